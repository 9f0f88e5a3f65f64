"""Routing state across a SIGHUP reload and the admin resets (spec §4.2, §4.4, §4.5, §6,
§8; docs/routing.md "Reload and resets"): reloaded backoff/breaker tuning applies, a key
whose secret changed starts clean, per-key reset, exhausted usage windows shown and
cleared, circuit open/close logged. Real aord + mock provider, fake clock."""
import json
import os
import signal
import sqlite3
import threading

import aortest
from aortest import check, eq
from test_routing import T0, chat, row, setup, tried

EXHAUSTED_30S = {"x-ratelimit-remaining-requests": "0", "x-ratelimit-reset-requests": "30s",
                 "x-ratelimit-remaining-tokens": "90000", "x-ratelimit-reset-tokens": "1s"}


def aor(env, *args):
    """Runs the aor CLI (not preloaded); returns (rc, stdout, stderr)."""
    return env.run_client([os.path.join(env.build, "aor")] + list(args), preload=False)


def reload(env, d, edit):
    """Rewrites the config with edit(text) and sends SIGHUP; waits for the reload line."""
    text = open(env.config_path).read()
    open(env.config_path, "w").write(edit(text))
    n = d.stderr_text().count("config reloaded")
    os.kill(d.pid, signal.SIGHUP)
    aortest.wait_until(lambda: d.stderr_text().count("config reloaded") > n, what="reload logged")


def add_routing(line):
    return lambda text: text + "\n[routing]\n%s\n" % line


def test_sighup_applies_backoff_initial_s(env):
    """QA: backoff_initial_s was copied once at start; SIGHUP logged "reloaded" and the old
    curve stayed."""
    mock, d = setup(env)
    mock.script("secret-A", [{"status": 429, "times": -1}])
    eq(chat(env).headers.get("x-aor-key"), "B", "A failed, B answered")
    eq((row(d, "A")["window_s"], row(d, "A")["until"]), (5, T0 + 5), "A: the boot curve, 5 s")
    reload(env, d, add_routing("backoff_initial_s = 2"))
    check("config reloaded from %s: 1 provider, 2 keys" % env.config_path in d.stderr_text(),
          "the reload line gives the counts: %s" % d.stderr_text()[-400:])
    eq(row(d, "A")["until"], T0 + 5, "a running window keeps its until")
    mock.script("secret-B", [{"status": 429}])
    r = chat(env)
    eq(r.status, 429, "A backed off, B throttled")
    b = row(d, "B")
    eq((b["window_s"], b["until"]), (2, T0 + 2), "the next 429 uses the new curve: 2 s")


def test_sighup_applies_breaker_failures_and_logs_circuits(env):
    """QA: breaker_failures was not reloaded; circuit open/close were not logged at all."""
    mock, d = setup(env, keys=(("A", 0),), routing="breaker_failures = 5")
    mock.script("secret-A", [{"status": 429, "times": -1}])
    eq(chat(env).status, 429, "A throttled")
    eq(d.state()["breakers"], [], "1 failure of 5: closed")
    d.advance(6)
    reload(env, d, lambda t: t.replace("breaker_failures = 5", "breaker_failures = 1"))
    eq(chat(env).status, 429, "A throttled again")
    br = d.state()["breakers"]
    eq([(b["provider"], b["model"], b["state"]) for b in br], [("p", "gpt-4o-mini", "open")],
       "one failure opens the circuit after the reload")
    log = d.stderr_text()
    check("circuit opened: provider p, model gpt-4o-mini, until " in log,
          "the opening is logged: %s" % log[-600:])
    mock.script("secret-A", [])
    d.advance(31)  # past breaker_open_s and A's backoff window
    r = chat(env)
    eq((r.status, r.headers.get("x-aor-key")), (200, "A"), "the probe succeeds")
    eq(d.state()["breakers"], [], "closed")
    check("circuit closed: provider p, model gpt-4o-mini" in d.stderr_text(),
          "the closing is logged: %s" % d.stderr_text()[-600:])


