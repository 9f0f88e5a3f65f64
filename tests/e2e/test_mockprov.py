"""Tests of the mock provider (tests/mockprov) and of the harness itself.

They run without aord: `python3 tests/e2e/aortest.py tests/e2e/test_mockprov.py`.
"""

import http.client
import json
import os
import select
import socket
import ssl
import subprocess
import sys
import textwrap
import time

import aortest
from aortest import check, eq

FIXTURES = os.path.join(aortest.REPO, "tests", "fixtures", "provider-answers.json")
CHAT = "/v1/chat/completions"


def chat_body(model="gpt-4o", stream=False):
    msgs = [{"role": "user", "content": "hi"}]
    return json.dumps({"model": model, "stream": stream, "messages": msgs})


def bearer(key):
    return {"authorization": "Bearer " + key}


def post(url, body, headers=None, cafile=None):
    """POST; body: str, or a dict sent as JSON.  Returns (status, headers, body bytes)."""
    return aortest.http("POST", url, body, headers, cafile=cafile)


def raw_request(port, path, body, headers):
    """Sends one HTTP/1.1 request on a fresh plain socket; returns the socket."""
    s = socket.create_connection(("127.0.0.1", port), timeout=10)
    data = body.encode()
    head = "POST %s HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: %d\r\n" % (path, len(data))
    head += "".join("%s: %s\r\n" % kv for kv in headers.items())
    s.sendall(head.encode() + b"\r\n" + data)
    return s


def read_until(s, buf, pred, timeout):
    """Reads into buf (bytearray) until pred(buf) or EOF; returns True when pred held."""
    end = time.monotonic() + timeout
    while not pred(buf):
        left = end - time.monotonic()
        if left <= 0:
            return False
        r, _, _ = select.select([s], [], [], left)
        if not r:
            return False
        chunk = s.recv(65536)
        if not chunk:
            return pred(buf)
        buf += chunk
    return True


def test_script_429s_then_success_plain_and_tls(env):
    mock = env.start_mock(tls=True)
    seq = [{"status": 429, "headers": {"retry-after": "7"}, "times": 3}, {"status": 200}]
    mock.script("key-plain", seq)
    mock.script("key-tls", seq)

    # plain HTTP, all five requests on one keep-alive connection
    conn = http.client.HTTPConnection("127.0.0.1", mock.plain_port, timeout=10)
    got = []
    for _ in range(5):
        conn.request("POST", CHAT, chat_body(), {"authorization": "Bearer key-plain"})
        r = conn.getresponse()
        body = json.loads(r.read())
        got.append(r.status)
        if r.status == 429:
            eq(r.getheader("retry-after"), "7", "retry-after of a scripted 429")
            eq(body["error"]["code"], "rate_limit_exceeded", "openai 429 error code")
        else:
            eq(body["model"], "gpt-4o", "success echoes the model")
            eq(body["object"], "chat.completion", "success object")
    conn.close()
    eq(got, [429, 429, 429, 200, 200], "status sequence over plain HTTP")

    # TLS, verified against the mock's CA, by DNS name and by IP address
    ctx = ssl.create_default_context(cafile=mock.ca_path)
    conn = http.client.HTTPSConnection("localhost", mock.tls_port, timeout=10, context=ctx)
    got = []
    for _ in range(3):
        conn.request("POST", CHAT, chat_body(), {"authorization": "Bearer key-tls"})
        r = conn.getresponse()
        r.read()
        got.append(r.status)
    conn.close()
    for _ in range(2):
        st, h, _ = post(mock.url + CHAT, chat_body(), bearer("key-tls"), mock.ca_path)
        got.append(st)
    eq(got, [429, 429, 429, 200, 200], "status sequence over TLS")
    check(mock.url.startswith("https://"), "mock.url is the TLS one")

    # without the CA, TLS verification fails
    try:
        aortest.http("POST", mock.url + CHAT, chat_body(), {"authorization": "Bearer x"})
        raise AssertionError("TLS without the mock CA was accepted")
    except OSError as e:
        check("CERTIFICATE_VERIFY_FAILED" in str(e), "unexpected TLS error %s" % e)

    statuses = [r["status"] for r in mock.requests(key="key-plain")]
    eq(statuses, [429, 429, 429, 200, 200], "log of key-plain")


