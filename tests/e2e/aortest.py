#!/usr/bin/env python3
"""aortest — the end-to-end test harness of aor (Python 3 standard library only).

Library (imported by tests/e2e/test_*.py):

    import aortest

    def test_three_429_then_ok(env):              # env: a fresh aortest.Env
        mock = env.start_mock(tls=True)            # tests/mockprov, own test CA
        mock.script("sk-a", [{"status": 429, "times": 3}, {"status": 200}])
        port = aortest.free_port()
        env.set_keys(OPENAI_API_KEY="sk-a")
        env.write_config(f'''
            [daemon]
            listen = 127.0.0.1:{port}
            [key "a"]
            env = OPENAI_API_KEY
            [provider "openai"]
            dialect = openai
            base_url = {mock.url}
            ca_file = {mock.ca_path}
            keys = a
            models = gpt-4o
            ''')
        d = env.start_daemon(fake_clock=1800000000)
        status, headers, body = env.curl([d.url + "/v1/chat/completions", "-d", "{...}"],
                                         preload=False)
        aortest.eq(status, 200, "status")
        d.advance(5)
        aortest.check(d.state()["backoff"] == [], "backoff cleared")

Runner:

    python3 tests/e2e/aortest.py tests/e2e/test_x.py [more files] [-k SUBSTRING]

runs every top-level function test_*(env) of each file, in file order, each in
a fresh Env that is cleaned up afterwards (every process it started is
killed).  It prints "PASS name", "SKIP name: reason" or "FAIL name: reason"
(followed by the failing line, the daemons' stderr tail and the mocks'
stderr tail), and finally exactly "N passed, N failed" (", N skipped" added
when a test raised aortest.Skip).  Exit code 0 only when none failed.

A test may set `fn.timeout = SECONDS` (default 120, or $AOR_E2E_TIMEOUT).
Environment: AOR_BUILD (build dir with aord, aor, libaor.so; default
"build", relative to the repository root), AOR_KEEP=1 keeps each test's
temp dir (its path is printed), AOR_UPSTREAM (passed on to aord: "curl"
sends every upstream transfer through libcurl).
"""

import importlib.util
import inspect
import itertools
import json
import os
import re
import shutil
import signal
import socket
import ssl
import stat
import subprocess
import sys
import tempfile
import textwrap
import time
import traceback
import urllib.error
import urllib.request

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
MOCKPROV = os.path.join(REPO, "tests", "mockprov", "mockprov.py")
DEFAULT_TIMEOUT_S = 120
START_TIMEOUT_S = 30  # aord under ASan starts slower than a release build

# Inherited variables that would leak the developer's setup into a test.
_DROP_EXACT = {
    "LD_PRELOAD", "SSL_CERT_FILE", "SSL_CERT_DIR", "NODE_EXTRA_CA_CERTS",
    "REQUESTS_CA_BUNDLE", "CURL_CA_BUNDLE", "HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY",
    "http_proxy", "https_proxy", "all_proxy", "NO_PROXY", "no_proxy",
}  # fmt: skip
# AOR_UPSTREAM passes through so a whole run can exercise aord's libcurl upstream path
# (`AOR_UPSTREAM=curl tests/run-all`); tests that need one path set or drop it themselves.
_DROP_RE = re.compile(r"(_API_KEY(_\d+)?$|_AUTH_TOKEN$|_BASE_URL$|^AOR_(?!BUILD$|UPSTREAM$))")


class Skip(Exception):
    """Raise in a test to skip it: `raise aortest.Skip("needs node")`."""


class TestTimeout(Exception):
    """The test ran longer than its timeout."""


class HarnessError(Exception):
    """The harness could not do what was asked (a process did not start, ...)."""


# --- small helpers -------------------------------------------------------------


def check(cond, msg="check failed"):
    """assert that survives python -O and names what was wrong."""
    if not cond:
        raise AssertionError(msg)


def eq(actual, expected, what="value"):
    """Fails with 'what: expected X, got Y'."""
    if actual != expected:
        raise AssertionError("%s: expected %r, got %r" % (what, expected, actual))


