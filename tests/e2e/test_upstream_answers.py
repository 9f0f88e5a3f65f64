"""Upstream answers a test scripts byte for byte (a raw HTTP/1.1 server written here, on
loopback), through the sidecar: what the client gets must be exactly what it should.
Regressions from a hostile review of the direct upstream path (docs/architecture.md,
"Upstream"): a slow reader must get every byte once (flow control), a 204 has no body,
a 101 is not an answer, curl's h2c upgrade offer is answered in HTTP/1.1, and headers a
client names in Connection stay with aor."""
import hashlib
import json
import re
import socket
import threading
import time

import aortest
from aortest import check, eq

BODY = b'{"model":"gpt-4o","messages":[{"role":"user","content":"hi"}]}'
STREAM_BODY = b'{"model":"gpt-4o-mini","stream":true,"messages":[]}'


class RawUpstream:
    """Accepts connections on 127.0.0.1 and runs handler(sock, n) for each in a thread
    (n counts connections from 0). .heads collects the request heads read with
    read_request."""

    def __init__(self, handler):
        self.handler = handler
        self.lsock = socket.socket()
        self.lsock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.lsock.bind(("127.0.0.1", 0))
        self.lsock.listen(64)
        self.port = self.lsock.getsockname()[1]
        self.conns = 0
        self.heads = []
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self):
        while True:
            try:
                s, _ = self.lsock.accept()
            except OSError:
                return
            n = self.conns
            self.conns += 1
            threading.Thread(target=self._run, args=(s, n), daemon=True).start()

    def _run(self, s, n):
        try:
            self.handler(s, n)
        except OSError:
            pass
        finally:
            s.close()

    def read_request(self, s, timeout=20):
        """One request (head + Content-Length body); (head, body) or (None, None) at EOF."""
        s.settimeout(timeout)
        buf = b""
        while b"\r\n\r\n" not in buf:
            d = s.recv(65536)
            if not d:
                return None, None
            buf += d
        head, rest = buf.split(b"\r\n\r\n", 1)
        m = re.search(rb"(?i)\r\ncontent-length:\s*(\d+)", head)
        n = int(m.group(1)) if m else 0
        while len(rest) < n:
            d = s.recv(65536)
            if not d:
                break
            rest += d
        self.heads.append(head)
        return head, rest

    def close(self):
        self.lsock.close()


def start(env, up, extra_env=None, scheme="http", provider_lines="", key="sk-test-raw-upstream"):
    """aord with one openai provider at up (scheme://127.0.0.1:up.port), one key (its
    secret: key), the sidecar on a free port; provider_lines go into the provider
    section."""
    port = aortest.free_port()
    env.set_keys(OPENAI_API_KEY=key)
    env.write_config(f"""
        [daemon]
        listen = 127.0.0.1:{port}
        [key "a"]
        env = OPENAI_API_KEY
        [provider "openai"]
        dialect = openai
        base_url = {scheme}://127.0.0.1:{up.port}
        {provider_lines}
        keys = a
        models = *
        """)
    return env.start_daemon(extra_env=extra_env)


def request(extra=b"", body=BODY, path=b"/v1/chat/completions"):
    return (b"POST " + path + b" HTTP/1.1\r\nHost: 127.0.0.1\r\n"
            b"Content-Type: application/json\r\nAuthorization: Bearer client\r\n" + extra +
            b"Content-Length: %d\r\n\r\n" % len(body) + body)


def read_answer(s, timeout=20):
    """One answer from a raw client socket: (status, head bytes, body bytes); the body by
    Content-Length, chunked encoding, or to EOF; (0, b"", b"") when nothing came."""
    s.settimeout(timeout)
    buf = b""
    while b"\r\n\r\n" not in buf:
        d = s.recv(65536)
        if not d:
            return 0, b"", b""
        buf += d
    head, rest = buf.split(b"\r\n\r\n", 1)
    status = int(head.split(b" ", 2)[1])
    m = re.search(rb"(?i)\r\ncontent-length:\s*(\d+)", head)
    if status in (204, 304) or (100 <= status < 200):
        return status, head, rest
    if m:
        n = int(m.group(1))
        while len(rest) < n:
            d = s.recv(1 << 20)
            if not d:
                break
            rest += d
        return status, head, rest
    if re.search(rb"(?i)\r\ntransfer-encoding:\s*chunked", head):
        out = b""

        def more():
            d = s.recv(65536)
            if not d:  # closed before the last chunk: an unfinished answer (§5.3)
                raise EOFError("the answer ended without its last chunk after %r" % out[-200:])
            return d

        while True:
            while b"\r\n" not in rest:
                rest += more()
            size_line, rest = rest.split(b"\r\n", 1)
            size = int(size_line.split(b";")[0], 16)
            while len(rest) < size + 2:
                rest += more()
            out += rest[:size]
            rest = rest[size + 2:]
            if size == 0:
                return status, head, out
    while True:
        d = s.recv(65536)
        if not d:
            return status, head, rest
        rest += d


def always(answer):
    """A RawUpstream that answers every request with the same bytes."""
    def handler(s, n):
        while True:
            head, _ = up.read_request(s)
            if head is None:
                return
            s.sendall(answer)

    up = RawUpstream(handler)
    return up


def ask(d, body=BODY):
    """One request through the sidecar on a new connection: (status, head, body)."""
    s = socket.create_connection(("127.0.0.1", d.port))
    s.sendall(request(body=body))
    answer = read_answer(s)
    s.close()
    return answer


def read_to_eof(s, timeout=20):
    """Every byte until the peer closes."""
    s.settimeout(timeout)
    raw = b""
    while True:
        chunk = s.recv(1 << 20)
        if not chunk:
            return raw
        raw += chunk


def numbered(n):
    """n bytes in which every 8 KiB block starts with its number: a block sent twice or
    lost shows at once."""
    pat = hashlib.sha256(b"aor").digest() * 256
    out = bytearray()
    i = 0
    while len(out) < n:
        out += i.to_bytes(8, "big") + pat[:8184]
        i += 1
    return bytes(out[:n])


def slow_reader(env, extra_env):
    size = 6 << 20  # well over aord's 1 MiB output high-water mark
    payload = numbered(size)

    def handler(s, n):
        up.read_request(s)
        s.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
                  b"Content-Length: %d\r\n\r\n" % size)
        s.sendall(payload)

    up = RawUpstream(handler)
    d = start(env, up, extra_env)
    c = socket.socket()
    c.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 65536)
    c.connect(("127.0.0.1", d.port))
    c.sendall(request())
    time.sleep(1.0)  # aord's output fills up and the upstream transfer pauses
    status, head, body = read_answer(c, timeout=30)
    c.close()
    eq(status, 200, "status")
    eq(len(body), size, "body bytes (Content-Length %d)" % size)
    check(body == payload, "the body is the upstream's, every block once")
    up.close()


