"""Issue 3 §4.5: kill -9 of aord during a 429 storm loses no acknowledged state;
replay brings back every backoff row and open circuit with its remaining time."""
import http.client
import json
import os
import random
import socket
import subprocess
import time

import aortest
from aortest import check, eq
from test_routing import T0, setup


def storm(env, n, tag):
    procs = []
    for i in range(n):
        body = json.dumps({"model": "m%d-%s" % (i % 4, tag),
                           "messages": [{"role": "user", "content": "hi"}]})
        procs.append(env.spawn(["curl", "-sS", "-o", "/dev/null", "-w", "%{http_code}",
                                "https://api.openai.com/v1/chat/completions",
                                "-H", "Authorization: Bearer c%d" % i,
                                "-H", "Content-Type: application/json", "-d", body]))
    return procs


def test_kill9_during_429_storm_keeps_state(env):
    mock, d = setup(env, keys=(("A", 0), ("B", 0), ("C", 1), ("D", 2)), models="*")
    mock.script("*", [{"status": 429, "times": -1}])
    mock.script("secret-D", [{"status": 503, "headers": {"retry-after": "40"}, "times": -1}])
    clock = T0
    for rnd in range(3):
        if rnd:
            d.advance(25)  # every window expired: the next failures escalate
            clock += 25
        for p in storm(env, 8, "r%d" % rnd):
            p.wait(timeout=60)
    acked = d.state()
    check(len(acked["backoff"]) >= 3, "backoff rows before the crash: %s" % acked["backoff"])
    # One more round in flight while the daemon dies.
    procs = storm(env, 8, "crash")
    time.sleep(0.05)
    d.kill9()
    for p in procs:
        p.wait(timeout=60)
    d2 = env.start_daemon(fake_clock=clock)
    after = d2.state()
    by_key = {(b["provider"], b["key"]): b for b in after["backoff"]}
    for b in acked["backoff"]:
        a = by_key.get((b["provider"], b["key"]))
        check(a is not None, "backoff row %s/%s came back" % (b["provider"], b["key"]))
        check(a["until"] >= b["until"], "remaining time kept for %s" % b["key"])
        check(a["failure_count"] >= b["failure_count"], "curve level kept for %s" % b["key"])
        check(a["window_s"] >= b["window_s"] or a["failure_count"] > b["failure_count"],
              "window kept for %s" % b["key"])
    got = {(x["provider"], x["model"]): x for x in after["breakers"]}
    for x in acked["breakers"]:
        if x["until"] > clock:
            check((x["provider"], x["model"]) in got, "open circuit %s came back" % x["model"])
            eq(got[(x["provider"], x["model"])]["until"] >= x["until"], True, "circuit until kept")
    eq(len(after["sticky"]) >= len(acked["sticky"]), True, "sticky rows kept")
    # The restarted daemon honours the restored state: everything is backed off.
    r = env.curl(["https://api.openai.com/v1/chat/completions", "-H", "Authorization: Bearer z",
                  "-H", "Content-Type: application/json",
                  "-d", json.dumps({"model": "m0-r0", "messages": []})])
    eq(r.status, 429, "restored backoff honoured")
    check("aor_all_backed_off" in r.body, "terminal answer after restart")


def test_clean_restart_compacts_log(env):
    mock, d = setup(env)
    mock.script("secret-A", [{"status": 429, "times": -1}])
    r = env.curl(["https://api.openai.com/v1/chat/completions", "-H", "Authorization: Bearer z",
                  "-H", "Content-Type: application/json",
                  "-d", json.dumps({"model": "gpt-4o-mini", "messages": []})])
    eq(r.headers.get("x-aor-key"), "B", "failover")
    before = d.state()
    eq(d.stop(), 0, "clean stop on SIGTERM")
    d2 = env.start_daemon(fake_clock=T0)
    after = d2.state()
    eq([(b["key"], b["until"], b["window_s"]) for b in after["backoff"]],
       [(b["key"], b["until"], b["window_s"]) for b in before["backoff"]], "backoff after restart")
    eq([(s["key"], s["model"]) for s in after["sticky"]],
       [(s["key"], s["model"]) for s in before["sticky"]], "sticky after restart")
    import sqlite3
    db = sqlite3.connect(env.db_path)
    n = db.execute("select count(*) from state_events").fetchone()[0]
    eq(n, 0, "event log compacted at start")
    secret_rows = db.execute("select count(*) from backoff where key like 'secret%'").fetchone()[0]
    eq(secret_rows, 0, "no secret in the store")