def wait_until(pred, timeout=10.0, interval=0.02, what="condition"):
    """Polls pred() until it returns a true value (returned); fails after timeout s."""
    end = time.monotonic() + timeout
    while True:
        v = pred()
        if v:
            return v
        if time.monotonic() >= end:
            raise AssertionError("timed out after %gs waiting for %s" % (timeout, what))
        time.sleep(interval)


def free_port(host="127.0.0.1"):
    """A TCP port that was free a moment ago (bind to 0, read, close)."""
    fam = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(fam, socket.SOCK_STREAM) as s:
        s.bind((host, 0))
        return s.getsockname()[1]


def build_dir():
    """$AOR_BUILD as an absolute path (relative ones are taken from the repo root)."""
    b = os.environ.get("AOR_BUILD", "build")
    return b if os.path.isabs(b) else os.path.join(REPO, b)


def http(method, url, body=None, headers=None, timeout=30.0, cafile=None):
    """One HTTP(S) request without any proxy: returns (status, headers, body bytes).

    body: bytes, str, or a dict/list sent as JSON (content-type set).  headers:
    dict.  The returned headers dict has lower-case names (repeats joined with
    ", ").  HTTP error statuses are returned, not raised; connection failures
    raise OSError (urllib.error.URLError).
    """
    h = dict(headers or {})
    data = body
    if isinstance(body, (dict, list)):
        data = json.dumps(body).encode()
        h.setdefault("content-type", "application/json")
    elif isinstance(body, str):
        data = body.encode()
    handlers = [urllib.request.ProxyHandler({})]
    if cafile:
        ctx = ssl.create_default_context(cafile=cafile)
        handlers.append(urllib.request.HTTPSHandler(context=ctx))
    opener = urllib.request.build_opener(*handlers)
    req = urllib.request.Request(url, data=data, headers=h, method=method)
    try:
        with opener.open(req, timeout=timeout) as r:
            return r.status, _lc_headers(r.headers.items()), r.read()
    except urllib.error.HTTPError as e:
        with e:
            return e.code, _lc_headers(e.headers.items()), e.read()


def _lc_headers(items):
    out = {}
    for k, v in items:
        k = k.lower()
        out[k] = out[k] + ", " + v if k in out else v
    return out


def _tail(path, lines=40):
    try:
        with open(path, "rb") as f:
            data = f.read()
    except OSError:
        return ""
    return "\n".join(data.decode("utf-8", "replace").splitlines()[-lines:])


def _terminate(proc, grace_s, group=False):
    """SIGTERM, wait grace_s, then SIGKILL; returns the exit code."""
    if proc.poll() is not None:
        return proc.returncode
    try:
        if group:
            os.killpg(proc.pid, signal.SIGTERM)
        else:
            proc.terminate()
    except ProcessLookupError:
        pass
    try:
        return proc.wait(grace_s)
    except subprocess.TimeoutExpired:
        try:
            if group:
                os.killpg(proc.pid, signal.SIGKILL)
            else:
                proc.kill()
        except ProcessLookupError:
            pass
        return proc.wait()


class CurlResult(tuple):
    """(status, headers, body) from Env.curl, plus .rc (curl's exit code), .stderr, .raw.

    status is 0 when curl got no HTTP answer at all.
    """

    def __new__(cls, status, headers, body, rc, stderr, raw):
        self = super().__new__(cls, (status, headers, body))
        self.rc, self.stderr, self.raw = rc, stderr, raw
        return self

    status = property(lambda self: self[0])
    headers = property(lambda self: self[1])
    body = property(lambda self: self[2])

    def json(self):
        return json.loads(self[2])


def parse_curl_headers(text):
    """(status, headers) of the last non-1xx answer in a `curl -D` dump."""
    status, headers = 0, {}
    for block in re.split(r"\r?\n\r?\n", text):
        lines = [ln for ln in block.splitlines() if ln.strip()]
        if not lines or not lines[0].startswith("HTTP/"):
            continue
        parts = lines[0].split()
        code = int(parts[1]) if len(parts) > 1 and parts[1].isdigit() else 0
        if 100 <= code < 200:
            continue
        status, items = code, []
        for ln in lines[1:]:
            if ":" in ln:
                k, v = ln.split(":", 1)
                items.append((k.strip(), v.strip()))
        headers = _lc_headers(items)
    return status, headers


# --- the mock provider ---------------------------------------------------------


