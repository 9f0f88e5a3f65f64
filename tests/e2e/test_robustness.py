"""Bad input loses no state and leaks no secret (found by a hostile review): requests
aor cannot serve are refused locally, browsers cannot use the sidecar, parallel
failures of one outage escalate once, cut streams deliver what arrived, HEAD has no
body, half-closed clients get their answer, upstream echoes of a key are redacted."""
import json
import socket
import subprocess
import threading
import time

import aortest
from aortest import check, eq
from test_routing import T0, setup

BODY = json.dumps({"model": "gpt-4o-mini", "messages": [{"role": "user", "content": "hi"}]})


def raw(port, data, timeout=10, shut=False):
    s = socket.create_connection(("127.0.0.1", port), timeout=timeout)
    s.sendall(data)
    if shut:
        s.shutdown(socket.SHUT_WR)
    out = b""
    try:
        while True:
            chunk = s.recv(65536)
            if not chunk:
                break
            out += chunk
    except socket.timeout:
        pass
    s.close()
    return out


def test_requests_aor_cannot_serve_change_no_state(env):
    mock, d = setup(env)
    cases = [
        b"CONNECT api.openai.com:443 HTTP/1.1\r\nHost: api.openai.com:443\r\n\r\n",
        b"POST http://evil.example/v1/chat/completions HTTP/1.1\r\nHost: evil.example\r\n"
        b"Content-Length: 2\r\n\r\n{}",
        b"OPTIONS /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n",
        b"TRACE / HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n",
    ]
    for c in cases:
        out = raw(d.port, c)
        status = int(out.split(b" ", 2)[1]) if out.startswith(b"HTTP/1.1 ") else 0
        check(status in (400, 405), "refused locally: %r -> %r" % (c[:30], out[:80]))
        if c.startswith((b"CONNECT", b"POST http")):
            # QA: the hint named port 8787 whatever the sidecar listens on.
            hint = b"OPENAI_BASE_URL=http://127.0.0.1:%d/v1" % d.port
            check(hint in out, "the hint names this sidecar (%s): %r" % (hint, out[-300:]))
    # RFC 9112 §3.2, RFC 9110 §10.1.1, §15.5.15: no Host in HTTP/1.1, an expectation aor
    # cannot meet, a request target over 32 KiB.
    post = b"POST /v1/chat/completions HTTP/1.1\r\n%sContent-Length: 2\r\n\r\n{}"
    for c, want in ((post % b"", 400), (post % b"Host: 127.0.0.1\r\nExpect: 200-ok\r\n", 417),
                    (b"GET /v1/models?q=" + b"x" * 40000 + b" HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n",
                     414)):
        out = raw(d.port, c)
        eq(out.split(b"\r\n", 1)[0].split(b" ", 2)[1:2], [str(want).encode()],
           "status for %r" % c[:50])
    r = env.curl(["-x", d.url, "https://api.openai.com/v1/models"], preload=False)
    check(r.rc != 0 or r.status in (400, 405), "HTTPS_PROXY pointed at the sidecar is refused")
    eq(len(mock.log()), 0, "nothing went upstream")
    st = d.state()
    eq((st["backoff"], st["breakers"]), ([], []), "no state changed")