def test_slow_reader_gets_every_byte_once_direct(env):
    slow_reader(env, None)


def test_slow_reader_gets_every_byte_once_libcurl(env):
    slow_reader(env, {"AOR_UPSTREAM": "curl"})


def test_204_has_no_body_and_the_connection_goes_on(env):
    answers = [b"HTTP/1.1 204 No Content\r\nX-Up: 1\r\n\r\n",
               b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 2\r\n\r\n{}"]

    def handler(s, n):
        for a in answers:
            if up.read_request(s)[0] is None:
                return
            s.sendall(a)

    up = RawUpstream(handler)
    d = start(env, up)
    c = socket.create_connection(("127.0.0.1", d.port))
    c.sendall(request())
    status, head, rest = read_answer(c)
    eq(status, 204, "first status")
    check(b"x-up: 1" in head.lower(), "the upstream's header is forwarded")
    check(b"transfer-encoding" not in head.lower(), "no Transfer-Encoding on a 204: %r" % head)
    check(b"content-length" not in head.lower(), "no Content-Length on a 204: %r" % head)
    eq(rest, b"", "bytes after the 204's head")
    c.sendall(request())
    status, head, body = read_answer(c)
    eq((status, body), (200, b"{}"), "second answer on the same connection")
    c.close()
    up.close()


def test_head_answered_as_an_event_stream_is_a_success(env):
    """A 200 to HEAD typed text/event-stream has no body to peek at: it is passed on, not
    taken for a stream that ended before its first event (QA: the key was backed off)."""
    def handler(s, n):
        while up.read_request(s)[0] is not None:
            s.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n"
                      b"Transfer-Encoding: chunked\r\n\r\n")

    up = RawUpstream(handler)
    d = start(env, up)
    c = socket.create_connection(("127.0.0.1", d.port))
    c.sendall(b"HEAD /v1/models HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer client\r\n"
              b"Connection: close\r\n\r\n")
    c.settimeout(10)
    out = b""
    while True:
        chunk = c.recv(65536)
        if not chunk:
            break
        out += chunk
    check(out.startswith(b"HTTP/1.1 200 "), "200 passed on: %r" % out[:120])
    check(out.endswith(b"\r\n\r\n"), "head only: %r" % out[-40:])
    eq(d.state()["backoff"], [], "no backoff row")
    up.close()


def test_101_from_upstream_is_not_an_answer(env):
    def handler(s, n):
        if up.read_request(s)[0] is not None:
            s.sendall(b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\n"
                      b"Connection: Upgrade\r\n\r\n")
            time.sleep(0.5)

    up = RawUpstream(handler)
    d = start(env, up)
    status, headers, body = d.http("POST", "/v1/chat/completions", BODY,
                                   {"Content-Type": "application/json"})
    text = body.decode(errors="replace") if isinstance(body, bytes) else str(body)
    eq(status, 502, "status when the only upstream switches protocols (%s)" % text[:200])
    check("upstream" in text.lower(), "the answer says what went wrong: %s" % text[:300])
    up.close()


def test_h2c_upgrade_offer_is_answered_in_http11(env):
    def handler(s, n):
        while up.read_request(s)[0] is not None:
            s.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
                      b"Content-Length: 11\r\n\r\n{\"ok\":true}")

    up = RawUpstream(handler)
    d = start(env, up)
    c = socket.create_connection(("127.0.0.1", d.port))
    c.sendall(request(b"Connection: Upgrade, HTTP2-Settings\r\nUpgrade: h2c\r\n"
                      b"HTTP2-Settings: AAMAAABkAARAAAAAAAIAAAAA\r\n"))
    status, head, body = read_answer(c)
    c.close()
    eq((status, body), (200, b'{"ok":true}'), "answer to a request offering h2c")
    eq(len(up.heads), 1, "requests upstream")
    h = up.heads[0].lower()
    check(b"upgrade" not in h and b"http2-settings" not in h,
          "the upgrade offer is not forwarded: %r" % up.heads[0])
    # curl --http2 makes the same offer
    rc, out, err = env.run_client(
        ["curl", "-sS", "--http2", "-H", "Content-Type: application/json", "--data-binary",
         BODY.decode(), "http://127.0.0.1:%d/v1/chat/completions" % d.port], preload=False)
    eq((rc, out.strip()), (0, '{"ok":true}'), "curl --http2 (%s)" % err.strip())
    up.close()


def test_headers_named_in_connection_stay_with_aor(env):
    def handler(s, n):
        while up.read_request(s)[0] is not None:
            s.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\n{}")

    up = RawUpstream(handler)
    d = start(env, up)
    c = socket.create_connection(("127.0.0.1", d.port))
    c.sendall(request(b"Connection: keep-alive, X-Private\r\nX-Private: 1\r\nX-Public: 2\r\n"))
    status, head, body = read_answer(c)
    c.close()
    eq(status, 200, "status")
    h = up.heads[0].lower()
    check(b"x-private" not in h, "a header named in Connection is not forwarded: %r" % h)
    check(b"x-public: 2" in h, "other headers are: %r" % h)
    up.close()


def test_headers_the_upstream_names_in_connection_stay_with_aor(env):
    """The answer's direction (RFC 9110 §7.6.1; QA: `Connection: X-Secret` with
    `X-Secret: leak` reached the client), on the direct path and through libcurl."""
    def handler(s, n):
        while up.read_request(s)[0] is not None:
            s.sendall(b"HTTP/1.1 200 OK\r\nX-Hop: leak\r\nConnection: keep-alive, X-Hop,"
                      b" x-other\r\nX-Other: 1\r\nX-Public: 2\r\nContent-Length: 2\r\n\r\n{}")

    up = RawUpstream(handler)
    for backend in ("direct", "curl"):
        d = start(env, up, extra_env={"AOR_UPSTREAM": "curl"} if backend == "curl" else None)
        c = socket.create_connection(("127.0.0.1", d.port))
        c.sendall(request())
        status, head, body = read_answer(c)
        c.close()
        h = head.lower()
        eq((status, body), (200, b"{}"), "%s: answer" % backend)
        check(b"x-hop" not in h and b"x-other" not in h,
              "%s: headers the upstream named in Connection are not forwarded: %r" % (backend, h))
        check(b"x-public: 2" in h, "%s: other headers are: %r" % (backend, h))
        d.stop()
    up.close()