class Mock:
    """A running tests/mockprov.  Control goes over its plain-HTTP port.

    .port/.url are the port and base URL providers should use (the TLS ones
    when started with tls=True), .plain_port/.plain_url and .tls_port/.tls_url
    both listeners, .ca_path the test CA (None without TLS).
    """

    def __init__(self, env, n, tls, names, verbose):
        self.env = env
        base = os.path.join(env.tmp, "mock%d" % n)
        port_file = base + ".ports"
        self.stderr_path = base + ".stderr"
        cmd = [sys.executable, MOCKPROV, "--port", "0", "--port-file", port_file,
               "--parent-pid", str(os.getpid())]  # fmt: skip
        if tls:
            cmd += ["--tls-port", "0", "--tls-dir", base + "-tls"]
            for nm in names:
                cmd += ["--name", nm]
        if verbose:
            cmd.append("--verbose")
        with open(self.stderr_path, "wb") as err:
            self.proc = subprocess.Popen(
                cmd, env=env.env, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=err
            )
        end = time.monotonic() + START_TIMEOUT_S
        while not os.path.exists(port_file):
            if self.proc.poll() is not None:
                raise HarnessError(
                    "mockprov exited with %d at start:\n%s"
                    % (self.proc.returncode, _tail(self.stderr_path))
                )
            if time.monotonic() > end:
                self.stop()
                raise HarnessError("mockprov did not start within %ds" % START_TIMEOUT_S)
            time.sleep(0.01)
        with open(port_file) as f:
            ports = [int(x) for x in f.read().split()]
        self.plain_port = ports[0]
        self.plain_url = "http://127.0.0.1:%d" % self.plain_port
        self.tls_port = ports[1] if tls else None
        self.tls_url = "https://127.0.0.1:%d" % self.tls_port if tls else None
        self.ca_path = os.path.join(base + "-tls", "ca.pem") if tls else None
        self.port = self.tls_port if tls else self.plain_port
        self.url = self.tls_url if tls else self.plain_url

    def _control(self, method, path, body=None):
        status, _, data = http(method, self.plain_url + "/_mock/" + path, body, timeout=10)
        obj = json.loads(data) if data else None
        if status != 200:
            raise HarnessError("mockprov %s %s -> %d: %s" % (method, path, status, obj))
        return obj

    def script(self, key, responses, append=False):
        """Queue scripted answers for requests made with `key` (see tests/mockprov/README.md).

        Replaces the key's queue unless append=True.  key "*" applies to any
        key without its own queue; "" to requests without a key.
        """
        req = {"key": key, "responses": responses, "append": append}
        return self._control("POST", "script", req)

    def log(self, since=0):
        """Requests received after seq `since`: dicts with seq, key, method, path,
        model, stream, status, at, headers, ... (tests/mockprov/README.md)."""
        return self._control("GET", "log?since=%d" % since)

    def requests(self, key=None, path=None):
        """log() filtered by key and/or path substring."""
        return [
            r
            for r in self.log()
            if (key is None or r["key"] == key) and (path is None or path in r["path"])
        ]

    def reset(self):
        """Forget all scripts, the log and the gates."""
        self._control("POST", "reset")

    def gate(self, name):
        """Open gate `name`: gated streams waiting on it send the rest of their events."""
        self._control("POST", "gate?name=" + name)

    def stderr_text(self):
        return _tail(self.stderr_path, 200)

    def stop(self):
        return _terminate(self.proc, 3)


# --- the daemon ----------------------------------------------------------------


def _ini_daemon_values(path):
    """{option: value} of the [daemon] section of an aor.ini (comments stripped)."""
    out, in_daemon = {}, False
    try:
        with open(path) as f:
            lines = f.read().splitlines()
    except OSError:
        return out
    for ln in lines:
        s = ln.strip()
        if not s or s[0] in ";#":
            continue
        if s.startswith("["):
            in_daemon = s.split("]")[0].strip("[ ").lower() == "daemon"
            continue
        if in_daemon and "=" in s:
            k, v = s.split("=", 1)
            v = re.split(r"\s[;#]", v, 1)[0]
            out[k.strip().lower()] = v.strip()
    return out


