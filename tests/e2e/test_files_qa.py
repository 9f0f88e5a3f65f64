"""aord and the files around its socket (spec §7), pass-through half-close (spec §2) and
connections closed right after a valid preamble (QA findings):

* only a stale socket is ever replaced at the socket path; a `hosts` file that is not
  aord's address set is neither overwritten nor removed; a directory aord did not create
  (other than its default runtime directory) is never chmod'ed;
* a socket directory owned by another uid, or writable by group/others, is refused;
* pass-through passes a half-close on (both ways) instead of dropping the connection;
* a client that closes after a valid preamble without sending a byte is not a bad
  preamble."""
import os
import signal
import socket
import stat
import threading
import time

import aortest
from aortest import check, eq


def minimal_config(env, listen="off"):
    env.write_config(
        """
        [daemon]
        listen = %s
        """
        % listen
    )


def refused_start(env, sock, what):
    """Starts aord on socket path sock, expects it to exit non-zero; returns its stderr."""
    minimal_config(env)
    d = env.start_daemon(extra_env={"AOR_SOCKET": sock}, wait=False)
    try:
        rc = d.proc.wait(timeout=30)
    except Exception:
        d.stop()
        raise AssertionError("aord started although %s" % what)
    text = d.stderr_text()
    check(rc != 0, "aord exit code %d for %s: %s" % (rc, what, text[-1500:]))
    return text


def mode(path):
    """Permission bits of path as an octal text ("0755"), for readable failures."""
    return "%04o" % stat.S_IMODE(os.stat(path).st_mode)


# --- finding 1: aord only touches what is its own ----------------------------------


def test_socket_path_that_is_a_file_is_refused(env):
    v = env.path("v")
    os.mkdir(v, 0o755)
    notes = os.path.join(v, "notes.txt")
    with open(notes, "w") as f:
        f.write("important\n")
    err = refused_start(env, notes, "the socket path is a regular file")
    check("%s: the path exists and is not a socket" % notes in err, "error names the path: " + err)
    with open(notes) as f:
        eq(f.read(), "important\n", "notes.txt content")
    eq(mode(v), "0755", "mode of the directory")


def test_foreign_hosts_file_is_kept(env):
    v2 = env.path("v2")
    os.mkdir(v2)
    os.chmod(v2, 0o755)
    hosts = os.path.join(v2, "hosts")
    with open(hosts, "w") as f:
        f.write("127.0.0.1 myhost\n")
    err = refused_start(env, os.path.join(v2, "aor.sock"), "a foreign hosts file is there")
    check("%s exists and is not aord's published address set" % hosts in err,
          "error names the file: " + err)  # fmt: skip
    with open(hosts) as f:
        eq(f.read(), "127.0.0.1 myhost\n", "hosts content")
    eq(mode(v2), "0755", "mode of the directory")
    check(not os.path.exists(os.path.join(v2, "aor.sock")), "no socket left behind")


def test_own_directory_is_not_chmodded(env):
    """A directory of the user's own (like $HOME), 0755: used as is, not made 0700; the
    address set aord wrote there is its own, replaced on the next start and, on SIGTERM,
    cut down to its host lines."""
    mine = env.path("mine")
    os.mkdir(mine)
    os.chmod(mine, 0o755)
    sock = os.path.join(mine, "aor.sock")
    minimal_config(env)
    for _ in range(2):
        d = env.start_daemon(extra_env={"AOR_SOCKET": sock})
        eq(mode(mine), "0755", "mode of the user's directory")
        eq(mode(sock), "0600", "socket mode")
        hosts = os.path.join(mine, "hosts")
        aortest.wait_until(lambda: os.path.exists(hosts), 10, what="the address set is published")
        with open(hosts) as f:
            check(f.read().startswith("aor-hosts 1\n"), "aord's address set")
        eq(d.stop(), 0, "aord exit code on SIGTERM")
        check(not os.path.exists(sock), "socket removed on SIGTERM")
        with open(hosts) as f:
            text = f.read()
        check(text.startswith("aor-hosts 1\nh ") and "\na " not in text,
              "the address set keeps its host lines, not its addresses: %r" % text)
        eq(mode(mine), "0755", "mode of the user's directory after SIGTERM")


