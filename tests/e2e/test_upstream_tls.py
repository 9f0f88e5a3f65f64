"""A TLS upstream written here (Python's ssl over memory BIOs, on loopback, with a test CA
from tests/mockprov/tlsgen.py) decides which TLS records go out in which TCP write; the
client talks plain HTTP to the sidecar. Regressions from a hostile review of aord's own
TLS upstream client (daemon/upstream_h1.c: SSL_read/SSL_write on the socket, read-ahead):

* Records that follow an answer in the same TCP write are read by OpenSSL with the
  answer's last record (read-ahead), so the socket of the idle connection shows nothing.
  Answer bytes there must not become the next request's answer, and a close_notify there
  must not get the next request sent onto a closed connection (and so sent twice).
* Protocol records there (a TLS 1.3 NewSessionTicket or KeyUpdate) leave the connection
  reusable.
* Many tiny records, a close-delimited answer ended without close_notify (complete), and a
  Content-Length answer cut without close_notify (not complete)."""
import ctypes
import os
import re
import socket
import ssl
import sys
import time

import aortest
from aortest import check, eq
from test_upstream_answers import RawUpstream, early_413_rounds, numbered, read_answer, request
from test_upstream_answers import start as raw_start

sys.path.insert(0, os.path.join(aortest.REPO, "tests", "mockprov"))
import tlsgen  # noqa: E402


class TlsConn:
    """The server side of one TLS connection over memory BIOs: records are made with
    records() and sent with send_wire(), so the test decides what shares a TCP write."""

    def __init__(self, sock, ctx):
        self.sock = sock
        self.inc, self.out = ssl.MemoryBIO(), ssl.MemoryBIO()
        self.obj = ctx.wrap_bio(self.inc, self.out, server_side=True)
        self.buf = b""

    def _flush(self):
        d = self.out.read()
        if d:
            self.sock.sendall(d)

    def _fill(self):
        d = self.sock.recv(65536)
        if not d:
            self.inc.write_eof()
        else:
            self.inc.write(d)
        return bool(d)

    def handshake(self):
        while True:
            try:
                self.obj.do_handshake()
                self._flush()
                return
            except ssl.SSLWantReadError:
                self._flush()
                if not self._fill():
                    raise ConnectionError("EOF during the handshake")

    def _read(self):
        while True:
            try:
                d = self.obj.read(65536)
                self._flush()
                return d
            except ssl.SSLWantReadError:
                self._flush()
                if not self._fill():
                    return b""
            except ssl.SSLZeroReturnError:
                return b""

    def read_request(self, timeout=20):
        """One request (head + Content-Length body): (head, body), (None, None) at EOF."""
        self.sock.settimeout(timeout)
        while b"\r\n\r\n" not in self.buf:
            d = self._read()
            if not d:
                return None, None
            self.buf += d
        head, rest = self.buf.split(b"\r\n\r\n", 1)
        m = re.search(rb"(?i)\r\ncontent-length:\s*(\d+)", head)
        n = int(m.group(1)) if m else 0
        while len(rest) < n:
            d = self._read()
            if not d:
                break
            rest += d
        self.buf = rest[n:]
        return head, rest[:n]

    def records(self, data, size=16384):
        """data encrypted as records of at most size bytes: the wire bytes, not sent."""
        for i in range(0, len(data), size):
            self.obj.write(data[i:i + size])
        return self.out.read()

    def close_notify(self):
        """The close_notify alert's wire bytes, not sent."""
        try:
            self.obj.unwrap()
        except (ssl.SSLWantReadError, ssl.SSLError):
            pass
        return self.out.read()

    def send_wire(self, wire):
        self.sock.sendall(wire)


class TlsUpstream(RawUpstream):
    """RawUpstream with TLS: runs handler(conn, n) for each connection in a thread, conn a
    TlsConn after the handshake (n counts connections from 0); .requests lists
    (connection number, head)."""

    def __init__(self, env, handler):
        self.paths = tlsgen.ensure_tls(env.path("upstream-tls"))
        self.ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        self.ctx.load_cert_chain(self.paths["server.pem"], self.paths["server.key"])
        self.requests = []
        super().__init__(handler)

    def _run(self, s, n):
        s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        try:
            c = TlsConn(s, self.ctx)
            c.handshake()
            self.handler(c, n)
        except (OSError, ssl.SSLError, ConnectionError):
            pass
        finally:
            s.close()

    def serve(self, c, n):
        """Reads requests on c; yields each (recorded in .requests) until EOF."""
        while True:
            head, body = c.read_request()
            if head is None:
                return
            self.requests.append((n, head))
            yield head, body