class Daemon:
    """A running aord.  .url is the sidecar/admin base URL (None with listen = off)."""

    def __init__(self, env, proc, port, socket_path, stderr_path):
        self.env, self.proc, self.port = env, proc, port
        self.pid = proc.pid
        self.socket_path = socket_path
        self.stderr_path = stderr_path
        self.url = "http://127.0.0.1:%d" % port if port else None

    def alive(self):
        return self.proc.poll() is None

    def stop(self, timeout=15):
        """SIGTERM and wait; returns the exit code (SIGKILL after timeout s, then fails)."""
        if self.proc.poll() is not None:
            return self.proc.returncode
        self.proc.terminate()
        try:
            return self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
            raise AssertionError("aord did not stop within %gs of SIGTERM" % timeout)

    def kill9(self):
        """SIGKILL, as a crash would; returns after the process is gone."""
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait()

    def stderr_text(self):
        with open(self.stderr_path, "rb") as f:
            return f.read().decode("utf-8", "replace")

    def token(self):
        with open(self.env.token_path) as f:
            return f.read().strip()

    def http(self, method, path, body=None, headers=None, timeout=30.0):
        """A request to the daemon's listen address: (status, headers, body bytes)."""
        if not self.url:
            raise HarnessError("aord has no listen address (listen = off)")
        return http(method, self.url + path, body, headers, timeout)

    def admin(self, method, path, body=None, timeout=30.0):
        """An admin request with the bearer token: (status, headers, body bytes)."""
        return self.http(method, path, body, {"authorization": "Bearer " + self.token()}, timeout)

    def state(self):
        """GET /admin/api/state as JSON (fails the test on a non-200 answer)."""
        status, _, body = self.admin("GET", "/admin/api/state")
        if status != 200:
            raise AssertionError("GET /admin/api/state -> %d: %s" % (status, body[:300]))
        return json.loads(body)

    def advance(self, s):
        """Moves the fake clock (AOR_FAKE_CLOCK) by s seconds."""
        status, _, body = self.admin("POST", "/admin/api/clock/advance?s=%s" % s)
        if status != 200:
            raise AssertionError("clock advance -> %d: %s" % (status, body[:300]))
        return json.loads(body) if body.strip().startswith(b"{") else None

    def healthz(self):
        return self.http("GET", "/healthz", timeout=2)[0]

    def metrics(self):
        status, _, body = self.http("GET", "/metrics")
        if status != 200:
            raise AssertionError("GET /metrics -> %d" % status)
        return body.decode()


# --- the environment of one test -------------------------------------------------