def test_stop_with_connections_open_is_clean(env):
    """SIGTERM while a client idles on keep-alive, another waits for an answer that never
    comes and a third has sent half a request: aord exits 0, and under the sanitizers
    with nothing leaked (every connection is closed and freed)."""
    def handler(s, n):
        up.read_request(s)
        time.sleep(5)  # never answers in time

    up = RawUpstream(handler)
    d = start(env, up)
    idle = socket.create_connection(("127.0.0.1", d.port))
    idle.sendall(b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
    eq(read_answer(idle)[0], 200, "healthz on the idle connection")
    waiting = socket.create_connection(("127.0.0.1", d.port))
    waiting.sendall(request())
    half = socket.create_connection(("127.0.0.1", d.port))
    half.sendall(b"POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                 b"Content-Length: 100\r\n\r\n{")
    aortest.wait_until(lambda: len(up.heads) == 1, what="the request upstream")
    rc = d.stop()
    err = d.stderr_text()
    eq(rc, 0, "aord's exit status")
    check("Sanitizer" not in err, "no sanitizer report: %s" % err[-1500:])
    for s in (idle, waiting, half):
        s.close()
    up.close()


def test_bytes_after_an_answer_end_its_pooled_connection(env):
    """An upstream answer that ends exactly where a 16 KiB read ends, with stray bytes
    (another whole answer) behind it in the socket: the connection must not go back to
    the pool, or the walk's next attempt on the same origin, in the same loop pass, reads
    the stray answer as its own (review: the client got the smuggled 200 and key a was
    recorded a success)."""
    smuggled = (b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
                b"Content-Length: 17\r\n\r\n{\"smuggled\":true}")

    def answer_429_of(total):
        base = b'{"error":{"message":"slow down","type":"requests","code":"rate_limit_exceeded"}}'
        pre = b"HTTP/1.1 429 Too Many Requests\r\nContent-Type: application/json\r\nContent-Length: "
        for pad in range(total):
            body = base + b" " * pad
            head = pre + b"%d\r\n\r\n" % len(body)
            if len(head) + len(body) == total:
                return head + body
        raise AssertionError("no padding makes %d bytes" % total)

    first = answer_429_of(16384)

    def handler(s, n):
        while True:
            head, _ = up.read_request(s)
            if head is None:
                return
            if len(up.heads) == 1:
                s.sendall(first + smuggled)
            else:
                s.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
                          b"Content-Length: 13\r\n\r\n{\"real\":true}")

    up = RawUpstream(handler)
    port = aortest.free_port()
    env.set_keys(KEY_A="sk-" + "test-raw-a", KEY_B="sk-" + "test-raw-b")
    env.write_config(f"""
        [daemon]
        listen = 127.0.0.1:{port}
        [key "a"]
        env = KEY_A
        [key "b"]
        env = KEY_B
        [provider "openai"]
        dialect = openai
        base_url = http://127.0.0.1:{up.port}
        keys = a, b
        models = *
        """)
    d = env.start_daemon()
    s = socket.create_connection(("127.0.0.1", d.port))
    s.sendall(request())
    status, head, body = read_answer(s)
    s.close()
    eq((status, body), (200, b'{"real":true}'), "the second attempt's own answer")
    check(b"x-aor-attempts: 2" in head.lower(), "two attempts: %r" % head)
    eq(len(up.heads), 2, "two requests upstream")
    eq(up.conns, 2, "the second on a new connection")


def early_answer_then_reset(env, extra_env):
    """An upstream that answers 413 after the request head and closes with the 8 MiB body
    unread (the kernel resets the connection): the 413 reaches the client as it came, a
    client error, nothing backed off. QA: on the direct backend the send error failed
    the attempt as transient (502), and with more keys the walk sent the body to each
    and opened the model's circuit."""
    answer = (b"HTTP/1.1 413 Payload Too Large\r\nContent-Type: application/json\r\n"
              b"Connection: close\r\nContent-Length: 62\r\n\r\n"
              b'{"error":{"message":"too big","type":"invalid_request_error"}}')

    def handler(s, n):
        s.settimeout(20)
        buf = b""
        while b"\r\n\r\n" not in buf:
            d = s.recv(4096)
            if not d:
                return
            buf += d
        s.sendall(answer)  # then closed by RawUpstream, the body unread: a reset

    up = RawUpstream(handler)
    d = start(env, up, extra_env=extra_env)
    early_413_rounds(d, answer.split(b"\r\n\r\n", 1)[1])


def early_413_rounds(d, body413):
    """Three 8 MiB uploads through d's sidecar, each on a new connection, to an upstream
    that answers 413 early and closes: each client gets that 413 (body413) in one
    attempt, and nothing is backed off."""
    big = b'{"model":"gpt-4o","messages":[{"role":"user","content":"' + b"x" * (8 << 20) + b'"}]}'
    for i in range(3):
        s = socket.create_connection(("127.0.0.1", d.port))
        s.sendall(request(body=big))
        status, head, body = read_answer(s, timeout=60)
        s.close()
        eq((status, body), (413, body413), "round %d: the 413 as it came" % i)
        check(b"x-aor-attempts: 1" in head.lower(), "one attempt: %r" % head)
    eq(d.state()["backoff"], [], "nothing backed off")


def test_early_answer_before_a_reset_reaches_the_client_direct(env):
    early_answer_then_reset(env, None)


def test_early_answer_before_a_reset_reaches_the_client_libcurl(env):
    early_answer_then_reset(env, {"AOR_UPSTREAM": "curl"})


def test_stream_of_one_error_event_without_blank_line_is_a_failure(env):
    """§5.3: an error event before any byte reached the client is a failed attempt, also
    when it is the whole stream and lacks the blank line that ends an event (review: it
    was passed on as a success, the key's backoff cleared)."""
    event = (b'event: error\ndata: {"type":"error","error":{"type":"overloaded_error",'
             b'"message":"Overloaded"}}\n')
    d = start(env, always(b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n"
                          b"Content-Length: %d\r\n\r\n" % len(event) + event))
    status, head, got = ask(d, STREAM_BODY)
    eq(status, 200, "the walk ran out: the last answer as it came (§5.6)")
    check(b"overloaded_error" in got, "with its event: %r" % got)
    rows = d.state()["backoff"]
    eq([(r["key"], r["last_error_kind"]) for r in rows], [("a", "rate")],
       "the overloaded error event backed the key off as rate")


def test_stream_reset_after_its_terminator_is_complete(env):
    """An upstream that resets its connection after a stream's data: [DONE] instead of
    sending the last chunk: the answer is whole, so the client's response ends cleanly
    and the attempt is a success (it was cut and the key backed off as transient)."""
    ev = b'data: {"choices":[{"delta":{"content":"hi"}}]}\n\ndata: [DONE]\n\n'

    def handler(s, n):
        head, _ = up.read_request(s)
        if head is None:
            return
        s.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n"
                  b"Transfer-Encoding: chunked\r\n\r\n%x\r\n" % len(ev) + ev + b"\r\n")
        time.sleep(0.2)
        s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, b"\x01\x00\x00\x00\x00\x00\x00\x00")
        s.close()

    up = RawUpstream(handler)
    d = start(env, up)
    status, head, got = ask(d, STREAM_BODY)  # read_answer raises on an unfinished answer
    eq(status, 200, "the stream")
    check(got.endswith(b"data: [DONE]\n\n"), "all of it: %r" % got[-60:])
    eq(d.state()["backoff"], [], "a success, nothing backed off")
    check("upstream failed after its stream's terminator" in d.stderr_text(),
          "aord says so:\n" + d.stderr_text()[-1500:])
    up.close()