def _rotation_setup(env, keys_a=True):
    """Provider p with keys A (KEY_A from an env_file, priority 0) and B; returns
    (mock, daemon, env_file path, config writer: write(with_a))."""
    mock = env.start_mock(tls=True)
    port = aortest.free_port()
    envfile = env.path("keys.env")
    with open(envfile, "w") as f:
        f.write("KEY_A=secret-A\n")
    os.chmod(envfile, 0o600)
    env.set_keys(KEY_B="secret-B")

    def write(with_a):
        env.write_config("[daemon]\nlisten = 127.0.0.1:%d\nenv_file = %s\n%s"
                         '[key "B"]\nenv = KEY_B\npriority = 1\n'
                         '[provider "p"]\ndialect = openai\nbase_url = %s\n'
                         "intercept = api.openai.com\nca_file = %s\nkeys = %s\n"
                         "models = gpt-4o-mini\n"
                         % (port, envfile,
                            '[key "A"]\nenv = KEY_A\npriority = 0\n' if with_a else "",
                            mock.url, mock.ca_path, "A, B" if with_a else "B"))
    write(keys_a)
    return mock, env.start_daemon(fake_clock=T0), envfile, write


def test_rotated_secret_clears_the_keys_backoff(env):
    """A revoked key replaced in env_file (same key name, new value) is a new credential:
    SIGHUP clears its backoff rows (durably: written ahead) and logs the key by name."""
    mock, d, envfile, write = _rotation_setup(env)
    mock.script("secret-A", [{"status": 401, "times": -1}])
    eq(chat(env).headers.get("x-aor-key"), "B", "A refused, B answered")
    eq(row(d, "A")["last_error_kind"], "auth", "A backed off for auth")
    with open(envfile, "w") as f:
        f.write("KEY_A=secret-A-new\n")
    reload(env, d, lambda t: t)
    log = d.stderr_text()
    check("key 'A' has a new secret" in log, "the rotation is logged by name: %s" % log[-600:])
    check("secret-A-new" not in log, "the secret is never logged")
    eq(row(d, "A"), None, "A's backoff row is cleared")
    r = chat(env)
    eq((r.status, r.headers.get("x-aor-key")), (200, "A"), "A used at once with its new secret")
    eq(len(mock.requests(key="secret-A-new")), 1, "sent with the new secret")
    eq(tried(mock, "A"), 1, "the old secret not used again")
    # Durable: a restart replays the reset (the row would come back from the log otherwise).
    mock.script("secret-A-new", [{"status": 200}])
    eq(d.stop(), 0, "stopped")
    d = env.start_daemon(fake_clock=T0)
    eq(row(d, "A"), None, "still cleared after a restart")


def test_a_renamed_providers_circuit_is_not_shown(env):
    """QA: after a reload renamed provider p to q, p's open circuit was still listed by
    /admin/api/state and `aor status` (its backoff and sticky rows were not), and `aor
    backoff reset p` refused it. Like those rows it stays stored, unshown."""
    mock, d = setup(env, routing="breaker_failures = 2")
    mock.script("secret-A", [{"status": 503, "times": -1}])
    mock.script("secret-B", [{"status": 503, "times": -1}])
    eq(chat(env).status, 503, "both keys failed")
    eq([(b["provider"], b["state"]) for b in d.state()["breakers"]], [("p", "open")],
       "p's circuit is open")
    reload(env, d, lambda t: t.replace('[provider "p"]', '[provider "q"]'))
    st = d.state()
    eq((st["backoff"], st["breakers"]), ([], []), "p's rows and circuit are not shown")
    mock.script("secret-A", [])
    r = chat(env)
    eq((r.status, r.headers.get("x-aor-provider")), (200, "q"), "q serves at once")


def test_a_key_back_with_a_new_secret_is_a_new_credential(env):
    """QA: a key removed by one reload and back with a new secret at the next kept the
    old secret's backoff row (the reload compared with the config just before only), also
    over a restart. The secret is compared with the last one aord saw under that name."""
    mock, d, envfile, write = _rotation_setup(env)
    mock.script("secret-A", [{"status": 401, "times": -1}])
    eq(chat(env).headers.get("x-aor-key"), "B", "A refused, B answered")
    eq(row(d, "A")["last_error_kind"], "auth", "A backed off for auth")
    reload(env, d, lambda t: (write(False), open(env.config_path).read())[1])
    with open(envfile, "w") as f:
        f.write("KEY_A=secret-A-new\n")
    reload(env, d, lambda t: (write(True), open(env.config_path).read())[1])
    check("SIGHUP: key 'A' has a new secret: a new credential, 1 backoff row cleared"
          in d.stderr_text(), "said: %s" % d.stderr_text()[-600:])
    eq(row(d, "A"), None, "A's backoff row is cleared")
    r = chat(env)
    eq((r.status, r.headers.get("x-aor-key")), (200, "A"), "A used with its new secret")
    eq(d.stop(), 0, "stopped")
    d = env.start_daemon(fake_clock=T0)
    eq(row(d, "A"), None, "still cleared after a restart")
    check("new secret" not in d.stderr_text(), "no rotation at the restart: the same secret")


