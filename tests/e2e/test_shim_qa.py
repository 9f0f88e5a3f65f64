"""QA findings on libaor.so (docs/shim.md), end to end with LD_PRELOAD:

* the shim's stderr lines never go into a socket that took fd 2 (a program that closed
  stderr): no SIGPIPE death, no bytes injected into the connection or the daemon stream;
* a socket path too long for a Unix socket is named as such in the fail-open warning;
* AOR_HOSTS, when set, is the whole list of intercepted hosts: what the daemon
  publishes counts only for hosts on it; AOR_HOSTS="" intercepts nothing.

Uses tests/e2e/fake_daemon.py (no aord) and tests/progs/connect_probe."""
import os
import socket
import sys
import threading

import aortest
from aortest import check, eq

HERE = os.path.dirname(os.path.abspath(__file__))

# A client that closed stderr: its next socket is fd 2. SIGPIPE is left at its default
# (as in a C program), so a write to that socket before it is connected kills it.
# Prints the first line of the answer and what came back.
CLOSED_STDERR_CLIENT = r"""
import os, signal, socket, sys
signal.signal(signal.SIGPIPE, signal.SIG_DFL)
host, port, mode = sys.argv[1], int(sys.argv[2]), sys.argv[3]
os.close(2)
s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
assert s.fileno() == 2, s.fileno()
s.connect((host, port))
socket.getaddrinfo(host, port, socket.AF_INET)  # one more AOR_DEBUG line, after connect
if mode == "http":
    s.sendall(b"GET /qa HTTP/1.0\r\nHost: x\r\n\r\n")
else:
    s.sendall(b"hello\n")
data = b""
while b"hello\n" not in data if mode == "echo" else True:
    c = s.recv(4096)
    if not c:
        break
    data += c
print(repr(data))
"""


class RecordingHTTP:
    """A loopback HTTP/1.0 server that keeps the raw bytes of every request."""

    def __init__(self):
        self.srv = socket.socket()
        self.srv.bind(("127.0.0.1", 0))
        self.srv.listen(16)
        self.port = self.srv.getsockname()[1]
        self.requests = []
        threading.Thread(target=self.loop, daemon=True).start()

    def loop(self):
        while True:
            try:
                c, _ = self.srv.accept()
            except OSError:
                return
            data = b""
            c.settimeout(5)
            try:
                while b"\r\n\r\n" not in data:
                    b = c.recv(4096)
                    if not b:
                        break
                    data += b
                self.requests.append(data)
                c.sendall(b"HTTP/1.0 200 OK\r\nContent-Length: 2\r\n\r\nhi")
            except OSError:
                self.requests.append(data)
            finally:
                c.close()

    def close(self):
        self.srv.close()


def start_fake_daemon(env):
    log = env.path("fake_daemon.log")
    p = env.spawn([sys.executable, os.path.join(HERE, "fake_daemon.py"), env.socket_path,
                   "--log", log], preload=False)
    line = p.stdout.readline()
    check(line.strip() == b"ready", "fake daemon did not start: %r" % line)
    return log


def read_log(log):
    try:
        with open(log) as f:
            return f.read().splitlines()
    except FileNotFoundError:
        return []


def test_shim_qa_closed_stderr_failopen(env):
    """Fail-open with fd 2 a TCP socket: the warning used to be written into the not yet
    connected socket (EPIPE: the program died of SIGPIPE, exit 141) and the debug lines
    into the connection. Now the program connects directly and the server gets only the
    program's bytes."""
    srv = RecordingHTTP()
    try:
        rc, out, err = env.run_client(
            [sys.executable, "-c", CLOSED_STDERR_CLIENT, "localhost", str(srv.port), "http"],
            extra_env={"AOR_SOCKET": env.path("nowhere", "aor.sock"),
                       "AOR_HOSTS": "localhost:%d" % srv.port, "AOR_DEBUG": "1"})
        eq(rc, 0, "client exit (-13 = SIGPIPE); stdout %r" % out)
        check("HTTP/1.0 200 OK" in out, "answer: %r" % out)
        eq(len(srv.requests), 1, "requests the server saw")
        req = srv.requests[0]
        check(req.startswith(b"GET /qa HTTP/1.0\r\n"), "the request is the program's: %r" % req)
        check(b"aor" not in req, "no shim text in the connection: %r" % req)
    finally:
        srv.close()