def test_304_to_a_conditional_request_is_returned_without_a_body(env):
    """An upstream 304 Not Modified (a conditional GET the client made) goes back as it
    came, without a body or framing, and the connection goes on (review: it became a 502
    'not an answer of the openai API')."""
    def handler(s, n):
        while True:
            head, _ = up.read_request(s)
            if head is None:
                return
            if b"if-none-match" in head.lower():
                s.sendall(b'HTTP/1.1 304 Not Modified\r\nETag: "v1"\r\n\r\n')
            else:
                s.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
                          b"Content-Length: 2\r\n\r\n{}")

    up = RawUpstream(handler)
    d = start(env, up)
    s = socket.create_connection(("127.0.0.1", d.port))
    s.sendall(b'GET /v1/models HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer c\r\n'
              b'If-None-Match: "v1"\r\n\r\nGET /v1/models HTTP/1.1\r\nHost: 127.0.0.1\r\n'
              b'Authorization: Bearer c\r\nConnection: close\r\n\r\n')
    raw = read_to_eof(s)
    s.close()
    first, sep, rest = raw.partition(b"\r\n\r\n")
    check(first.startswith(b"HTTP/1.1 304 "), "304 as it came: %r" % raw[:300])
    check(b'etag: "v1"' in first.lower(), "with its ETag: %r" % first)
    check(b"transfer-encoding" not in first.lower(), "no chunked framing: %r" % first)
    check(rest.startswith(b"HTTP/1.1 200 "), "no body, and the next answer follows: %r" % rest[:200])
    eq(d.state()["backoff"], [], "no failure recorded")


def test_client_error_over_the_buffer_limit_is_returned_whole(env):
    """A 400 (client kind: "returned to the client as is", §4.1) whose body is larger than
    aord keeps for classification (1 MiB; a 422 that echoes a large prompt): classified by
    its start, then passed on whole, with its Content-Length (QA: the client got the first
    MiB and an unfinished answer)."""
    big = b'{"error":{"message":"' + b"x" * (2 * 1024 * 1024) + b'","type":"invalid_request_error"}}'
    d = start(env, always(b"HTTP/1.1 400 Bad Request\r\nContent-Type: application/json\r\n"
                          b"Content-Length: %d\r\n\r\n" % len(big) + big))
    status, head, body = ask(d)
    eq(status, 400, "the 400 as it came")
    check(b"content-length: %d" % len(big) in head.lower(), "its length: %r" % head)
    check(body == big, "the whole body (%d of %d bytes)" % (len(body), len(big)))
    eq(d.state()["backoff"], [], "a client error backs nothing off")


def test_short_key_in_a_client_error_over_the_buffer_limit_is_masked(env):
    """A 400 over the 1 MiB buffer goes on as it comes; a key shorter than 16 characters
    that it quotes past the first MiB is masked there too, as in a buffered error body
    (keys from 4 characters on). Before, only keys of 16 or more were looked for once
    the answer was forwarded as it comes (QA)."""
    key = b"sk-short1"
    head_part = b'{"error":{"message":"' + b"x" * (1024 * 1024) + b" Incorrect API key provided: "
    big = head_part + key + b". Rotate " + key + b'","type":"invalid_request_error"}}'
    d = start(env, always(b"HTTP/1.1 400 Bad Request\r\nContent-Type: application/json\r\n"
                          b"Content-Length: %d\r\n\r\n" % len(big) + big), key=key.decode())
    status, head, body = ask(d)
    eq(status, 400, "the 400 as it came")
    eq(len(body), len(big), "its length kept")
    check(key not in body, "the short key is not in the body: %r" % body[-120:])
    eq(body, big.replace(key, b"*" * len(key)), "the key masked, the rest as it came")


def test_retryable_error_body_over_the_buffer_limit_ends_unfinished(env):
    """A 500 (retryable) over the 1 MiB buffer: the attempt ends at the limit; when the
    walk runs out the client gets the first part in an unfinished chunked response, never
    a cut body framed as whole (review: Content-Length of the cut part on a kept-alive
    connection)."""
    big = b'{"error":{"message":"' + b"x" * (2 * 1024 * 1024) + b'","type":"server_error"}}'
    d = start(env, always(b"HTTP/1.1 500 Internal Server Error\r\nContent-Type: application/json\r\n"
                          b"Content-Length: %d\r\n\r\n" % len(big) + big))
    s = socket.create_connection(("127.0.0.1", d.port))
    s.sendall(request())
    raw = read_to_eof(s)
    s.close()
    head, _, body = raw.partition(b"\r\n\r\n")
    check(head.startswith(b"HTTP/1.1 500 "), "the 500 as it came: %r" % head[:200])
    check(b"transfer-encoding: chunked" in head.lower() and b"content-length" not in head.lower(),
          "chunked, not a length: %r" % head)
    check(not body.endswith(b"0\r\n\r\n"), "no last chunk: the client sees an unfinished answer")
    eq(len(body), len(b"100000\r\n") + (1 << 20) + 2, "exactly the first MiB, in one chunk")
    eq([(r["key"], r["last_error_kind"]) for r in d.state()["backoff"]], [("a", "transient")],
       "the 500 backed the key off")
    st, _, _ = aortest.http("GET", d.url + "/healthz")
    eq(st, 200, "aord goes on")