def test_second_aord_leaves_the_running_ones_state_alone(env):
    """A second aord on the same state file exits with status 3 before it reads the log:
    it used to replay and compact the database under the running one, deleting what
    that one appended meanwhile (review: 40 of 40 acknowledged backoff rows lost after a
    kill -9)."""
    import sqlite3
    mock, d = setup(env, keys=(("A", 0),))
    mock.script("secret-A", [{"status": 503, "times": -1}])
    r = env.curl(["https://api.openai.com/v1/chat/completions", "-H", "Authorization: Bearer c",
                  "-H", "Content-Type: application/json",
                  "-d", json.dumps({"model": "gpt-4o-mini", "messages": []})])
    eq(r.status, 503, "a failure recorded")
    db = sqlite3.connect(env.db_path)
    before = db.execute("SELECT count(*) FROM state_events").fetchone()[0]
    db.close()
    check(before >= 1, "the running aord logged it: %d events" % before)
    d2 = env.start_daemon(fake_clock=T0, wait=False)
    eq(d2.proc.wait(timeout=30), 3, "the second aord's exit status")
    check("another aord is running with the state file" in d2.stderr_text(),
          "it says why: %r" % d2.stderr_text()[-400:])
    db = sqlite3.connect(env.db_path)
    after = db.execute("SELECT count(*) FROM state_events").fetchone()[0]
    db.close()
    eq(after, before, "the log was not compacted under the running aord")
    # The same database through a symbolic link, with its own socket and port: the lock
    # is the database's own (QA: a lock file beside each path let both run).
    import os
    link = env.path("link.db")
    os.symlink(env.db_path, link)
    other = env.path("other.ini")
    with open(env.config_path) as f:
        text = f.read()
    with open(other, "w") as f:
        f.write(text.replace("[daemon]\n", "[daemon]\nstate = %s\nsocket = %s\n"
                             % (link, env.path("other.sock")), 1)
                .replace("listen = 127.0.0.1:%d" % d.port,
                         "listen = 127.0.0.1:%d" % aortest.free_port()))
    d4 = env.start_daemon(fake_clock=T0, wait=False, args=("--config", other))
    eq(d4.proc.wait(timeout=30), 3, "a second aord on a link to the database")
    check(d.alive() and d.healthz() == 200, "the first one goes on")
    d.kill9()
    d3 = env.start_daemon(fake_clock=T0)
    eq([(b["key"], b["last_error_kind"]) for b in d3.state()["backoff"]], [("A", "transient")],
       "the row came back after kill -9")


def test_damaged_state_file_says_what_to_do(env):
    """QA: a damaged aor.db (random bytes, or an SQLite header followed by garbage) stopped
    aord with SQLite's words alone ("file is not a database", "database disk image is
    malformed"). The error names the file and says that moving it aside starts aord with
    empty state; moved aside, it does."""
    env.write_config("""
        [daemon]
        listen = off
        """)
    os.makedirs(os.path.dirname(env.db_path), exist_ok=True)
    rnd = random.Random(7)
    for junk in (rnd.randbytes(8192), b"SQLite format 3\0" + rnd.randbytes(8192)):
        with open(env.db_path, "wb") as f:
            f.write(junk)
        r = subprocess.run([os.path.join(env.build, "aord")], env=env.env, capture_output=True,
                           text=True, timeout=60)
        eq(r.returncode, 1, "aord refuses the file (stderr %r)" % r.stderr)
        check("file is not a database" in r.stderr or "malformed" in r.stderr, r.stderr)
        check("%s is damaged or not an aor state file: move it aside" % env.db_path in r.stderr
              and "aord starts with empty state" in r.stderr, "says what to do: %r" % r.stderr)
        check("Sanitizer" not in r.stderr, r.stderr)
    for suffix in ("", "-wal", "-shm"):
        if os.path.exists(env.db_path + suffix):
            os.rename(env.db_path + suffix, env.db_path + suffix + ".broken")
    d = env.start_daemon()
    check(d.alive(), "aord starts once the file is moved aside")