def test_fixture_presets_answer_status_headers_body(env):
    mock = env.start_mock(tls=False)
    with open(FIXTURES) as f:
        cases = json.load(f)["cases"]
    paths = {
        "openai": CHAT,
        "anthropic": "/v1/messages",
        "gemini": "/v1beta/models/gemini-2.5-flash:generateContent",
    }
    for case in cases:
        key = "k-" + case["name"]
        mock.script(key, [{"kind": "preset", "name": case["name"]}])
        st, h, body = aortest.http(
            "POST", mock.url + paths[case["dialect"]], chat_body(), {"x-api-key": key}
        )
        eq(st, case["status"], case["name"] + " status")
        for k, v in case["headers"].items():
            eq(h.get(k.lower()), v, "%s header %s" % (case["name"], k))
        if "body_text" in case:
            eq(body.decode(), case["body_text"], case["name"] + " body")
        else:
            eq(json.loads(body), case["body"], case["name"] + " body")
        # the preset was used once: the next request succeeds
        st, _, _ = post(mock.url + paths[case["dialect"]], chat_body(), {"x-api-key": key})
        eq(st, 200, case["name"] + " after the preset")
    # an unknown preset is refused when scripted, naming the problem
    try:
        mock.script("x", [{"kind": "preset", "name": "no-such-case"}])
        raise AssertionError("unknown preset accepted")
    except aortest.HarnessError as e:
        check("no-such-case" in str(e), str(e))


def test_gated_stream_delivers_first_event_before_gate(env):
    mock = env.start_mock(tls=False)
    mock.script("g", [{"kind": "gated_stream", "events": 4, "gate": "g1"}])
    t0 = time.monotonic()
    s = raw_request(
        mock.plain_port,
        "/v1/messages",
        json.dumps({"model": "claude-sonnet-4-5", "stream": True, "max_tokens": 10}),
        {"x-api-key": "g", "content-type": "application/json"},
    )
    buf = bytearray()
    check(read_until(s, buf, lambda b: b"message_start" in b, 5), "first event did not arrive")
    check(time.monotonic() - t0 < 3, "first event took longer than 3 s")
    # nothing more while the gate is closed
    more = read_until(s, buf, lambda b: b"content_block_start" in b, 0.3)
    check(not more, "events passed a closed gate")
    check(b"Transfer-Encoding: chunked" in buf, "headers of a chunked stream")
    mock.gate("g1")
    done = read_until(s, buf, lambda b: b"\r\n0\r\n\r\n" in b, 5)
    check(done, "stream did not finish after the gate")
    s.close()
    text = buf.decode()
    eq(text.count("event: content_block_delta"), 4, "content deltas")
    order = [text.index(w) for w in ("message_start", "content_block_start", "message_stop")]
    eq(order, sorted(order), "event order")
    eq(mock.requests(key="g")[0]["kind"], "gated_stream", "log kind")


