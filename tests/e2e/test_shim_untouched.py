"""Issue 4 item 4: with aord running and the shim preloaded, what aor does not route is
not touched: AI_NUMERICHOST, hints == NULL, loopback connects, bind before connect, UDP,
and a local HTTP server reached by curl and Python."""
import os
import platform
import re
import subprocess
import sys
import threading
import http.server

import aortest
from aortest import check, eq
from test_walk import two_key_setup


class QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args):
        pass


def connections(d):
    m = re.search(r"^aor_connections_total (\d+)$", d.metrics(), re.M)
    return int(m.group(1))


def test_unrouted_traffic_is_untouched(env):
    mock, d = two_key_setup(env)
    before = connections(d)
    probe = os.path.join(env.build, "tests", "progs", "untouched_probe")
    rc, out, err = env.run_client([probe], extra_env={"AOR_DEBUG": "1"})
    eq(rc, 0, "probe exit (%s %s)" % (out, err))
    names = ("numeric", "nullhints", "loopback", "bind", "udp")
    if platform.machine() == "x86_64":
        names += ("tsc",)  # QA: the shim's TSC gate crashed a program that disabled RDTSC
    for name in names:
        check("%s ok" % name in out.splitlines(), "%s: %s" % (name, out))
    check("redirected" not in err, "nothing redirected: %s" % err)

    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), QuietHandler)
    t = threading.Thread(target=srv.serve_forever, daemon=True)
    t.start()
    try:
        url = "http://127.0.0.1:%d/" % srv.server_address[1]
        r = env.curl([url])
        eq(r.status, 200, "curl to a local server through the shim")
        check("x-aor-key" not in r.headers, "not routed")
        rc, out, err = env.run_client([sys.executable, "-c",
                                       "import urllib.request as u;print(u.urlopen(%r).status)" % url])
        eq((rc, out.strip()), (0, "200"), "python to a local server through the shim")
    finally:
        srv.shutdown()
    # Only the metrics requests of this test reached aord.
    eq(connections(d) - before, 1, "aord saw no connection but our own metrics call")
