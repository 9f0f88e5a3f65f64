"""State and clock sanity (docs/store.md "Rows from the future", spec §4.4, §4.5, §9 "Test
clock"): rows written while the clock was far ahead are limited at the next start; a bad
AOR_FAKE_CLOCK stops aord with a message; the breaker window includes its ends; an
OpenRouter moderation refusal is the client's answer, not a key failure. Real aord + mock
provider, fake clock."""
import json
import os
import subprocess

import aortest
from aortest import check, eq

T0 = 1800000000
AHEAD = 4000000000  # QA: AOR_FAKE_CLOCK=4000000000, then a normal start


def config(env, mock, keys=(("A", 0),), routing=""):
    port = aortest.free_port()
    cfg = "[daemon]\nlisten = 127.0.0.1:%d\n" % port
    if routing:
        cfg += "[routing]\n%s\n" % routing
    for name, prio in keys:
        var = "KEY_" + name
        env.set_keys(**{var: "secret-" + name})
        cfg += '[key "%s"]\nenv = %s\npriority = %d\n' % (name, var, prio)
    cfg += ('[provider "p"]\ndialect = openai\nbase_url = %s\nintercept = api.openai.com\n'
            "ca_file = %s\nkeys = %s\nmodels = gpt-4o-mini\n"
            % (mock.url, mock.ca_path, ", ".join(n for n, _ in keys)))
    env.write_config(cfg)


def chat(env):
    body = {"model": "gpt-4o-mini", "messages": [{"role": "user", "content": "hi"}]}
    return env.curl(["https://api.openai.com/v1/chat/completions",
                     "-H", "Authorization: Bearer client-1",
                     "-H", "Content-Type: application/json", "-d", json.dumps(body)])


def rows(d, key):
    return [b for b in d.state()["backoff"] if b["key"] == key]


def test_backoff_from_a_clock_far_ahead_is_limited_at_start(env):
    """QA: one transient failure under AOR_FAKE_CLOCK=4000000000, then a start at the real
    time: 429 "free again in 2203878330 s", `aor backoff` "free in 277777 h". At start the
    failure is taken as a failure now (5 s window), the circuit as open at most
    breaker_open_s, and one warning names the rows."""
    mock = env.start_mock(tls=True)
    config(env, mock, routing="breaker_failures = 1")
    d = env.start_daemon(fake_clock=AHEAD)
    mock.script("secret-A", [{"status": 503}])
    eq(chat(env).status, 503, "the transient failure is passed on")
    eq([(b["until"], b["window_s"]) for b in rows(d, "A")], [(AHEAD + 5, 5)], "row ahead")
    eq([(b["model"], b["until"]) for b in d.state()["breakers"]], [("gpt-4o-mini", AHEAD + 30)],
       "circuit ahead")
    eq(d.stop(), 0, "stopped")

    d = env.start_daemon(fake_clock=T0)
    eq([(b["until"], b["window_s"], b["last_failure"], b["failure_count"]) for b in rows(d, "A")],
       [(T0 + 5, 5, T0, 1)], "taken as a failure now, curve level kept")
    eq([(b["model"], b["until"]) for b in d.state()["breakers"]], [("gpt-4o-mini", T0 + 30)],
       "the circuit ends within breaker_open_s")
    log = d.stderr_text()
    check("state at start: 1 backoff row and 1 circuit ended later than this config allows"
          in log and "key p/A until " in log and "circuit p/gpt-4o-mini until " in log,
          "one warning names the rows: %s" % log[-800:])
    check("secret-A" not in log, "no secret in the log")
    r = chat(env)
    eq(r.status, 429, "still backed off right after the start")
    check("free again in 30 s" in r.body, "a short wait: %s" % r.body)
    rc, out, err = env.run_client([os.path.join(env.build, "aor"), "backoff"], preload=False)
    check(rc == 0 and "free in 5 s" in out, "aor backoff: %r %r" % (out, err))
    d.advance(30)
    r = chat(env)
    eq((r.status, r.headers.get("x-aor-key")), (200, "A"), "free again after 30 s, not years")


def test_fake_clock_out_of_range_refused(env):
    """QA: AOR_FAKE_CLOCK=1e300 was accepted (failures stored but never active, every
    advance refused), 99999999999999999999 too. Accepted: Unix seconds 0 .. 253402300799
    (9999-12-31T23:59:59Z); anything else stops aord with exit 2 and says why."""
    env.write_config("[daemon]\nlisten = off\n")
    aord = os.path.join(env.build, "aord")
    for bad in ("1e300", "99999999999999999999", "253402300800", "-1", "nan", "inf", "12abc",
                "0x", " "):
        e = dict(env.env, AOR_FAKE_CLOCK=bad)
        try:
            r = subprocess.run([aord], env=e, capture_output=True, text=True, timeout=20)
        except subprocess.TimeoutExpired:
            raise AssertionError("AOR_FAKE_CLOCK=%r: aord started instead of refusing" % bad)
        eq(r.returncode, 2, "AOR_FAKE_CLOCK=%r refused (stderr %r)" % (bad, r.stderr))
        check("AOR_FAKE_CLOCK must be Unix seconds from 0 to 253402300799" in r.stderr
              and ("got '%s'" % bad) in r.stderr, "the message: %r" % r.stderr)
        check("Sanitizer" not in r.stderr, r.stderr)
    mock = env.start_mock(tls=True)
    config(env, mock)
    d = env.start_daemon(fake_clock=253402300799)
    eq(d.state().get("now", 253402300799), 253402300799, "the last second of 9999 is fine")
    eq(d.healthz(), 200, "running")


def test_breaker_window_includes_its_ends(env):
    """QA: spec §4.4 "3 failures within 60 s": failures at +40, +80, +100 (60 s from the
    first to the last) did not open the circuit; +41, +80, +100 did."""
    mock = env.start_mock(tls=True)
    config(env, mock)
    d = env.start_daemon(fake_clock=T0)
    mock.script("secret-A", [{"status": 500, "times": -1}])
    d.advance(40)
    eq(chat(env).status, 500, "failure at +40")
    d.advance(40)
    eq(chat(env).status, 500, "failure at +80")
    d.advance(20)
    eq(chat(env).status, 500, "failure at +100")
    eq([(b["model"], b["state"]) for b in d.state()["breakers"]], [("gpt-4o-mini", "open")],
       "three failures exactly 60 s apart open the circuit")


def test_openrouter_moderation_is_the_clients_answer(env):
    """QA: OpenRouter's 403 "Your input was flagged" (error.metadata.reasons /
    flagged_input) was auth: the flagged prompt went to every key, each got a 120 s auth
    cooldown and the circuit opened for everyone. It is a client error: returned as it
    came, no walk, no backoff, no circuit."""
    mock = env.start_mock(tls=True)
    config(env, mock, keys=(("A", 0), ("B", 1)))
    d = env.start_daemon(fake_clock=T0)
    mock.script("secret-A", [{"kind": "preset", "name": "openrouter-moderation-403"}])
    r = chat(env)
    eq((r.status, r.headers.get("x-aor-key"), r.headers.get("x-aor-attempts")), (403, "A", "1"),
       "returned as is after one attempt")
    check("flagged" in r.body and "harassment" in r.body, "the provider's body: %s" % r.body)
    eq(len(mock.requests(key="secret-B")), 0, "B never saw the flagged prompt")
    st = d.state()
    eq((st["backoff"], st["breakers"]), ([], []), "no backoff, no circuit")
    r = chat(env)
    eq((r.status, r.headers.get("x-aor-key")), (200, "A"), "the next request goes to A")