def test_state_path_that_is_not_a_file_is_named(env):
    """QA: a FIFO at aor.db stopped aord with "open: disk I/O error", a link to /dev/null
    with "attempt to write a readonly database". Both are named for what they are."""
    env.write_config("""
        [daemon]
        listen = off
        """)
    os.makedirs(os.path.dirname(env.db_path), exist_ok=True)
    for make, what in ((lambda p: os.mkfifo(p, 0o600), "a FIFO"),
                       (lambda p: os.symlink("/dev/null", p), "a character device")):
        if os.path.lexists(env.db_path):
            os.unlink(env.db_path)
        make(env.db_path)
        r = subprocess.run([os.path.join(env.build, "aord")], env=env.env, capture_output=True,
                           text=True, timeout=60)
        eq(r.returncode, 1, "aord refuses it (stderr %r)" % r.stderr)
        check("the state file %s is not a regular file (%s)" % (env.db_path, what) in r.stderr,
              "named: %r" % r.stderr)
    os.unlink(env.db_path)


def test_state_file_removed_under_aord(env):
    """QA: `rm aor.db` (and its -wal, -shm) under a running aord: SQLite went on writing
    into the unlinked inode, no error, and every later change was gone at the next start.
    aord notices at its next state change, writes the state in memory into a new file
    there (and moves its single-instance lock to it), and goes on."""
    mock, d = setup(env)
    mock.script("secret-A", [{"status": 429, "times": 1}])
    body = json.dumps({"model": "gpt-4o-mini", "messages": []})
    r = env.curl(["https://api.openai.com/v1/chat/completions", "-H", "Authorization: Bearer c1",
                  "-H", "Content-Type: application/json", "-d", body])
    eq(r.headers.get("x-aor-key"), "B", "the first request fails over")
    for suffix in ("", "-wal", "-shm"):
        if os.path.exists(env.db_path + suffix):
            os.unlink(env.db_path + suffix)
    d.advance(10)  # A's window is over: the next failure escalates it
    mock.script("secret-A", [{"status": 503, "times": 1}])
    r = env.curl(["https://api.openai.com/v1/chat/completions", "-H", "Authorization: Bearer c2",
                  "-H", "Content-Type: application/json", "-d", body])
    eq(r.headers.get("x-aor-key"), "B", "the second request fails over")
    check("was removed or replaced while aord ran" in d.stderr_text(),
          "aord says what happened: " + d.stderr_text()[-1500:])  # fmt: skip
    check(os.path.exists(env.db_path), "a new state file at the path")
    acked = d.state()
    eq([(b["key"], b["failure_count"]) for b in acked["backoff"]], [("A", 2)],
       "the backoff row before the crash")  # fmt: skip
    # A second aord on the new file is refused: the lock moved with the state.
    d2 = env.start_daemon(fake_clock=T0, wait=False)
    eq(d2.proc.wait(timeout=30), 3, "a second aord on the new state file")
    d.kill9()
    d3 = env.start_daemon(fake_clock=T0 + 10)
    after = d3.state()
    eq([(b["key"], b["failure_count"], b["until"]) for b in after["backoff"]],
       [(b["key"], b["failure_count"], b["until"]) for b in acked["backoff"]],
       "backoff after kill -9 and a restart")  # fmt: skip
    eq(sorted((s["client"], s["key"]) for s in after["sticky"]),
       sorted((s["client"], s["key"]) for s in acked["sticky"]), "sticky rows kept")
    eq(len(after["sticky"]), 2, "both clients' sticky rows")