def test_log_records_keys_and_request_fields(env):
    mock = env.start_mock(tls=False)
    u = mock.url
    gem = u + "/v1beta/models/gemini-2.5-pro:"
    post(u + CHAT, chat_body(stream=True), bearer("kb"))
    post(u + "/v1/messages", {"model": "claude-x"}, {"x-api-key": "ka"})
    post(gem + "generateContent", "{}", {"x-goog-api-key": "kg"})
    post(gem + "streamGenerateContent?alt=sse&key=kq", "{}")
    aortest.http("GET", u + "/v1/models")
    log = mock.log()
    eq([r["key"] for r in log], ["kb", "ka", "kg", "kq", None], "keys")
    eq(
        [r["key_from"] for r in log],
        ["bearer", "x-api-key", "x-goog-api-key", "query", None],
        "key sources",
    )
    gm = "gemini-2.5-pro"
    eq([r["model"] for r in log], ["gpt-4o", "claude-x", gm, gm, None], "models")
    eq([r["stream"] for r in log], [True, False, False, True, False], "stream flags")
    eq([r["status"] for r in log], [200] * 5, "statuses")
    eq(log[3]["path"], "/v1beta/models/gemini-2.5-pro:streamGenerateContent", "path without query")
    check("key=kq" in log[3]["query"], "query kept")
    eq(log[0]["headers"]["authorization"], "Bearer kb", "headers with lower-case names")
    check(all(abs(r["at"] - time.time()) < 60 for r in log), "at is time.time()")
    eq(json.loads(log[1]["body"])["model"], "claude-x", "body logged")
    eq(len(mock.log(since=log[2]["seq"])), 2, "log since")
    mock.reset()
    eq(mock.log(), [], "log after reset")


def _sse_events(text, sep="\n\n"):
    return [e for e in text.split(sep) if e.strip()]


def test_stream_shapes_of_each_dialect(env):
    mock = env.start_mock(tls=True)
    u, ca = mock.url, mock.ca_path
    # OpenAI chat: chunks then [DONE]
    st, h, b = post(u + CHAT, chat_body(stream=True), bearer("o"), ca)
    eq(st, 200, "openai stream status")
    check(h["content-type"].startswith("text/event-stream"), "openai content-type")
    ev = _sse_events(b.decode())
    eq(ev[-1], "data: [DONE]", "openai terminator")
    first = json.loads(ev[0][len("data: ") :])
    eq(first["object"], "chat.completion.chunk", "chunk object")
    eq(first["model"], "gpt-4o", "chunk model")
    text = "".join(json.loads(e[6:])["choices"][0]["delta"].get("content", "") for e in ev[:-1])
    eq(text, "Hello from the", "streamed text")
    # Anthropic: the event sequence
    body = {"model": "claude-haiku-4-5", "stream": True, "max_tokens": 5}
    st, h, b = post(u + "/v1/messages", body, {"x-api-key": "a"}, ca)
    types = [e.split("\n")[0][len("event: ") :] for e in _sse_events(b.decode())]
    want = ["message_start", "content_block_start", "ping"] + ["content_block_delta"] * 3
    want += ["content_block_stop", "message_delta", "message_stop"]
    eq(types, want, "anthropic events")
    # Gemini alt=sse: CRLF-separated data chunks, the last one with finishReason
    gem = u + "/v1beta/models/gemini-2.5-flash:streamGenerateContent"
    st, h, b = post(gem + "?alt=sse", "{}", {"x-goog-api-key": "g"}, ca)
    ev = _sse_events(b.decode(), "\r\n\r\n")
    eq(len(ev), 3, "gemini chunks")
    last = json.loads(ev[-1][6:])
    eq(last["candidates"][0]["finishReason"], "STOP", "gemini final chunk")
    eq(last["modelVersion"], "gemini-2.5-flash", "gemini model")
    # Gemini without alt=sse: one JSON array
    st, h, b = post(gem, "{}", {"x-goog-api-key": "g"}, ca)
    eq(len(json.loads(b)), 3, "gemini JSON array stream")
    # Responses API ends with response.completed; legacy completions with [DONE]
    st, h, b = post(u + "/v1/responses", {"model": "gpt-4o", "stream": True}, bearer("o"), ca)
    last = _sse_events(b.decode())[-1]
    check(last.startswith("event: response.completed"), "responses terminator")
    body = {"model": "gpt-3.5-turbo-instruct", "stream": True}
    st, h, b = post(u + "/v1/completions", body, bearer("o"), ca)
    eq(_sse_events(b.decode())[-1], "data: [DONE]", "completions terminator")


