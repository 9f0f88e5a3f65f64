"""The success record and usage snapshot of a 2xx answer forwarded as it comes run right
after its head is sent (daemon/proxy.c flush_bookkeeping): recorded once when the client
leaves right after the head (the usage snapshot, and the success it was so far), for
HEAD and 204, not at all when the body fails later (only the failure), and before the
next pipelined request is routed. Also hostile clients against conn.c's own
socket I/O (plain and TLS, pipelined while busy), under the sanitizers. Written by a
review of that change."""
import random
import socket
import ssl
import threading
import time

import aortest
from aortest import check, eq
from test_upstream_answers import RawUpstream, request, read_answer
from test_upstream_answers import start as raw_start
from test_conn_io import tls_conn, unix_conn, HOST, Reader, no_sanitizer_report

EXHAUST = (b"x-ratelimit-remaining-requests: 0\r\nx-ratelimit-reset-requests: 30s\r\n"
           b"x-ratelimit-remaining-tokens: 9000\r\nx-ratelimit-reset-tokens: 1s\r\n")
BODY = b'{"model":"gpt-4o","messages":[]}'


def sticky_keys(d):
    return [s["key"] for s in d.state()["sticky"]]


def test_ok_recorded_when_client_leaves_right_after_head(env):
    gate = threading.Event()

    def h(s, n):
        up.read_request(s)
        s.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n" + EXHAUST +
                  b"Content-Length: 100000\r\n\r\n{")
        gate.wait(20)

    up = RawUpstream(h)
    d = raw_start(env, up)
    c = socket.create_connection(("127.0.0.1", d.port))
    c.sendall(request(body=BODY))
    c.settimeout(10)
    buf = b""
    while b"\r\n\r\n" not in buf:
        buf += c.recv(65536)
    c.close()
    # The usage snapshot is recorded with the head. The client's close is seen (on the
    # sidecar too, since 2026-12-02: the kernel is asked after its socket) and cancels the
    # request; the answer, cut by nobody but the client, counts as the success it was so
    # far (daemon/proxy.c proxy_free). Before, the close went unseen until the next write,
    # and this test took "no success yet" for the rule.
    def exhausted():
        st, _, body = d.http("POST", "/v1/chat/completions", BODY,
                             {"authorization": "Bearer client", "content-type": "application/json"})
        return st == 429 and b"aor_all_backed_off" in body
    aortest.wait_until(exhausted, 10, what="usage snapshot of the left answer: key exhausted")
    aortest.wait_until(lambda: sticky_keys(d) == ["a"], 10,
                       what="the success of the answer its client left")
    gate.set()
    no_sanitizer_report(d)


def test_pipelined_next_request_sees_usage_of_first(env):
    """The 2nd request pipelined behind the 1st is routed after the 1st's bookkeeping."""
    def h(s, n):
        while True:
            head, _ = up.read_request(s)
            if head is None:
                return
            s.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n" + EXHAUST +
                      b"Content-Length: 2\r\n\r\n{}")

    up = RawUpstream(h)
    d = raw_start(env, up)
    c = socket.create_connection(("127.0.0.1", d.port))
    c.sendall(request(body=BODY) + request(body=BODY))
    c.settimeout(20)
    r = Reader(c)  # both answers may come in one read: keep the second's bytes
    eq(r.answer()[0], 200, "first answered")
    eq(r.answer()[0], 429, "second sees the first's exhausted window")
    no_sanitizer_report(d)


def test_head_and_204_record_success(env):
    def h(s, n):
        while True:
            head, _ = up.read_request(s)
            if head is None:
                return
            if head.startswith(b"HEAD"):
                s.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
                          b"Content-Length: 50\r\n\r\n")
            else:
                s.sendall(b"HTTP/1.1 204 No Content\r\n" + EXHAUST + b"\r\n")

    up = RawUpstream(h)
    d = raw_start(env, up)
    c = socket.create_connection(("127.0.0.1", d.port))
    c.sendall(request(body=BODY).replace(b"POST", b"HEAD", 1))
    c.settimeout(10)
    buf = b""
    while b"\r\n\r\n" not in buf:
        buf += c.recv(65536)
    check(buf.startswith(b"HTTP/1.1 200"), "HEAD answered: %r" % buf[:80])
    aortest.wait_until(lambda: sticky_keys(d) == ["a"], 10, what="HEAD success recorded")
    c.sendall(request(body=BODY))
    eq(read_answer(c)[0], 204, "204 forwarded")
    c.sendall(request(body=BODY))
    eq(read_answer(c)[0], 429, "204's usage headers recorded")
    no_sanitizer_report(d)


