"""aord's own surface (spec §7, §8, §9): the socket's preamble and permissions, the
sidecar's uid check, admin token, local routes, body cap, WebSocket refusal,
--check-config, SIGHUP reload and SIGTERM."""
import json
import os
import signal
import socket
import stat
import subprocess
import time

import aortest
from aortest import check, eq
from test_walk import CHAT, two_key_setup


def test_socket_modes_and_malformed_preamble(env):
    mock, d = two_key_setup(env)
    eq(stat.S_IMODE(os.stat(os.path.dirname(env.socket_path)).st_mode), 0o700, "socket dir 0700")
    eq(stat.S_IMODE(os.stat(env.socket_path).st_mode), 0o600, "socket 0600")
    eq(stat.S_IMODE(os.stat(env.token_path).st_mode), 0o600, "admin.token 0600")
    eq(stat.S_IMODE(os.stat(os.path.join(env.env["XDG_DATA_HOME"], "aor", "ca.key")).st_mode),
       0o600, "ca.key 0600")
    eq(stat.S_IMODE(os.stat(os.path.join(env.env["XDG_DATA_HOME"], "aor", "ca.pem")).st_mode),
       0o600, "ca.pem 0600 (spec §9: ca.pem, ca.key (0600))")
    for junk in (b"HELLO\n", b"AOR/1 api.openai.com 1.2.3.4 99999\n", b"A" * 4000):
        s = socket.socket(socket.AF_UNIX)
        s.connect(env.socket_path)
        s.settimeout(5)
        s.sendall(junk)
        try:
            eq(s.recv(100), b"", "closed on a malformed preamble %r" % junk[:20])
        except ConnectionResetError:
            pass
        s.close()
    time.sleep(0.2)
    check("malformed preamble" in d.stderr_text(), "logged")
    eq(d.healthz(), 200, "still serving")


def test_an_exposed_admin_token_is_replaced(env):
    """An admin.token readable by others may have been read: aord writes a new one (0600)
    instead of only tightening the mode, and says so."""
    os.makedirs(os.path.dirname(env.token_path), exist_ok=True)
    old = "ab" * 32
    with open(env.token_path, "w") as f:
        f.write(old + "\n")
    os.chmod(env.token_path, 0o644)
    mock, d = two_key_setup(env)
    new = d.token()
    check(new != old and len(new) == 64, "a new token")
    eq(stat.S_IMODE(os.stat(env.token_path).st_mode), 0o600, "0600")
    check("readable or writable by others" in d.stderr_text(), "said so")
    status, _, _ = d.http("GET", "/admin/api/state", headers={"authorization": "Bearer " + old})
    eq(status, 401, "the old token no longer works")


def test_sighup_writes_a_removed_admin_token_again(env):
    """QA: a removed admin.token stayed missing until aord restarted, and `aor status` /
    `aor backoff` could not reach aord meanwhile. SIGHUP reads it again: a missing file
    gets a new token (0600), which then opens the admin routes and the old one does not;
    an unchanged file keeps its token."""
    mock, d = two_key_setup(env)
    old = d.token()
    os.kill(d.pid, signal.SIGHUP)
    aortest.wait_until(lambda: "SIGHUP: config reloaded" in d.stderr_text(), what="reload")
    eq(d.token(), old, "an unchanged file keeps its token")
    status, _, _ = d.http("GET", "/admin/api/state", headers={"authorization": "Bearer " + old})
    eq(status, 200, "the token still works")
    os.unlink(env.token_path)
    os.kill(d.pid, signal.SIGHUP)
    aortest.wait_until(lambda: os.path.exists(env.token_path), what="admin.token written again")
    eq(stat.S_IMODE(os.stat(env.token_path).st_mode), 0o600, "0600")
    new = d.token()
    check(new != old and len(new) == 64, "a new token")
    status, _, _ = d.http("GET", "/admin/api/state", headers={"authorization": "Bearer " + new})
    eq(status, 200, "the new token opens the admin routes")
    status, _, _ = d.http("GET", "/admin/api/state", headers={"authorization": "Bearer " + old})
    eq(status, 401, "the old one does not")
    aortest.wait_until(lambda: "a new admin token is in" in d.stderr_text(), what="said so")


