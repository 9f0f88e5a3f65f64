"""Spec §2: "the daemon confirms the host from TLS SNI and passes any connection whose SNI
is not an intercepted host straight through to the original address, bytes untouched",
and step 3: the offline fallback address only "when ... the daemon is up".

QA findings (black box, aord from main):
* a TLS connection without SNI (or with an IP-literal SNI, or a ClientHello aord could
  not read: over 16 KiB) was terminated by aord with the preamble's host and, with
  preamble host "-", routed to the provider with the user's key;
* plain HTTP with preamble host "-" was routed to the provider whatever its Host header
  named (the Host header plays the role of SNI for plain HTTP: docs/shim.md);
* the shim handed out the fallback address when aord was killed (-9) and only its socket
  file was left.

Clients here write the shim's preamble straight to aord's Unix socket, then their own
bytes. Every pass-through target is a loopback server the test starts (Sink)."""
import os
import socket
import ssl
import struct
import sys
import threading
import time

import aortest
from aortest import check, eq

HOST = "api.openai.com"
KEY = "sk-test-sni-passthru-key"


class Sink:
    """A one-connection TCP server on 127.0.0.1: reads until it has len(expect) bytes
    (or EOF), answers b"PASSTHRU <n>\\n" and closes. .got: the bytes it received, None
    while nobody connected."""

    def __init__(self, expect):
        self.expect = expect
        self.got = None
        self.srv = socket.socket()
        self.srv.bind(("127.0.0.1", 0))
        self.srv.listen(4)
        self.port = self.srv.getsockname()[1]
        self.t = threading.Thread(target=self._run, daemon=True)
        self.t.start()

    def _run(self):
        self.srv.settimeout(30)
        try:
            c, _ = self.srv.accept()
        except OSError:
            return
        c.settimeout(20)
        got = b""
        try:
            while len(got) < len(self.expect):
                d = c.recv(65536)
                if not d:
                    break
                got += d
            self.got = got
            c.sendall(b"PASSTHRU %d\n" % len(got))
        except OSError:
            self.got = got
        finally:
            c.close()

    def close(self):
        self.srv.close()


def setup(env, intercept=HOST):
    """The mock provider (plain HTTP) behind aord as "openai", intercepting HOST."""
    mock = env.start_mock(tls=False)
    env.set_keys(OPENAI_API_KEY=KEY)
    env.write_config(f"""
        [daemon]
        listen = 127.0.0.1:{aortest.free_port()}
        [key "a"]
        env = OPENAI_API_KEY
        [provider "openai"]
        dialect = openai
        base_url = {mock.url}
        intercept = {intercept}
        keys = a
        models = *
        """)
    d = env.start_daemon(extra_env={"AOR_DEBUG": "1"})
    return mock, d


def preamble(host, port):
    return b"AOR/1 %s 127.0.0.1 %d\n" % ((host or "-").encode(), port)


def client_hello(sni):
    """A ClientHello as Python's OpenSSL client writes it; sni None: no server_name."""
    ctx = ssl.create_default_context()
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    inc, out = ssl.MemoryBIO(), ssl.MemoryBIO()
    o = ctx.wrap_bio(inc, out, server_hostname=sni)
    try:
        o.do_handshake()
    except ssl.SSLWantReadError:
        pass
    hello = out.read()
    eq(hello[:1], b"\x16", "a TLS handshake record")
    return hello


def padded_hello(sni, pad):
    """client_hello(sni) with a GREASE extension of pad bytes appended (servers ignore
    it; RFC 8701; None: as many as the extensions' length field allows), re-framed into
    records of at most 16 KiB."""
    recs, p = b"", 0
    raw = client_hello(sni)
    while p < len(raw):
        n = struct.unpack("!H", raw[p + 3:p + 5])[0]
        recs += raw[p + 5:p + 5 + n]
        p += 5 + n
    hs = recs
    eq(hs[0], 1, "a ClientHello")
    body = hs[4:4 + int.from_bytes(hs[1:4], "big")]
    q = 2 + 32
    q += 1 + body[q]  # session id
    q += 2 + struct.unpack("!H", body[q:q + 2])[0]  # cipher suites
    q += 1 + body[q]  # compression
    ext_len = struct.unpack("!H", body[q:q + 2])[0]
    if pad is None:
        pad = 0xFFFF - ext_len - 4
    exts = body[q + 2:q + 2 + ext_len] + struct.pack("!HH", 0xFAFA, pad) + b"\0" * pad
    check(len(exts) <= 0xFFFF, "extensions fit their length field")
    body = body[:q] + struct.pack("!H", len(exts)) + exts
    hs = b"\x01" + len(body).to_bytes(3, "big") + body
    out = b""
    for i in range(0, len(hs), 16384):
        part = hs[i:i + 16384]
        out += b"\x16" + raw[1:3] + struct.pack("!H", len(part)) + part
    return out