def test_world_writable_sticky_directory_is_refused(env):
    s = env.path("s")
    os.mkdir(s)
    os.chmod(s, 0o1777)
    err = refused_start(env, os.path.join(s, "aor.sock"), "the directory is 1777")
    check("socket directory %s: writable by group or others (mode 1777)" % s in err,
          "error names the directory and its mode: " + err)  # fmt: skip
    eq(mode(s), "1777", "mode of the directory")


def test_created_and_default_directories_are_0700(env):
    """A directory aord creates is 0700; the default runtime directory, when it exists
    and is ours, is tightened to 0700 as before."""
    sock = env.path("new", "sub", "aor.sock")
    minimal_config(env)
    d = env.start_daemon(extra_env={"AOR_SOCKET": sock})
    eq(mode(env.path("new", "sub")), "0700", "mode of the created directory")
    d.stop()
    default_dir = os.path.dirname(env.socket_path)
    os.mkdir(default_dir)
    os.chmod(default_dir, 0o755)
    d = env.start_daemon()
    eq(mode(default_dir), "0700", "mode of the default runtime directory")
    d.stop()


# --- finding 2: a directory others can write to is refused ----------------------------


def test_group_writable_directory_is_refused(env):
    g = env.path("g")
    os.mkdir(g)
    os.chmod(g, 0o770)
    err = refused_start(env, os.path.join(g, "aor.sock"), "the directory is 0770")
    check("socket directory %s: writable by group or others (mode 0770)" % g in err,
          "error names the directory: " + err)  # fmt: skip
    eq(mode(g), "0770", "mode of the directory")


def test_directory_of_another_uid_is_refused(env):
    if os.getuid() != 0:
        raise aortest.Skip("needs root to chown a directory to another uid")
    f = env.path("f")
    os.mkdir(f)
    os.chown(f, 65534, 65534)
    os.chmod(f, 0o777)
    err = refused_start(env, os.path.join(f, "aor.sock"), "the directory belongs to uid 65534")
    check("socket directory %s: owned by uid 65534, not by you" % f in err,
          "error names the directory and owner: " + err)  # fmt: skip
    eq(mode(f), "0777", "mode of the directory")
    check(not os.path.exists(os.path.join(f, "aor.sock")), "no socket there")
    # The default runtime directory pre-created by someone else: refused as well.
    default_dir = os.path.dirname(env.socket_path)
    os.mkdir(default_dir, 0o700)
    os.chown(default_dir, 65534, 65534)
    minimal_config(env)
    d = env.start_daemon(wait=False)
    rc = d.proc.wait(timeout=30)
    check(rc != 0, "aord refused a default directory of uid 65534")
    check("owned by uid 65534" in d.stderr_text(), "error: " + d.stderr_text()[-1000:])


# --- finding 3: pass-through half-close -------------------------------------------------


class HalfCloseServer:
    """One-connection TCP server on 127.0.0.1 run by fn(conn) in a thread."""

    def __init__(self, fn):
        self.srv = socket.socket()
        self.srv.bind(("127.0.0.1", 0))
        self.srv.listen(4)
        self.port = self.srv.getsockname()[1]
        self.result = {}
        self.t = threading.Thread(target=self._run, args=(fn,), daemon=True)
        self.t.start()

    def _run(self, fn):
        self.srv.settimeout(30)
        try:
            c, _ = self.srv.accept()
            c.settimeout(20)
            fn(c, self.result)
            c.close()
        except Exception as e:  # reported by the test
            self.result["error"] = repr(e)

    def join(self):
        self.t.join(30)
        self.srv.close()
        return self.result


def read_to_eof(s):
    data = b""
    while True:
        b = s.recv(65536)
        if not b:
            return data
        data += b