def test_write_lock_held_by_another_process_does_not_stall_aord(env):
    """QA: another process holding a write transaction on aor.db (an `sqlite3` shell)
    froze aord's event loop for the 5 s busy timeout at each state change: every client
    and stream stalled. A running aord waits 50 ms, then counts the write as failed (the
    change applied in memory, as with a full disk) and goes on."""
    import sqlite3
    mock, d = setup(env)
    mock.script("secret-A", [{"status": 503, "times": -1}])
    db = sqlite3.connect(env.db_path, isolation_level=None, timeout=0.1)
    db.execute("BEGIN IMMEDIATE")
    try:
        t0 = time.monotonic()
        r = env.curl(["https://api.openai.com/v1/chat/completions", "-H",
                      "Authorization: Bearer c", "-H", "Content-Type: application/json",
                      "-d", json.dumps({"model": "gpt-4o-mini", "messages": []})])
        took = time.monotonic() - t0
        eq(r.headers.get("x-aor-key"), "B", "failover while the lock is held")
        check(took < 4, "not stalled for the 5 s busy timeout (%.2f s)" % took)
        check("could not write backoff" in d.stderr_text() and "locked" in d.stderr_text(),
              "the lost write is logged: " + d.stderr_text()[-1000:])  # fmt: skip
        eq([(b["key"], b["last_error_kind"]) for b in d.state()["backoff"]],
           [("A", "transient")], "the failure applied in memory")  # fmt: skip
    finally:
        db.execute("ROLLBACK")
        db.close()
    m = [l for l in d.metrics().splitlines() if l.startswith("aor_state_write_errors_total ")]
    check(m and float(m[0].split()[1]) >= 1, "counted: %r" % m)


def test_state_file_replaced_by_a_backup_or_another_file(env):
    """Review: a backup renamed over aor.db was opened next to the old file's -wal, whose
    pages damaged it; another program's database renamed over it made every later write
    say "another aord is running" (aord's own lock on it); a removed state directory was
    never made again. The old store is closed first (its -wal and -shm go with it), a
    refused file is retried at the next change without a false lock message, and the
    directory is made again."""
    import sqlite3
    import shutil
    mock, d = setup(env)
    mock.script("secret-A", [{"status": 503, "times": -1}])
    body = json.dumps({"model": "gpt-4o-mini", "messages": []})

    def ask(client):
        return env.curl(["https://api.openai.com/v1/chat/completions", "-H",
                         "Authorization: Bearer " + client, "-H",
                         "Content-Type: application/json", "-d", body])  # fmt: skip

    eq(ask("c0").headers.get("x-aor-key"), "B", "failover")
    backup = env.path("backup.db")
    src = sqlite3.connect(env.db_path)
    dst = sqlite3.connect(backup)
    src.backup(dst)
    dst.close()
    src.close()
    for i in range(1, 6):
        d.advance(600)
        ask("c%d" % i)  # more events in the running aord's -wal
    os.rename(backup, env.db_path)
    d.advance(600)
    eq(ask("c6").headers.get("x-aor-key"), "B", "failover after the backup came back")
    check("was removed or replaced while aord ran" in d.stderr_text(),
          "said: " + d.stderr_text()[-1500:])  # fmt: skip
    db = sqlite3.connect(env.db_path)
    eq(db.execute("PRAGMA integrity_check").fetchone()[0], "ok", "the new file is sound")
    db.close()

    # Another program's file renamed over it: refused, no false "another aord" line.
    other = env.path("other.db")
    db = sqlite3.connect(other)
    db.execute("CREATE TABLE foo(x)")
    db.commit()
    db.close()
    os.rename(other, env.db_path)
    for i in range(7, 10):
        d.advance(600)
        eq(ask("c%d" % i).headers.get("x-aor-key"), "B", "routing goes on from memory")
    text = d.stderr_text()
    check("not an aor state file" in text, "says why: " + text[-1500:])
    check("another aord is running" not in text, "no false lock message: " + text[-1500:])
    db = sqlite3.connect(env.db_path)
    eq([r[0] for r in db.execute("SELECT name FROM sqlite_master")], ["foo"],
       "the other program's file is untouched")  # fmt: skip
    db.close()

    # Its directory removed: made again at the next change.
    with open(env.token_path) as f:
        token = f.read()
    d.advance(600)
    shutil.rmtree(os.path.dirname(env.db_path))
    ask("c10")
    check(os.path.exists(env.db_path), "a new state file, directory and all")
    with open(env.token_path, "w") as f:  # (the test's admin access)
        f.write(token)
    os.chmod(env.token_path, 0o600)
    acked = d.state()
    d.kill9()
    d2 = env.start_daemon(fake_clock=T0 + 6000)
    after = d2.state()
    eq([(b["key"], b["failure_count"]) for b in after["backoff"]],
       [(b["key"], b["failure_count"]) for b in acked["backoff"]], "backoff kept")  # fmt: skip
    eq(len(after["sticky"]), len(acked["sticky"]), "sticky rows kept")