def test_event_stream_that_is_an_html_page_is_a_configuration_error(env):
    """A 200 labelled text/event-stream whose body is an HTML page (a proxy's error page
    behind a wrong base_url) is a configuration error like an HTML 2xx (§4.1: 502 naming
    the provider, no backoff), not a stream passed on as a success (QA)."""
    page = b"<html><body>502 Bad Gateway</body></html>"
    d = start(env, always(b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n"
                          b"Content-Length: %d\r\n\r\n" % len(page) + page))
    status, head, got = ask(d, STREAM_BODY)
    eq(status, 502, "configuration error")
    check(b"aor_bad_upstream" in got and b"openai" in got, "names the provider: %r" % got)
    eq(d.state()["backoff"], [], "no backoff for a wrong base_url")


def test_html_page_without_content_type_is_a_configuration_error(env):
    """A 200 HTML page with no Content-Type at all (a wrong base_url's server that labels
    nothing) is a configuration error like a text/html one (§4.1: 502 naming the provider,
    nothing recorded), not a success passed on with a sticky row (QA). A 200 without a
    Content-Type that is not HTML still goes through as it came."""
    page = b"\n<!DOCTYPE html><html><body>Welcome to nginx!</body></html>"
    d = start(env, always(b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n" % len(page) + page))
    status, head, got = ask(d, STREAM_BODY)
    eq(status, 502, "configuration error")
    check(b"aor_bad_upstream" in got and b"openai" in got, "names the provider: %r" % got)
    st = d.state()
    eq((st["backoff"], st["sticky"]), ([], []), "nothing recorded for a wrong base_url")
    d.stop()
    plain = b'{"id":"x","object":"chat.completion","choices":[]}'
    d = start(env, always(b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n" % len(plain)
                          + plain))  # fmt: skip
    status, head, got = ask(d, STREAM_BODY)
    eq((status, got), (200, plain), "an untyped JSON answer as it came")


def split_stream_upstream(parts, gap_s=0.15):
    """An upstream that answers with a chunked SSE stream written in the given parts, each
    flushed and followed by a pause (so aord reads them one at a time)."""
    def handler(s, n):
        up.read_request(s)
        s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        s.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n"
                  b"Transfer-Encoding: chunked\r\n\r\n")
        for part in parts:
            s.sendall(b"%x\r\n%s\r\n" % (len(part), part))
            time.sleep(gap_s)
        s.sendall(b"0\r\n\r\n")

    up = RawUpstream(handler)
    return up


def test_key_quoted_in_a_stream_after_its_start_is_masked(env):
    """§3.2: a configured secret never reaches the client. An error event that quotes the
    key after a stream started (bytes already sent, so not a failed attempt, §5.3) went to
    the client as it came (QA). It is masked now, length kept, also when the key is cut
    across two upstream reads; the rest of the stream is unchanged. A stream whose last
    event is an error event ([DONE] after it does not count) is left unfinished (no last
    chunk), as a cut stream is (§5.3), so a client does not take it for a clean end."""
    key = b"sk-test-raw-upstream"  # the key start() configures (20 bytes)
    first = b'data: {"choices":[{"delta":{"content":"Hi"}}]}\n\n'
    err_a = b'data: {"error":{"message":"Incorrect API key provided: ' + key[:4]
    err_b = key[4:] + b'. Rotate ' + key[:6] + b'!"}}\n\n'
    parts = [first, err_a, err_b, b"data: [DONE]\n\n"]  # the key cut after 4 bytes
    d = start(env, split_stream_upstream(parts))
    s = socket.create_connection(("127.0.0.1", d.port))
    s.sendall(request(body=STREAM_BODY))
    raw = read_to_eof(s)
    s.close()
    head, _, body = raw.partition(b"\r\n\r\n")
    status = int(head.split(b" ", 2)[1])
    eq(status, 200, "status")
    check(re.search(rb"(?i)\r\ntransfer-encoding:\s*chunked", head), "a chunked answer: %r" % head)
    check(not body.endswith(b"0\r\n\r\n"), "no last chunk after an error event: %r" % body[-40:])
    got = b""
    while body:  # the chunks that came, without the last one
        size_line, _, body = body.partition(b"\r\n")
        size = int(size_line.split(b";")[0], 16)
        got += body[:size]
        body = body[size + 2:]
    check(key not in got and key[4:] not in got, "no part of the key past its start: %r" % got)
    masked = b"[redacted]" + b"*" * (len(key) - 10)
    want = first + (err_a + err_b).replace(key, masked) + b"data: [DONE]\n\n"
    eq(got, want, "the stream with the key masked, everything else as it came")
    check(got.endswith(b"Rotate sk-tes!\"}}\n\ndata: [DONE]\n\n"),
          "a start of the key that is not the key goes out at the next bytes")


def test_key_start_at_the_end_of_a_stream_goes_out_at_its_end(env):
    """Bytes held back because they could start the key are sent when the answer ends
    cleanly (a Content-Length answer stays exactly as long as announced)."""
    key = b"sk-test-raw-upstream"
    body = b'{"id":"x","note":"ends with ' + key[:7]
    d = start(env, always(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
                          b"Content-Length: %d\r\n\r\n" % len(body) + body))
    status, head, got = ask(d)
    eq((status, got), (200, body), "the whole body, its last bytes included")


def test_placeholder_key_in_a_good_answer_is_left_alone(env):
    """A short placeholder key for a local server ("ollama") is an everyday word: answers
    forwarded as they come are not rewritten for it (QA: "run: ollama pull" became
    "run: ****** pull" after keys were masked in streams). Real keys (16 characters and
    more) are masked; a buffered error body still has even a short key redacted."""
    text = b'data: {"choices":[{"delta":{"content":"run: ollama pull llama3"}}]}\n\n'
    d = start(env, split_stream_upstream([text, b"data: [DONE]\n\n"], gap_s=0.05), key="ollama")
    status, head, got = ask(d, STREAM_BODY)
    eq((status, got), (200, text + b"data: [DONE]\n\n"), "the stream as it came")


def test_key_in_a_header_of_a_forwarded_answer_is_dropped(env):
    """A header that quotes the configured key is kept from the client in answers
    forwarded as they come (2xx JSON and SSE), as in buffered ones (QA: only error answers
    had it dropped)."""
    key = b"sk-test-raw-upstream"
    body = b'{"id":"x"}'

    def handler(s, n):
        while True:
            head, req = up.read_request(s)
            if head is None:
                return
            if b'"stream":true' in req:
                ev = b"data: {}\n\ndata: [DONE]\n\n"
                s.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n"
                          b"X-Debug-Auth: Bearer " + key + b"\r\nX-Other: fine\r\n"
                          b"Content-Length: %d\r\n\r\n" % len(ev) + ev)
            else:
                s.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
                          b"X-Debug-Auth: Bearer " + key + b"\r\nX-Other: fine\r\n"
                          b"Content-Length: %d\r\n\r\n" % len(body) + body)

    up = RawUpstream(handler)
    d = start(env, up)
    for req_body, what in ((BODY, "JSON"), (STREAM_BODY, "SSE")):
        status, head, got = ask(d, req_body)
        eq(status, 200, what)
        check(key not in head and b"x-debug-auth" not in head.lower(),
              "%s: the header with the key is not forwarded: %r" % (what, head))
        check(b"x-other: fine" in head.lower(), "%s: other headers are: %r" % (what, head))