def test_a_reload_that_changes_nothing_keeps_a_rotated_keys_backoff(env):
    """QA: with the state file write-locked by another process, a rotated key's new
    fingerprint could not be stored; every later reload that changed nothing compared with
    the stale stored one, said "has a new secret" again and dropped the backoff the new
    secret had earned. aord remembers each key's fingerprint in memory too."""
    mock, d, envfile, write = _rotation_setup(env)
    db = sqlite3.connect(env.db_path, isolation_level=None, timeout=0.1)
    try:
        db.execute("BEGIN IMMEDIATE")  # another process holds the write lock
        with open(envfile, "w") as f:
            f.write("KEY_A=secret-A-new\n")
        reload(env, d, lambda t: t)
        check("SIGHUP: key 'A' has a new secret" in d.stderr_text(), "the rotation is seen")
        mock.script("secret-A-new", [{"status": 429, "headers": {"retry-after": "600"}}])
        eq(chat(env).headers.get("x-aor-key"), "B", "the new secret throttled, B answered")
        eq(row(d, "A")["window_s"], 600, "A backed off for 600 s")
        n = d.stderr_text().count("has a new secret")
        reload(env, d, lambda t: t)  # nothing changed
        eq(d.stderr_text().count("has a new secret"), n, "no rotation said again")
        eq(row(d, "A")["window_s"], 600, "A's backoff kept")
    finally:
        db.execute("ROLLBACK")
        db.close()


def test_an_answer_to_the_replaced_secret_is_not_recorded(env):
    """QA: a request still waiting on the old (revoked) secret when a reload rotated the
    key got its 401 after the reload, and it was recorded against the key: the new
    credential was benched for 120 s and never tried."""
    mock, d, envfile, write = _rotation_setup(env)
    mock.script("secret-A", [{"status": 401, "delay_ms": 3000, "times": -1}])
    out = {}
    t = threading.Thread(target=lambda: out.update(r=chat(env)))
    t.start()
    aortest.wait_until(lambda: len(mock.requests(key="secret-A")) == 1,
                       what="the request on the old secret to reach the mock")
    with open(envfile, "w") as f:
        f.write("KEY_A=secret-A-new\n")
    reload(env, d, lambda t: t)
    t.join(30)
    eq((out["r"].status, out["r"].headers.get("x-aor-key")), (200, "B"),
       "the old secret's 401, then B answered")
    eq(row(d, "A"), None, "no backoff row for A: the 401 was the replaced secret's")
    check("p/A: auth with the key's secret a reload replaced: not recorded" in d.stderr_text(),
          "said: %s" % d.stderr_text()[-600:])
    r = chat(env)
    eq((r.status, r.headers.get("x-aor-key")), (200, "A"), "A used at once with its new secret")
    eq(len(mock.requests(key="secret-A-new")), 1, "sent with the new secret")