def test_json_shapes_and_errors(env):
    mock = env.start_mock(tls=False)
    u = mock.url
    checks = [
        (
            "/v1/embeddings",
            {"model": "text-embedding-3-small", "input": ["a", "b"]},
            lambda o: len(o["data"]) == 2,
        ),
        (
            "/v1/messages/count_tokens",
            {"model": "claude-x", "messages": []},
            lambda o: o["input_tokens"] > 0,
        ),
        (
            "/v1/responses",
            {"model": "gpt-4o", "input": "hi"},
            lambda o: o["output"][0]["content"][0]["text"],
        ),
        ("/v1beta/models/gemini-2.5-flash:countTokens", {}, lambda o: o["totalTokens"] > 0),
        (
            "/v1beta/models/gemini-2.5-flash:generateContent",
            {},
            lambda o: o["candidates"][0]["content"]["parts"][0]["text"] == "Hello from the",
        ),
    ]
    for path, req, ok in checks:
        st, _, b = post(u + path, req, bearer("o"))
        eq(st, 200, path)
        check(ok(json.loads(b)), "%s shape: %s" % (path, b[:200]))
    st, _, b = aortest.http("GET", u + "/v1/models", None, bearer("o"))
    eq(json.loads(b)["object"], "list", "openai models list")
    anth = {"x-api-key": "a", "anthropic-version": "2023-06-01"}
    st, _, b = aortest.http("GET", u + "/v1/models", None, anth)
    check("has_more" in json.loads(b), "anthropic models list")
    # unknown path and missing model: the dialect's error shapes
    st, _, b = post(u + "/v1/nope", "{}")
    eq(st, 404, "unknown path")
    st, _, b = post(u + "/v1/messages", "{}", {"x-api-key": "a"})
    eq((st, json.loads(b)["error"]["type"]), (400, "invalid_request_error"), "missing model")


def test_stream_failures(env):
    mock = env.start_mock(tls=False)
    u = mock.url
    # sse_error_first: a 200 stream whose first event is the dialect's error
    mock.script("e", [{"kind": "sse_error_first"}])
    st, h, b = post(u + "/v1/messages", {"model": "c", "stream": True}, {"x-api-key": "e"})
    eq(st, 200, "sse_error_first status")
    first = _sse_events(b.decode())[0].split("\n")
    eq(first[0], "event: error", "first event is an error")
    eq(json.loads(first[1][6:])["error"]["type"], "overloaded_error", "anthropic overloaded")
    # sse_error_after: N good events, then the error event
    mock.script("e2", [{"kind": "sse_error_after", "events": 2}])
    st, h, b = post(u + CHAT, chat_body(stream=True), bearer("e2"))
    ev = _sse_events(b.decode())
    eq(len(ev), 3, "events with sse_error_after")
    eq(json.loads(ev[2][6:])["error"]["type"], "server_error", "openai error event")
    # cut_after: N events, then the connection closes without the terminator
    mock.script("c", [{"kind": "cut_after", "events": 2}])
    conn = http.client.HTTPConnection("127.0.0.1", mock.plain_port, timeout=10)
    conn.request("POST", CHAT, chat_body(stream=True), bearer("c"))
    r = conn.getresponse()
    eq(r.status, 200, "cut stream status")
    try:
        data = r.read()
        raise AssertionError("cut stream read cleanly: %r" % data)
    except http.client.IncompleteRead as e:
        eq(len(_sse_events(e.partial.decode())), 2, "events before the cut")
        check(b"[DONE]" not in e.partial, "no terminator")
    conn.close()
    # non-stream cut: a truncated JSON body
    mock.script("c2", [{"kind": "cut_after", "events": 0}])
    conn = http.client.HTTPConnection("127.0.0.1", mock.plain_port, timeout=10)
    conn.request("POST", CHAT, chat_body(), bearer("c2"))
    try:
        conn.getresponse().read()
        raise AssertionError("cut JSON read cleanly")
    except http.client.IncompleteRead:
        pass
    conn.close()
    # drop: the connection closes without an answer
    mock.script("d", [{"kind": "drop"}])
    try:
        post(u + CHAT, chat_body(), bearer("d"))
        raise AssertionError("drop answered")
    except (OSError, http.client.HTTPException):
        pass
    eq(mock.requests(key="d")[0]["status"], 0, "drop logged with status 0")