def test_cut_error_answer_does_not_end_with_the_start_of_the_key(env):
    """A retryable error over the 1 MiB buffer goes out cut when the walk runs out; when
    the key straddles the cut, the kept part ended with most of it (QA: 28 of 32
    characters). Those last bytes are dropped now."""
    key = b"sk-test-raw-upstream"
    pad = (1 << 20) - len(b'{"error":{"message":"') - 12
    big = (b'{"error":{"message":"' + b"x" * pad + key + b"x" * 500000 + b'","type":"server_error"}}')
    d = start(env, always(b"HTTP/1.1 500 Internal Server Error\r\nContent-Type: application/json\r\n"
                          b"Content-Length: %d\r\n\r\n" % len(big) + big))
    s = socket.create_connection(("127.0.0.1", d.port))
    s.sendall(request())
    raw = read_to_eof(s)
    s.close()
    head, _, body = raw.partition(b"\r\n\r\n")
    check(head.startswith(b"HTTP/1.1 500 "), "the 500, cut: %r" % head[:200])
    check(key[:12] not in body and key[:4] not in body[-40:],
          "no start of the key at the cut: %r" % body[-60:])


def test_2xx_head_without_a_body_byte_walks_on(env):
    """A 200 JSON answer whose upstream closes after its head, before any body byte: no
    byte reached the client yet, so the attempt is a transient failure that walks on to
    the next key (§4.1, §5.3). The head was forwarded at once before, and the client got
    a truncated 200 while the key was backed off anyway (QA)."""
    good = b'{"id":"chatcmpl-b","object":"chat.completion","choices":[]}'

    def handler(s, n):
        while True:
            head, _ = up.read_request(s)
            if head is None:
                return
            if b"bearer sk-key-a" in head.lower():
                s.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
                          b"Content-Length: 1000\r\n\r\n")
                return  # closed before the body
            s.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
                      b"Content-Length: %d\r\n\r\n" % len(good) + good)

    up = RawUpstream(handler)
    port = aortest.free_port()
    env.set_keys(KEY_A="sk-key-a", KEY_B="sk-key-b")
    env.write_config(f"""
        [daemon]
        listen = 127.0.0.1:{port}
        [key "a"]
        env = KEY_A
        [key "b"]
        env = KEY_B
        priority = 1
        [provider "openai"]
        dialect = openai
        base_url = http://127.0.0.1:{up.port}
        keys = a, b
        models = *
        """)
    d = env.start_daemon()
    status, head, body = ask(d)
    eq((status, body), (200, good), "the answer of key b, whole")
    check(b"x-aor-key: b" in head.lower() and b"x-aor-attempts: 2" in head.lower(),
          "from b, after a: %r" % head)
    eq([(r["key"], r["last_error_kind"]) for r in d.state()["backoff"]], [("a", "transient")],
       "a backed off as transient")


def test_empty_2xx_chunked_answer_is_passed_on(env):
    """A 200 whose chunked body is empty (only the last chunk) ends cleanly without a body
    byte: it goes to the client as it came, a success."""
    d = start(env, always(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
                          b"Transfer-Encoding: chunked\r\n\r\n0\r\n\r\n"))
    status, head, body = ask(d)
    eq((status, body), (200, b""), "an empty 200")
    check(b"x-aor-attempts: 1" in head.lower(), "one attempt: %r" % head)
    eq(d.state()["backoff"], [], "no failure recorded")


def test_answer_framing_the_upstream_gets_wrong_never_desyncs_the_client(env):
    """Chaos pass: through libcurl (AOR_UPSTREAM=curl, or any proxy variable) an answer
    with both Content-Length: 5 and Transfer-Encoding: chunked went to the client under
    Content-Length: 5 with all 229 decoded bytes after it, so the rest sat in front of the
    client's next answer on its keep-alive connection (an upstream could write the start
    of it); two Content-Lengths that disagree did the same. Now Transfer-Encoding frames
    the body (the Content-Length is dropped, RFC 9112 §6.3) and disagreeing lengths fail
    the attempt; on both backends the next answer on the connection is whole."""
    long_body = b'{"id":"x","pad":"' + b"p" * 200 + b'"}'
    chunked = b"%x\r\n" % len(long_body) + long_body + b"\r\n0\r\n\r\n"
    bad = {
        b"cl_te": b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 5\r\n"
                  b"Transfer-Encoding: chunked\r\n\r\n" + chunked,
        b"two_cl": b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 2\r\n"
                   b"Content-Length: 3\r\n\r\n{}x",
    }

    def handler(s, n):
        while True:
            head, body = up.read_request(s)
            if head is None:
                return
            which = [k for k in bad if k in body]
            if which:
                s.sendall(bad[which[0]])
                if which[0] == b"two_cl":
                    return  # its framing is unknowable: the connection ends
            else:
                s.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
                          b"Content-Length: 11\r\n\r\n{\"ok\":true}")

    up = RawUpstream(handler)
    for backend in ("direct", "curl"):
        d = start(env, up, extra_env={"AOR_UPSTREAM": "curl"} if backend == "curl" else None)
        for case in bad:
            d.admin("POST", "/admin/api/backoff/clear")
            c = socket.create_connection(("127.0.0.1", d.port))
            c.sendall(request(body=b'{"model":"gpt-4o-mini","case":"%s"}' % case))
            status, head, body = read_answer(c)
            m = re.search(rb"(?i)\r\ncontent-length:\s*(\d+)", head)
            check(status in (200, 502), "%s %s: status %d" % (backend, case, status))
            if m:
                eq(len(body), int(m.group(1)),
                   "%s %s: the body is as long as announced (%r)" % (backend, case, head))
            if status == 200:
                eq(body, long_body, "%s %s: the chunked body, whole (%r)" % (backend, case, head))
            d.admin("POST", "/admin/api/backoff/clear")
            c.sendall(request())
            status2, head2, body2 = read_answer(c)
            c.close()
            eq((status2, body2), (200, b'{"ok":true}'),
               "%s %s: the next answer on the connection is whole (%r)" % (backend, case, head2))
        d.stop()
    up.close()