def test_per_key_reset_route_and_cli(env):
    mock, d = setup(env)
    mock.script("secret-A", [{"status": 429, "times": -1}])
    mock.script("secret-B", [{"status": 429, "times": -1}])
    eq(chat(env).status, 429, "both throttled")
    eq(sorted(b["key"] for b in d.state()["backoff"]), ["A", "B"], "both backed off")
    st, _, body = d.admin("POST", "/admin/api/backoff/reset?provider=p&key=A")
    eq(st, 200, "per-key reset: %s" % body)
    eq(json.loads(body)["removed"], 1, "one row removed")
    eq(sorted(b["key"] for b in d.state()["backoff"]), ["B"], "only A's row went")
    st, _, body = d.admin("POST", "/admin/api/backoff/reset?provider=p&key=nosuch")
    eq(st, 404, "unknown key of the provider: %s" % body)
    check(b"key" in body, "says which: %r" % body)
    st, _, body = d.admin("POST", "/admin/api/backoff/reset?provider=nosuch&key=A")
    eq(st, 404, "unknown provider")
    # A name that decodes to a NUL byte first names no provider; it is not "missing" (QA).
    st, _, body = d.admin("POST", "/admin/api/backoff/reset?provider=%00%ff")
    eq((st, b"no such provider" in body), (404, True), "provider=%%00%%ff: %r" % body)
    st, _, body = d.admin("POST", "/admin/api/backoff/reset?provider=")
    eq((st, b"provider=NAME is required" in body), (400, True), "provider= empty: %r" % body)
    st, _, body = d.admin("POST", "/admin/api/backoff/reset?provider=p&key=%00")
    eq((st, b"no such key" in body), (404, True), "key=%%00: %r" % body)
    # The CLI: reset PROVIDER KEY, and an unknown key.
    rc, out, err = aor(env, "backoff", "reset", "p", "B")
    eq(rc, 0, "aor backoff reset p B (stderr %r)" % err)
    eq(out, "backoff reset for p key B (1 backoff row removed)\n", "its output")
    eq(d.state()["backoff"], [], "B's row went")
    rc, out, err = aor(env, "backoff", "reset", "p", "nosuch")
    eq(rc, 1, "unknown key: exit 1")
    check("no key named 'nosuch'" in err, "names the key: %r" % err)
    # Durable: written ahead as a key reset.
    db = sqlite3.connect(env.db_path)
    n = db.execute("select count(*) from state_events where type = 'reset' and key = 'A'"
                   " and provider = 'p'").fetchone()[0]
    eq(n, 1, "the key reset is in the event log")
    # Without key: the existing provider reset (§8), rows and circuits.
    chat(env, token="client-2")
    check(d.state()["backoff"], "backed off again")
    st, _, body = d.admin("POST", "/admin/api/backoff/reset?provider=p")
    eq(st, 200, "provider reset")
    eq(d.state()["backoff"], [], "provider reset clears every key")


def test_exhausted_usage_is_shown_and_cleared(env):
    """QA: a key held back by an exhausted usage window was invisible (no state, `aor
    status` said "backoff: none active") and `aor backoff clear` did not free it."""
    mock, d = setup(env)
    mock.script("secret-A", [{"status": 200, "headers": EXHAUSTED_30S}])
    eq(chat(env).headers.get("x-aor-key"), "A", "A answered, its window now exhausted")
    st = d.state()
    for field in ("now", "backoff", "breakers", "sticky", "keys", "providers", "config"):
        check(field in st, "existing field %s kept" % field)
    u = st["usage"]
    eq([(x["provider"], x["key"], x["window"], x["remaining"], x["reset_at"]) for x in u],
       [("p", "A", "requests", 0, T0 + 30)], "the exhausted window is in the state")
    eq(chat(env).headers.get("x-aor-key"), "B", "A skipped")
    rc, out, err = aor(env, "status")
    eq(rc, 0, "status (stderr %r)" % err)
    check("usage exhausted (1 window" in out, "status shows the exhausted key: %s" % out)
    check(any(l.split() == ["p/A", "requests", "free", "in", "30", "s", "free", "in", "30", "s"]
              for l in out.splitlines()),
          "the window's row (its reset, the key's): %s" % out)
    rc, out, err = aor(env, "backoff")
    check("p/A" in out and "requests" in out, "backoff list shows it too: %s" % out)
    rc, out, err = aor(env, "backoff", "clear")
    eq(rc, 0, "clear (stderr %r)" % err)
    check("exhausted usage cleared for 1 key" in out, "clear says so: %r" % out)
    eq(d.state()["usage"], [], "the snapshot is gone")
    eq(chat(env).headers.get("x-aor-key"), "A", "A used again at once")
    rc, out, err = aor(env, "status")
    check("usage: no key exhausted" in out, "status: %s" % out)


def test_backoff_unknown_subcommand_is_named(env):
    rc, out, err = aor(env, "backoff", "bogus")
    eq(rc, 2, "usage error")
    check("unknown subcommand 'bogus'" in err, "names it: %r" % err)
    rc, out, err = aor(env, "backoff", "reset")
    eq(rc, 2, "reset without PROVIDER")
    check("PROVIDER is required" in err, err)