def test_state_file_taken_by_another_aord_is_left_alone(env):
    """Review: the state directory removed under aord A, then aord B started on the same
    state path: A's next state change renamed B's live -wal and -shm aside (it closed its
    old store and moved leftovers before it tried the lock), and B's state then lived
    only in the detached WAL. A takes the lock first; held by B, A touches nothing."""
    import shutil
    import sqlite3
    mock, d = setup(env)
    mock.script("secret-A", [{"status": 503, "times": -1}])
    body = json.dumps({"model": "gpt-4o-mini", "messages": []})

    def ask(port, client):
        return aortest.http("POST", "http://127.0.0.1:%d/v1/chat/completions" % port, body,
                            {"authorization": "Bearer " + client,
                             "content-type": "application/json"})  # fmt: skip

    eq(ask(d.port, "c0")[0], 200, "A answers")
    with open(env.token_path) as f:
        token = f.read()
    d.advance(600)
    shutil.rmtree(os.path.dirname(env.db_path))
    os.makedirs(os.path.dirname(env.db_path), mode=0o700)
    with open(env.token_path, "w") as f:  # (the test's admin access to A)
        f.write(token)
    os.chmod(env.token_path, 0o600)
    other = env.path("other.ini")
    with open(env.config_path) as f:
        text = f.read()
    port_b = aortest.free_port()
    with open(other, "w") as f:
        f.write(text.replace("[daemon]\n", "[daemon]\nsocket = %s\n" % env.path("b.sock"), 1)
                .replace("listen = 127.0.0.1:%d" % d.port, "listen = 127.0.0.1:%d" % port_b))
    b = env.start_daemon(fake_clock=T0, args=("--config", other), wait=False)
    aortest.wait_until(lambda: os.path.exists(env.path("b.sock")), 30, what="B's socket")
    time.sleep(0.5)
    eq(ask(port_b, "b1")[0], 200, "B answers")  # B writes into its new file
    eq(ask(d.port, "c1")[0], 200, "A goes on from memory")
    left = [n for n in os.listdir(os.path.dirname(env.db_path)) if n.endswith(".replaced")]
    eq(left, [], "nothing of B's renamed aside")
    check("another aord is running with the state file" in d.stderr_text(),
          "A says why it cannot move there: " + d.stderr_text()[-1200:])  # fmt: skip
    db = sqlite3.connect(env.db_path)
    n = db.execute("SELECT count(*) FROM state_events").fetchone()[0]
    db.close()
    check(n >= 1, "B's events are readable in its file: %d" % n)
    b.stop()


def _ask_raw(port, token):
    """One request on a fresh connection to the sidecar; returns (status, x-aor-key) as
    soon as the whole answer (Content-Length) has been read."""
    body = json.dumps({"model": "gpt-4o-mini", "messages": [{"role": "user", "content": "hi"}]})
    req = ("POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1:%d\r\n"
           "Authorization: Bearer %s\r\nContent-Type: application/json\r\n"
           "Content-Length: %d\r\n\r\n%s" % (port, token, len(body), body)).encode()
    s = socket.create_connection(("127.0.0.1", port), timeout=30)
    try:
        s.sendall(req)
        buf = b""
        while b"\r\n\r\n" not in buf:
            chunk = s.recv(65536)
            if not chunk:
                raise AssertionError("connection closed before the head: %r" % buf)
            buf += chunk
        head, _, rest = buf.partition(b"\r\n\r\n")
        lines = head.decode("latin-1").split("\r\n")
        hdrs = {k.strip().lower(): v.strip()
                for k, _, v in (ln.partition(":") for ln in lines[1:])}
        need = int(hdrs.get("content-length", "0"))
        while len(rest) < need:
            chunk = s.recv(65536)
            if not chunk:
                break
            rest += chunk
        return int(lines[0].split()[1]), hdrs.get("x-aor-key")
    finally:
        s.close()