CLIENT = r"""
import socket, sys
port = int(sys.argv[1])
fam, typ, proto, _, addr = socket.getaddrinfo("localhost", port, socket.AF_INET,
                                              socket.SOCK_STREAM)[0]
s = socket.socket(fam, typ, proto)
s.settimeout(20)
s.connect(addr)
s.sendall(b"GET / HTTP/1.0\r\nHost: x\r\n\r\n")
if sys.argv[2] == "client-first":
    s.shutdown(socket.SHUT_WR)
    data = b""
    while True:
        b = s.recv(65536)
        if not b:
            break
        data += b
    sys.stdout.write(repr(data))
else:
    data = b""
    while True:
        b = s.recv(65536)
        if not b:
            break
        data += b
    s.sendall(b"more after your end")
    s.shutdown(socket.SHUT_WR)
    s.recv(1)
    sys.stdout.write(repr(data))
"""


def passthru_setup(env):
    minimal_config(env)
    return env.start_daemon(extra_env={"AOR_DEBUG": "1"})


def run_half_close_client(env, port, mode_):
    return env.run_client(["python3", "-c", CLIENT, str(port), mode_], timeout=40,
                          extra_env={"AOR_HOSTS": "localhost:%d" % port,
                                     "AOR_DEBUG": "1"})  # fmt: skip


def test_passthru_client_half_close(env):
    """The client sends its request and shuts down its sending side; the server answers
    only once it has seen that end (so the half-close must reach it), and the client
    reads the answer to the end."""
    d = passthru_setup(env)

    def serve(c, res):
        res["got"] = read_to_eof(c)
        c.sendall(b"HTTP/1.0 200 OK\r\nContent-Length: 5\r\n\r\nhello")

    srv = HalfCloseServer(serve)
    rc, out, err = run_half_close_client(env, srv.port, "client-first")
    res = srv.join()
    eq(res.get("error"), None, "server error")
    eq(res.get("got"), b"GET / HTTP/1.0\r\nHost: x\r\n\r\n", "what the server received")
    eq(rc, 0, "client exit (stderr %s)" % err[-1500:])
    eq(out, repr(b"HTTP/1.0 200 OK\r\nContent-Length: 5\r\n\r\nhello"), "what the client read")
    check("passing through to 127.0.0.1:%d" % srv.port in d.stderr_text(),
          "went through aord's pass-through: " + d.stderr_text()[-1500:])  # fmt: skip


def test_passthru_server_half_close(env):
    """The mirror case: the server answers and shuts down its sending side first, then
    still reads what the client sends after that, to the client's end."""
    d = passthru_setup(env)

    def serve(c, res):
        head = b""
        while b"\r\n\r\n" not in head:
            b = c.recv(65536)
            if not b:
                break
            head += b
        c.sendall(b"HTTP/1.0 200 OK\r\n\r\nbye")
        c.shutdown(socket.SHUT_WR)
        res["got"] = head + read_to_eof(c)

    srv = HalfCloseServer(serve)
    rc, out, err = run_half_close_client(env, srv.port, "server-first")
    res = srv.join()
    eq(res.get("error"), None, "server error")
    eq(rc, 0, "client exit (stderr %s)" % err[-1500:])
    eq(out, repr(b"HTTP/1.0 200 OK\r\n\r\nbye"), "what the client read")
    eq(res.get("got"), b"GET / HTTP/1.0\r\nHost: x\r\n\r\nmore after your end",
       "what the server received after its own end")  # fmt: skip
    check("passing through to 127.0.0.1:%d" % srv.port in d.stderr_text(),
          "went through aord's pass-through: " + d.stderr_text()[-1500:])  # fmt: skip


# --- finding 4: a close right after a valid preamble is not a bad preamble -------------


def bad_preambles(d):
    for line in d.metrics().splitlines():
        if line.startswith("aor_bad_preambles_total "):
            return int(float(line.split()[1]))
    raise AssertionError("no aor_bad_preambles_total in the metrics")