def test_sighup_with_a_fifo_at_admin_token(env):
    """Review: a FIFO at admin.token made SIGHUP block aord in open() (no writer ever
    comes), so it stopped serving. It is not a regular file: aord writes a new token in
    its place, says so, and keeps serving."""
    mock, d = two_key_setup(env)
    old = d.token()
    os.unlink(env.token_path)
    os.mkfifo(env.token_path, 0o600)
    os.kill(d.pid, signal.SIGHUP)
    aortest.wait_until(lambda: "is not a regular file" in d.stderr_text(), 10,
                       what="said the FIFO is not a regular file")
    eq(d.healthz(), 200, "aord still serves")
    check(stat.S_ISREG(os.stat(env.token_path).st_mode), "a regular file again")
    new = d.token()
    check(new != old and len(new) == 64, "a new token")
    status, _, _ = d.http("GET", "/admin/api/state", headers={"authorization": "Bearer " + new})
    eq(status, 200, "the new token opens the admin routes")


def test_sidecar_refuses_other_uids(env):
    mock, d = two_key_setup(env)
    if os.getuid() != 0:
        raise aortest.Skip("needs root to run a client as another uid")
    code = ("import socket,sys\ns=socket.create_connection(('127.0.0.1',%d))\n"
            "s.sendall(b'GET /healthz HTTP/1.1\\r\\nHost: x\\r\\n\\r\\n')\n"
            "s.settimeout(5)\nprint(repr(s.recv(100)))\n" % d.port)
    rc, out, err = env.run_client(["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups",
                                   "python3", "-c", code], preload=False)
    check(out.strip() in ("b''",) or "Connection reset" in err, "refused: %r %r" % (out, err))
    check("refused a connection of uid 65534" in d.stderr_text(), "logged")
    eq(d.healthz(), 200, "own uid served")
    # QA: each refusal was a log line, any local user could fill the disk with them. At
    # most one a minute now; /metrics counts every one.
    flood = ("import socket\nfor i in range(30):\n"
             "    s=socket.create_connection(('127.0.0.1',%d))\n"
             "    s.settimeout(5)\n    s.recv(10)\n    s.close()\n" % d.port)
    rc, out, err = env.run_client(["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups",
                                   "python3", "-c", flood], preload=False)
    eq(rc, 0, "the other user's client ran (%r)" % err)
    eq(d.stderr_text().count("refused a connection of uid 65534"), 1, "one line for 31 refusals")
    check("aor_rejected_peers_total 31" in d.metrics(), "every refusal counted")


def test_admin_routes_refuse_pages_of_other_local_origins(env):
    """The session cookie is SameSite=Strict, but cookies ignore ports: a page served by any
    other local server (http://127.0.0.1:3000) carried it, and its POST to
    /admin/api/backoff/clear was answered 200 (QA). Admin routes now take browser requests
    only from their own origin; requests without Origin (curl, scripts) are unchanged."""
    mock, d = two_key_setup(env)
    cookie = {"cookie": "aor_admin=" + d.token()}
    own = "http://127.0.0.1:%d" % d.port
    other = "http://127.0.0.1:%d" % (d.port + 1 if d.port < 65535 else d.port - 1)
    for headers, want, what in (
            ({"origin": other}, 403, "a page of another local port"),
            ({"origin": "null"}, 403, "an opaque origin"),
            ({"sec-fetch-site": "same-site"}, 403, "Sec-Fetch-Site: same-site"),
            ({"origin": own, "sec-fetch-site": "same-origin"}, 200, "the admin page itself"),
            ({}, 200, "no Origin: not a page")):
        status, _, body = d.http("POST", "/admin/api/backoff/clear", body=b"",
                                 headers=dict(cookie, **headers))
        eq(status, want, "%s: %r" % (what, body[:200]))
        if want == 403:
            check(b"cross-origin" in body, "says why: %r" % body)
    status, _, _ = d.http("GET", "/admin/api/state", headers=dict(cookie, origin=other))
    eq(status, 403, "reading the state from another origin")
    eq(d.healthz(), 200, "/healthz is not an admin route")