def start(env, up):
    return raw_start(env, up, scheme="https", provider_lines="ca_file = " + up.paths["ca.pem"])


def ask(d):
    """One request on a new client connection to the sidecar: (status, head, body)."""
    c = socket.create_connection(("127.0.0.1", d.port))
    try:
        c.sendall(request())
        return read_answer(c, timeout=20)
    finally:
        c.close()


def answer(body):
    return (b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
            b"Content-Length: %d\r\n\r\n" % len(body) + body)


def test_bytes_after_an_answer_are_not_the_next_answer(env):
    """The upstream sends one answer too many, in its own record in the same TCP write:
    the next request (another client's) must get its own answer, not those bytes."""
    def handler(c, n):
        for _ in up.serve(c, n):
            k = len(up.requests)
            c.send_wire(c.records(answer(b'{"n":%d}' % k)) +
                        c.records(answer(b'{"smuggled":%d}' % k)))

    up = TlsUpstream(env, handler)
    d = start(env, up)
    status, _, body = ask(d)
    eq((status, body), (200, b'{"n":1}'), "first answer")
    status, _, body = ask(d)
    eq((status, body), (200, b'{"n":2}'),
       "second client's answer (bytes the upstream sent after the first answer are not it)")
    up.close()


def test_close_notify_with_an_answer_ends_the_connection(env):
    """The answer and close_notify in one TCP write, the TCP connection left open: the next
    request goes out once, on a new connection."""
    def handler(c, n):
        for _ in up.serve(c, n):
            c.send_wire(c.records(answer(b'{"conn":%d}' % n)) + c.close_notify())

    up = TlsUpstream(env, handler)
    d = start(env, up)
    eq(ask(d)[0], 200, "first status")
    time.sleep(0.2)
    status, _, body = ask(d)
    eq((status, body), (200, b'{"conn":1}'), "second answer, from a new connection")
    eq([n for n, _ in up.requests], [0, 1],
       "connection of each request the upstream read (each sent once)")
    up.close()


def _ssl_ptr(conn):
    """The SSL * of an ssl.SSLObject (CPython's PySSLSocket: head, Socket, ssl), checked;
    raises Skip when this Python or libssl does not fit."""
    try:
        lib = ctypes.CDLL("libssl.so.3")
        lib.SSL_is_server.argtypes = [ctypes.c_void_p]
        lib.SSL_version.argtypes = [ctypes.c_void_p]
        lib.SSL_new_session_ticket.argtypes = [ctypes.c_void_p]
        lib.SSL_key_update.argtypes = [ctypes.c_void_p, ctypes.c_int]
        lib.SSL_do_handshake.argtypes = [ctypes.c_void_p]
        p = ctypes.c_void_p.from_address(id(conn.obj._sslobj) + 2 * ctypes.sizeof(ctypes.c_void_p)
                                         + ctypes.sizeof(ctypes.c_ssize_t)).value
    except (OSError, AttributeError) as e:
        raise aortest.Skip("no libssl.so.3 to send post-handshake messages: %s" % e)
    if not p or lib.SSL_is_server(p) != 1 or lib.SSL_version(p) != 0x304:
        raise aortest.Skip("cannot reach the SSL object of Python's ssl module")
    return lib, p