def test_a_refusal_comes_before_a_body_that_waits_for_100_continue(env):
    """A client that sends Expect: 100-continue (curl for bodies over 1 MiB) waits for
    "100 Continue" before it uploads. aord sent it for any request, so a request it would
    refuse (a base URL without /v1, a browser's Origin) uploaded its whole body first
    (review). The refusal is the answer to the head now (RFC 9110 §10.1.1); a request aord
    serves still gets 100 Continue."""
    mock, d = setup(env)
    head = ("POST %s HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
            "Content-Length: %d\r\nExpect: 100-continue\r\n%s\r\n")
    for path, extra, want in (("/chat/completions", "", 404),
                              ("/v1/chat/completions", "Origin: https://evil.example\r\n", 403)):
        out = raw(d.port, (head % (path, 8 << 20, extra)).encode(), timeout=5)  # no body sent
        eq(out.split(b"\r\n", 1)[0], b"HTTP/1.1 %d %s" % (want, b"Not Found" if want == 404
                                                            else b"Forbidden"),
           "%s %r: the refusal, without a 100 Continue: %r" % (path, extra, out[:200]))
        check(b"x-aor-attempts: 0\r\n" in out, "x-aor-* headers: %r" % out[:300])
        if want == 404:
            check(b"aor_unknown_route" in out and b"/v1/" in out, "names the routes: %r" % out)
    s = socket.create_connection(("127.0.0.1", d.port), timeout=10)
    s.sendall((head % ("/v1/chat/completions", len(BODY), "")).encode())
    first = s.recv(65536)
    eq(first, b"HTTP/1.1 100 Continue\r\n\r\n", "a request aord serves: 100 Continue")
    s.sendall(BODY.encode())
    out = b""
    while b"\r\n\r\n" not in out:
        chunk = s.recv(65536)
        if not chunk:
            break
        out += chunk
    s.close()
    eq(out.split(b"\r\n", 1)[0], b"HTTP/1.1 200 OK", "then its answer: %r" % out[:200])
    eq(len(mock.log()), 1, "only the served request went upstream")


def test_browsers_cannot_use_the_sidecar(env):
    mock, d = setup(env)
    base = ["-H", "Content-Type: text/plain", "-d", BODY, d.url + "/v1/chat/completions"]
    for hdrs in (["-H", "Host: rebind.evil.example:%d" % d.port],
                 ["-H", "Origin: https://evil.example"],
                 ["-H", "Origin: null"],
                 ["-H", "Sec-Fetch-Site: cross-site"]):
        r = env.curl(hdrs + base, preload=False)
        eq(r.status, 403, "refused: %s" % hdrs)
        eq((r.headers.get("x-aor-key"), r.headers.get("x-aor-attempts")), ("-", "0"),
           "x-aor-* on a local refusal too")
    eq(len(mock.log()), 0, "no key spent")
    r = env.curl(["-H", "Origin: http://127.0.0.1:%d" % d.port] + base, preload=False)
    eq(r.status, 200, "a same-origin loopback page (the admin page) is fine")


def test_parallel_failures_of_one_outage_escalate_once(env):
    mock, d = setup(env, keys=(("A", 0),))
    mock.script("secret-A", [{"status": 503, "times": -1, "delay_ms": 300}])
    procs = [env.spawn(["curl", "-sS", "-o", "/dev/null", d.url + "/v1/chat/completions",
                        "-H", "Content-Type: application/json", "-d", BODY], preload=False)
             for _ in range(8)]
    for p in procs:
        p.wait(timeout=30)
    rows = d.state()["backoff"]
    eq(len(rows), 1, "one row")
    eq((rows[0]["window_s"], rows[0]["failure_count"]), (5, 1),
       "requests in flight during the first failure do not escalate")
    # §4.4 counts every retryable failure: the burst opens the model's circuit.
    eq([(b["provider"], b["model"], b["state"]) for b in d.state()["breakers"]],
       [("p", "gpt-4o-mini", "open")], "the burst of 8 failures opened the circuit")


def test_cut_stream_delivers_what_arrived_then_errors(env):
    mock, d = setup(env)
    mock.script("secret-A", [{"kind": "cut_after", "events": 3}])
    body = json.dumps({"model": "gpt-4o-mini", "stream": True, "messages": []})
    r = env.curl([d.url + "/v1/chat/completions", "-H", "Content-Type: application/json", "-d", body],
                 preload=False)
    check(r.rc != 0, "the client sees an error (rc %d)" % r.rc)
    check(r.body.count("data: ") >= 2, "the events that arrived were delivered: %r" % r.body[:300])
    check("[DONE]" not in r.body, "no terminator")