def test_close_after_valid_preamble_is_not_bad(env):
    minimal_config(env, listen="127.0.0.1:%d" % aortest.free_port())
    d = env.start_daemon(extra_env={"AOR_DEBUG": "1"})
    # Raw: a valid preamble, then the client closes without a byte of its own.
    s = socket.socket(socket.AF_UNIX)
    s.connect(env.socket_path)
    s.sendall(b"AOR/1 api.openai.com 198.18.0.7 443\n")
    s.close()
    aortest.wait_until(lambda: "closed by the client" in d.stderr_text(), 10,
                       what="aord saw the close")  # fmt: skip
    # Through the shim, as a port probe does (offline fallback address for the name).
    rc, out, err = env.run_client(["python3", "-c", "import socket;"
                                   "socket.create_connection(('api.openai.com', 443)).close()"],
                                  timeout=30, extra_env={"AOR_DEBUG": "1"})  # fmt: skip
    eq(rc, 0, "probe client exit (%s)" % err[-1000:])
    check("redirected" in err, "the shim redirected the probe: " + err[-1000:])
    aortest.wait_until(lambda: d.stderr_text().count("closed by the client") >= 2, 10,
                       what="aord saw the probe's close")  # fmt: skip
    text = d.stderr_text()
    check("warn" not in "\n".join(l for l in text.splitlines() if "closed by the client" in l),
          "no warning for a close after a valid preamble: " + text[-1500:])  # fmt: skip
    eq(bad_preambles(d), 0, "aor_bad_preambles_total")
    # An incomplete preamble is still a bad one.
    s = socket.socket(socket.AF_UNIX)
    s.connect(env.socket_path)
    s.sendall(b"AOR/1 api.open")
    s.close()
    aortest.wait_until(lambda: bad_preambles(d) == 1, 10, what="the cut preamble is counted")
    check("closed by the client before the preamble was complete" in d.stderr_text(),
          "logged: " + d.stderr_text()[-1000:])  # fmt: skip


def test_preamble_timeout_is_a_deadline(env):
    """QA: the 10 s preamble timeout was restarted by every byte, so a shim connection
    sending a byte every few seconds stayed in the preamble stage for ever (each wake-up
    re-peeking what it had). It is a deadline from the accept."""
    minimal_config(env, listen="127.0.0.1:%d" % aortest.free_port())
    d = env.start_daemon()
    s = socket.socket(socket.AF_UNIX)
    s.connect(env.socket_path)
    s.settimeout(0.5)
    start = time.monotonic()
    closed_at = None
    for b in b"AOR/1 api.openai.com":  # never the newline
        try:
            s.sendall(bytes([b]))
            if s.recv(1) == b"":
                closed_at = time.monotonic() - start
                break
        except socket.timeout:
            pass
        except OSError:
            closed_at = time.monotonic() - start
            break
        if time.monotonic() - start > 16:
            break
        time.sleep(1.5)
    s.close()
    check(closed_at is not None and closed_at < 14,
          "aord closed the trickling preamble by its 10 s deadline (closed at %r s)"
          % closed_at)  # fmt: skip
    aortest.wait_until(lambda: "no complete preamble" in d.stderr_text(), 5,
                       what="the timeout is logged")  # fmt: skip
    eq(bad_preambles(d), 1, "aor_bad_preambles_total")


def test_sigterm_as_soon_as_the_socket_exists(env):
    """A SIGTERM sent the moment the socket appears (a supervisor, a script that waits for
    it) stops aord cleanly: exit 0 and the socket removed, not killed by the signal's
    default action because its handler came after the sockets."""
    minimal_config(env)
    sock = env.socket_path
    for i in range(8):
        d = env.start_daemon(wait=False)
        end = time.monotonic() + 30
        while not os.path.exists(sock) and d.proc.poll() is None and time.monotonic() < end:
            pass  # no sleep: the signal goes as early as a watcher could send it
        check(os.path.exists(sock), "start %d: the socket appears" % i)
        os.kill(d.proc.pid, signal.SIGTERM)
        eq(d.stop(), 0, "start %d: aord's exit code on a SIGTERM right at start" % i)
        check(not os.path.exists(sock), "start %d: socket removed" % i)