def test_tickets_and_key_update_after_an_answer_keep_the_connection(env):
    """NewSessionTicket and KeyUpdate (update requested) records right after each answer, in
    the same TCP write: every answer is right, one connection serves them all, and aord
    idles without spinning."""
    errors = []

    def handler(c, n):
        for _ in up.serve(c, n):
            wire = c.records(answer(b'{"n":%d}' % len(up.requests)))
            try:
                lib, p = _ssl_ptr(c)
            except aortest.Skip as e:
                errors.append(e)
                return
            ok = lib.SSL_new_session_ticket(p) == 1
            lib.SSL_do_handshake(p)  # writes the ticket to the memory BIO
            ok = ok and lib.SSL_key_update(p, 1) == 1  # SSL_KEY_UPDATE_REQUESTED
            lib.SSL_do_handshake(p)
            if not ok:
                errors.append(AssertionError("the test upstream could not make the records"))
                return
            c.send_wire(wire + c.out.read())

    up = TlsUpstream(env, handler)
    d = start(env, up)
    for i in range(1, 4):
        status, _, body = ask(d)
        if errors:
            raise errors[0]
        eq((status, body), (200, b'{"n":%d}' % i), "answer %d" % i)
        time.sleep(0.2)
    eq(up.conns, 1, "upstream connections")
    t0 = _cpu_s(d.proc.pid)
    time.sleep(2)
    used = _cpu_s(d.proc.pid) - t0
    check(used < 0.2, "aord used %.2f s of CPU in 2 s with one idle TLS connection" % used)
    up.close()


def _cpu_s(pid):
    with open("/proc/%d/stat" % pid) as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def test_answer_in_one_byte_records(env):
    """Head and body of two answers, one byte per TLS record: both arrive whole on one
    connection."""
    payload = numbered(20000)

    def handler(c, n):
        for _ in up.serve(c, n):
            c.send_wire(c.records(answer(payload), size=1))

    up = TlsUpstream(env, handler)
    d = start(env, up)
    for i in range(2):
        status, _, body = ask(d)
        eq(status, 200, "status %d" % i)
        check(body == payload, "answer %d: %d bytes, expected %d" % (i, len(body), len(payload)))
    eq(up.conns, 1, "upstream connections")
    up.close()


def test_close_delimited_answer_without_close_notify_is_complete(env):
    payload = numbered(100000)

    def handler(c, n):
        for _ in up.serve(c, n):
            c.send_wire(c.records(b"HTTP/1.0 200 OK\r\nContent-Type: application/json\r\n\r\n" +
                                  payload))
            c.sock.shutdown(socket.SHUT_RDWR)  # no close_notify
            return

    up = TlsUpstream(env, handler)
    d = start(env, up)
    status, _, body = ask(d)
    eq(status, 200, "status")
    check(body == payload, "the whole body (%d bytes of %d)" % (len(body), len(payload)))
    up.close()


def test_content_length_answer_cut_without_close_notify_is_not_complete(env):
    def handler(c, n):
        for _ in up.serve(c, n):
            c.send_wire(c.records(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
                                  b"Content-Length: 1000\r\n\r\n" + b"x" * 400))
            time.sleep(0.2)
            c.sock.shutdown(socket.SHUT_RDWR)  # no close_notify
            return

    up = TlsUpstream(env, handler)
    d = start(env, up)
    c = socket.create_connection(("127.0.0.1", d.port))
    c.sendall(request())
    c.settimeout(20)
    got = b""
    while True:
        x = c.recv(65536)
        if not x:
            break
        got += x
    c.close()
    head, _, body = got.partition(b"\r\n\r\n")
    check(b"content-length: 1000" in head.lower(), "the upstream's length is forwarded: %r" % head)
    eq(len(body), 400, "body bytes before the client's connection is closed")
    up.close()


def test_a_private_ca_without_ca_file_says_what_to_set(env):
    """QA: an upstream whose certificate comes from a private CA, with no ca_file, gave
    "unable to get local issuer certificate" and no word on the fix. The 502 names
    ca_file."""
    import json
    import urllib.error
    import urllib.request

    mock = env.start_mock(tls=True)
    port = aortest.free_port()
    env.set_keys(KEY_A="secret-A")
    env.write_config(
        "[daemon]\nlisten = 127.0.0.1:%d\n[key \"A\"]\nenv = KEY_A\n[provider \"p\"]\n"
        "dialect = openai\nbase_url = %s\nkeys = A\nmodels = gpt-4o-mini\n" % (port, mock.url))
    env.start_daemon()
    body = json.dumps({"model": "gpt-4o-mini", "messages": [{"role": "user", "content": "hi"}]})
    req = urllib.request.Request("http://127.0.0.1:%d/v1/chat/completions" % port,
                                 data=body.encode(), headers={"Content-Type": "application/json",
                                                              "Authorization": "Bearer c"})  # fmt: skip
    try:
        urllib.request.urlopen(req, timeout=30)
        status, text = 200, ""
    except urllib.error.HTTPError as e:
        status, text = e.code, e.read().decode("utf-8", "replace")
    eq(status, 502, "no trusted certificate: 502 (%s)" % text)
    check("ca_file" in text and "not accepted" in text, "the answer names ca_file: %r" % text)