def test_status_after_a_reload_that_moved_listen_says_why(env):
    """QA: after [daemon] listen changed and a SIGHUP, aord stays on its old address (it
    says so in its log) while `aor status` reads the new one from the file and found no
    admin API there, with no word on why. Now it says: restart aord."""
    mock, d = setup(env)
    newport = aortest.free_port()
    text = open(env.config_path).read()
    open(env.config_path, "w").write(
        text.replace("listen = 127.0.0.1:%d" % d.port, "listen = 127.0.0.1:%d" % newport))
    n = d.stderr_text().count("take effect at the next start")
    os.kill(d.pid, signal.SIGHUP)
    aortest.wait_until(lambda: d.stderr_text().count("take effect at the next start") > n,
                       what="aord says the address stays until the next start")  # fmt: skip
    rc, out, err = aor(env, "status")
    eq(rc, 1, "aor status cannot reach the admin API (stdout %r)" % out)
    check("does not answer" in out and "restart aord" in out, "and says why: %r" % out)


def _open_gated_stream(d, mock, gate):
    """A sidecar stream from key A that the mock holds after 2 events; returns (conn,
    response, first lines)."""
    import http.client
    mock.script("secret-A", [{"kind": "gated_stream", "gate": gate, "gate_after": 2,
                              "events": 4}])
    conn = http.client.HTTPConnection("127.0.0.1", d.port, timeout=15)
    body = json.dumps({"model": "gpt-4o-mini", "stream": True,
                       "messages": [{"role": "user", "content": "hi"}]})
    conn.request("POST", "/v1/chat/completions", body,
                 {"content-type": "application/json", "authorization": "Bearer c"})
    r = conn.getresponse()
    eq(r.status, 200, "stream status")
    first = [r.readline() for _ in range(4)]  # two events: data line + blank line each
    check(all(first), "the first events arrived: %r" % first)
    return conn, r


def test_sigterm_lets_answers_in_flight_finish(env):
    """QA: SIGTERM cut every open stream at once (a `systemctl --user restart` mid-answer
    lost it). Now: no new connections, and answers in flight finish (up to 10 s)."""
    import socket
    import time

    mock, d = setup(env)
    conn, r = _open_gated_stream(d, mock, "g1")
    idle = socket.create_connection(("127.0.0.1", d.port))  # keep-alive, no request
    os.kill(d.pid, signal.SIGTERM)
    aortest.wait_until(lambda: "answer in flight may finish" in d.stderr_text(),
                       what="the drain logged")
    check(not os.path.exists(env.socket_path), "the shim socket is gone at once")
    try:
        socket.create_connection(("127.0.0.1", d.port), timeout=2).close()
        raise AssertionError("a new sidecar connection was accepted while stopping")
    except OSError:
        pass
    idle.settimeout(5)
    eq(idle.recv(1), b"", "the idle keep-alive connection is closed")
    check(d.alive(), "aord waits for the stream")
    mock.gate("g1")
    rest = r.read()  # raises IncompleteRead if the stream is cut
    check(b"data: [DONE]" in rest, "the stream finished: %r" % rest[-200:])
    conn.close()
    end = time.monotonic() + 10
    while d.alive() and time.monotonic() < end:
        time.sleep(0.05)
    eq(d.proc.returncode, 0, "aord exit code after the drain")
    check("every answer in flight finished" in d.stderr_text(), "logged")


def test_second_sigterm_stops_at_once(env):
    import http.client
    import time

    mock, d = setup(env)
    conn, r = _open_gated_stream(d, mock, "g2")
    os.kill(d.pid, signal.SIGTERM)
    aortest.wait_until(lambda: "answer in flight may finish" in d.stderr_text(),
                       what="the drain logged")
    os.kill(d.pid, signal.SIGTERM)
    end = time.monotonic() + 5
    while d.alive() and time.monotonic() < end:
        time.sleep(0.05)
    eq(d.proc.returncode, 0, "aord stopped at the second signal, exit 0")
    try:
        r.read()
        raise AssertionError("the held stream ended cleanly although aord stopped")
    except (http.client.IncompleteRead, ConnectionError):
        pass  # cut: the client sees an error, never a clean end (§5.3)
    conn.close()
    mock.gate("g2")


