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
from test_walk import CHAT, two_key_setup


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


def test_aord_under_another_name_with_the_shim_preloaded_does_not_route_itself(env):
    """QA: the shim stayed out of aord's way only when the program was called "aord" (or
    AOR_DAEMON was set before it loaded): a copy named my-router started with LD_PRELOAD
    set (a user's shell that exports it, a wrapper under another name) sent its own
    upstream connections to itself, thousands a second, and answered 502. Spec §2: the
    daemon never routes its own upstream connections through itself. In a private network
    namespace whose DNS knows llm.test, the provider's base_url host, which aord
    publishes: a shim that is on in my-router redirects my-router's upstream connection."""
    import netns
    import shutil
    why = netns.unavailable()
    if why:
        raise aortest.Skip(why)
    copy = env.path("my-router")
    shutil.copy(os.path.join(env.build, "aord"), copy)
    lib = os.path.join(env.build, "libaor.so")
    with netns.NetNS(env, {"llm.test": ["127.0.0.1"]}):
        mock = env.start_mock(tls=True, names=("llm.test",))
        mock.url = mock.url.replace("127.0.0.1", "llm.test")
        # An aord built with AddressSanitizer wants its runtime first in the list.
        asan = ":".join(o for o in (env.env.get("ASAN_OPTIONS"), "verify_asan_link_order=0") if o)
        mock, d = two_key_setup(env, mock=mock, daemon_bin=copy, daemon_env={
            "LD_PRELOAD": lib, "AOR_DEBUG": "1", "ASAN_OPTIONS": asan})
        hosts = os.path.join(env.env["XDG_RUNTIME_DIR"], "aor", "hosts")
        aortest.wait_until(lambda: "\na 127.0.0.1 %d llm.test" % mock.port in open(hosts).read(),
                           10, what="llm.test's address published")
        r = env.curl(["https://api.openai.com/v1/chat/completions",
                      "-H", "Authorization: Bearer client-token",
                      "-H", "Content-Type: application/json", "-d", CHAT])  # fmt: skip
        eq((r.status, r.headers.get("x-aor-key")), (200, "A"), "answered through my-router")
        eq(len(mock.requests(key="key-a-secret")), 1, "the mock got the one request")
        err = d.stderr_text()
        check("redirected" not in err, "my-router's own connections were not redirected: %s"
              % err[-1500:])
        check("libaor loaded, disabled" in err, "the shim in my-router is off: %s" % err[-1500:])