class Env:
    """An isolated world for one test: own XDG dirs and HOME in a temp dir, a
    scrubbed environment for children, and cleanup of everything started."""

    _ids = itertools.count(1)

    def __init__(self, name="e2e", build=None):
        self.name = name
        self.build = build or build_dir()
        # short prefix: the socket path must stay under sun_path's 108 bytes
        self.tmp = tempfile.mkdtemp(prefix="aor-e2e-")
        d = {
            "XDG_CONFIG_HOME": "config",
            "XDG_RUNTIME_DIR": "run",
            "XDG_STATE_HOME": "state",
            "XDG_DATA_HOME": "data",
            "HOME": "home",
        }
        self.env = {
            k: v
            for k, v in os.environ.items()
            if k not in _DROP_EXACT and not _DROP_RE.search(k)
        }
        for var, sub in d.items():
            p = os.path.join(self.tmp, sub)
            os.mkdir(p, 0o700)
            os.chmod(p, 0o700)
            self.env[var] = p
        self.env["AOR_BUILD"] = self.build
        self.config_path = os.path.join(self.env["XDG_CONFIG_HOME"], "aor", "aor.ini")
        self.socket_path = os.path.join(self.env["XDG_RUNTIME_DIR"], "aor", "aor.sock")
        self.token_path = os.path.join(self.env["XDG_STATE_HOME"], "aor", "admin.token")
        self.db_path = os.path.join(self.env["XDG_STATE_HOME"], "aor", "aor.db")
        self.ca_path = os.path.join(self.env["XDG_DATA_HOME"], "aor", "ca.pem")
        self.bundle_path = os.path.join(self.env["XDG_DATA_HOME"], "aor", "bundle.pem")
        self.mocks, self.daemons, self.procs = [], [], []
        self.failed = False
        self._n = itertools.count(1)

    # -- files and variables

    def path(self, *parts):
        """A path inside this test's temp dir."""
        return os.path.join(self.tmp, *parts)

    def set_keys(self, **variables):
        """Sets variables (API keys, ...) in the children's environment."""
        self.env.update({k: str(v) for k, v in variables.items()})

    def write_config(self, text, path=None):
        """Writes $XDG_CONFIG_HOME/aor/aor.ini (dedented); returns its path."""
        path = path or self.config_path
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "w") as f:
            f.write(textwrap.dedent(text).lstrip("\n"))
        return path

    # -- processes

    def start_mock(self, tls=True, names=(), verbose=False):
        """Starts tests/mockprov (plain port, plus a TLS port when tls); returns a Mock."""
        m = Mock(self, next(self._n), tls, names, verbose)
        self.mocks.append(m)
        return m

    def start_daemon(
        self, extra_env=None, fake_clock=None, args=(), wait=True, timeout=START_TIMEOUT_S,
        binary=None,
    ):  # fmt: skip
        """Starts $AOR_BUILD/aord (or binary: a copy of it) with this env; returns a
        Daemon once it is ready.

        Ready = GET /healthz on the configured `listen` answers 200 (skipped
        with listen = off) and the Unix socket exists.  The listen address and
        socket path come from the config file in use (--config in args,
        AOR_CONFIG, else $XDG_CONFIG_HOME/aor/aor.ini).  fake_clock (Unix s)
        sets AOR_FAKE_CLOCK.  stderr goes to a file (Daemon.stderr_text()).
        Raises HarnessError when aord exits or is not ready within timeout s.
        """
        aord = binary or os.path.join(self.build, "aord")
        if not os.access(aord, os.X_OK):
            raise HarnessError("no aord at %s (build it: make BUILD=%s)" % (aord, self.build))
        env = dict(self.env)
        if fake_clock is not None:
            env["AOR_FAKE_CLOCK"] = str(fake_clock)
        env.update({k: str(v) for k, v in (extra_env or {}).items()})
        args = list(args)
        cfg = env.get("AOR_CONFIG") or self.config_path
        if "--config" in args and args.index("--config") + 1 < len(args):
            cfg = args[args.index("--config") + 1]
        opts = _ini_daemon_values(cfg)
        listen = opts.get("listen", "127.0.0.1:8787")
        port = None
        if listen.lower() != "off":
            port = int(listen.rsplit(":", 1)[1])
        sock = env.get("AOR_SOCKET") or os.path.expanduser(opts.get("socket", ""))
        sock = sock or self.socket_path
        stderr_path = self.path("aord%d.stderr" % next(self._n))
        with open(stderr_path, "wb") as err:
            proc = subprocess.Popen(
                [aord] + args, env=env, stdin=subprocess.DEVNULL, stdout=err, stderr=err,
                preexec_fn=_pdeathsig if _single_threaded() else None,
            )  # fmt: skip
        d = Daemon(self, proc, port, sock, stderr_path)
        self.daemons.append(d)
        if not wait:
            return d
        end = time.monotonic() + timeout
        while True:
            if proc.poll() is not None:
                raise HarnessError(
                    "aord exited with %d during start:\n%s" % (proc.returncode, _tail(stderr_path))
                )
            if _is_socket(sock) and (port is None or _healthz_ok(port)):
                return d
            if time.monotonic() > end:
                _terminate(proc, 5)
                raise HarnessError(
                    "aord not ready within %gs (healthz on port %s, socket %s):\n%s"
                    % (timeout, port, sock, _tail(stderr_path))
                )
            time.sleep(0.02)

    def _child_env(self, preload, extra_env):
        env = dict(self.env)
        if preload:
            lib = os.path.join(self.build, "libaor.so")
            if not os.path.exists(lib):
                raise HarnessError("no libaor.so at %s (build it first)" % lib)
            env["LD_PRELOAD"] = lib
        env.update({k: str(v) for k, v in (extra_env or {}).items()})
        return env

    def run_client(self, args, preload=True, input=None, timeout=60, extra_env=None, cwd=None):
        """Runs a command (list, or str for sh -c) with LD_PRELOAD=libaor.so when preload.

        Returns (rc, stdout, stderr) as text.  The command runs in its own
        process group, killed as a whole on timeout (then the test fails).
        """
        if isinstance(args, str):
            args = ["sh", "-c", args]
        env = self._child_env(preload, extra_env)
        proc = subprocess.Popen(
            args, env=env, cwd=cwd, start_new_session=True,
            stdin=subprocess.PIPE if input is not None else subprocess.DEVNULL,
            stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        )  # fmt: skip
        self.procs.append(proc)
        try:
            data = input.encode() if isinstance(input, str) else input
            out, err = proc.communicate(data, timeout)
        except subprocess.TimeoutExpired:
            _terminate(proc, 2, group=True)
            raise AssertionError("client %s did not finish within %gs" % (args[:3], timeout))
        finally:
            if proc.poll() is not None:
                self.procs.remove(proc)
        return proc.returncode, out.decode("utf-8", "replace"), err.decode("utf-8", "replace")

    def spawn(
        self, args, preload=True, extra_env=None, cwd=None,
        stdout=subprocess.PIPE, stderr=subprocess.PIPE,
    ):  # fmt: skip
        """Starts a background client (same env rules as run_client); returns the
        Popen, killed with its process group at cleanup."""
        if isinstance(args, str):
            args = ["sh", "-c", args]
        proc = subprocess.Popen(
            args, env=self._child_env(preload, extra_env), cwd=cwd, start_new_session=True,
            stdin=subprocess.DEVNULL, stdout=stdout, stderr=stderr,
        )  # fmt: skip
        self.procs.append(proc)
        return proc

    def curl(self, args, preload=True, timeout=60, extra_env=None):
        """Runs `curl -sS -D <file> -o <file> ARGS`; returns CurlResult (status,
        headers with lower-case names, body text), plus .rc/.stderr/.raw."""
        n = next(self._n)
        hfile, bfile = self.path("curl%d.headers" % n), self.path("curl%d.body" % n)
        cmd = ["curl", "-sS", "--max-time", str(timeout), "-D", hfile, "-o", bfile] + list(args)
        rc, _, err = self.run_client(cmd, preload, timeout=timeout + 10, extra_env=extra_env)
        try:
            with open(hfile, "rb") as f:
                status, headers = parse_curl_headers(f.read().decode("latin-1"))
        except FileNotFoundError:
            status, headers = 0, {}
        try:
            with open(bfile, "rb") as f:
                raw = f.read()
        except FileNotFoundError:
            raw = b""
        return CurlResult(status, headers, raw.decode("utf-8", "replace"), rc, err, raw)

    # -- teardown

    def report(self):
        """Text for a failure: the stderr tails of the daemons and mocks."""
        out = []
        for i, d in enumerate(self.daemons):
            how = "running" if d.alive() else "exit %s" % d.proc.returncode
            out.append("--- aord #%d stderr (pid %d, %s) ---" % (i + 1, d.pid, how))
            out.append(_tail(d.stderr_path, 40) or "(empty)")
        for i, m in enumerate(self.mocks):
            t = _tail(m.stderr_path, 15)
            if t:
                out.append("--- mockprov #%d stderr ---" % (i + 1))
                out.append(t)
        return "\n".join(out)

    def cleanup(self):
        """Stops every process this Env started and removes the temp dir (kept with AOR_KEEP=1)."""
        for p in self.procs:
            _terminate(p, 2, group=True)
        for d in self.daemons:
            _terminate(d.proc, 10)
        for m in self.mocks:
            m.stop()
        self.procs, self.daemons, self.mocks = [], [], []
        if os.environ.get("AOR_KEEP") == "1":
            return
        shutil.rmtree(self.tmp, ignore_errors=True)