def test_head_has_no_body_and_keepalive_stays_in_sync(env):
    mock, d = setup(env)
    out = raw(d.port, b"HEAD /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"
                      b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n")
    parts = out.split(b"HTTP/1.1 ")
    eq(len(parts), 3, "two answers: %r" % out)
    check(parts[1].endswith(b"\r\n\r\n"), "HEAD answer has no body: %r" % parts[1])
    check(parts[2].endswith(b"ok\n"), "GET answer has its body")


def test_heads_of_aords_own_answers_have_no_body(env):
    """aord's own answers (404 of an unknown route, 403 of a foreign Host) to HEAD: the
    head with the GET's Content-Length, no body, so a kept-alive connection stays in step
    (QA: Node's keep-alive agent failed with HPE_INVALID_CONSTANT on the next answer)."""
    mock, d = setup(env)
    out = raw(d.port, b"HEAD /nope HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"
                      b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n")
    parts = out.split(b"HTTP/1.1 ")
    eq([p.split(b" ", 1)[0] for p in parts[1:]], [b"404", b"200"], "two answers: %r" % out)
    check(parts[1].endswith(b"\r\n\r\n") and b"content-length: 0" not in parts[1].lower(),
          "404 head without its body: %r" % parts[1])
    out = raw(d.port, b"HEAD /v1/models HTTP/1.1\r\nHost: evil.example\r\n\r\n")
    check(out.startswith(b"HTTP/1.1 403 ") and out.endswith(b"\r\n\r\n"),
          "403 head only: %r" % out)


def test_every_connection_header_names_hop_headers(env):
    """RFC 9110 §7.6.1: the names listed in any Connection field are not forwarded (QA:
    only the first Connection field's were stripped)."""
    mock, d = setup(env)
    body = b'{"model":"gpt-4o-mini","messages":[]}'
    out = raw(d.port, b"POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                      b"Connection: keep-alive\r\nConnection: x-secret\r\nX-Secret: leak\r\n"
                      b"X-Kept: yes\r\nContent-Type: application/json\r\nConnection: close\r\n"
                      b"Content-Length: %d\r\n\r\n%s" % (len(body), body))
    check(out.startswith(b"HTTP/1.1 200 "), "answered: %r" % out[:100])
    h = mock.log()[-1]["headers"]
    check("x-secret" not in h and h.get("x-kept") == "yes", "forwarded headers: %r" % h)


def test_admin_token_in_a_trailer_does_not_count(env):
    """RFC 9110 §6.5.1: trailer fields are not headers; the admin token must come in the
    header section."""
    mock, d = setup(env)
    for trailer in (b"Authorization: Bearer %s" % d.token().encode(),
                    b"Cookie: aor_admin=%s" % d.token().encode()):
        out = raw(d.port, b"POST /admin/api/backoff/clear HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                          b"Transfer-Encoding: chunked\r\nConnection: close\r\n\r\n0\r\n"
                          + trailer + b"\r\n\r\n")
        check(out.startswith(b"HTTP/1.1 401 "), "trailer %r: %r" % (trailer[:14], out[:60]))


def test_half_closed_client_gets_its_answer(env):
    mock, d = setup(env)
    req = ("POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
           "Content-Length: %d\r\n\r\n%s" % (len(BODY), BODY)).encode()
    out = raw(d.port, req, shut=True)
    check(out.startswith(b"HTTP/1.1 200"), "answered after SHUT_WR: %r" % out[:100])


def test_upstream_echo_of_a_key_is_redacted(env):
    mock, d = setup(env)
    mock.script("secret-A", [{"status": 401, "body": {"error": {"code": "secret-A", "type": "secret-A",
                                                                 "message": "bad key secret-A"}}}])
    r = env.curl([d.url + "/v1/chat/completions", "-H", "Content-Type: application/json", "-d", BODY],
                 preload=False)
    eq(r.headers.get("x-aor-key"), "B", "walked on after auth")
    time.sleep(0.2)
    log = d.stderr_text()
    check("secret-A" not in log, "no secret in stderr: %s" % log[-500:])
    with open(env.path("state", "aor", "aord.log")) as f:
        check("secret-A" not in f.read(), "no secret in the log file")


def test_long_model_name_refused(env):
    mock, d = setup(env)
    body = json.dumps({"model": "m" * 5000, "messages": []})
    r = env.curl([d.url + "/v1/chat/completions", "-H", "Content-Type: application/json", "-d", body],
                 preload=False)
    eq(r.status, 400, "refused")
    eq(d.state()["sticky"], [], "nothing stored")


def test_test_clock_advance_is_bounded(env):
    mock, d = setup(env)
    for bad in ("99999999999999999999", "1e12", "", "-5", "abc"):
        status, _, _ = d.admin("POST", "/admin/api/clock/advance?s=" + bad)
        eq(status, 400, "advance s=%r refused" % bad)
    status, _, _ = d.admin("POST", "/admin/api/clock/advance?s=86400")
    eq(status, 200, "a day is fine")


def test_json_aord_writes_is_utf8_whatever_the_request_holds(env):
    """RFC 8259 §8.1: a model name that is not UTF-8 (a Latin-1 byte) reaches the circuit
    breaker's row and the all-backed-off message; /admin/api/state and the error body stay
    valid UTF-8 JSON with U+FFFD in its place (QA: the state API sent the raw byte)."""
    mock, d = setup(env, keys=(("A", 0), ("B", 0), ("C", 0)))
    for k in "ABC":
        mock.script("secret-" + k, [{"status": 503, "times": -1}])
    body = b'{"model":"caf\xe9","messages":[]}'
    hdrs = {"Content-Type": "application/json", "Authorization": "Bearer client-1"}
    st, _, _ = aortest.http("POST", d.url + "/v1/chat/completions", body, hdrs)
    eq(st, 503, "three upstream failures, the last as it came")
    token = open(env.token_path).read().strip()
    st, _, raw_state = aortest.http("GET", d.url + "/admin/api/state", None,
                                    {"Authorization": "Bearer " + token})
    eq(st, 200, "state")
    state = json.loads(raw_state.decode("utf-8"))  # strict: raises on a byte that is not UTF-8
    eq([b["model"] for b in state["breakers"]], ["caf\ufffd"], "the circuit's model")
    st, _, err = aortest.http("POST", d.url + "/v1/chat/completions", body, hdrs)
    eq(st, 429, "all backed off")
    msg = json.loads(err.decode("utf-8"))["error"]["message"]
    check("caf\ufffd" in msg, "the model in the message: %r" % msg)


def _read_to_end(s):
    """Every byte s gives until the peer's end."""
    data = bytearray()
    while True:
        chunk = s.recv(1 << 20)
        if not chunk:
            return bytes(data)
        data += chunk


def _rss_kib(pid):
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


def test_pipelined_requests_of_a_client_that_does_not_read_are_bounded(env):
    """QA: a client that pipelined GET /metrics and never read the answers made aord
    read on and queue every answer (1.8 GB RSS in 5 s, then the OOM killer). aord now
    stops reading a client whose unread answers pass 1 MiB and reads on once it takes
    them: memory stays bounded, and every request is still answered, in order."""
    mock, d = setup(env)
    req = b"GET /metrics HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    s.connect(("127.0.0.1", d.port))
    s.setblocking(False)
    before = _rss_kib(d.pid)
    sent, stalled_since, end = 0, None, time.monotonic() + 20
    batch = req * 2000
    while time.monotonic() < end and sent < 40 * 1024 * 1024:
        try:
            off = sent % len(batch)  # batch is whole requests: the stream stays in step
            sent += s.send(batch[off:])
            stalled_since = None
        except BlockingIOError:
            stalled_since = stalled_since or time.monotonic()
            if time.monotonic() - stalled_since > 1.0:
                break  # aord stopped reading: the kernel buffers are full
            time.sleep(0.01)
    grown = _rss_kib(d.pid) - before
    requests = sent // len(req)
    check(sent < 40 * 1024 * 1024, "aord stopped reading (%d bytes sent)" % sent)
    check(grown < 64 * 1024, "aord grew by %d KiB for %d unread requests" % (grown, requests))
    # Now read: every request sent whole gets its answer, in order.
    s.setblocking(True)
    s.settimeout(30)
    rest = sent % len(req)
    if rest:
        requests += 1

    def finish():  # the rest of the last request, while the answers are read
        if rest:
            s.sendall(req[rest:])
        s.shutdown(socket.SHUT_WR)

    t = threading.Thread(target=finish)
    t.start()
    data = _read_to_end(s)
    t.join()
    s.close()
    eq(data.count(b"HTTP/1.1 200 "), requests, "answers to %d pipelined requests" % requests)
    check(d.healthz() == 200, "aord answers after")


def test_admin_session_cookie_never_reaches_the_provider(env):
    """QA: the admin session cookie (its value is the admin token) was set with Path=/, so
    a client with a cookie jar sent it with its sidecar requests, and aord forwarded it
    to the provider. The cookie is now for /admin only, and aord takes aor_admin out of
    any Cookie field it forwards (the client's other cookies go on, in order)."""
    mock, d = setup(env)
    tok = d.token()
    status, hdrs, _ = d.http("GET", "/admin?token=" + tok)
    eq(status, 200, "admin page")
    check("; Path=/admin;" in hdrs.get("set-cookie", ""), "cookie for /admin only: %r" % hdrs)
    status, _, _ = d.http("GET", "/admin/api/state", headers={"cookie": "aor_admin=" + tok})
    eq(status, 200, "the cookie still opens the admin API")
    for cookie, forwarded in (("aor_admin=" + tok, None),
                              ("theme=dark; aor_admin=%s;x=1" % tok, "theme=dark; x=1"),
                              ("a=1", "a=1")):
        mock.reset()
        status, _, _ = d.http("POST", "/v1/chat/completions", body=BODY,
                              headers={"authorization": "Bearer c", "cookie": cookie,
                                       "content-type": "application/json"})
        eq(status, 200, "sidecar request with cookie %r" % cookie.replace(tok, "TOKEN"))
        got = [r["headers"] for r in mock.log()]
        eq(len(got), 1, "one upstream request")
        h = {k.lower(): v for k, v in got[0].items()}
        eq(h.get("cookie"), forwarded, "Cookie upstream for %r" % cookie.replace(tok, "TOKEN"))
        check(tok not in json.dumps(got), "the admin token never reaches the provider")


def test_admin_query_with_a_nul_is_refused(env):
    """QA: provider=openai%00garbage reset provider p (the value was cut at the NUL);
    s=1%00 advanced the test clock."""
    mock, d = setup(env, prov="openai")
    tok = d.token()
    for path, want in (("/admin/api/backoff/reset?provider=openai%00garbage", 404),
                       ("/admin/api/backoff/reset?provider=openai", 200),
                       ("/admin/api/clock/advance?s=1%00", 400),
                       ("/admin/api/clock/advance?s=1", 200)):
        status, _, body = d.http("POST", path, body=b"", headers={"authorization": "Bearer " + tok})
        eq(status, want, "%s: %r" % (path, body[:120]))


def test_half_close_behind_pipelined_requests_gets_every_answer(env):
    """QA: a client that sent a slow request, 2,000 pipelined GET /metrics behind it and
    then closed its sending side got 632 answers and an end: once unread answers passed
    1 MiB, aord stopped taking requests, and the end of input closed the connection as
    if all were answered."""
    mock, d = setup(env)
    mock.script("*", [{"status": 200, "delay_ms": 1500}])
    slow = ("POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\n"
            "Authorization: Bearer c\r\nContent-Type: application/json\r\n"
            "Content-Length: %d\r\n\r\n%s" % (len(BODY), BODY)).encode()
    n = 2000
    s = socket.create_connection(("127.0.0.1", d.port), timeout=30)
    s.sendall(slow + b"GET /metrics HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n" * n)
    s.shutdown(socket.SHUT_WR)
    time.sleep(3)  # the slow answer, then the others queue up unread
    data = _read_to_end(s)
    s.close()
    eq(data.count(b"HTTP/1.1 200 "), n + 1, "answers to the slow request and %d more" % n)