def test_failure_mid_body_records_only_the_failure(env):
    """An answer cut after its head went out is a failure, not a success and then a
    failure (§5.3; QA: a provider whose streams always broke stayed at the first level of
    the curve and never opened its circuit). Before, the success was recorded first."""
    def h(s, n):
        up.read_request(s)
        s.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
                  b"Content-Length: 100000\r\n\r\n{\"a\":")
        time.sleep(0.3)

    up = RawUpstream(h)
    d = raw_start(env, up)
    c = socket.create_connection(("127.0.0.1", d.port))
    c.sendall(request(body=BODY))
    st, _, _ = read_answer(c)
    eq(st, 200, "head went out")
    aortest.wait_until(lambda: d.state()["backoff"], 10, what="failure recorded")
    eq(sticky_keys(d), [], "no success recorded")
    eq(d.state()["backoff"][0]["last_error_kind"], "transient", "the cut is transient")
    no_sanitizer_report(d)


def test_hostile_mix_under_sanitizers(env):
    """Plain + TLS clients that pipeline, half-close, vanish after the head, or read
    slowly, against a streaming upstream; aord must stay up and clean."""
    chunk = b'data: {"x":1}\n\n'

    def h(s, n):
        while True:
            head, _ = up.read_request(s)
            if head is None:
                return
            s.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
                      b"Transfer-Encoding: chunked\r\n\r\n")
            for _ in range(random.randint(1, 30)):
                s.sendall(b"%x\r\n" % len(chunk) + chunk + b"\r\n")
                if random.random() < 0.2:
                    time.sleep(0.01)
            s.sendall(b"0\r\n\r\n")

    up = RawUpstream(h)
    d = raw_start(env, up, provider_lines="intercept = " + HOST)
    rnd = random.Random(7)
    errors = []

    def client(i):
        r = random.Random(i)
        try:
            s = tls_conn(env) if r.random() < 0.5 else socket.create_connection(
                ("127.0.0.1", d.port))
            s.settimeout(10)
            k = r.randint(1, 4)
            data = b"".join(request(body=BODY) for _ in range(k))
            mode = r.choice(["pipe", "halfclose", "vanish", "slow", "bytewise"])
            if mode == "bytewise":
                for b in data[:200]:
                    s.sendall(bytes([b]))
                s.sendall(data[200:])
            else:
                s.sendall(data)
            if mode == "halfclose" and not isinstance(s, ssl.SSLSocket):
                s.shutdown(socket.SHUT_WR)
            if mode == "vanish":
                s.recv(100)
                s.close()
                return
            got = b""
            while got.count(b"0\r\n\r\n") < k:
                if mode == "slow":
                    time.sleep(0.005)
                x = s.recv(512 if mode == "slow" else 65536)
                if not x:
                    break
                got += x
            if got.count(b"HTTP/1.1 200") != k:
                errors.append("%d %s: %d answers of %d" % (i, mode, got.count(b"HTTP/1.1 200"), k))
            s.close()
        except Exception as e:  # noqa
            errors.append("%d: %r" % (i, e))

    for rnd_round in range(4):
        ts = [threading.Thread(target=client, args=(rnd_round * 100 + i,)) for i in range(40)]
        for t in ts:
            t.start()
        for t in ts:
            t.join(60)
    eq(d.http("GET", "/healthz")[0], 200, "aord still answers after the hostile clients")
    check(not errors, "client errors: %s" % errors[:5])
    no_sanitizer_report(d)


def test_tls_pipelined_over_1mib_while_busy(env):
    """Reading pauses at 1 MiB while the first request is in flight; bytes left in
    OpenSSL's read-ahead buffer must be read once the first answer is done."""
    from test_conn_io import Reader, start as cio_start

    def h(up, s):
        first = True
        while True:
            head, body = up.read_request(s)
            if head is None:
                return
            if first:
                time.sleep(1.0)
                first = False
            s.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
                      b"Content-Length: %d\r\n\r\n" % len(body[:40]) + body[:40])

    up, d = cio_start(env, h)
    for trial in range(3):
        pad = 200000 + trial * 4099
        reqs = [request(body=b'{"model":"gpt-4o","n":%d,"p":"%s"}' % (i, b"x" * pad))
                for i in range(8)]
        reqs.append(request(body=b'{"model":"gpt-4o","n":99}'))  # small, last
        s = tls_conn(env)
        # One thread only (an SSL object must not be used by two at once): sendall returns
        # once aord has read on after the first answer; the small answers wait in the
        # socket meanwhile.
        s.sendall(b"".join(reqs))
        r = Reader(s)
        for i in list(range(8)) + [99]:
            status, head, body = r.answer()
            check(status == 200 and b'"n":%d' % i in body,
                  "trial %d answer %d: %r" % (trial, i, body[:40]))
        s.close()
    no_sanitizer_report(d)