def test_admin_token_and_local_routes(env):
    mock, d = two_key_setup(env)
    status, _, _ = d.http("GET", "/admin/api/state")
    eq(status, 401, "no token")
    status, _, body = d.http("GET", "/admin/api/state",
                             headers={"authorization": "Bearer " + "0" * 64})
    eq(status, 401, "wrong token")
    check(b"admin token not accepted" in body and b"another XDG_STATE_HOME" in body,
          "a wrong token is told apart from a missing one: %r" % body)
    # Spec §8: admin routes need the token, the page included (it was served to anyone).
    status, hdrs, body = d.http("GET", "/admin")
    eq(status, 401, "admin page without the token")
    check(b"admin.token" in body and b"aor_admin" not in body, "says how to get in: %r" % body)
    check("set-cookie" not in hdrs, "no cookie without the token")
    status, _, _ = d.http("GET", "/admin?token=" + "0" * 64)
    eq(status, 401, "admin page with a wrong token")
    status, _, body = d.http("GET", "/admin", headers={"authorization": "Bearer " + d.token()})
    eq(status, 200, "admin page with the bearer token")
    check(b"<title>aor</title>" in body and b"clearAll" in body, "page")
    status, hdrs, body = d.http("GET", "/admin?token=" + d.token())
    eq(status, 200, "admin page with ?token=")
    check(b"clearAll" in body, "the page itself")
    check("aor_admin=" in hdrs.get("set-cookie", ""), "session cookie set")
    status, _, _ = d.http("GET", "/admin", headers={"cookie": "aor_admin=" + d.token()})
    eq(status, 200, "admin page with the session cookie")
    status, _, _ = d.http("GET", "/admin/?token=" + d.token())
    eq(status, 200, "/admin/ is the page too")
    status, _, body = d.http("GET", "/admin/api/state", headers={"cookie": "aor_admin=" + d.token()})
    eq(status, 200, "cookie accepted")
    st = json.loads(body)
    for k in ("backoff", "breakers", "sticky", "keys"):
        check(k in st, "state has %s" % k)
    eq(sorted((k["key"], k["priority"]) for k in st["keys"]), [("A", 0), ("B", 1)], "keys")
    check("key-a-secret" not in body.decode(), "no secret in the state")
    m = d.metrics()
    check("aor_requests_total" in m and "# TYPE" in m, "prometheus text")
    tok = d.token()
    for cookie, want in (("theme=dark; aor_admin=" + tok, 200), ("aor_admin=%s ;x=1" % tok, 200),
                         ("xaor_admin=" + tok, 401), ("aor_admin=%sgarbage" % tok, 401),
                         ("aor_admin=bad; aor_admin=" + tok, 200), ("aor_admin=" + tok[:63], 401)):
        status, _, _ = d.http("GET", "/admin/api/state", headers={"cookie": cookie})
        eq(status, want, "cookie %r" % cookie.replace(tok, "TOKEN"))
    status, hdrs, _ = d.http("POST", "/admin", body=b"", headers={"authorization": "Bearer " + tok})
    eq((status, hdrs.get("allow")), (405, "GET, HEAD"), "POST /admin names what it takes")
    # RFC 9110 §15.5.6: a 405 carries Allow (QA: none had it).
    for method, path, allow in (("POST", "/healthz", "GET, HEAD"), ("PUT", "/metrics", "GET, HEAD"),
                                ("GET", "/admin/api/backoff/clear", "POST"),
                                ("POST", "/admin/api/state", "GET, HEAD"),
                                ("OPTIONS", "/v1/chat/completions",
                                 "GET, HEAD, POST, PUT, PATCH, DELETE")):
        status, hdrs, _ = d.http(method, path, body=b"" if method != "GET" else None,
                                 headers={"authorization": "Bearer " + tok})
        eq((status, hdrs.get("allow")), (405, allow), "%s %s" % (method, path))
    # §5.6 "every answer carries x-aor-*": aor's own answers too, naming no provider (QA).
    for path in ("/healthz", "/metrics", "/admin/api/state"):
        status, hdrs, _ = d.http("GET", path, headers={"authorization": "Bearer " + tok})
        eq((status, hdrs.get("x-aor-provider"), hdrs.get("x-aor-key"),
            hdrs.get("x-aor-attempts")), (200, "-", "-", "0"), "x-aor-* on %s" % path)
    # Only the provider APIs reach a provider, and never with dot segments (spec §8).
    before = len(mock.log())
    for path in ("/nope", "/favicon.ico", "/ADMIN/api/state", "//admin/api/state",
                 "/v1/chat/completions/../../secret", "/v1/./models", "/v1/%2E%2e/x"):
        status, hdrs, body = d.http("GET", path)
        eq(status, 404, "local 404 for %s" % path)
        check(b"aor_unknown_route" in body, "says why: %r" % body)
    eq(len(mock.log()), before, "none of them reached the provider")
    status, _, _ = d.http("GET", "/v1/models")
    eq(status, 200, "a provider path still goes through")


