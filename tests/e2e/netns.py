"""A private network namespace with its own DNS server, for e2e tests that need
names to resolve (tests/e2e/test_shim_clients.py).  Root only; stdlib + ctypes.

    with netns.NetNS(env, {"api.openai.com": ["192.0.2.1", "2001:db8::1"]}) as ns:
        mock = env.start_mock(tls=True)     # started inside the namespace
        d = env.start_daemon()              # resolves api.openai.com through ns's dnsmasq
        ...

While the `with` block runs, the test process itself is inside the namespace:
`ip netns add NAME` creates it, the process joins it with setns(2), and a
private mount namespace (unshare(2)) bind-mounts a resolv.conf naming
127.0.0.1 over /etc/resolv.conf (what `ip netns exec` does with
/etc/netns/NAME/resolv.conf, without touching /etc).  Every process the test
starts in the block (mock, aord, clients, via aortest.Env) inherits both, so
the harness's own HTTP calls to 127.0.0.1 reach the mock and aord there.
dnsmasq (Debian dnsmasq-base) answers the given names with the given A/AAAA
records and nothing else.  Only `lo` is up: the TEST-NET addresses in the
records are never reachable, which is the point (the shim redirects them before
a packet would leave).

On exit (also on failure or timeout) dnsmasq is stopped, the process goes back
to its original network and mount namespaces (and working directory, which
setns(2) of a mount namespace resets) and the named namespace is
deleted.  Processes aortest.Env started inside stay in the (now unnamed)
namespace until Env.cleanup kills them.
"""

import ctypes
import itertools
import os
import shutil
import socket
import subprocess
import time

import aortest

DNSMASQ = "/usr/sbin/dnsmasq"
CLONE_NEWNS = 0x00020000
CLONE_NEWNET = 0x40000000

_libc = ctypes.CDLL(None, use_errno=True)
_ids = itertools.count(1)
_PATH = os.environ.get("PATH", "") + ":/usr/sbin:/usr/bin:/sbin:/bin"


def unavailable():
    """None when NetNS can work here, else the reason (for aortest.Skip)."""
    if os.geteuid() != 0:
        return "needs root (network namespaces)"
    for tool in ("ip", "mount"):
        if not shutil.which(tool, path=_PATH):
            return "needs the %s command" % tool
    if not os.access(DNSMASQ, os.X_OK):
        return "needs %s (Debian dnsmasq-base, scripts/install-deps)" % DNSMASQ
    return None


def _run(args, timeout=10):
    args = [shutil.which(args[0], path=_PATH) or args[0]] + list(args[1:])
    p = subprocess.run(args, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                       stderr=subprocess.STDOUT, timeout=timeout)  # fmt: skip
    if p.returncode != 0:
        raise aortest.HarnessError("%s -> exit %d: %s" % (
            " ".join(args), p.returncode, p.stdout.decode("utf-8", "replace").strip()))
    return p.stdout.decode("utf-8", "replace")


def _setns(fd, nstype):
    if _libc.setns(fd, nstype) != 0:
        e = ctypes.get_errno()
        raise OSError(e, "setns: " + os.strerror(e))


def _unshare(flags):
    if _libc.unshare(flags) != 0:
        e = ctypes.get_errno()
        raise OSError(e, "unshare: " + os.strerror(e))