def test_kill9_right_after_an_answer_keeps_its_success(env):
    """§4.5: kill -9 at any moment loses no acknowledged state. A success's state change
    (here the round-robin streak, §5.5: two successes per key) was written after the
    answer had gone out, so a kill -9 as soon as the client had read it lost it about
    half the time (QA: 12 of 25): after the restart the third key served three in a row.
    Now it is on disk before the answer's last bytes leave aord."""
    mock, d = setup(env, keys=(("A", 0), ("B", 0), ("C", 0)), routing="strategy = round-robin")
    # aord and this client on one CPU, aord at the lowest priority: the client, woken by
    # the answer, runs at once and aord waits; whatever aord does after writing the
    # answer happens after the kill (old code: the state write).
    cpu = min(os.sched_getaffinity(0))
    own = os.sched_getaffinity(0)

    def crowd(daemon):
        os.sched_setaffinity(daemon.pid, {cpu})
        os.setpriority(os.PRIO_PROCESS, daemon.pid, 19)

    bad = []
    os.sched_setaffinity(0, {cpu})
    try:
        for trial in range(8):
            token = "client-trial-%d" % trial
            crowd(d)
            seq = [_ask_raw(d.port, token) for _ in range(3)]
            d.kill9()
            d = env.start_daemon(fake_clock=T0)
            seq += [_ask_raw(d.port, token) for _ in range(2)]
            eq([st for st, _ in seq], [200] * 5, "every answer a 200: %r" % seq)
            keys = [k for _, k in seq]
            # Two on a key, then the next: x x y | y z (the streak of y came back as 1).
            if not (keys[0] == keys[1] != keys[2] == keys[3] != keys[4]):
                bad.append(keys)
    finally:
        os.sched_setaffinity(0, own)
    eq(bad, [], "round-robin order kept across kill -9 right after an answer")


def test_sticky_rows_are_capped_and_survive_kill9(env):
    """QA 2026-12-03: a client sending ever new model names grew the sticky table (and
    the state file) without bound. aord keeps 100,000 rows: each new one beyond drops
    the least recently used, written ahead, so kill -9 then a start has the same rows.
    The table is filled through the state file (99,990 older rows of another client),
    then requests add rows."""
    mock = env.start_mock(tls=False)
    env.set_keys(OPENAI_API_KEY="sk-test-cap")
    port = aortest.free_port()
    env.write_config(f"""
        [daemon]
        listen = 127.0.0.1:{port}
        [key "a"]
        env = OPENAI_API_KEY
        [provider "openai"]
        dialect = openai
        base_url = {mock.url}
        keys = a
        models = *
    """)
    d = env.start_daemon()
    conn = None

    def ask(model):
        nonlocal conn
        if conn is None:
            conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
        body = json.dumps({"model": model, "messages": [{"role": "user", "content": "hi"}]})
        conn.request("POST", "/v1/chat/completions", body,
                     {"Authorization": "Bearer client-cap", "Content-Type": "application/json"})
        r = conn.getresponse()
        r.read()
        eq(r.status, 200, "status of %s" % model)

    ask("first")
    me = d.state()["sticky"][0]["client"]
    conn.close()
    conn = None
    eq(d.stop(), 0, "aord stops")
    import sqlite3
    db = sqlite3.connect(env.db_path)
    # "first" is made the oldest row: only its use below keeps it.
    db.execute("UPDATE sticky SET last_success = 1600000000 WHERE client = ?", (me,))
    db.executemany('INSERT INTO sticky(client, model, provider, "key", last_success) '
                   'VALUES(?, ?, ?, ?, ?)',
                   (("0" * 64, "old%d" % i, "openai", "a", 1700000000.0 + i)
                    for i in range(99989)))
    db.commit()
    db.close()
    d = env.start_daemon()
    ask("first")  # a use: no longer the least recently used
    for i in range(10):
        ask("new%d" % i)
    eq(len(d.state()["sticky"]), 100000, "rows at the maximum")
    check("sticky: 100000" not in d.stderr_text(), "no warning before the table is full")
    for i in range(10, 20):
        ask("new%d" % i)
    conn.close()
    st = d.state()
    models = {s["model"] for s in st["sticky"]}
    eq(len(st["sticky"]), 100000, "rows after 10 more")
    check("first" in models, "a row used again is kept")
    check(not {"old%d" % i for i in range(10)} & models, "the 10 least recently used dropped")
    check({"old10", "old99988", "new0", "new19"} <= models, "newer rows kept")
    eq(d.stderr_text().count("sticky: 100000 (client, model) rows, the most kept"), 1,
       "the full table said once")
    d.kill9()
    d = env.start_daemon()
    after = {s["model"] for s in d.state()["sticky"]}
    eq(len(after), 100000, "rows after kill -9 and a start")
    eq(after, models, "the same rows after kill -9")