def exchange(env, pre, data, parts=1):
    """Connects to aord's socket, writes pre + data (data in `parts` writes) and reads
    until EOF, or until the first bytes show aord answered itself (a TLS record, an
    HTTP status line). Returns what was read."""
    u = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    u.settimeout(20)
    u.connect(env.socket_path)
    u.sendall(pre)
    step = max(1, len(data) // parts)
    for i in range(0, len(data), step):
        u.sendall(data[i:i + step])
    got = b""
    try:
        while True:
            d = u.recv(65536)
            if not d:
                break
            got += d
            if got[:1] in (b"\x15", b"\x16") or got.startswith(b"HTTP/"):
                break
    except socket.timeout:
        pass
    u.close()
    return got


def passes_through(env, d, host, data, why, parts=1):
    """host (None: "-") + data through aord: the loopback Sink must get exactly data and
    the client the Sink's answer; aord says why at debug level."""
    sink = Sink(data)
    try:
        got = exchange(env, preamble(host, sink.port), data, parts)
        sink.t.join(30)
        check(got == b"PASSTHRU %d\n" % len(data),
              "%s: the client got the original server's answer, not aord's: %r"
              % (why, got[:80]))  # fmt: skip
        check(sink.got == data, "%s: the original address got the client's bytes untouched "
              "(%r bytes of %d)" % (why, None if sink.got is None else len(sink.got), len(data)))
        line = "shim connection: %s" % why
        tail = "; passing through to 127.0.0.1:%d" % sink.port
        aortest.wait_until(lambda: any(l.startswith("aord: debug: " + line) and l.endswith(tail)
                                       for l in d.stderr_text().splitlines()),
                           10, what="aord's debug line: " + why)  # fmt: skip
    finally:
        sink.close()


def test_tls_without_an_intercepted_sni_passes_through(env):
    mock, d = setup(env)
    # No SNI, preamble host "-" (recognised by address only): not the provider.
    passes_through(env, d, None, client_hello(None), "TLS without SNI")
    # No SNI with a preamble host aord intercepts: SNI decides, not the preamble.
    passes_through(env, d, HOST, client_hello(None), "TLS without SNI")
    # No SNI, preamble host the client's AOR_HOSTS has but aord does not: passed
    # through, no leaf made for it (the old answer: a 404 and a name-constraints warning).
    passes_through(env, d, "other.example", client_hello(None), "TLS without SNI")
    check("name constraints" not in d.stderr_text(), "no leaf for other.example: "
          + d.stderr_text()[-1500:])  # fmt: skip
    # An IP-literal SNI (the provider's base_url host is 127.0.0.1): not a host name.
    hello = client_hello("aaaaa.bbb").replace(b"aaaaa.bbb", b"127.0.0.1")
    passes_through(env, d, None, hello, "SNI 127.0.0.1 is an address, not a provider host name")
    # An SNI of another host: as before.
    passes_through(env, d, HOST, client_hello("other.example"),
                   "SNI other.example is not a provider host")
    # A hello aord cannot read (over AOR_SNI_MAX_HELLO = 64 KiB) naming HOST.
    big = padded_hello(HOST, None)
    check(len(big) > 64 * 1024, "the hello is over 64 KiB (%d)" % len(big))
    passes_through(env, d, None, big, "TLS ClientHello not readable")
    eq(mock.requests(), [], "the provider got no request")


def test_tls_with_an_intercepted_sni_is_served(env):
    mock, d = setup(env)
    # Preamble "-": the SNI names HOST, aord terminates TLS and routes it.
    s = _served(env, HOST, ctx=ssl.create_default_context(cafile=env.ca_path), port=443)
    s.close()
    answer = s.answer
    check(b"x-aor-provider: openai" in answer.lower(), "routed: %r" % answer[:400])
    eq([r["key"] for r in mock.requests(path="/models")], [KEY], "the provider's request")
    # A hello over 16 KiB (two records) naming HOST is read to its SNI and served:
    # aord answers with its own handshake, nothing is passed through.
    sink = Sink(b"x")
    try:
        got = exchange(env, preamble(None, sink.port), padded_hello(HOST, 20000))
        eq(got[:1], b"\x16", "aord answered the 20 KiB hello itself: %r" % got[:40])
        eq(sink.got, None, "nothing reached the original address")
    finally:
        sink.close()


def test_plain_http_by_address_goes_by_its_host_header(env):
    mock, d = setup(env)
    req = b"GET /v1/models HTTP/1.1\r\nHost: example.org\r\nAccept: */*\r\n\r\n"
    passes_through(env, d, None, req, "plain HTTP Host example.org is not a provider host")
    # The head in pieces: aord waits for the Host line.
    passes_through(env, d, None, req, "plain HTTP Host example.org is not a provider host",
                   parts=5)
    passes_through(env, d, None, b"GET / HTTP/1.0\r\nAccept: */*\r\n\r\n",
                   "plain HTTP without a Host header")
    passes_through(env, d, None, b"GET / HTTP/1.1\r\nHost: 127.0.0.1:80\r\n\r\n",
                   "plain HTTP Host 127.0.0.1 is an address, not a provider host name")
    passes_through(env, d, None, b"SSH-2.0-OpenSSH_9.6\r\n", "plain HTTP request head not "
                   "readable")  # fmt: skip
    # The Host header names HOST, but aord has not published 127.0.0.1 for it: nothing
    # vouches for a plain-HTTP Host, so it goes to the address the program connected to
    # (review: a client's token went to a real provider named only in a Host header).
    req = b"GET /v1/models HTTP/1.1\r\nHost: API.OpenAI.com:80\r\nConnection: close\r\n\r\n"
    passes_through(env, d, None, req,
                   "plain HTTP Host api.openai.com does not have the address 127.0.0.1")
    eq(mock.requests(), [], "the provider got no request")


def test_plain_http_by_address_is_routed_for_a_published_host(env):
    """Preamble "-" (the shim recognised a published address, as for a client with its own
    resolver) and a Host header naming the host aord published that address for: routed
    with the key."""
    mock, d = setup(env, intercept="localhost")
    hosts = os.path.join(os.path.dirname(env.socket_path), "hosts")
    aortest.wait_until(lambda: os.path.exists(hosts) and " 127.0.0.1 " in open(hosts).read(),
                       10, what="aord published localhost's address")
    port = int(mock.url.rsplit(":", 1)[1])
    got = exchange(env, preamble(None, port), b"GET /v1/models HTTP/1.1\r\nHost: LocalHost.:%d"
                   b"\r\nConnection: close\r\n\r\n" % port)  # fmt: skip
    check(got.startswith(b"HTTP/1.1 200"), "served: %r" % got[:200])
    eq([r["key"] for r in mock.requests(path="/models")], [KEY], "the provider's request")


def test_no_fallback_address_when_the_daemon_was_killed(env):
    """The offline fallback needs a daemon that takes connections, not a socket file."""
    mock, d = setup(env)
    name = "aor-fallback-test.invalid"
    code = ("import socket\n"
            "try:\n"
            "    print(socket.getaddrinfo(%r, 443, socket.AF_INET, socket.SOCK_STREAM)[0][4][0])\n"
            "except socket.gaierror as e:\n"
            "    print('gaierror', e.errno)\n" % name)
    extra = {"AOR_HOSTS": name, "AOR_DEBUG": "1"}
    rc, out, err = env.run_client([sys.executable, "-c", code], extra_env=extra)
    eq(rc, 0, "client exit (%s)" % err[-1000:])
    check(out.startswith("198.1"), "aord up: the fallback address (%r %s)" % (out, err[-800:]))
    d.kill9()
    check(os.path.exists(env.socket_path), "kill -9 left the socket file")
    rc, out, err = env.run_client([sys.executable, "-c", code], extra_env=extra)
    eq(rc, 0, "client exit (%s)" % err[-1000:])
    check(out.startswith("gaierror"), "aord gone: the resolver's own failure, not a fallback "
          "address: %r" % out)  # fmt: skip
    check("daemon not up" in err, "AOR_DEBUG says why: %s" % err[-800:])


def test_no_pass_through_to_the_offline_stand_in_address(env):
    """A connection to the shim's offline stand-in (198.18.0.0/15, spec §2 step 3) that is
    not served has nowhere to go: closed at once with a warning, never a connect that
    hangs until the kernel gives up (QA, from reading the code). aord makes no connection
    (the address is never routed)."""
    mock, d = setup(env)
    import time
    t0 = time.monotonic()
    try:
        got = exchange(env, b"AOR/1 - 198.18.3.4 443\n", client_hello(None))
    except ConnectionResetError:
        got = b""  # closed with the hello unread
    eq(got, b"", "closed without an answer")
    check(time.monotonic() - t0 < 10, "at once")
    aortest.wait_until(lambda: "to the offline stand-in address 198.18.3.4: nothing to pass it "
                       "to, closed" in d.stderr_text(), what="the warning")


def _ctx(env, tls12=False):
    ctx = ssl.create_default_context(cafile=env.ca_path)
    ctx.check_hostname = False
    if tls12:
        ctx.maximum_version = ssl.TLSVersion.TLSv1_2
    return ctx


def _served(env, sni, session=None, ctx=None, port=9):
    """A TLS connection through aord's socket (preamble "-", original port: port 9 has
    nothing to pass through to) with this SNI, verified against aor's CA (names not
    checked unless ctx says so); returns the SSLSocket after a whole request, its answer
    in .answer."""
    ctx = ctx or _ctx(env)
    u = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    u.settimeout(20)
    u.connect(env.socket_path)
    u.sendall(preamble(None, port))
    s = ctx.wrap_socket(u, server_hostname=sni, session=session)
    s.sendall(b"GET /v1/models HTTP/1.1\r\nHost: %s\r\nConnection: close\r\n\r\n"
              % sni.rstrip(".").encode())
    answer = b""
    while True:
        b = s.recv(65536)
        if not b:
            break
        answer += b
    check(answer.startswith(b"HTTP/1.1 200"), "served for %s: %r" % (sni[:40], answer[:200]))
    s.answer = answer
    return s


def test_longest_intercepted_name_with_its_trailing_dot_is_served(env):
    """docs/tls.md: a name is 1-253 bytes after dropping one trailing dot. QA: a 253-byte
    intercepted name sent as SNI with its dot (254 bytes) was passed through as a
    malformed ClientHello."""
    name = ".".join(["b" * 63, "c" * 63, "d" * 63, "e" * 53, "example"])
    eq(len(name), 253, "the longest name")
    setup(env, intercept=name)
    _served(env, name + ".").close()
    _served(env, name).close()


def test_tls_session_is_not_resumed_for_another_host(env):
    """RFC 6066 §3: a session is not resumed under another server name. QA: a TLS 1.2
    ticket issued for api.openai.com resumed on a connection naming another intercepted
    host, whose certificate the client never checked."""
    setup(env, intercept=HOST + ", other.example")
    for tls12 in (True, False):
        ctx = _ctx(env, tls12)
        first = _served(env, HOST, ctx=ctx)
        sess = first.session
        first.close()
        again = _served(env, HOST, session=sess, ctx=ctx)
        check(again.session_reused, "the same host resumes (TLS 1.2: %s)" % tls12)
        again.close()
        other = _served(env, "other.example", session=sess, ctx=ctx)
        check(not other.session_reused, "another host does not (TLS 1.2: %s)" % tls12)
        other.close()


def test_a_preamble_then_silence_is_not_a_bad_preamble(env):
    """§7 counts malformed or oversized preambles. A valid one whose client then sends
    nothing for 10 s was counted as malformed too (QA); it is closed, said, not counted."""
    mock, d = setup(env)

    def bad():
        line = [l for l in d.metrics().splitlines() if l.startswith("aor_bad_preambles_total ")]
        return int(line[0].split()[1])

    before = bad()
    u = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    u.settimeout(30)
    u.connect(env.socket_path)
    u.sendall(preamble(HOST, 443))
    try:
        eq(u.recv(100), b"", "closed after the preamble timeout")
    except ConnectionResetError:
        pass  # closed with a reset: as good
    u.close()
    eq(bad(), before, "not a malformed preamble")
    check("did not come whole within 10 s after the preamble" in d.stderr_text(),
          "said: %s" % d.stderr_text()[-500:])


def test_a_passed_through_connection_ends_with_its_client(env):
    """QA: a shim client passed through (an SNI aor does not serve) that closed its
    connection left both of aord's descriptors open for as long as the target kept its
    side open and silent. A client closed for good (not only its sending side) ends the
    pass-through; a half-closed one keeps the other direction."""
    mock, d = setup(env)
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(64)
    held = []
    threading.Thread(target=lambda: [held.append(srv.accept()[0]) for _ in range(11)],
                     daemon=True).start()
    fds = lambda: len(os.listdir("/proc/%d/fd" % d.pid))  # noqa: E731
    before = fds()
    hello = client_hello("other.example")
    port = srv.getsockname()[1]
    for _ in range(10):
        u = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        u.connect(env.socket_path)
        u.sendall(preamble(None, port) + hello)
        aortest.wait_until(lambda: len(held) >= _ + 1, 10, what="the target to be reached")
        u.close()
    aortest.wait_until(lambda: fds() <= before, 10,
                       what="aord to let go of closed clients' pass-throughs (%d fds, %d before)"
                       % (fds(), before))
    # Half-closed: the target's answer still reaches the client.
    u = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    u.connect(env.socket_path)
    u.sendall(preamble(None, port) + hello)
    u.shutdown(socket.SHUT_WR)
    aortest.wait_until(lambda: len(held) == 11, 10, what="the target to be reached")
    time.sleep(1.5)  # past a look at whether the client is gone
    held[10].sendall(b"ANSWER")
    u.settimeout(10)
    eq(u.recv(100), b"ANSWER", "a half-closed client still gets the answer")
    u.close()
    for c in held:
        c.close()
    srv.close()