def test_curl_backend_blames_the_upstream_for_what_it_answered(env):
    """Chaos pass: through libcurl, a status line it does not take (`HTTP/1.1 2x0`) or an
    HTTP/0.9 answer came back as libcurl's "unsupported protocol", which aord took for its
    own fault: 502 aor_internal, no backoff, no walk. After the request went out, these
    are the upstream's: a transient failure of the key, as on the direct backend."""
    answers = {b"badstatus": b"HTTP/1.1 2x0 OK\r\nContent-Length: 2\r\n\r\n{}",
               b"http09": b"{\"not\": \"http\"}\n"}

    def handler(s, n):
        head, body = up.read_request(s)
        if head is not None:
            s.sendall(next(v for k, v in answers.items() if k in body))

    up = RawUpstream(handler)
    d = start(env, up, extra_env={"AOR_UPSTREAM": "curl"})
    for case in answers:
        d.admin("POST", "/admin/api/backoff/clear")
        c = socket.create_connection(("127.0.0.1", d.port))
        c.sendall(request(body=b'{"model":"gpt-4o-mini","case":"%s"}' % case))
        status, head, body = read_answer(c)
        c.close()
        eq(status, 502, "%s: no usable answer (%r)" % (case, body[:300]))
        check(b"aor_internal" not in body, "%s: not aor's own fault: %r" % (case, body[:300]))
        rows = [r for r in d.state()["backoff"] if r["key"] == "a"]
        check(rows and rows[0]["last_error_kind"] == "transient",
              "%s: the key has a transient failure: %r" % (case, d.state()["backoff"]))
    up.close()


def test_libcurl_sends_the_request_as_the_direct_path_does(env):
    """On the libcurl path (proxy variables, AOR_UPSTREAM=curl) the upstream gets what the
    direct path sends: no Content-Type the client did not send (libcurl's default for a
    POST is application/x-www-form-urlencoded; QA), and the body of a GET that has one."""
    got = []

    def handler(s, n):
        while True:
            head, body = up.read_request(s)
            if head is None:
                return
            got.append((head, body))
            s.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
                      b"Content-Length: 2\r\n\r\n{}")

    up = RawUpstream(handler)
    d = start(env, up, extra_env={"AOR_UPSTREAM": "curl"})
    s = socket.create_connection(("127.0.0.1", d.port))
    s.sendall(b"DELETE /v1/responses/resp_1 HTTP/1.1\r\nHost: 127.0.0.1\r\n"
              b"Authorization: Bearer client\r\n\r\n")
    eq(read_answer(s)[0], 200, "DELETE answered")
    s.sendall(b"POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\n"
              b"Authorization: Bearer client\r\nContent-Length: %d\r\n\r\n" % len(BODY) + BODY)
    eq(read_answer(s)[0], 200, "unlabelled POST answered")
    s.sendall(request())
    eq(read_answer(s)[0], 200, "JSON POST answered")
    s.sendall(b"GET /v1/models HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer client\r\n"
              b"Content-Length: 5\r\n\r\nhello")
    eq(read_answer(s)[0], 200, "GET with a body answered")
    s.close()
    heads = [h.lower() for h, _ in got]
    check(b"content-type" not in heads[0], "no Content-Type on the DELETE: %r" % heads[0])
    check(b"content-type" not in heads[1], "no Content-Type on the POST: %r" % heads[1])
    check(b"content-type: application/json" in heads[2], "the client's own kept: %r" % heads[2])
    eq(got[3][1], b"hello", "the GET's body went upstream")


def on_both_backends(env, handler):
    """For the direct upstream path and then libcurl (AOR_UPSTREAM=curl), each with its
    own aord (an Env of its own) in front of a RawUpstream running handler(up, sock, n):
    yields (backend name, daemon, the answer to one request()), cleaned up after each."""
    for backend in ("direct", "curl"):
        up = RawUpstream(lambda s, n: handler(up, s, n))
        e = aortest.Env("both-" + backend, build=env.build)
        try:
            d = start(e, up, extra_env={"AOR_UPSTREAM": "curl"} if backend == "curl" else None)
            s = socket.create_connection(("127.0.0.1", d.port))
            s.sendall(request())
            answer = read_answer(s)
            s.close()
            yield backend, d, answer
        finally:
            e.cleanup()
            up.close()


def test_libcurl_refuses_an_answer_over_256_header_lines(env):
    """As the direct path does (test_daemon_upstream_h1): over 256 header lines is not an
    answer proxy.c can keep whole (QA: the libcurl path passed 255 of 300 on, without
    Content-Length); a 502 naming it, the key backed off as for any bad answer."""
    def handler(up, s, n):
        up.read_request(s)
        s.sendall(b"HTTP/1.1 200 OK\r\n" + b"".join(b"X-H%d: v\r\n" % i for i in range(300)) +
                  b"Content-Type: application/json\r\nContent-Length: 2\r\n\r\n{}")

    for backend, d, answer in on_both_backends(env, handler):
        status, _, body = answer
        eq(status, 502, backend + ": status")
        check(b"over 256 header lines" in body, backend + ": named: %r" % body[:300])


def test_trailer_lines_are_not_header_lines(env):
    """A chunked answer with 200 header lines and 100 trailer lines is under the 256 of
    the head on both paths (QA: the libcurl path counted the trailers too, cut the whole
    body and backed the key off)."""
    def handler(up, s, n):
        up.read_request(s)
        s.sendall(b"HTTP/1.1 200 OK\r\n" + b"".join(b"X-H%d: v\r\n" % i for i in range(200)) +
                  b"Content-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n"
                  b"2\r\n{}\r\n0\r\n" + b"".join(b"X-T%d: t\r\n" % i for i in range(100)) +
                  b"\r\n")

    for backend, d, answer in on_both_backends(env, handler):
        status, _, body = answer
        eq((status, body), (200, b"{}"), backend + ": the answer whole")
        eq(d.state()["backoff"], [], backend + ": nothing backed off")


def _writes(d):
    m = re.search(r"^aor_state_writes_total (\d+)$", d.metrics(), re.M)
    return int(m.group(1))


