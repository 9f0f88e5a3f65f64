"""§4.4 end-to-end: a half-open circuit lets one probe through; while it is in flight
the other requests skip the provider as if its circuit were open (QA: a second request
sent while the probe was waiting on the provider was sent to it too)."""
import json
import threading
import time

import aortest
from aortest import check, eq

T0 = 1800000000


def setup(env):
    """Provider p (keys A, B, key priority 0, provider priority 0) and provider q (key Q,
    provider priority 1), both serving gpt-4o-mini from one plain mock. Returns (mock, d)."""
    mock = env.start_mock(tls=False)
    port = aortest.free_port()
    env.set_keys(KEY_A="secret-A", KEY_B="secret-B", KEY_Q="secret-Q")
    env.write_config(f"""
        [daemon]
        listen = 127.0.0.1:{port}
        [key "A"]
        env = KEY_A
        [key "B"]
        env = KEY_B
        [key "Q"]
        env = KEY_Q
        [provider "p"]
        dialect = openai
        base_url = {mock.url}
        keys = A, B
        models = gpt-4o-mini
        priority = 0
        [provider "q"]
        dialect = openai
        base_url = {mock.url}
        keys = Q
        models = gpt-4o-mini
        priority = 1
        """)
    return mock, env.start_daemon(fake_clock=T0)


def chat(env, d, extra=()):
    body = json.dumps({"model": "gpt-4o-mini", "messages": [{"role": "user", "content": "hi"}]})
    return env.curl([d.url + "/v1/chat/completions", "-H", "Authorization: Bearer client-1",
                     "-H", "Content-Type: application/json", "-d", body] + list(extra),
                    preload=False)


def p_calls(mock):
    return sum(1 for r in mock.log() if r["key"] in ("secret-A", "secret-B"))


def test_probe_in_flight_holds_other_requests(env):
    mock, d = setup(env)
    mock.script("secret-A", [{"status": 500, "times": -1}])
    mock.script("secret-B", [{"status": 500, "times": -1}])
    r = chat(env, d)
    eq((r.status, r.headers.get("x-aor-provider")), (200, "q"), "p's keys failed, q answered")
    d.advance(6)  # the 5 s backoff windows are over
    r = chat(env, d)
    eq(r.headers.get("x-aor-provider"), "q", "q answered")
    eq([b["state"] for b in d.state()["breakers"]], ["open"], "third failure opened p's circuit")
    d.advance(31)  # the circuit's 30 s and every backoff window are over: half-open
    mock.script("secret-A", [{"status": 500, "delay_ms": 1500, "times": -1}])
    mock.script("secret-B", [{"status": 500, "delay_ms": 1500, "times": -1}])
    before = p_calls(mock)
    res = {}
    t = threading.Thread(target=lambda: res.update(r=chat(env, d)))
    t.start()
    time.sleep(0.4)  # request 1 (the probe) is waiting on p
    r2 = chat(env, d)
    t.join(30)
    check(not t.is_alive(), "request 1 answered")
    r1 = res["r"]
    eq((r1.status, r1.headers.get("x-aor-provider")), (200, "q"),
       "the probe failed, reopened the circuit, q answered")
    eq((r2.status, r2.headers.get("x-aor-provider"), r2.headers.get("x-aor-attempts")),
       (200, "q", "1"), "request 2 skipped p while the probe was in flight")
    eq(p_calls(mock) - before, 1, "one call to p: the probe only")
    eq([b["state"] for b in d.state()["breakers"]], ["open"], "the failed probe reopened it")


def test_lost_probe_does_not_wedge_the_circuit(env):
    """A probe whose answer does not come (the provider holds it) holds the circuit only
    for its lease (breaker_open_s): then the next request is the probe. Until 2026-12-02
    the probe here was lost by a sidecar client that gave up unnoticed; a client that
    leaves is now seen, and its probe hands the lease back at once
    (test_walk.test_probe_whose_client_left_hands_its_lease_back)."""
    mock, d = setup(env)
    mock.script("secret-A", [{"status": 500, "times": -1}])
    mock.script("secret-B", [{"status": 500, "times": -1}])
    chat(env, d)
    d.advance(6)
    chat(env, d)
    eq([b["state"] for b in d.state()["breakers"]], ["open"], "p's circuit open")
    d.advance(31)
    mock.script("secret-A", [{"status": 500, "delay_ms": 8000}, {"status": 500, "times": -1}])
    before = p_calls(mock)
    res = {}
    t = threading.Thread(target=lambda: res.update(r=chat(env, d)))
    t.start()  # request 1, the probe: its client waits, the provider holds the answer
    aortest.wait_until(lambda: p_calls(mock) - before == 1, what="the probe at p")
    r2 = chat(env, d)
    eq((r2.headers.get("x-aor-provider"), r2.headers.get("x-aor-attempts")), ("q", "1"),
       "request 2 skipped p: the probe's lease runs")
    eq([b["state"] for b in d.state()["breakers"]], ["half-open"], "still half-open")
    d.advance(29)
    r3 = chat(env, d)
    eq((r3.headers.get("x-aor-provider"), r3.headers.get("x-aor-attempts")), ("q", "1"),
       "request 3 skipped p: 29 s into the 30 s lease")
    eq(p_calls(mock) - before, 1, "one call to p so far: the probe without an answer")
    d.advance(1)
    r4 = chat(env, d)
    eq((r4.status, r4.headers.get("x-aor-provider")), (200, "q"),
       "request 4 was the new probe (it failed), then q answered")
    eq(p_calls(mock) - before, 2, "the lease ended: the next request probed p")
    eq([b["state"] for b in d.state()["breakers"]], ["open"], "the failed probe reopened it")
    t.join(40)
    check(not t.is_alive(), "request 1 ended")


def test_a_streaming_probe_closes_the_circuit_when_its_answer_starts(env):
    """The probe's answer is a long stream that started well: the circuit closes then (any
    success closes it, §4.4), not at the stream's end while every other request skips the
    provider; the attempt's own success (sticky) still waits for the clean end."""
    mock, d = setup(env)
    mock.script("secret-A", [{"status": 500, "times": 2}])
    mock.script("secret-B", [{"status": 500, "times": 1}])
    chat(env, d)
    d.advance(6)
    chat(env, d)
    eq([b["state"] for b in d.state()["breakers"]], ["open"], "p's circuit open")
    d.advance(31)
    mock.script("secret-A", [{"kind": "gated_stream", "events": 4, "gate": "g1"}])
    body = json.dumps({"model": "gpt-4o-mini", "stream": True,
                       "messages": [{"role": "user", "content": "hi"}]})
    p = env.spawn(["curl", "-sS", "-N", d.url + "/v1/chat/completions", "-H",
                   "Authorization: Bearer client-1", "-H", "Content-Type: application/json",
                   "-d", body], preload=False)
    aortest.wait_until(lambda: d.state()["breakers"] == [], 10,
                       what="circuit closed while the probe's stream runs")
    r2 = chat(env, d)
    eq(r2.headers.get("x-aor-provider"), "p", "another request goes to p meanwhile")
    mock.gate("g1")
    p.wait(20)