test_sticky_rows_are_capped_and_survive_kill9.timeout = 300


def test_kill9_after_a_streams_terminator_keeps_its_success(env):
    """§4.5: a stream's success is recorded once its own terminator (`data: [DONE]`) goes
    by, before the client has it, not when the upstream's last chunk comes (QA: the
    upstream held the end of the body 3 s after [DONE], which the client had read; a kill
    -9 then lost the new client's sticky row)."""
    mock, d = setup(env)
    mock.script("secret-A", [{"kind": "gated_stream", "gate": "end", "gate_after": 1000}])
    body = json.dumps({"model": "gpt-4o-mini", "stream": True,
                       "messages": [{"role": "user", "content": "hi"}]})
    conn = http.client.HTTPConnection("127.0.0.1", d.port, timeout=20)
    conn.request("POST", "/v1/chat/completions", body,
                 {"content-type": "application/json", "authorization": "Bearer stream-client"})
    r = conn.getresponse()
    eq((r.status, r.getheader("x-aor-key")), (200, "A"), "the stream from A")
    got = b""
    while b"[DONE]" not in got:
        line = r.fp.readline()
        check(line, "the stream ended before [DONE]: %r" % got[-300:])
        got += line
    eq([(s["provider"], s["key"]) for s in d.state()["sticky"]], [("p", "A")],
       "the success is recorded while the body's end is held")
    d.kill9()
    conn.close()
    mock.gate("end")
    d = env.start_daemon(fake_clock=T0)
    eq([(s["provider"], s["key"]) for s in d.state()["sticky"]], [("p", "A")],
       "the sticky row survives kill -9")


def a_401_then_b(env):
    """aord with keys A and B (test_routing.setup); A answers 401, so one request leaves A
    backed off (auth) and is answered by B. Returns the daemon."""
    mock, d = setup(env)
    mock.script("secret-A", [{"status": 401, "times": -1}])
    r = env.curl(["https://api.openai.com/v1/chat/completions", "-H", "Authorization: Bearer c",
                  "-H", "Content-Type: application/json",
                  "-d", json.dumps({"model": "gpt-4o-mini", "messages": []})])
    eq((r.status, r.headers.get("x-aor-key")), (200, "B"), "A's 401, B answered")
    return d


def test_key_rotated_by_a_restart_is_a_new_credential(env):
    """A key whose secret changed between two runs is a new credential at start, as at a
    SIGHUP (docs/routing.md §12): its backoff rows go. QA: after a restart with the new
    secret, the row of the old one's 401 kept the key out for its 120 s. A restart with
    the same secret keeps the row."""
    d = a_401_then_b(env)
    eq([(b["key"], b["last_error_kind"]) for b in d.state()["backoff"]], [("A", "auth")], "A out")
    eq(d.stop(), 0, "clean stop")
    d = env.start_daemon(fake_clock=T0 + 1)
    eq([b["key"] for b in d.state()["backoff"]], ["A"], "the same secret: the row stays")
    eq(d.stop(), 0, "clean stop")
    env.set_keys(KEY_A="secret-A2")
    d = env.start_daemon(fake_clock=T0 + 2)
    eq(d.state()["backoff"], [], "a new secret: a new credential, no row")
    check("key 'A' has a new secret since aord last ran: a new credential, 1 backoff row "
          "cleared" in d.stderr_text(), "said: %s" % d.stderr_text()[-600:])
    check("secret-A2" not in d.stderr_text(), "the secret is not logged")
    r = env.curl(["https://api.openai.com/v1/chat/completions", "-H", "Authorization: Bearer c",
                  "-H", "Content-Type: application/json",
                  "-d", json.dumps({"model": "gpt-4o-mini", "messages": []})])
    eq((r.status, r.headers.get("x-aor-key")), (200, "A"), "the new secret is tried")
    d.kill9()
    d = env.start_daemon(fake_clock=T0 + 3)
    eq(d.state()["backoff"], [], "the clearing survives kill -9")
    with open(env.db_path, "rb") as f:
        raw = f.read()
    check(b"secret-A" not in raw, "no secret in the state file")