def test_log_file_is_0600_under_any_umask(env):
    """QA: under umask 000 aord.log was created 0666 (the other state files were 0600)."""
    minimal_config(env)
    old = os.umask(0)
    try:
        d = env.start_daemon()
    finally:
        os.umask(old)
    log = os.path.join(env.env["XDG_STATE_HOME"], "aor", "aord.log")
    aortest.wait_until(lambda: os.path.exists(log), 10, what="the log file")
    eq(mode(log), "0600", "mode of aord.log")
    eq(d.stop(), 0, "aord exit code on SIGTERM")


def test_sighup_reopens_a_rotated_log(env):
    """QA: the log was opened once; after logrotate's rename and a SIGHUP aord kept
    writing into the renamed file and no new aord.log appeared."""
    minimal_config(env)
    d = env.start_daemon()
    log = os.path.join(env.env["XDG_STATE_HOME"], "aor", "aord.log")
    aortest.wait_until(lambda: os.path.exists(log), 10, what="the log file")
    os.rename(log, log + ".1")
    d.proc.send_signal(signal.SIGHUP)
    aortest.wait_until(lambda: os.path.exists(log) and "config reloaded" in open(log).read(), 10,
                       what="a new aord.log with the reload line")
    eq(mode(log), "0600", "mode of the new aord.log")
    check("config reloaded" not in open(log + ".1").read(), "the rotated file got no more lines")
    eq(d.stop(), 0, "aord exit code on SIGTERM")


# --- the places aord refuses, refused or reported before it starts (QA) ------------------


def run_bin(env, name, args, extra_env=None, cwd=None):
    """Runs build/<name> (aor or aord) to its end with this env; (rc, stdout, stderr)."""
    return env.run_client([os.path.join(env.build, name)] + list(args), preload=False,
                          extra_env=extra_env, cwd=cwd, timeout=30)


def test_relative_socket_path_is_refused(env):
    """QA: AOR_SOCKET=relative.sock made aord create the socket and the hosts file in its
    own working directory, where no shim started in another directory finds them. A
    relative socket path (AOR_SOCKET, or a `socket =` left relative) is a configuration
    error for aord (exit 2, before it creates anything) and for aor."""
    minimal_config(env)
    work = env.path("work")
    os.mkdir(work, 0o700)
    rc, out, err = run_bin(env, "aord", [], extra_env={"AOR_SOCKET": "relative.sock"}, cwd=work)
    eq(rc, 2, "aord with AOR_SOCKET=relative.sock: exit 2 (stderr %r)" % err)
    check("AOR_SOCKET=relative.sock: socket path relative.sock is not absolute" in err, err)
    eq(os.listdir(work), [], "nothing created in the working directory")
    check(not os.path.exists(os.path.join(env.env["XDG_STATE_HOME"], "aor", "aor.db")),
          "no state opened")
    for args in (["--check-config"],):
        rc, out, err = run_bin(env, "aord", args, extra_env={"AOR_SOCKET": "relative.sock"})
        eq(rc, 2, "aord --check-config: exit 2 (stderr %r)" % err)
        check("not absolute" in err, err)
    for args in (["check-config"], ["status"], ["backoff"], ["env"], ["run", "true"]):
        rc, out, err = run_bin(env, "aor", args, extra_env={"AOR_SOCKET": "relative.sock"})
        eq(rc, 2, "aor %s with a relative AOR_SOCKET: exit 2 (stderr %r)" % (args[0], err))
        check("AOR_SOCKET=relative.sock: socket path relative.sock is not absolute" in err,
              "aor %s says why: %r" % (args[0], err))
    rc, out, err = run_bin(env, "aor", ["doctor"], extra_env={"AOR_SOCKET": "relative.sock"})
    eq(rc, 1, "doctor fails")
    check("fail: AOR_SOCKET=relative.sock: socket path relative.sock is not absolute" in out,
          out)
    # `socket =` in a config named relatively ("aor.ini", "./aor.ini") is relative to the
    # file's directory made absolute, as docs/config.md says (fresh-user pass: it stayed
    # relative and was refused).
    with open(os.path.join(work, "aor.ini"), "w") as f:
        f.write("[daemon]\nlisten = off\nsocket = here.sock\n")
    for name in ("aor.ini", "./aor.ini"):
        rc, out, err = run_bin(env, "aor", ["--config", name, "check-config"], cwd=work)
        eq(rc, 0, "aor --config %s check-config (stderr %r)" % (name, err))
        rc, out, err = run_bin(env, "aord", ["--config", name, "--check-config"], cwd=work)
        eq(rc, 0, "aord --config %s --check-config (stderr %r)" % (name, err))
    eq(sorted(os.listdir(work)), ["aor.ini"], "nothing created in the working directory")


