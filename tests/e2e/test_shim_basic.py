#!/usr/bin/env python3
"""End-to-end checks of libaor.so against a fake daemon (tests/e2e/fake_daemon.py).

Runs the C probes (tests/progs) and real clients (curl, python, node when present)
with LD_PRELOAD=$AOR_BUILD/libaor.so in an isolated XDG_RUNTIME_DIR / AOR_SOCKET /
XDG_DATA_HOME / HOME. Prints one line per check ("ok NAME" or "FAIL NAME: why");
exits 0 when every check passed. Standalone:
    AOR_BUILD=build/san python3 tests/e2e/test_shim_basic.py
or through the harness (one test, test_shim_basic):
    AOR_BUILD=build/san python3 tests/e2e/aortest.py tests/e2e/test_shim_basic.py Needs: make BUILD=$AOR_BUILD $AOR_BUILD/libaor.so
and the tests/progs binaries. stdlib only.
"""
import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
BUILD = os.path.join(ROOT, os.environ.get("AOR_BUILD", "build"))
LIB = os.path.join(BUILD, "libaor.so")
PROBE = os.path.join(BUILD, "tests", "progs", "connect_probe")
STATIC = os.path.join(BUILD, "tests", "progs", "connect_static")
FALLBACK_RE = re.compile(r"^198\.(18|19)\.\d{1,3}\.\d{1,3}$")

failures = []


def check(name, cond, detail=""):
    if cond:
        print("ok " + name, flush=True)
    else:
        failures.append(name)
        print("FAIL %s: %s" % (name, detail.strip().replace("\n", " | ")[:600]), flush=True)
    return cond


class Env:
    def __init__(self, tmp):
        self.tmp = tmp
        self.run = os.path.join(tmp, "run")
        self.sock = os.path.join(self.run, "aor", "aor.sock")
        self.hosts = os.path.join(self.run, "aor", "hosts")
        self.data = os.path.join(tmp, "data")
        self.home = os.path.join(tmp, "home")
        self.log = os.path.join(tmp, "daemon.log")
        for d in (self.run, self.data, self.home):
            os.makedirs(d, mode=0o700, exist_ok=True)

    def base(self, **extra):
        env = {k: v for k, v in os.environ.items()
               if not k.startswith("AOR_") and k not in (
                   "LD_PRELOAD", "SSL_CERT_FILE", "REQUESTS_CA_BUNDLE", "CURL_CA_BUNDLE",
                   "NODE_EXTRA_CA_CERTS", "http_proxy", "https_proxy", "HTTP_PROXY",
                   "HTTPS_PROXY", "ALL_PROXY", "all_proxy")}
        env.update(XDG_RUNTIME_DIR=self.run, AOR_SOCKET=self.sock, XDG_DATA_HOME=self.data,
                   HOME=self.home, LD_PRELOAD=LIB, NO_PROXY="*")
        for k, v in extra.items():
            if v is None:
                env.pop(k, None)
            else:
                env[k] = v
        return env

    def log_lines(self):
        try:
            with open(self.log, "rb") as f:
                return [l.decode(errors="replace") for l in f.read().splitlines()]
        except FileNotFoundError:
            return []

    def publish(self, text):
        tmp = self.hosts + ".tmp"
        with open(tmp, "w") as f:
            f.write(text)
        os.rename(tmp, self.hosts)

    def unpublish(self):
        try:
            os.unlink(self.hosts)
        except FileNotFoundError:
            pass


def run(argv, env, timeout=60, cwd=None):
    try:
        p = subprocess.run(argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                           timeout=timeout, cwd=cwd)
        return p.returncode, p.stdout.decode(errors="replace"), p.stderr.decode(errors="replace")
    except subprocess.TimeoutExpired:
        return -999, "", "timeout"


def fields(out):
    d = {}
    for line in out.splitlines():
        k, _, v = line.partition(" ")
        d.setdefault(k, v)
    return d


def start_daemon(e):
    p = subprocess.Popen([sys.executable, os.path.join(HERE, "fake_daemon.py"), e.sock,
                          "--log", e.log], stdout=subprocess.PIPE, env=dict(os.environ))
    line = p.stdout.readline()
    if line.strip() != b"ready":
        raise RuntimeError("fake daemon did not start")
    return p