def _ca_setup(env, mock, ca_file, extra_env=None):
    port = aortest.free_port()
    env.set_keys(KEY_A="secret-A")
    env.write_config(
        "[daemon]\nlisten = 127.0.0.1:%d\n[key \"A\"]\nenv = KEY_A\n[provider \"p\"]\n"
        "dialect = openai\nbase_url = %s\nkeys = A\nmodels = gpt-4o-mini\nca_file = %s\n"
        % (port, mock.url, ca_file))
    return env.start_daemon(extra_env=extra_env)


def _chat_status(d):
    body = {"model": "gpt-4o-mini", "messages": [{"role": "user", "content": "hi"}]}
    status, headers, text = d.http("POST", "/v1/chat/completions", body,
                                   {"authorization": "Bearer c"})
    return status, text


def _reload_and_clear_backoff(d):
    """SIGHUP, wait for the reload line, then clear the backoff the failures left."""
    import signal

    d.proc.send_signal(signal.SIGHUP)
    end = time.monotonic() + 10
    while "SIGHUP: config reloaded" not in d.stderr_text():
        check(time.monotonic() < end, "no reload line:\n" + d.stderr_text()[-2000:])
        time.sleep(0.05)
    status, _, text = d.admin("POST", "/admin/api/backoff/clear")
    eq(status, 200, "backoff cleared (%s)" % text)


def test_ca_file_is_an_extra_ca(env):
    """Spec §3: ca_file is an "optional extra CA": the system store still verifies. Here
    the "system store" is SSL_CERT_FILE (OpenSSL's default path) naming the mock's CA,
    and ca_file another CA: the upstream is trusted (it was refused: ca_file replaced
    the store)."""
    mock = env.start_mock(tls=True)
    other = env.start_mock(tls=True)  # its CA signed nothing the first mock presents
    check(open(mock.ca_path, "rb").read() != open(other.ca_path, "rb").read(), "two CAs")
    d = _ca_setup(env, mock, other.ca_path, extra_env={"SSL_CERT_FILE": mock.ca_path})
    status, text = _chat_status(d)
    eq(status, 200, "system store + ca_file: the upstream is trusted (%s)" % text[:300])


def test_ca_file_replaced_then_sighup_is_used(env):
    """QA: origins kept their TLS context for the life of aord, so a ca_file fixed in
    place and a SIGHUP still gave "certificate not accepted" until a restart."""
    import shutil

    mock = env.start_mock(tls=True)
    other = env.start_mock(tls=True)
    ca = env.path("provider-ca.pem")
    shutil.copyfile(other.ca_path, ca)  # the wrong CA
    d = _ca_setup(env, mock, ca)
    status, text = _chat_status(d)
    eq(status, 502, "the wrong CA: 502 (%s)" % text[:300])
    shutil.copyfile(mock.ca_path, ca)  # fixed in place
    _reload_and_clear_backoff(d)
    status, text = _chat_status(d)
    eq(status, 200, "the fixed CA after SIGHUP (%s)" % text[:300])