class NetNS:
    """Context manager: a named network namespace with lo up and dnsmasq on
    127.0.0.1:53 answering `records` ({name: [ip, ...]}, IPv4 and IPv6 mixed).

    .name is the namespace name (unique per process and use), .dns_log the
    dnsmasq query log (in the test's temp dir; AOR_KEEP=1 keeps it).
    """

    def __init__(self, env, records):
        self.env = env
        self.records = {k: list(v) for k, v in records.items()}
        self.name = "aor-%d-%d" % (os.getpid(), next(_ids))
        self.dns_log = env.path("%s.dnsmasq.log" % self.name)
        self.resolv = env.path("%s.resolv.conf" % self.name)
        self._old_net = self._old_mnt = self._old_cwd = None
        self._added = self._entered = False
        self._dnsmasq = None

    # -- enter

    def __enter__(self):
        why = unavailable()
        if why:
            raise aortest.Skip(why)
        try:
            self._enter()
        except BaseException:
            self._leave()  # its own errors would hide the first one
            raise
        return self

    def _enter(self):
        _run(["ip", "netns", "add", self.name])
        self._added = True
        with open(self.resolv, "w") as f:
            f.write("nameserver 127.0.0.1\noptions timeout:2 attempts:1\n")
        self._old_net = os.open("/proc/self/ns/net", os.O_RDONLY | os.O_CLOEXEC)
        self._old_mnt = os.open("/proc/self/ns/mnt", os.O_RDONLY | os.O_CLOEXEC)
        # setns() into a mount namespace moves the cwd to its root: keep the way back.
        self._old_cwd = os.open(".", os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        # Own mount namespace first (children inherit it): the bind mount below
        # must not be seen by the rest of the machine.
        _unshare(CLONE_NEWNS)
        self._entered = True
        _run(["mount", "--make-rslave", "/"])
        _run(["mount", "--bind", self.resolv, "/etc/resolv.conf"])
        fd = os.open("/run/netns/" + self.name, os.O_RDONLY | os.O_CLOEXEC)
        try:
            _setns(fd, CLONE_NEWNET)
        finally:
            os.close(fd)
        _run(["ip", "link", "set", "lo", "up"])
        self._start_dnsmasq()

    def _start_dnsmasq(self):
        args = [DNSMASQ, "--keep-in-foreground", "--conf-file=/dev/null", "--no-resolv",
                "--no-hosts", "--no-poll", "--bind-interfaces", "--listen-address=127.0.0.1",
                "--port=53", "--user=root", "--pid-file=", "--log-queries",
                "--log-facility=" + self.dns_log, "--local-ttl=1"]  # fmt: skip
        for host, ips in self.records.items():
            args.append("--host-record=%s,%s" % (host, ",".join(ips)))
        self._dnsmasq = subprocess.Popen(
            args, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
            preexec_fn=aortest._pdeathsig if aortest._single_threaded() else None,
        )  # fmt: skip
        # Ready when it answers a query for the first record over UDP.
        host = next(iter(self.records))
        end = time.monotonic() + 10
        while True:
            if self._dnsmasq.poll() is not None:
                err = self._dnsmasq.stderr.read().decode("utf-8", "replace")
                raise aortest.HarnessError("dnsmasq exited with %d: %s"
                                           % (self._dnsmasq.returncode, err.strip()))  # fmt: skip
            if _dns_answers(host):
                return
            if time.monotonic() > end:
                raise aortest.HarnessError("dnsmasq not answering on 127.0.0.1:53 within 10 s")
            time.sleep(0.05)

    # -- leave

    def __exit__(self, exc_type, exc, tb):
        errors = self._leave()
        if errors and exc_type is None:
            raise aortest.HarnessError("leaving namespace %s: %s" % (self.name, "; ".join(errors)))
        return False

    def _leave(self):
        """Undoes what _enter did (any part of it); returns a list of errors."""
        errors = []
        if self._dnsmasq is not None:
            aortest._terminate(self._dnsmasq, 3)
            self._dnsmasq.stderr.close()
            self._dnsmasq = None
        for fd, nstype in ((self._old_net, CLONE_NEWNET), (self._old_mnt, CLONE_NEWNS)):
            if fd is None:
                continue
            if self._entered:
                try:
                    _setns(fd, nstype)
                except OSError as e:
                    errors.append(str(e))
            os.close(fd)
        self._old_net = self._old_mnt = None
        if self._old_cwd is not None:
            try:
                os.fchdir(self._old_cwd)
            except OSError as e:
                errors.append("fchdir back: %s" % e)
            os.close(self._old_cwd)
            self._old_cwd = None
        self._entered = False
        if self._added:
            # In the original mount namespace again, so the name is really gone.
            ip = shutil.which("ip", path=_PATH) or "ip"
            p = subprocess.run([ip, "netns", "del", self.name], stdin=subprocess.DEVNULL,
                               capture_output=True, timeout=10)  # fmt: skip
            if p.returncode != 0:
                errors.append("ip netns del %s: %s" % (self.name, p.stderr.decode().strip()))
            self._added = False
        return errors


def _dns_answers(host, server="127.0.0.1"):
    """True when server:53 answers an A query for host (one UDP packet, 0.3 s)."""
    qid = 0x4A4F
    q = b"".join(bytes([len(p)]) + p.encode() for p in host.split(".")) + b"\0"
    # header: id, flags RD, 1 question; question: name, type A, class IN
    pkt = qid.to_bytes(2, "big") + bytes([1, 0, 0, 1, 0, 0, 0, 0, 0, 0]) + q + bytes([0, 1, 0, 1])
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.settimeout(0.3)
        try:
            s.sendto(pkt, (server, 53))
            data = s.recv(512)
        except OSError:
            return False
    return len(data) >= 12 and data[:2] == pkt[:2] and int.from_bytes(data[6:8], "big") > 0