class EchoServer:
    """A plain TCP echo server on 127.0.0.1 (the 'real' provider for fail-open)."""

    def __init__(self):
        self.srv = socket.socket()
        self.srv.bind(("127.0.0.1", 0))
        self.srv.listen(64)
        self.port = self.srv.getsockname()[1]
        threading.Thread(target=self.loop, daemon=True).start()

    def loop(self):
        while True:
            try:
                c, _ = self.srv.accept()
            except OSError:
                return
            threading.Thread(target=self.echo, args=(c,), daemon=True).start()

    @staticmethod
    def echo(c):
        try:
            c.sendall(b"DIRECT\n")
            while True:
                b = c.recv(4096)
                if not b:
                    break
                c.sendall(b)
        except OSError:
            pass
        finally:
            c.close()


def main():
    for path in (LIB, PROBE, STATIC):
        if not os.path.exists(path):
            print("FAIL setup: %s missing (make BUILD=%s testbins)" % (path, BUILD))
            return 1
    tmp = tempfile.mkdtemp(prefix="aor-shim-e2e-")
    e = Env(tmp)
    daemon = start_daemon(e)
    echo = EchoServer()
    try:
        checks(e, echo)
    finally:
        daemon.terminate()
        daemon.wait(5)
        shutil.rmtree(tmp, ignore_errors=True)
    print("%d check(s) failed" % len(failures) if failures else "all shim checks passed")
    return 1 if failures else 0