def test_timing_and_html_kinds(env):
    mock = env.start_mock(tls=False)
    u = mock.url
    mock.script("s", [{"kind": "slow_first_byte", "delay_ms": 300}])
    t0 = time.monotonic()
    st, _, _ = post(u + CHAT, chat_body(), bearer("s"))
    check(time.monotonic() - t0 >= 0.28, "slow_first_byte was not slow")
    eq(st, 200, "slow answer status")
    mock.script("i", [{"interval_ms": 100, "events": 3}])
    t0 = time.monotonic()
    post(u + CHAT, chat_body(stream=True), bearer("i"))
    check(time.monotonic() - t0 >= 0.5, "interval_ms not applied")
    mock.script("h", [{"kind": "html"}])
    st, h, b = post(u + CHAT, chat_body(), bearer("h"))
    eq(st, 200, "html status")
    check(h["content-type"].startswith("text/html") and b"<html" in b, "html answer")


def test_script_semantics(env):
    mock = env.start_mock(tls=False)
    u = mock.url
    msg = {"model": "c"}
    # times -1 repeats forever; the default error body of the dialect
    mock.script("f", [{"status": 529, "times": -1}])
    for _ in range(3):
        st, _, b = post(u + "/v1/messages", msg, {"x-api-key": "f"})
        eq((st, json.loads(b)["error"]["type"]), (529, "overloaded_error"), "forever 529")
    # "*" answers keys without a queue of their own; body_text
    mock.script("*", [{"status": 503, "body_text": "down", "times": 2}])
    got = [post(u + CHAT, chat_body(), bearer("other"))[:3:2] for _ in range(3)]
    eq([g[0] for g in got], [503, 503, 200], "wildcard script")
    eq(got[0][1], b"down", "body_text")
    # append adds to the queue, a new script replaces it
    mock.script("a", [{"status": 500}])
    mock.script("a", [{"status": 502}], append=True)
    mock.script("b", [{"status": 500}])
    mock.script("b", [{"status": 502}])
    got = [post(u + CHAT, chat_body(), bearer(k))[0] for k in "aabb"]
    eq(got, [500, 502, 502, 200], "append vs replace")
    # a 200 with headers: e.g. usage headers on a success
    mock.script("u", [{"headers": {"x-ratelimit-remaining-requests": "0"}}])
    st, h, b = post(u + CHAT, chat_body(), bearer("u"))
    eq((st, h.get("x-ratelimit-remaining-requests")), (200, "0"), "headers on a success")
    eq(json.loads(b)["object"], "chat.completion", "success body with scripted headers")
    # a bad script is refused with a message naming the field
    bad_scripts = [
        ([{"status": 429, "tiems": 3}], "tiems"),
        ([{"kind": "cut_after"}], "events"),
        ([{"kind": "nope"}], "nope"),
        ([{"times": 0}], "times"),
    ]
    for bad, word in bad_scripts:
        try:
            mock.script("x", bad)
            raise AssertionError("accepted bad script %r" % bad)
        except aortest.HarnessError as e:
            check(word in str(e), "error %r does not name %r" % (str(e), word))
    mock.reset()
    st, _, _ = post(u + "/v1/messages", msg, {"x-api-key": "f"})
    eq(st, 200, "reset clears scripts")