def test_shim_qa_closed_stderr_redirected(env):
    """fd 2 is the redirected connection itself: the AOR_DEBUG lines written after the
    redirect used to go into the daemon stream (the fake daemon echoes them back)."""
    log = start_fake_daemon(env)
    rc, out, err = env.run_client(
        [sys.executable, "-c", CLOSED_STDERR_CLIENT, "localhost", "443", "echo"],
        extra_env={"AOR_HOSTS": "localhost", "AOR_DEBUG": "1"})
    eq(rc, 0, "client exit; stdout %r" % out)
    eq(read_log(log), ["AOR/1 localhost 127.0.0.1 443"], "preamble the daemon got")
    eq(out.strip(), repr(b"PRE AOR/1 localhost 127.0.0.1 443\nhello\n"),
       "only the preamble echo and the program's bytes came back")


def test_shim_qa_socket_path_too_long(env):
    """An AOR_SOCKET longer than a Unix socket address holds: the warning used to show
    the path cut at 107 bytes as if it were the path."""
    srv = RecordingHTTP()
    try:
        path = "/tmp/" + "x" * 150 + "/aor.sock"
        code = ("import socket,sys; s = socket.create_connection(('localhost', %d));"
                "s.sendall(b'GET / HTTP/1.0\\r\\n\\r\\n'); print(s.recv(100)[:15])" % srv.port)
        rc, out, err = env.run_client([sys.executable, "-c", code],
                                      extra_env={"AOR_SOCKET": path,
                                                 "AOR_HOSTS": "localhost:%d" % srv.port})
        eq(rc, 0, "client exit (%s)" % err)
        lines = err.splitlines()
        eq(len(lines), 1, "one warning line: %r" % err)
        want = "aor: daemon socket path too long (%d bytes, at most 107): /tmp/xxx" % len(path)
        check(lines[0].startswith(want), "warning names the problem: %r" % lines[0])
        check(lines[0].endswith("..., connecting directly (fail-open)"), lines[0])
    finally:
        srv.close()


def test_shim_qa_aor_hosts_is_the_whole_list(env):
    """Spec §2 "AOR_HOSTS overrides": with AOR_HOSTS set, a host the daemon publishes but
    AOR_HOSTS does not list is not redirected (AOR_HOSTS=api.anthropic.com used to
    redirect api.openai.com while aord ran); AOR_HOSTS="" intercepts nothing."""
    log = start_fake_daemon(env)
    hosts = os.path.join(os.path.dirname(env.socket_path), "hosts")
    with open(hosts + ".tmp", "w") as f:
        f.write("aor-hosts 1\n"
                "a 127.0.0.5 443 api.openai.com\n"
                "a 127.0.0.6 443 api.anthropic.com\n")
    os.rename(hosts + ".tmp", hosts)
    probe = os.path.join(env.build, "tests", "progs", "connect_probe")

    def redirected(ip, aor_hosts):
        n0 = len(read_log(log))
        extra = {} if aor_hosts is None else {"AOR_HOSTS": aor_hosts}
        rc, out, err = env.run_client([probe, ip, "443"], extra_env=extra)
        new = read_log(log)[n0:]
        if rc == 0:
            check(len(new) == 1, "one preamble for %s: %r" % (ip, new))
            return new[0]
        check("connect" in out and not new, "%s went direct (nothing listens): %s" % (ip, out))
        return None

    # Published addresses go as "-" (the program did not look the host up: aord goes by
    # the SNI / Host header, docs/shim.md).
    eq(redirected("127.0.0.5", None), "AOR/1 - 127.0.0.5 443", "unset, openai")
    eq(redirected("127.0.0.6", None), "AOR/1 - 127.0.0.6 443", "unset, anthropic")
    eq(redirected("127.0.0.5", "api.anthropic.com"), None, "AOR_HOSTS=api.anthropic.com, openai")
    eq(redirected("127.0.0.6", "api.anthropic.com"), "AOR/1 - 127.0.0.6 443",
       "AOR_HOSTS=api.anthropic.com, anthropic")
    eq(redirected("127.0.0.5", ""), None, "AOR_HOSTS='', openai")
    eq(redirected("127.0.0.6", ""), None, "AOR_HOSTS='', anthropic")