def test_body_cap_and_websocket(env):
    mock, d = two_key_setup(env, extra="")
    big = "x" * (33 * 1024 * 1024)
    path = env.path("big.json")
    with open(path, "w") as f:
        f.write('{"model":"gpt-4o-mini","pad":"%s"}' % big)
    r = env.curl([d.url + "/v1/chat/completions", "-H", "Content-Type: application/json",
                  "--data-binary", "@" + path], preload=False)
    eq(r.status, 413, "body over body_max")
    eq(len(mock.log()), 0, "nothing forwarded")
    check(r.json()["error"]["type"] == "invalid_request_error", "OpenAI shape on /v1/chat")
    # aord's own refusals come in the error shape of the API the path belongs to, so the
    # client's SDK can read them (QA: Anthropic and Gemini paths got OpenAI's shape).
    for p, shape in (("/v1/messages", lambda j: j["type"] == "error" and
                      j["error"]["type"] == "request_too_large"),
                     ("/v1beta/models/gemini-2.0-flash:generateContent",
                      lambda j: j["error"]["code"] == 413 and "status" in j["error"])):
        r = env.curl([d.url + p, "-H", "Content-Type: application/json",
                      "--data-binary", "@" + path], preload=False)
        eq(r.status, 413, "413 on " + p)
        check(shape(r.json()), "dialect shape on %s: %r" % (p, r.body[:200]))
    r = env.curl([d.url + "/v1/responses", "-H", "Connection: Upgrade", "-H", "Upgrade: websocket",
                  "-H", "Sec-WebSocket-Version: 13", "-H", "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ=="],
                 preload=False)
    eq(r.status, 426, "WebSocket upgrade refused so clients fall back to HTTP")
    eq(r.headers.get("upgrade"), "HTTP/1.1", "RFC 9110 §15.5.22: a 426 names the protocol to use")
    check("upgrade" in r.headers.get("connection", "").lower(), "§7.8: Connection lists upgrade")


def test_check_config_and_version(env):
    aord = os.path.join(env.build, "aord")
    env.write_config("""
        [routing]
        auto_fallbak = true
        [key "k"]
        env = NOT_SET_ANYWHERE
        [provider "p"]
        dialect = openai
        base_url = https://api.openai.com
        keys = k, missing
        models = gpt-4o
        """)
    rc, out, err = env.run_client([aord, "--check-config"], preload=False)
    eq(rc, 2, "exit 2 on errors")
    for needle in ("aor.ini:2", "did you mean", "NOT_SET_ANYWHERE", "missing"):
        check(needle in err, "%r in errors: %s" % (needle, err))
    rc, out, err = env.run_client([aord, "--version"], preload=False)
    eq(rc, 0, "--version")
    check(out.startswith("aord "), "version line")


def test_sighup_reload_and_sigterm(env):
    mock, d = two_key_setup(env)
    mock.script("key-a-secret", [{"status": 429, "times": -1}])
    r = env.curl([d.url + "/v1/chat/completions", "-H", "Content-Type: application/json", "-d", CHAT],
                 preload=False)
    eq(r.headers.get("x-aor-key"), "B", "before reload")
    text = open(env.config_path).read().replace("keys = A, B", "keys = B")
    open(env.config_path, "w").write(text.replace('[key "A"]\nenv = KEY_A\npriority = 0\n', ""))
    os.kill(d.pid, signal.SIGHUP)
    aortest.wait_until(lambda: "config reloaded" in d.stderr_text(), what="reload logged")
    eq([k["key"] for k in d.state()["keys"]], ["B"], "reloaded keys")
    eq([b["key"] for b in d.state()["backoff"]], [], "the removed key is not shown")
    import sqlite3
    db = sqlite3.connect(env.db_path)
    kept = db.execute("select count(*) from state_events where key = 'A'").fetchone()[0] + \
        db.execute("select count(*) from backoff where key = 'A'").fetchone()[0]
    check(kept > 0, "its state is kept in the store across the reload")
    # A broken config keeps the running one.
    open(env.config_path, "w").write("[nonsense\n")
    os.kill(d.pid, signal.SIGHUP)
    aortest.wait_until(lambda: "keeping the running one" in d.stderr_text(), what="bad reload logged")
    eq(d.healthz(), 200, "still up")
    eq(d.stop(), 0, "SIGTERM exits 0")
    check(not os.path.exists(env.socket_path), "socket removed")