def test_curl_helper_and_client_env(env):
    mock = env.start_mock(tls=True)
    hdrs = {"retry-after": "3", "x-two": ["a", "b"]}
    mock.script("ck", [{"status": 429, "headers": hdrs}])
    args = ["--cacert", mock.ca_path, "-H", "authorization: Bearer ck", "-d", chat_body()]
    r = env.curl(args + [mock.url + CHAT], preload=False)
    status, headers, body = r
    eq(status, 429, "curl status")
    eq(headers["retry-after"], "3", "curl header")
    eq(headers["x-two"], "a, b", "repeated header")
    eq(json.loads(body)["error"]["code"], "rate_limit_exceeded", "curl body")
    eq(r.rc, 0, "curl rc")
    r = env.curl(["-d", chat_body(), mock.plain_url + CHAT], preload=False)
    eq((r.status, r.json()["model"]), (200, "gpt-4o"), "curl plain")
    r = env.curl(["http://127.0.0.1:%d/" % aortest.free_port()], preload=False)
    eq((r.status, r.rc), (0, 7), "curl without an answer")
    rc, out, err = env.run_client(["sh", "-c", "env"], preload=False)
    eq(rc, 0, "env rc")
    check("XDG_RUNTIME_DIR=" + env.env["XDG_RUNTIME_DIR"] in out, "client sees XDG_RUNTIME_DIR")
    rc, out, _ = env.run_client("echo hi; exit 3", preload=False)
    eq((rc, out), (3, "hi\n"), "rc and stdout of sh -c")


def test_env_isolation(env):
    saved = dict(os.environ)
    leak = ["OPENAI_API_KEY", "OPENAI_API_KEY_2", "ANTHROPIC_BASE_URL", "AOR_CONFIG", "LD_PRELOAD"]
    os.environ.update({v: "x" for v in leak})
    try:
        e2 = aortest.Env("iso")
    finally:
        os.environ.clear()
        os.environ.update(saved)
    try:
        for v in leak:
            check(v not in e2.env, "%s leaked into the test env" % v)
        for v in ("XDG_CONFIG_HOME", "XDG_RUNTIME_DIR", "XDG_STATE_HOME", "XDG_DATA_HOME", "HOME"):
            check(e2.env[v].startswith(e2.tmp + "/"), "%s not in the temp dir" % v)
        eq(os.stat(e2.env["XDG_RUNTIME_DIR"]).st_mode & 0o777, 0o700, "runtime dir mode")
        p = e2.write_config(
            """
            [daemon]
            listen = 127.0.0.1:1  ; comment
            """
        )
        eq(p, os.path.join(e2.env["XDG_CONFIG_HOME"], "aor", "aor.ini"), "config path")
        with open(p) as f:
            eq(f.read(), "[daemon]\nlisten = 127.0.0.1:1  ; comment\n", "dedented config")
        eq(aortest._ini_daemon_values(p)["listen"], "127.0.0.1:1", "listen parsed")
        m = e2.start_mock(tls=False)
    finally:
        e2.cleanup()
    check(m.proc.poll() is not None, "cleanup left the mock running")
    check(not os.path.exists(e2.tmp), "cleanup left the temp dir")


FAKE_AORD = r'''#!/usr/bin/env python3
# Stand-in for aord used to test the harness: healthz, socket, token, state, clock.
import http.server, json, os, re, signal, socket, sys, threading
cfg = os.path.join(os.environ["XDG_CONFIG_HOME"], "aor", "aor.ini")
if os.environ.get("FAKE_FAIL"):
    sys.stderr.write("config error: something named\n"); sys.exit(2)
port = int(re.search(r"listen\s*=\s*127\.0\.0\.1:(\d+)", open(cfg).read()).group(1))
rt = os.path.join(os.environ["XDG_RUNTIME_DIR"], "aor"); os.makedirs(rt, 0o700, exist_ok=True)
st = os.path.join(os.environ["XDG_STATE_HOME"], "aor"); os.makedirs(st, 0o700, exist_ok=True)
with open(os.path.join(st, "admin.token"), "w") as f: f.write("tok123\n")
clock = [float(os.environ["AOR_FAKE_CLOCK"])] if "AOR_FAKE_CLOCK" in os.environ else None
class H(http.server.BaseHTTPRequestHandler):
    def log_message(self, *a): pass
    def ans(self, code, obj):
        b = json.dumps(obj).encode(); self.send_response(code)
        self.send_header("Content-Length", str(len(b))); self.end_headers(); self.wfile.write(b)
    def do_GET(self):
        if self.path == "/healthz": return self.ans(200, {"ok": True})
        if self.headers.get("authorization") != "Bearer tok123": return self.ans(401, {})
        if self.path == "/admin/api/state":
            return self.ans(200, {"backoff": [], "now": clock and clock[0]})
        self.ans(404, {})
    def do_POST(self):
        if self.headers.get("authorization") != "Bearer tok123": return self.ans(401, {})
        m = re.match(r"/admin/api/clock/advance\?s=([0-9.]+)$", self.path)
        if m and clock: clock[0] += float(m.group(1)); return self.ans(200, {"now": clock[0]})
        self.ans(404, {})
srv = http.server.ThreadingHTTPServer(("127.0.0.1", port), H)
u = socket.socket(socket.AF_UNIX); u.bind(os.path.join(rt, "aor.sock"))
signal.signal(signal.SIGTERM, lambda *a: threading.Thread(target=srv.shutdown).start())
sys.stderr.write("fake aord up\n"); sys.stderr.flush()
srv.serve_forever(); sys.stderr.write("fake aord stopped\n")
'''