# A client that keeps a redirected connection open while it runs a subprocess, as a
# Python SDK with a kept-alive connection does: CPython's subprocess closes the parent's
# fds in a vfork() child, which shares the parent's memory.
SUBPROCESS_CLIENT = r"""
import socket, subprocess, sys
s = socket.create_connection(("localhost", int(sys.argv[1])))
before = s.getpeername()
subprocess.run(["/bin/true"], check=True)
after = s.getpeername()
s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
s.sendall(b"ping\n")
data = b""
while b"ping\n" not in data:
    c = s.recv(100)
    if not c:
        break
    data += c
print(before[1], after[1], s.family == socket.AF_INET, b"ping" in data)
"""


def test_shim_qa_subprocess_keeps_the_tcp_view(env):
    """A subprocess (vfork child closing fds) must not clear the parent's record of its
    redirected connection (review: afterwards getpeername gave an AF_UNIX path and
    setsockopt(TCP_NODELAY) failed with EOPNOTSUPP)."""
    log = start_fake_daemon(env)
    rc, out, err = env.run_client([sys.executable, "-c", SUBPROCESS_CLIENT, "9443"],
                                  extra_env={"AOR_HOSTS": "localhost:9443"})
    eq(rc, 0, "client exit (%s)" % err[-500:])
    eq(out.split(), ["9443", "9443", "True", "True"], "the TCP view after the subprocess")
    check(read_log(log)[-1:] == ["AOR/1 localhost 127.0.0.1 9443"], "redirected: %r" % read_log(log))


def test_shim_qa_daemon_of_another_user_is_not_used(env):
    """A listener on the daemon socket run by another user (who could create
    /tmp/aor-$UID first when XDG_RUNTIME_DIR is unset) gets nothing: the shim checks the
    peer's uid (SO_PEERCRED) and connects directly (review: the preamble and the
    request, bearer token included, went to the other user's listener)."""
    import shutil
    import tempfile
    if os.geteuid() != 0 or shutil.which("setpriv") is None:
        raise aortest.Skip("needs root and setpriv to run a listener as another user")
    base = tempfile.mkdtemp(prefix="aor-qa-other-")
    os.chmod(base, 0o755)
    sock = os.path.join(base, "d", "aor.sock")
    log = os.path.join(base, "log")
    open(log, "w").close()
    os.chmod(log, 0o666)
    os.makedirs(os.path.dirname(sock))
    os.chown(os.path.dirname(sock), 65534, 65534)
    p = env.spawn(["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups",
                   sys.executable, os.path.join(HERE, "fake_daemon.py"), sock, "--log", log],
                  preload=False)
    line = p.stdout.readline()
    check(line.strip() == b"ready", "fake daemon did not start: %r" % line)
    os.chmod(os.path.dirname(sock), 0o755)
    os.chmod(sock, 0o666)
    srv = RecordingHTTP()
    try:
        code = ("import socket,sys; s = socket.create_connection(('localhost', %d));"
                "s.sendall(b'GET /x HTTP/1.0\\r\\nAuthorization: Bearer sk-victim\\r\\n\\r\\n');"
                "print(s.recv(100)[:15])" % srv.port)
        rc, out, err = env.run_client([sys.executable, "-c", code],
                                      extra_env={"AOR_SOCKET": sock,
                                                 "AOR_HOSTS": "localhost:%d" % srv.port})
        eq(rc, 0, "client exit (%s)" % err)
        check("200 OK" in out, "it connected directly: %r" % out)
        eq([x for x in read_log(log) if x != "BAD "], [],
           "the other user's listener got no preamble (only a connection closed at once)")
        check(len(srv.requests) == 1 and b"sk-victim" in srv.requests[0], "the request went direct")
    finally:
        srv.close()
        p.terminate()
        shutil.rmtree(base, ignore_errors=True)