def test_drain_survives_half_close_pipelining_and_uploads(env):
    """QA of the drain: bytes or EOF from the client on a busy connection after SIGTERM
    freed it mid-answer (and aord exited), and a request still being uploaded got no
    answer. Each now gets its answer, then the connection closes."""
    import socket
    import time

    mock, d = setup(env)
    mock.script("secret-A", [{"kind": "gated_stream", "gate": "g3", "gate_after": 2,
                              "events": 4},
                             {"kind": "gated_stream", "gate": "g4", "gate_after": 2,
                              "events": 4}])
    body = json.dumps({"model": "gpt-4o-mini", "stream": True,
                       "messages": [{"role": "user", "content": "hi"}]}).encode()
    head = ("POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\n"
            "Authorization: Bearer c\r\nContent-Type: application/json\r\n"
            "Content-Length: %d\r\n\r\n" % len(body)).encode()
    half = socket.create_connection(("127.0.0.1", d.port), timeout=15)
    half.sendall(head + body)
    pipe = socket.create_connection(("127.0.0.1", d.port), timeout=15)
    pipe.sendall(head + body)
    upload = socket.create_connection(("127.0.0.1", d.port), timeout=15)
    upload.sendall(head + body[:10])  # the rest comes after SIGTERM
    for s in (half, pipe):
        got = b""
        while got.count(b"data: ") < 2:
            got += s.recv(65536)
    os.kill(d.pid, signal.SIGTERM)
    aortest.wait_until(lambda: "answers in flight may finish" in d.stderr_text(),
                       what="the drain logged")
    half.shutdown(socket.SHUT_WR)
    pipe.sendall(head + body)  # a second request behind the one in flight
    upload.sendall(body[10:])
    time.sleep(0.3)
    check(d.alive(), "aord still draining")
    mock.gate("g3")
    mock.gate("g4")
    from test_files_qa import read_to_eof as rest
    for name, s in (("half-closed", half), ("pipelined", pipe)):
        r = rest(s)
        check(r.endswith(b"0\r\n\r\n") and b"[DONE]" in r, "%s: the stream finished: %r"
              % (name, r[-120:]))
        check(r.count(b"HTTP/1.1 ") == 0, "%s: no second answer during the drain" % name)
    r = rest(upload)
    check(r.startswith(b"HTTP/1.1 200"), "the upload got its answer: %r" % r[:200])
    # Its head was written during the drain: it says it is the connection's last, so a
    # pooling client opens a new connection instead of failing on this one (QA).
    check(b"\r\nConnection: close\r\n" in r.split(b"\r\n\r\n", 1)[0] + b"\r\n",
          "the answer written during the drain says Connection: close: %r" % r[:300])
    end = time.monotonic() + 10
    while d.alive() and time.monotonic() < end:
        time.sleep(0.05)
    eq(d.proc.returncode, 0, "aord exit code after the drain")


def test_answer_in_flight_keeps_its_config_over_reloads(env):
    """A config replaced by SIGHUP is freed once no request holds it (before, every old
    config stayed until exit: memory and old secrets). A stream that started on key A keeps
    A's config while three reloads remove A and rename the provider: it finishes, and the
    next request uses the new config. Under AddressSanitizer a config freed too early
    stops aord (heap-use-after-free) and cuts the stream."""
    mock, d = setup(env)
    conn, r = _open_gated_stream(d, mock, "g-reload")
    eq(r.getheader("x-aor-key"), "A", "the stream went to A")
    reload(env, d, lambda t: t.replace("keys = A, B", "keys = B"))
    reload(env, d, lambda t: t.replace('[provider "p"]', '[provider "q"]'))
    reload(env, d, lambda t: t + "\n[routing]\nbackoff_initial_s = 7\n")
    mock.gate("g-reload")
    rest = r.read()
    check(b"data: [DONE]" in rest, "the stream finished after the reloads: %r" % rest[-200:])
    conn.close()
    check(d.alive(), "aord still runs")
    r2 = chat(env)
    eq((r2.status, r2.headers.get("x-aor-provider"), r2.headers.get("x-aor-key")),
       (200, "q", "B"), "a new request uses the reloaded config")
    eq([k["key"] for k in d.state()["keys"]], ["B"], "the state shows the new keys only")