def test_check_config_reports_a_socket_directory_aord_refuses(env):
    """QA: check-config said OK for `socket = /tmp/x.sock`, and aord then refused to start
    ("socket directory /tmp: writable by group or others"). Both check-configs now report
    what aord's start would refuse about the socket, naming the line (or AOR_SOCKET)."""
    shared = env.path("shared")
    os.mkdir(shared)
    os.chmod(shared, 0o1777)
    group = env.path("group")
    os.mkdir(group)
    os.chmod(group, 0o770)
    for d, m in ((shared, "1777"), (group, "0770")):
        env.write_config("[daemon]\nlisten = off\nsocket = %s/x.sock\n" % d)
        want = ("%s:3: socket = %s/x.sock: socket directory %s: writable by group or others "
                "(mode %s); chmod 700 it or choose a socket in a directory of your own"
                % (env.config_path, d, d, m))
        rc, out, err = run_bin(env, "aor", ["check-config"])
        eq(rc, 2, "aor check-config, socket in a %s directory (stdout %r)" % (m, out))
        eq(err, "aor: configuration errors:\n%s\n" % want, "aor check-config says why")
        rc, out, err = run_bin(env, "aord", ["--check-config"])
        eq(rc, 2, "aord --check-config (stdout %r)" % out)
        eq(err, "aord: configuration errors:\n%s\n" % want, "aord --check-config says why")
        eq(mode(d), m, "the directory is left as it is")
    # With other errors (an unset key variable) it is listed too: all errors at once
    # (spec §3.1; fresh-user pass: it showed only after the others were fixed).
    env.write_config('[daemon]\nlisten = off\nsocket = %s/x.sock\n[key "k"]\nenv = AOR_QA_UNSET_KEY\n'
                     '[provider "p"]\ndialect = openai\nbase_url = https://api.openai.com\n'
                     "keys = k\nmodels = gpt-4o\n" % shared)
    for binary, arg in (("aor", "check-config"), ("aord", "--check-config")):
        rc, out, err = run_bin(env, binary, [arg])
        eq(rc, 2, "%s %s with two errors" % (binary, arg))
        check("AOR_QA_UNSET_KEY" in err and "socket directory %s: writable" % shared in err,
              "%s lists both errors: %r" % (binary, err))
    minimal_config(env)
    rc, out, err = run_bin(env, "aor", ["check-config"],
                           extra_env={"AOR_SOCKET": os.path.join(shared, "y.sock")})
    eq(rc, 2, "AOR_SOCKET in a 1777 directory")
    check("AOR_SOCKET=%s/y.sock: socket directory %s: writable by group or others" %
          (shared, shared) in err, err)
    # Something else at the socket path, a foreign hosts file: aord refuses those too.
    mine = env.path("mine")
    os.mkdir(mine, 0o700)
    with open(os.path.join(mine, "hosts"), "w") as f:
        f.write("127.0.0.1 myhost\n")
    rc, out, err = run_bin(env, "aor", ["check-config"],
                           extra_env={"AOR_SOCKET": os.path.join(mine, "aor.sock")})
    eq(rc, 2, "a foreign hosts file")
    check("%s/hosts exists and is not aord's published address set" % mine in err, err)
    # Fine: a directory of one's own (created 0700 when missing), and the default one.
    for sock in (os.path.join(env.path("new"), "aor.sock"), None):
        rc, out, err = run_bin(env, "aor", ["check-config"],
                               extra_env={"AOR_SOCKET": sock} if sock else None)
        eq((rc, err), (0, ""), "check-config OK for socket %s" % sock)
        check(out.startswith("aor: configuration OK"), out)
    check(not os.path.exists(env.path("new")), "check-config creates nothing")