def _is_socket(path):
    try:
        return stat.S_ISSOCK(os.stat(path).st_mode)
    except OSError:
        return False


def _healthz_ok(port):
    try:
        return http("GET", "http://127.0.0.1:%d/healthz" % port, timeout=1)[0] == 200
    except (OSError, ValueError):
        return False


def _single_threaded():
    import threading

    return threading.active_count() == 1


try:
    import ctypes

    _PRCTL = ctypes.CDLL(None, use_errno=True).prctl
except (ImportError, OSError, AttributeError):
    _PRCTL = None


def _pdeathsig():
    """Child side (after fork): get SIGTERM when the harness dies, so no aord
    outlives a run.  Only used while the harness is single-threaded."""
    if _PRCTL is not None:
        _PRCTL(1, int(signal.SIGTERM))  # PR_SET_PDEATHSIG


# --- runner ----------------------------------------------------------------------


def _load(path):
    name = os.path.splitext(os.path.basename(path))[0]
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod
    spec.loader.exec_module(mod)
    return mod


def _where(exc, path):
    """'file:line: code' of the deepest frame in the test file."""
    best = None
    for fr in traceback.extract_tb(exc.__traceback__):
        if os.path.abspath(fr.filename) == os.path.abspath(path):
            best = fr
    if best is None:
        return ""
    return "%s:%d: %s" % (os.path.relpath(best.filename), best.lineno, best.line)