def test_system_store_loaded_once_and_again_after_sighup(env):
    """Performance review: every TLS origin loaded the whole system CA bundle into a
    context of its own (~50 ms of the event loop and ~0.8 MiB each, on the first request
    to each provider). Two providers now share one load; after a SIGHUP the store is
    loaded again from the file as it is then: a bundle fixed in place is used."""
    import shutil

    mock_a = env.start_mock(tls=True)
    mock_b = env.start_mock(tls=True)
    bundle = env.path("system-bundle.pem")
    shutil.copyfile(mock_a.ca_path, bundle)  # the "system store" trusts mock_a only
    port = aortest.free_port()
    env.set_keys(KEY_A="secret-A")
    env.write_config(
        "[daemon]\nlisten = 127.0.0.1:%d\n[key \"A\"]\nenv = KEY_A\n"
        "[provider \"a\"]\ndialect = openai\nbase_url = %s\nkeys = A\nmodels = model-a\n"
        "[provider \"b\"]\ndialect = openai\nbase_url = %s\nkeys = A\nmodels = model-b\n"
        % (port, mock_a.url, mock_b.url))
    d = env.start_daemon(extra_env={"SSL_CERT_FILE": bundle, "AOR_DEBUG": "1"})

    def chat(model):
        body = {"model": model, "messages": [{"role": "user", "content": "hi"}]}
        status, _, text = d.http("POST", "/v1/chat/completions", body,
                                 {"authorization": "Bearer c"})
        return status, text

    def loads():
        return d.stderr_text().count("upstream TLS: loaded the system CA store")

    status, text = chat("model-a")
    eq(status, 200, "provider a, trusted by the bundle (%s)" % text[:300])
    status, text = chat("model-b")
    eq(status, 502, "provider b, not in the bundle (%s)" % text[:300])
    eq(loads(), 1, "two TLS origins, one load of the store:\n" + d.stderr_text()[-2000:])
    with open(bundle, "ab") as f:  # fixed in place: mock_b's CA added
        f.write(open(mock_b.ca_path, "rb").read())
    _reload_and_clear_backoff(d)
    status, text = chat("model-b")
    eq(status, 200, "provider b after the bundle was fixed and SIGHUP (%s)" % text[:300])
    eq(loads(), 2, "loaded again once after SIGHUP:\n" + d.stderr_text()[-2000:])


def test_fifo_config_files_do_not_hang(env):
    """Review: a FIFO as the config, an env_file or a ca_file made `aor check-config`
    (and aord, also on SIGHUP) wait for a writer forever. Each is refused at once."""
    import subprocess

    fifo = env.path("a.fifo")
    os.mkfifo(fifo, 0o600)
    env.set_keys(KEY_A="secret-A")
    base = ("[key \"A\"]\nenv = KEY_A\n[provider \"p\"]\ndialect = openai\n"
            "base_url = https://127.0.0.1:1\nkeys = A\nmodels = gpt-4o-mini\n")
    cases = [(fifo, "not a regular file"),
             (env.write_config("[daemon]\nenv_file = %s\n" % fifo + base,
                               path=env.path("envfile.ini")), "not a regular file"),
             (env.write_config(base + "ca_file = %s\n" % fifo, path=env.path("cafile.ini")),
              "not a regular file")]
    for cfg, want in cases:
        try:
            r = subprocess.run([os.path.join(env.build, "aor"), "check-config", "--config", cfg],
                               env=env.env, capture_output=True, text=True, timeout=10)
        except subprocess.TimeoutExpired:
            raise AssertionError("check-config hung on %s" % cfg)
        eq(r.returncode, 2, "check-config %s: exit 2 (%s)" % (cfg, r.stderr))
        check(want in r.stderr, "check-config %s says %r: %r" % (cfg, want, r.stderr))


def test_early_answer_before_a_reset_reaches_the_client_over_tls(env):
    """The early 413 of test_upstream_answers over TLS: the upstream answers after the
    request head and closes with the 8 MiB body unread (a reset while aord still sends);
    the answer's records are in the socket and reach the client as they came."""
    body413 = b'{"error":{"message":"too big","type":"invalid_request_error"}}'

    def handler(c, n):
        c.sock.settimeout(20)
        while b"\r\n\r\n" not in c.buf:
            d = c._read()
            if not d:
                return
            c.buf += d
        c.send_wire(c.records(b"HTTP/1.1 413 Payload Too Large\r\nContent-Type: application/json"
                              b"\r\nConnection: close\r\nContent-Length: %d\r\n\r\n" % len(body413)
                              + body413))

    up = TlsUpstream(env, handler)
    d = start(env, up)
    early_413_rounds(d, body413)
    up.close()