def test_socket_problem_is_listed_with_every_other_error_in_line_order(env):
    """QA: an unknown option (or any error but an unset variable) hid the socket's
    problem from both check-configs, and with an unset variable it came out of line
    order; aord's start said it without file:line and exited 1, which systemd restarts
    (the unit stops restarting on 2). Now every one lists it at its line, exit 2."""
    shared = env.path("shared")
    os.mkdir(shared)
    os.chmod(shared, 0o1777)
    env.write_config("[daemon]\nlisten = off\nsocket = %s/x.sock\nfoo = 1\n"
                     '[key "k"]\nenv = AOR_QA_UNSET_KEY\n' % shared)
    want = ["%s:3: socket = %s/x.sock: socket directory %s: writable by group or others "
            "(mode 1777); chmod 700 it or choose a socket in a directory of your own"
            % (env.config_path, shared, shared),
            "%s:4: unknown option foo in [daemon]" % env.config_path]
    for binary, args in (("aor", ["check-config"]), ("aord", ["--check-config"]), ("aord", [])):
        rc, out, err = run_bin(env, binary, args)
        eq(rc, 2, "%s %s: exit 2 (stderr %r)" % (binary, " ".join(args), err))
        lines = [ln for ln in err.splitlines() if ln.startswith(env.config_path + ":")]
        eq(lines[:2], want, "%s %s: the socket's line first, then the option" %
           (binary, " ".join(args)))
        check(any("AOR_QA_UNSET_KEY" in ln for ln in lines[2:]),
              "%s: the unset variable is listed too: %r" % (binary, err))
    check(not os.path.exists(os.path.join(shared, "x.sock")), "no socket made")
    # From the environment: named after AOR_SOCKET, after the file's errors.
    env.write_config("[daemon]\nlisten = off\nfoo = 1\n")
    rc, out, err = run_bin(env, "aord", [], extra_env={"AOR_SOCKET": shared + "/y.sock"})
    eq(rc, 2, "aord with AOR_SOCKET in a 1777 directory (stderr %r)" % err)
    eq(err.splitlines()[1:3],
       ["%s:3: unknown option foo in [daemon]" % env.config_path,
        "AOR_SOCKET=%s/y.sock: socket directory %s: writable by group or others (mode 1777); "
        "chmod 700 it or choose a socket in a directory of your own" % (shared, shared)],
       "aord's errors")


def test_state_directory_open_to_others_is_refused(env):
    """QA: with $XDG_STATE_HOME/aor at 0777 (it holds admin.token, aord.log and aor.db)
    aord started silently, while it refuses such a socket or data directory. It now
    refuses it the same way, before it writes anything there."""
    minimal_config(env)
    state = os.path.join(env.env["XDG_STATE_HOME"], "aor")
    os.mkdir(state)
    os.chmod(state, 0o777)
    d = env.start_daemon(wait=False)
    rc = d.proc.wait(timeout=30)
    text = d.stderr_text()
    eq(rc, 1, "aord exit code with a 0777 state directory: %s" % text[-1500:])
    check("state directory %s: writable by group or others (mode 0777); chmod 700 it" % state
          in text, "names the directory, its mode and the fix: " + text)
    eq(os.listdir(state), [], "nothing written into it (no log, token or state)")
    eq(mode(state), "0777", "its mode is left as it is")
    os.chmod(state, 0o700)
    d = env.start_daemon()
    eq(d.stop(), 0, "starts once it is 0700")