def test_sighup_listen_change_is_reported_against_the_bound_address(env):
    """A listen change waits for the next start; reverting it is no change (QA: the
    second reload said "still on" the address of the first, which was never bound)."""
    mock, d = two_key_setup(env)
    port = d.url.rsplit(":", 1)[1]
    orig = open(env.config_path).read()
    check("127.0.0.1:%s" % port in orig, "the config names the port")
    open(env.config_path, "w").write(orig.replace("127.0.0.1:%s" % port, "127.0.0.1:1"))
    os.kill(d.pid, signal.SIGHUP)
    aortest.wait_until(lambda: d.stderr_text().count("config reloaded") == 1, what="reload 1")
    log = d.stderr_text()
    check("take effect at the next start; still on 127.0.0.1:%s" % port in log,
          "the change is reported with the bound address: %s" % log[-600:])
    open(env.config_path, "w").write(orig)
    os.kill(d.pid, signal.SIGHUP)
    aortest.wait_until(lambda: d.stderr_text().count("config reloaded") == 2, what="reload 2")
    eq(d.stderr_text().count("take effect at the next start"), 1,
       "reverting to the bound address is no change")
    eq(d.healthz(), 200, "still on the bound address")


def test_cli_finds_the_daemon_despite_config_errors(env):
    mock, d = two_key_setup(env)
    with open(env.config_path, "a") as f:
        f.write("[provider \"extra\"]\nbogus = 1\n")
    aor = os.path.join(env.build, "aor")
    rc, out, err = env.run_client([aor, "status"], preload=False)
    eq(rc, 0, "aor status reaches the running daemon (%s %s)" % (out, err))
    check("config" in err and "errors" in err, "warns about the config")


def test_state_hides_keys_removed_by_reload(env):
    mock, d = two_key_setup(env)
    mock.script("key-a-secret", [{"status": 429}])
    r = env.curl([d.url + "/v1/chat/completions", "-H", "Content-Type: application/json", "-d", CHAT],
                 preload=False)
    eq(r.headers.get("x-aor-key"), "B", "failover")
    check(any(b["key"] == "A" for b in d.state()["backoff"]), "A backed off")
    text = open(env.config_path).read().replace('[key "A"]', '[key "X"]').replace("keys = A, B", "keys = X, B")
    open(env.config_path, "w").write(text)
    os.kill(d.pid, signal.SIGHUP)
    aortest.wait_until(lambda: "config reloaded" in d.stderr_text(), what="reload")
    st = d.state()
    eq([b["key"] for b in st["backoff"]], [], "the removed key A is not shown")
    eq(sorted(k["key"] for k in st["keys"]), ["B", "X"], "keys after the rename")


def test_connect_then_close_is_not_a_warning_each(env):
    """QA: every connection closed before aord looked up its owner logged a warning
    ("cannot tell the owner of a connection (Transport endpoint is not connected)"): any
    local user could fill aord's log at will."""
    import socket
    import struct

    mock, d = two_key_setup(env)
    for i in range(40):
        s = socket.create_connection(("127.0.0.1", d.port))
        s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        s.close()  # a reset at once
    eq(d.healthz(), 200, "aord still serves")
    n = d.stderr_text().count("cannot tell the owner")
    check(n == 0, "warnings for connections that were gone: %d" % n)


def test_a_stderr_nobody_reads_does_not_stop_aord(env):
    """QA: aord writes each log line to stderr too; with stderr a pipe whose reader
    stopped reading (`aord 2>&1 | cmd`, cmd stuck), the 64 KiB pipe filled and aord's one
    event loop stopped at the next line: no answers, and SIGTERM went unheard. Lines that
    cannot go to stderr without waiting are left out there (counted, and said once it
    reads again); aord.log has them all."""
    port = aortest.free_port()
    env.write_config("[daemon]\nlisten = 127.0.0.1:%d\n" % port)
    r, w = os.pipe()
    aord = subprocess.Popen([os.path.join(env.build, "aord")], env=env.env,
                            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=w)
    os.close(w)
    try:
        aortest.wait_until(lambda: aortest._healthz_ok(port), 30, what="aord to start")
        bad = b"POST /v1/chat/completions HTTP/1.1\r\nContent-Length: 2\r\n\r\n{}"  # no Host
        for _ in range(1200):  # a warning line each, ~110 bytes: twice the pipe's room
            s = socket.create_connection(("127.0.0.1", port), timeout=10)
            s.sendall(bad)
            s.recv(4096)
            s.close()
        check(aortest._healthz_ok(port), "aord still answers")
        aord.send_signal(signal.SIGTERM)
        eq(aord.wait(15), 0, "SIGTERM stops it cleanly")
        log = open(os.path.join(env.env["XDG_STATE_HOME"], "aor", "aord.log")).read()
        check(log.count("bad request from client") >= 1200, "aord.log has every line")
    finally:
        if aord.poll() is None:
            aord.kill()
            aord.wait()
        os.close(r)