def test_start_daemon_against_a_stand_in(env):
    build = env.path("fakebuild")
    os.mkdir(build)
    with open(os.path.join(build, "aord"), "w") as f:
        f.write(FAKE_AORD)
    os.chmod(os.path.join(build, "aord"), 0o755)
    e2 = aortest.Env("stand-in", build=build)
    try:
        port = aortest.free_port()
        e2.write_config("[daemon]\nlisten = 127.0.0.1:%d\n" % port)
        d = e2.start_daemon(fake_clock=1800000000)
        eq(d.healthz(), 200, "healthz")
        eq(d.state()["now"], 1800000000, "state with the token")
        d.advance(5)
        eq(d.state()["now"], 1800000005, "clock advanced")
        eq(d.stop(), 0, "clean stop rc")
        check("fake aord stopped" in d.stderr_text(), "stderr captured")
        os.unlink(e2.socket_path)
        d2 = e2.start_daemon()
        d2.kill9()
        eq(d2.proc.returncode, -9, "kill9")
        try:
            e2.start_daemon(extra_env={"FAKE_FAIL": "1"})
            raise AssertionError("a daemon that exits at start was accepted")
        except aortest.HarnessError as e:
            check("something named" in str(e) and "exited with 2" in str(e), str(e))
    finally:
        e2.cleanup()


RUNNER_SAMPLE = '''
import aortest
def test_ok(env):
    aortest.check(env.env["HOME"].startswith(env.tmp))
def test_bad(env):
    aortest.eq(1, 2, "one")
def test_skipped(env):
    raise aortest.Skip("not here")
def helper(env):
    raise AssertionError("not a test")
'''


def test_runner_output_and_exit_code(env):
    sample = env.path("test_sample.py")
    with open(sample, "w") as f:
        f.write(textwrap.dedent(RUNNER_SAMPLE))
    runner = os.path.join(aortest.REPO, "tests", "e2e", "aortest.py")
    r = subprocess.run([sys.executable, runner, sample], capture_output=True, text=True, timeout=60)
    lines = r.stdout.splitlines()
    eq(lines[-1], "1 passed, 1 failed, 1 skipped", "summary line")
    eq(r.returncode, 1, "exit code with a failure")
    check("PASS test_sample.test_ok" in lines, r.stdout)
    check("FAIL test_sample.test_bad: AssertionError: one: expected 2, got 1" in lines, r.stdout)
    check("SKIP test_sample.test_skipped: not here" in lines, r.stdout)
    check(not any("helper" in ln for ln in lines), "helper was run")
    r = subprocess.run(
        [sys.executable, runner, sample, "-k", "ok"], capture_output=True, text=True, timeout=60
    )
    eq(r.stdout.splitlines()[-1], "1 passed, 0 failed", "summary with -k")
    eq(r.returncode, 0, "exit code without failures")