def test_state_file_elsewhere_is_checked_and_kept_private(env):
    """`[daemon] state =` in a directory others can write: said at start (QA: a 0777
    directory went unmentioned; the state directory itself was always checked). A state
    file made by hand with mode 0644 is made 0600, as aord makes its own."""
    shared = env.path("shared")
    os.makedirs(shared)
    os.chmod(shared, 0o777)
    db = os.path.join(shared, "aor.db")
    with open(db, "wb"):
        pass
    os.chmod(db, 0o644)
    with open(db + "-shm", "wb"):
        pass
    os.chmod(db + "-shm", 0o644)
    port = aortest.free_port()
    env.set_keys(KEY_A="sk-state-elsewhere-AAAA")
    env.write_config(f"""
        [daemon]
        listen = 127.0.0.1:{port}
        state = {db}
        [key "A"]
        env = KEY_A
        [provider "openai"]
        dialect = openai
        base_url = https://api.openai.com
        keys = A
        models = gpt-4o
        """)
    d = env.start_daemon()
    err = d.stderr_text()
    check("directory of the state file %s: writable by group or others" % shared in err,
          "the directory is named: %s" % err[-800:])
    eq(os.stat(db).st_mode & 0o777, 0o600, "the state file made 0600")
    eq(os.stat(db + "-shm").st_mode & 0o777, 0o600, "and its -shm")


def test_key_rotation_is_seen_after_the_state_file_was_removed(env):
    """rm aor.db* while aord runs, a clean stop (which writes the state in memory to a new
    file), a new secret for key A, a start: the new file has the keys' fingerprints too,
    so A is a new credential (QA: it stayed backed off for the old secret's 401)."""
    d = a_401_then_b(env)
    for suffix in ("", "-wal", "-shm"):
        if os.path.exists(env.db_path + suffix):
            os.unlink(env.db_path + suffix)
    eq(d.stop(), 0, "clean stop")
    check(os.path.exists(env.db_path), "the stop wrote a new state file")
    env.set_keys(KEY_A="secret-A2")
    d = env.start_daemon(fake_clock=T0 + 2)
    eq(d.state()["backoff"], [], "the rotated key is a new credential")
    check("key 'A' has a new secret since aord last ran" in d.stderr_text(), "said")


def test_aord_with_its_standard_fds_closed_writes_no_log_into_the_state_file(env):
    """QA: started with stdout and stderr closed (`aord >&- 2>&-`), aord's lock on the
    state file took fd 2, and every log line went into aor.db over SQLite's header: after
    a kill -9 the state was lost. Closed standard fds are opened on /dev/null first."""
    import signal as sig
    import sqlite3
    import subprocess
    port = aortest.free_port()
    env.write_config("[daemon]\nlisten = 127.0.0.1:%d\n" % port)
    aord = os.path.join(env.build, "aord")
    p = subprocess.Popen("exec %s >&- 2>&-" % aord, shell=True, env=env.env,
                         stdin=subprocess.DEVNULL)
    try:
        aortest.wait_until(lambda: aortest._healthz_ok(port), 30, what="aord to start")
        eq(os.readlink("/proc/%d/fd/2" % p.pid), "/dev/null", "fd 2 is /dev/null")
        for _ in range(50):  # a warning line each (a browser's Origin)
            aortest.http("POST", "http://127.0.0.1:%d/v1/chat/completions" % port, b"{}",
                         {"origin": "http://evil.example", "content-type": "application/json"})
        with open(env.db_path, "rb") as f:
            eq(f.read(16), b"SQLite format 3\0", "aor.db starts as a database")
        p.send_signal(sig.SIGKILL)
        p.wait(10)
        con = sqlite3.connect(env.db_path)
        eq(con.execute("pragma integrity_check").fetchone()[0], "ok", "the state file is whole")
        con.close()
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