def checks(e, echo):
    env = e.base()

    # --- offline fallback (spec §2 step 3): api.openai.com does not resolve here ------
    n0 = len(e.log_lines())
    rc, out, err = run([PROBE, "api.openai.com", "443"], env)
    f = fields(out)
    ip = f.get("resolved", "")
    check("fallback address in 198.18.0.0/15", rc == 0 and FALLBACK_RE.match(ip), out + err)
    check("getpeername shows the original address", f.get("peer") == ip + " 443", out)
    check("getsockname is loopback", f.get("sock", "").startswith("127.0.0.1 "), out)
    check("preamble names host, ip, port",
          e.log_lines()[n0:n0 + 1] == ["AOR/1 api.openai.com %s 443" % ip], str(e.log_lines()[n0:]))
    check("bytes flow both ways after the preamble",
          f.get("reply") == "PRE AOR/1 api.openai.com %s 443|hello|" % ip, out)
    check("nothing on stderr without AOR_DEBUG", err == "", err)
    rc2, out2, _ = run([PROBE, "api.openai.com", "443"], env)
    check("fallback address is stable across processes", fields(out2).get("resolved") == ip,
          out2)

    for mode, want in (("nonblock", ["connect 0", "so_error 0", "nonblock 1"]),
                       ("epoll", ["epoll ok"]),
                       ("eisconn", ["second_connect EISCONN"]),
                       ("fork", ["child_inherited_peer %s 443" % ip, "child ok"]),
                       # A new program image inheriting the fd keeps the TCP view (it
                       # showed the Unix socket: SO_DOMAIN AF_UNIX, TCP_NODELAY refused).
                       ("exec", ["exec_peer %s 443" % ip, "exec_domain AF_INET",
                                 "exec_set_nodelay 0", "exec_nodelay 1", "exec child ok"]),
                       ("dup", ["dup_peer ok", "reuse_peer ok", "dup2_over ok",
                                "close_range_reuse ok"]),
                       ("sockopt", ["keepalive_before_connect 1",
                                    "nodelay 1", "domain AF_INET", "protocol tcp",
                                    "type stream", "set_tos 0", "keepidle 30",
                                    "tcp_info established"]),
                       ("fastopen", ["fastopen_sent 6", "peer %s 443" % ip]),
                       ("cloexec", ["cloexec_set 1", "cloexec_unset 0"]),
                       ("ghbn", ["peer %s 443" % ip]),
                       ("ghbnr", ["peer %s 443" % ip])):
        rc, out, err = run([PROBE, "api.openai.com", "443", mode], env)
        lines = out.splitlines()
        check("probe %s" % mode, rc == 0 and all(w in lines for w in want) and "ok" in lines,
              out + err)

    rc, out, err = run([PROBE, "api.openai.com", "443", "exec"], env)
    f = fields(out)
    check("exec: the new image's getsockname is the one the parent saw",
          rc == 0 and f.get("sock") and f.get("exec_sock") == f.get("sock"), out + err)

    # 200 threads resolving and connecting at once. Through /etc/hosts (localhost): the
    # sandbox DNS drops bursts of queries, which would only test its timeouts.
    n0 = len(e.log_lines())
    rc, out, err = run([PROBE, "localhost", "443", "threads"], e.base(AOR_HOSTS="localhost"))
    check("probe threads (200 threads resolve + connect)",
          rc == 0 and "threads 200/200" in out.splitlines()
          and len(e.log_lines()) - n0 == 200, out + err)

    # --- UDP is never redirected -------------------------------------------------------
    n0 = len(e.log_lines())
    code = ("import socket\n"
            "ip = socket.getaddrinfo('api.openai.com', 443, socket.AF_INET)[0][4][0]\n"
            "s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)\n"
            "try:\n"
            "    s.connect((ip, 443)); print('peer', s.getpeername()[0])\n"
            "except OSError as e:\n"
            "    print('udp-error', e.errno)\n"
            "print('family', s.getsockopt(socket.SOL_SOCKET, socket.SO_DOMAIN))\n")
    rc, out, err = run([sys.executable, "-c", code], env)
    check("UDP connect is not redirected",
          rc == 0 and "family %d" % socket.AF_INET in out and len(e.log_lines()) == n0,
          out + err)

    # --- name resolution recording (step 1): AOR_HOSTS overrides the list --------------
    envl = e.base(AOR_HOSTS="localhost")
    n0 = len(e.log_lines())
    rc, out, err = run([PROBE, "localhost", "443"], envl)
    check("resolved address of an AOR_HOSTS host is redirected",
          rc == 0 and e.log_lines()[n0:n0 + 1] == ["AOR/1 localhost 127.0.0.1 443"],
          out + err + str(e.log_lines()[n0:]))
    rc, out, err = run([PROBE, "api.openai.com", "443"], envl)
    check("AOR_HOSTS replaces the built-in list", rc != 0 and "getaddrinfo" in out, out + err)
    envp = e.base(AOR_HOSTS=" localhost:8443 , api.example.test")
    n0 = len(e.log_lines())
    rc, out, err = run([PROBE, "localhost", "8443"], envp)
    check("AOR_HOSTS host:port redirects that port",
          rc == 0 and e.log_lines()[n0:n0 + 1] == ["AOR/1 localhost 127.0.0.1 8443"], out + err)
    rc, out, err = run([PROBE, "localhost", str(echo.port)], envp)
    check("other ports of an intercepted host go direct",
          rc == 0 and "reply DIRECT|hello|" in out, out + err)

    # --- published address set (step 2) ----------------------------------------------
    e.publish("aor-hosts 1\n"
              "h pub.example.test 443\n"
              "a 127.0.0.5 443 pub.example.test\n"
              "this line is junk\n"
              "a 127.0.0.6 443 one.example.test\n"
              "a 127.0.0.6 443 two.example.test\n"
              "h only-published.test 9443\n")
    n0 = len(e.log_lines())
    rc, out, err = run([PROBE, "127.0.0.5", "443"], env)
    # Redirected, but as "-": the program did not look up pub.example.test (it may have
    # looked up another name with that address, QA), so aord goes by the SNI / Host.
    check("published address is redirected, its host left to aord",
          rc == 0 and e.log_lines()[n0:n0 + 1] == ["AOR/1 - 127.0.0.5 443"],
          out + err)
    n0 = len(e.log_lines())
    rc, out, err = run([PROBE, "127.0.0.6", "443"], env)
    check("address of several hosts is sent as '-'",
          rc == 0 and e.log_lines()[n0:n0 + 1] == ["AOR/1 - 127.0.0.6 443"], out + err)
    n0 = len(e.log_lines())
    rc, out, err = run([PROBE, "only-published.test", "9443"], env)
    lines = e.log_lines()[n0:n0 + 1]
    check("published host with its own port (fallback + redirect)",
          rc == 0 and len(lines) == 1 and lines[0].startswith("AOR/1 only-published.test 198.1")
          and lines[0].endswith(" 9443"), out + err + str(lines))
    n0 = len(e.log_lines())
    rc, out, err = run([STATIC, "127.0.0.5", "443"], env)
    check("static binary is not intercepted (documented limit)",
          "connect failed" in out and len(e.log_lines()) == n0, out + err)
    e.publish("aor-hosts 2\na 127.0.0.5 443 pub.example.test\n")
    n0 = len(e.log_lines())
    rc, out, err = run([PROBE, "127.0.0.5", "443"], env)
    check("malformed published file is ignored", rc != 0 and len(e.log_lines()) == n0,
          out + err)
    e.unpublish()

    # --- not intercepted: untouched ----------------------------------------------------
    n0 = len(e.log_lines())
    rc, out, err = run([PROBE, "127.0.0.1", str(echo.port)], env)
    check("non-intercepted connect goes direct",
          rc == 0 and "reply DIRECT|hello|" in out and len(e.log_lines()) == n0
          and f"peer 127.0.0.1 {echo.port}" in out and err == "", out + err)

    # QA: a second connect() on a direct connection whose address became a provider's
    # (the name resolved after it) replaced the connection with one to the daemon.
    n0 = len(e.log_lines())
    rc, out, err = run([PROBE, "localhost", str(echo.port), "direct_first"],
                       e.base(AOR_HOSTS="localhost:%d" % echo.port))
    lines = out.splitlines()
    check("a connected socket's second connect: EISCONN, its connection kept",
          rc == 0 and "second_connect EISCONN" in lines and "reply DIRECT|hello|" in lines
          and "listen_connect EISCONN" in lines and "listener ok" in lines
          and len(e.log_lines()) == n0, out + err + str(e.log_lines()[n0:]))
    # ... nor one its peer reset, which the kernel still takes for connected (QA).
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    rport = sock.getsockname()[1]
    sock.close()
    n0 = len(e.log_lines())
    rc, out, err = run([PROBE, "localhost", str(rport), "direct_reset"],
                       e.base(AOR_HOSTS="localhost:%d" % rport))
    check("a reset connection's second connect: EISCONN, not redirected",
          rc == 0 and "connect_after_reset EISCONN" in out.splitlines()
          and len(e.log_lines()) == n0, out + err + str(e.log_lines()[n0:]))
    # QA: an fd inherited across exec whose first calls are connect()/sendto() with the
    # address (no getpeername before): EINVAL and EISCONN instead of the TCP answers.
    rc, out, err = run([PROBE, "api.openai.com", "443", "exec"],
                       dict(env, AOR_PROBE_CHILD="exec_child_connect"))
    lines = out.splitlines()
    check("exec: connect() and sendto() first on the inherited fd",
          rc == 0 and "exec_connect EISCONN" in lines and "exec_sendto 6" in lines
          and "exec_echo ok" in lines and "exec child ok" in lines, out + err)

    rc, out, err = run([PROBE, "api.openai.com", "443", "efault"], env)
    lines = out.splitlines()
    check("bad pointers: EFAULT, no crash in a hook",
          rc == 0 and "connect_bad EFAULT" in lines and "sendmsg_bad EFAULT" in lines
          and "sendto_bad EFAULT" in lines, "rc %d: " % rc + out + err)

    # --- fail-open / strict --------------------------------------------------------------
    gone = os.path.join(e.tmp, "nowhere", "aor.sock")
    envf = e.base(AOR_SOCKET=gone, AOR_HOSTS="localhost:%d" % echo.port)
    rc, out, err = run([PROBE, "localhost", str(echo.port), "cloexec"], envf)
    warn = "aor: daemon not reachable at %s, connecting directly (fail-open)" % gone
    check("fail-open connects directly", rc == 0, out + err)
    check("fail-open warns once per process", err.splitlines() == [warn], err)
    rc, out, err = run([PROBE, "localhost", str(echo.port)],
                       e.base(AOR_SOCKET=gone, AOR_HOSTS="localhost:%d" % echo.port,
                              AOR_STRICT="1"))
    check("AOR_STRICT=1 fails with ECONNREFUSED", rc != 0 and "Connection refused" in out,
          out + err)
    rc, out, err = run([PROBE, "api.openai.com", "443"], e.base(AOR_SOCKET=gone))
    check("no fallback address without a daemon", rc != 0 and "getaddrinfo" in out, out + err)
    # QA: AOR_STRICT=false was on (any value but "0" was).
    rc, out, err = run([PROBE, "localhost", str(echo.port)],
                       e.base(AOR_SOCKET=gone, AOR_HOSTS="localhost:%d" % echo.port,
                              AOR_STRICT="false"))
    check("AOR_STRICT=false is off: fail-open", rc == 0 and err.splitlines() == [warn],
          out + err)
    # QA: a relative AOR_SOCKET (aord refuses one) made the shim read ./hosts of the
    # program's working directory; now it is not used at all, and the warning says why.
    with open(os.path.join(e.tmp, "hosts"), "w") as fh:
        fh.write("aor-hosts 1\na 127.0.0.5 443 pub.example.test\n")
    rc, out, err = run([PROBE, "localhost", str(echo.port)],
                       e.base(AOR_SOCKET="aor.sock", AOR_HOSTS="localhost:%d" % echo.port),
                       cwd=e.tmp)
    check("relative AOR_SOCKET: fail-open, said",
          rc == 0 and err.splitlines() == ["aor: AOR_SOCKET=aor.sock is not an absolute path "
                                           "(aord refuses one), connecting directly "
                                           "(fail-open)"], out + err)
    # AOR_DEBUG explains it the same way (QA: "path too long", "File name too long").
    rc, out, err = run([PROBE, "localhost", str(echo.port)],
                       e.base(AOR_SOCKET="aor.sock", AOR_HOSTS="localhost:%d" % echo.port,
                              AOR_DEBUG="1"), cwd=e.tmp)
    check("relative AOR_SOCKET: AOR_DEBUG says why",
          rc == 0 and "daemon socket aor.sock (not an absolute path: fail-open)" in err and
          "too long" not in err, out + err)

    # --- the daemon never routes itself; AOR_DISABLE --------------------------------------
    for name, extra in (("AOR_DISABLE=1", {"AOR_DISABLE": "1"}),
                        ("AOR_DAEMON=1", {"AOR_DAEMON": "1"})):
        n0 = len(e.log_lines())
        rc, out, err = run([PROBE, "api.openai.com", "443"], e.base(**extra))
        check("%s passes through" % name,
              rc != 0 and "getaddrinfo" in out and len(e.log_lines()) == n0, out + err)
    aord = os.path.join(e.tmp, "aord")
    shutil.copy(PROBE, aord)
    rc, out, err = run([aord, "api.openai.com", "443"], env)
    check("a process named aord passes through", rc != 0 and "getaddrinfo" in out, out + err)

    # --- AOR_DEBUG -----------------------------------------------------------------------
    rc, out, err = run([PROBE, "api.openai.com", "443"], e.base(AOR_DEBUG="1"))
    check("AOR_DEBUG explains decisions",
          rc == 0 and "offline fallback" in err and "redirected to" in err
          and all(l.startswith("aor[") for l in err.splitlines()), err)
    # QA: a provider's address on a port aor does not redirect got no line.
    e.publish("aor-hosts 1\na 127.0.0.5 443 pub.example.test\n")
    rc, out, err = run([PROBE, "127.0.0.5", "8080"], e.base(AOR_DEBUG="1"))
    check("AOR_DEBUG explains a provider address on another port",
          "to 127.0.0.5 port 8080 (-, published for pub.example.test): a provider address, "
          "but not on 443 or "
          "an intercepted port: direct" in err, out + err)
    e.unpublish()

    # --- trust variables ---------------------------------------------------------------------
    os.makedirs(os.path.join(e.data, "aor"), exist_ok=True)
    bundle = os.path.join(e.data, "aor", "bundle.pem")
    ca = os.path.join(e.data, "aor", "ca.pem")
    for p in (bundle, ca):
        with open(p, "w") as fh:
            fh.write("-----BEGIN CERTIFICATE-----\n-----END CERTIFICATE-----\n")
    envcmd = shutil.which("env") or "/usr/bin/env"
    rc, out, err = run([envcmd], env)
    vals = dict(l.split("=", 1) for l in out.splitlines() if "=" in l)
    check("trust: bundle variables set",
          all(vals.get(k) == bundle for k in ("SSL_CERT_FILE", "REQUESTS_CA_BUNDLE",
                                               "CURL_CA_BUNDLE")), out)
    check("trust: NODE_EXTRA_CA_CERTS set to ca.pem", vals.get("NODE_EXTRA_CA_CERTS") == ca, out)
    rc, out, err = run([envcmd], e.base(SSL_CERT_FILE="/mine.pem",
                                        NODE_EXTRA_CA_CERTS="/node-mine.pem"))
    vals = dict(l.split("=", 1) for l in out.splitlines() if "=" in l)
    check("trust: the user's own values are left alone",
          vals.get("SSL_CERT_FILE") == "/mine.pem" and vals.get("CURL_CA_BUNDLE") == bundle,
          out)
    # Node's one file is merged (tests/e2e/test_trust.py); one it cannot read gives way
    # to ca.pem, as with `aor run`
    check("trust: an unreadable NODE_EXTRA_CA_CERTS gives way to ca.pem",
          vals.get("NODE_EXTRA_CA_CERTS") == ca, out)
    rc, out, err = run([envcmd], e.base(AOR_NO_TRUST="1"))
    vals = dict(l.split("=", 1) for l in out.splitlines() if "=" in l)
    check("trust: AOR_NO_TRUST=1 sets nothing",
          not any(k in vals for k in ("SSL_CERT_FILE", "REQUESTS_CA_BUNDLE", "CURL_CA_BUNDLE",
                                      "NODE_EXTRA_CA_CERTS")), out)
    os.unlink(bundle)
    os.unlink(ca)

    # --- real clients --------------------------------------------------------------------
    curl = shutil.which("curl")
    if curl:
        for extra in ([], ["--tcp-fastopen"]):
            rc, out, err = run([curl, "-sS", "-m", "10"] + extra +
                               ["http://api.openai.com:443/v1/models"], env)
            check("curl %s through the shim" % (" ".join(extra) or "plain"),
                  rc == 0 and re.match(r"^preamble: AOR/1 api\.openai\.com 198\.1[89]\.\S+ 443$",
                                       out.strip()) is not None, out + err)
    py_sync = ("import socket\n"
               "s = socket.create_connection(('api.openai.com', 443), timeout=5)\n"
               "s.sendall(b'hello\\n'); d = b''\n"
               "while b'hello' not in d:\n"
               "    c = s.recv(100)\n"
               "    if not c: break\n"
               "    d += c\n"
               "print(d.decode().replace('\\n', '|'), s.getpeername()[1])\n")
    rc, out, err = run([sys.executable, "-c", py_sync], env)
    check("python socket.create_connection", rc == 0 and "PRE AOR/1 api.openai.com" in out
          and out.strip().endswith("hello| 443"), out + err)
    py_async = ("import asyncio\n"
                "async def main():\n"
                "    r, w = await asyncio.open_connection('api.openai.com', 443)\n"
                "    w.write(b'hello\\n'); await w.drain()\n"
                "    a = await r.readline(); b = await r.readline()\n"
                "    print(a.decode().strip(), '|', b.decode().strip())\n"
                "    w.close()\n"
                "asyncio.run(main())\n")
    rc, out, err = run([sys.executable, "-c", py_async], env)
    check("python asyncio.open_connection",
          rc == 0 and "PRE AOR/1 api.openai.com" in out and out.strip().endswith("| hello"),
          out + err)
    node = shutil.which("node")
    if node:
        js = ("const net = require('net');\n"
              "const s = net.connect({host: 'api.openai.com', port: 443}, () => s.write('hello\\n'));\n"
              "let d = '';\n"
              "s.on('data', c => { d += c; if (d.includes('hello\\n')) {\n"
              "  console.log(d.replace(/\\n/g, '|'), s.remotePort); s.end(); } });\n"
              "s.on('error', e => { console.log('error', e.message); process.exit(1); });\n")
        rc, out, err = run([node, "-e", js], env)
        check("node net.connect", rc == 0 and "PRE AOR/1 api.openai.com" in out
              and out.strip().endswith("hello| 443"), out + err)


def test_shim_basic(env):
    """Entry for tests/e2e/aortest.py: every check above, in its own temp dir (the
    aortest Env is not used: this test needs no aord, only the fake daemon)."""
    del failures[:]
    rc = main()
    assert rc == 0, "shim checks failed: " + ", ".join(failures)


if __name__ == "__main__":
    sys.exit(main())