def test_responses_failed_split_across_reads_is_a_failure(env):
    """a88f886 recorded a stream's success at its terminator line; `event:
    response.failed` is one, and when its data came in a later read the failure was
    recorded as a success (QA). A success is recorded only at a success's terminator,
    once its event is whole. Since 2026-12-03 response.created is held with the event after
    it (an opening event: sse_peek.h), so the failure is one before the first byte: the
    walk, over with the one key, returns the answer as it came (§5.6)."""
    created = b'event: response.created\ndata: {"type":"response.created","response":{}}\n\n'
    failed_data = (b'data: {"type":"response.failed","response":{"error":{"code":"server_error",'
                   b'"message":"boom"}}}\n\n')
    up = split_stream_upstream([created, b"event: response.failed\n", failed_data], gap_s=0.3)
    d = start(env, up)
    s = socket.create_connection(("127.0.0.1", d.port))
    s.sendall(request(body=b'{"model":"gpt-4o","input":"hi","stream":true}',
                      path=b"/v1/responses"))
    status, head, body = read_answer(s)
    s.close()
    eq(status, 200, "the last answer as it came: %r" % head)
    check(body.startswith(created) and b'"message":"boom"' in body, "its events: %r" % body)
    eq([(b["key"], b["last_error_kind"]) for b in d.state()["backoff"]], [("a", "transient")],
       "the failure recorded")
    eq(d.state()["sticky"], [], "no success")


def test_stream_cut_after_its_terminator_is_recorded_once(env):
    """An event stream with a Content-Length that the upstream cuts after `data: [DONE]`:
    its success is recorded at [DONE]; the cut that follows ends the client's response
    (its length is not reached) but is not recorded as a second result (QA: a success and
    then a transient failure, two writes)."""
    def handler(s, n):
        up.read_request(s)
        body = b'data: {"choices":[{"delta":{"content":"Hi"}}]}\n\ndata: [DONE]\n\n'
        s.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n"
                  b"Content-Length: %d\r\n\r\n" % (len(body) + 500) + body)
        time.sleep(0.3)

    up = RawUpstream(handler)
    d = start(env, up)
    before = _writes(d)
    s = socket.create_connection(("127.0.0.1", d.port))
    s.sendall(request(body=STREAM_BODY))
    raw = read_to_eof(s)
    s.close()
    check(b"data: [DONE]" in raw, "the client got [DONE]: %r" % raw[-80:])
    eq(_writes(d) - before, 1, "one state write for the attempt")
    eq(d.state()["backoff"], [], "not backed off as well")


def test_the_upstream_is_asked_for_an_answer_without_content_coding(env):
    """QA: aord dropped the client's Accept-Encoding and sent none, which lets an upstream
    pick any coding (RFC 9110 §12.5.3); it reads the answer (classification, the first SSE
    event, redaction of the key) without decoding it: a gzip'd 429 insufficient_quota
    was a rate limit, a gzip'd 401 quoting the key reached the client unredacted. It asks
    for `Accept-Encoding: identity`, on both upstream paths. The upstream here gzips
    whenever that is not asked, as a server may."""
    import gzip
    heads = []

    def handler(up, s, n):
        head, _ = up.read_request(s)
        heads.append(head)
        body = json.dumps({"error": {"message": "You exceeded your current quota",
                                     "type": "insufficient_quota",
                                     "code": "insufficient_quota"}}).encode()
        coding = b""
        if not re.search(rb"(?im)^accept-encoding:\s*identity\s*$", head):
            body, coding = gzip.compress(body), b"Content-Encoding: gzip\r\n"
        s.sendall(b"HTTP/1.1 429 Too Many Requests\r\nContent-Type: application/json\r\n" +
                  coding + b"Content-Length: %d\r\n\r\n" % len(body) + body)

    for backend, d, answer in on_both_backends(env, handler):
        check(re.search(rb"(?im)^accept-encoding: identity\r?$", heads[-1]) is not None,
              "%s: asked for identity: %r" % (backend, heads[-1][:400]))
        status, _, body = answer
        eq(status, 429, backend + ": status (%r)" % body[:300])
        check(b"insufficient_quota" in body, backend + ": the body as it is: %r" % body[:200])
        rows = d.state()["backoff"]
        eq([r["last_error_kind"] for r in rows], ["quota"], backend + ": read as quota")


def test_alt_svc_does_not_reach_the_client(env):
    """An upstream's Alt-Svc (OpenAI's edge sends `h3=":443"`) offers HTTP/3 over UDP: a
    shim client that took it up would go around aor, which redirects TCP connections
    only (QA). It is not forwarded; the other headers are, on both upstream paths."""
    def handler(up, s, n):
        up.read_request(s)
        s.sendall(b"HTTP/1.1 200 OK\r\nAlt-Svc: h3=\":443\"; ma=86400\r\nX-Kept: yes\r\n"
                  b"Content-Type: application/json\r\nContent-Length: 2\r\n\r\n{}")

    for backend, d, answer in on_both_backends(env, handler):
        status, head, body = answer
        eq((status, body), (200, b"{}"), backend + ": the answer")
        check(b"alt-svc" not in head.lower(), backend + ": no Alt-Svc: %r" % head)
        check(b"x-kept: yes" in head.lower(), backend + ": other headers kept: %r" % head)


def test_head_answered_with_an_error_status_is_passed_on(env):
    """QA: HEAD on a path the provider does not have got 502 "wrong base_url?" (and an
    error line in the log): an answer to HEAD has no body, so the provider's JSON error
    shape could not be seen and the 404 was taken for a web server that is not the API.
    The status is the client's, as a GET's is: returned as it came, no walk, no backoff."""
    body = b'{"error":{"message":"Unknown request URL","type":"invalid_request_error"}}'

    def handler(s, n):
        while True:
            head, _ = up.read_request(s)
            if head is None:
                return
            s.sendall(b"HTTP/1.1 404 Not Found\r\nContent-Type: application/json\r\n"
                      b"Content-Length: %d\r\n\r\n" % len(body) +
                      (b"" if head.startswith(b"HEAD ") else body))

    up = RawUpstream(handler)
    d = start(env, up)
    for method in ("GET", "HEAD"):
        st, hdrs, got = d.http(method, "/v1/nosuchpath", None, {"authorization": "Bearer c"})
        eq((st, hdrs.get("x-aor-attempts")), (404, "1"), "%s: the provider's 404" % method)
        eq(got, body if method == "GET" else b"", "%s: its body" % method)
    eq(d.state()["backoff"], [], "no backoff")
    check("wrong base_url" not in d.stderr_text(), "no configuration error said")