def _on_alarm(signum, frame):
    raise TestTimeout("test timed out")


def _on_term(signum, frame):
    raise KeyboardInterrupt("terminated")


def run_tests(paths, pattern=None, out=sys.stdout):
    """Runs the test_* functions of the given files; returns (passed, failed, skipped)."""
    passed = failed = skipped = 0

    def say(line):
        out.write(line + "\n")
        out.flush()

    default_timeout = int(os.environ.get("AOR_E2E_TIMEOUT", DEFAULT_TIMEOUT_S))
    for path in paths:
        try:
            mod = _load(path)
        except Exception as e:
            failed += 1
            say("FAIL %s: cannot load: %s: %s" % (os.path.basename(path), type(e).__name__, e))
            traceback.print_exc(file=out)
            continue
        tests = [
            (n, f)
            for n, f in vars(mod).items()
            if n.startswith("test_") and inspect.isfunction(f) and f.__module__ == mod.__name__
        ]
        for fname, fn in tests:
            name = "%s.%s" % (mod.__name__, fname)
            if pattern and pattern not in name:
                continue
            env = None
            try:
                signal.alarm(int(getattr(fn, "timeout", default_timeout)))
                env = Env(name)
                fn(env)
                signal.alarm(0)
                passed += 1
                say("PASS %s" % name)
            except Skip as e:
                signal.alarm(0)
                skipped += 1
                say("SKIP %s: %s" % (name, e))
            except KeyboardInterrupt:
                signal.alarm(0)
                if env:
                    env.cleanup()
                raise
            except BaseException as e:
                signal.alarm(0)
                failed += 1
                msg = str(e).splitlines() or [""]
                say("FAIL %s: %s: %s" % (name, type(e).__name__, msg[0]))
                detail = msg[1:]
                w = _where(e, path)
                if w:
                    detail.insert(0, "at " + w)
                if not isinstance(e, (AssertionError, TestTimeout, HarnessError)):
                    detail.append("".join(traceback.format_exception(e)).rstrip())
                if env:
                    env.failed = True
                    detail.append(env.report())
                    if os.environ.get("AOR_KEEP") == "1":
                        detail.append("(temp dir kept: %s)" % env.tmp)
                for ln in "\n".join(d for d in detail if d).splitlines():
                    say("    " + ln)
            finally:
                signal.alarm(0)
                if env:
                    env.cleanup()
    return passed, failed, skipped


def summary(passed, failed, skipped):
    """The runner's last line: 'N passed, N failed' (+ ', N skipped' when any)."""
    s = "%d passed, %d failed" % (passed, failed)
    return s + (", %d skipped" % skipped if skipped else "")


def main(argv):
    # Test files `import aortest`: make that this very module, not a second copy.
    sys.modules.setdefault("aortest", sys.modules[__name__])
    pattern, paths = None, []
    it = iter(argv)
    for a in it:
        if a == "-k":
            pattern = next(it, None)
        elif a in ("-h", "--help"):
            print(__doc__)
            return 0
        else:
            paths.append(a)
    if not paths:
        sys.stderr.write("usage: aortest.py tests/e2e/test_x.py [...] [-k SUBSTRING]\n")
        return 2
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    signal.signal(signal.SIGALRM, _on_alarm)
    signal.signal(signal.SIGTERM, _on_term)
    try:
        p, f, s = run_tests(paths, pattern)
    except KeyboardInterrupt:
        print("interrupted")
        return 130
    print(summary(p, f, s))
    return 0 if f == 0 else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
