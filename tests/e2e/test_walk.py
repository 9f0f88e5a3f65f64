"""Issue 2 end-to-end: a real client's request shim -> aord -> mock provider, with
failover, escalation across natural expiry, sidecar, streaming and all-backed-off."""
import json
import os
import select
import subprocess
import time

import aortest
from aortest import check, eq

T0 = 1800000000
CHAT = json.dumps({"model": "gpt-4o-mini", "messages": [{"role": "user", "content": "hi"}]})


def two_key_setup(env, fake_clock=T0, extra="", mock=None, debug=False, daemon_env=None,
                  daemon_bin=None):
    """aord with provider "openai" (keys A, then B; secrets key-a-secret, key-b-secret)
    in front of a mock provider (started here with TLS unless given; a plain-only mock
    gives a plain http:// base_url), intercepting api.openai.com.
    debug: AOR_DEBUG=1 for aord and every client; daemon_env: more variables for aord;
    daemon_bin: the aord binary to start (default $AOR_BUILD/aord).
    Returns (mock, daemon)."""
    if mock is None:
        mock = env.start_mock(tls=True)
    if debug:
        env.env["AOR_DEBUG"] = "1"
    port = aortest.free_port()
    env.set_keys(KEY_A="key-a-secret", KEY_B="key-b-secret")
    env.write_config(f"""
        [daemon]
        listen = 127.0.0.1:{port}
        [key "A"]
        env = KEY_A
        priority = 0
        [key "B"]
        env = KEY_B
        priority = 1
        [provider "openai"]
        dialect = openai
        base_url = {mock.url}
        intercept = api.openai.com
        {"ca_file = %s" % mock.ca_path if mock.ca_path else ""}
        keys = A, B
        models = gpt-4o-mini
        {extra}
        """)
    d = env.start_daemon(fake_clock=fake_clock, extra_env=daemon_env, binary=daemon_bin)
    return mock, d


def shim_chat(env, body=CHAT, extra=()):
    return env.curl(["https://api.openai.com/v1/chat/completions",
                     "-H", "Authorization: Bearer client-token",
                     "-H", "Content-Type: application/json", "-d", body] + list(extra))


def test_shim_failover_sticky_and_escalation(env):
    mock, d = two_key_setup(env)
    mock.script("key-a-secret", [{"status": 429, "times": -1}])
    r = shim_chat(env)
    eq(r.status, 200, "status through the shim")
    eq(r.headers.get("x-aor-key"), "B", "x-aor-key")
    eq(r.headers.get("x-aor-attempts"), "2", "x-aor-attempts")
    eq(r.headers.get("x-aor-provider"), "openai", "x-aor-provider")
    check("choices" in r.json(), "OpenAI answer body reached the client")
    eq(len(mock.requests(key="key-a-secret")), 1, "A tried once")
    st = d.state()
    rows = [b for b in st["backoff"] if b["key"] == "A"]
    eq(len(rows), 1, "A backed off")
    eq(rows[0]["window_s"], 5, "first window 5 s")
    eq(rows[0]["last_error_kind"], "rate", "kind")
    eq(rows[0]["until"], T0 + 5, "until = now + 5")

    # The next request goes to B without touching A.
    r = shim_chat(env)
    eq(r.status, 200, "second status")
    eq(r.headers.get("x-aor-key"), "B", "second key")
    eq(r.headers.get("x-aor-attempts"), "1", "second attempts")
    eq(len(mock.requests(key="key-a-secret")), 1, "A not touched while backed off")

    # Past A's window A is tried again, still 429s: the window doubles (natural expiry
    # is not evidence of recovery).
    d.advance(6)
    eq([b for b in d.state()["backoff"] if b["key"] == "A"], [], "A's window has expired")
    r = shim_chat(env)
    eq(r.status, 200, "third status")
    eq(r.headers.get("x-aor-key"), "B", "third key")
    eq(r.headers.get("x-aor-attempts"), "2", "A was retried first")
    eq(len(mock.requests(key="key-a-secret")), 2, "A tried again after its window")
    rows = [b for b in d.state()["backoff"] if b["key"] == "A"]
    eq(rows[0]["window_s"], 10, "escalated window after natural expiry")
    eq(rows[0]["failure_count"], 2, "failure_count")
    eq(rows[0]["until"], T0 + 6 + 10, "until")


def test_sidecar_failover(env):
    mock, d = two_key_setup(env)
    mock.script("key-a-secret", [{"status": 429, "times": -1}])
    base = "http://127.0.0.1:%d/v1" % d.port
    r = env.curl([base + "/chat/completions", "-H", "Content-Type: application/json",
                  "-d", CHAT], preload=False)
    eq(r.status, 200, "sidecar status")
    eq(r.headers.get("x-aor-key"), "B", "sidecar key")
    eq(r.headers.get("x-aor-attempts"), "2", "sidecar attempts")
    # A client that takes a base URL: OPENAI_BASE_URL with Node's openai SDK is in
    # test_clients.py; here Python's urllib against the same base.
    code = (
        "import json,os,urllib.request as u\n"
        "b=os.environ['OPENAI_BASE_URL']\n"
        "rq=u.Request(b+'/chat/completions',data=%r.encode(),headers={'Content-Type':'application/json','Authorization':'Bearer x'})\n"
        "r=u.urlopen(rq)\n"
        "print(r.status, r.headers['x-aor-key'], json.load(r)['object'])\n" % CHAT
    )
    rc, out, err = env.run_client(["python3", "-c", code], preload=False,
                                  extra_env={"OPENAI_BASE_URL": base})
    eq(rc, 0, "python exit (stderr: %s)" % err)
    eq(out.split(), ["200", "B", "chat.completion"], "python via sidecar")


def test_silent_upstream_times_out_and_the_walk_goes_on(env):
    """A provider that takes the request and sends nothing: after 600 s of the daemon's
    clock the attempt is a timeout (transient, spec §4.1) and the next key answers. QA
    found such an attempt held the client and the upstream connection for good."""
    import threading
    mock, d = two_key_setup(env)
    mock.script("key-a-secret", [{"kind": "slow_first_byte", "delay_ms": 30000}])
    res = {}
    t = threading.Thread(target=lambda: res.update(r=env.curl(
        [d.url + "/v1/chat/completions", "-H", "Content-Type: application/json", "-d", CHAT],
        preload=False, timeout=40)))
    t.start()
    aortest.wait_until(lambda: any(r["key"] == "key-a-secret" for r in mock.log()),
                       what="key A has the request")
    d.advance(599)
    time.sleep(1.5)  # two stall checks (one a second) at 599 s: nothing may happen yet
    check(t.is_alive(), "not cut before 600 s")
    d.advance(2)
    t.join(20)
    check(not t.is_alive(), "answered after the stall")
    r = res["r"]
    eq(r.status, 200, "status (%s)" % r.body[:200])
    eq(r.headers.get("x-aor-key"), "B", "the next key answered")
    eq(r.headers.get("x-aor-attempts"), "2", "attempts")
    check("sent nothing for 600 s" in d.stderr_text(), "the log says why")
    check(any(b["key"] == "A" for b in d.state()["backoff"]), "A is backed off (transient)")


def test_shim_client_that_leaves_ends_its_walk(env):
    """Chaos pass: a shim client that gave up (curl --max-time 1 closes its connection)
    kept its request walking: key A's late 429 sent the same request on to key B, for
    nobody (billed, and the answer thrown away). A full close of the shim's connection
    (POLLHUP on the Unix socket, unlike a shutdown(SHUT_WR)) now cancels the request in
    flight: no further candidate is tried and nothing is backed off."""
    client_that_leaves_ends_its_walk(env, "shim")


def test_sidecar_client_that_leaves_ends_its_walk(env):
    """The same for a sidecar client (curl --max-time 1 to the base URL): on loopback TCP
    a close and a half-close look alike until a write fails, so its request walked on to
    key B when A's 429 came. aord now asks the kernel after the client's socket
    (inet_diag): released by its process, the client is gone and the request is
    cancelled. A client that only half-closed is still answered
    (test_conn_io.test_half_closed_sidecar_client_waits_for_a_slow_answer)."""
    client_that_leaves_ends_its_walk(env, "sidecar")


def client_that_leaves_ends_its_walk(env, via):
    """curl (through the shim, or to the sidecar) gives up after 2 s while key A holds its
    request for 5 s and then answers 429: nothing goes on to key B, nothing is backed off,
    the debug log says why, and aord goes on serving. (2 s: on a loaded machine 1 s was
    sometimes spent before the shim's TLS request reached the mock.)"""
    mock, d = two_key_setup(env, fake_clock=None, debug=True)
    mock.script("key-a-secret", [{"status": 429, "delay_ms": 5000}])
    url = ("https://api.openai.com" if via == "shim" else d.url) + "/v1/chat/completions"
    args = [url, "-H", "Authorization: Bearer client-token", "-H",
            "Content-Type: application/json", "-d", CHAT]  # fmt: skip
    t0 = time.monotonic()
    r = env.curl(args, preload=via == "shim", timeout=2)
    eq(r.rc, 28, "curl gave up after 2 s (%s)" % r.stderr)
    check(any(x["key"] == "key-a-secret" for x in mock.log()), "key A had the request")
    time.sleep(max(0, 7 - (time.monotonic() - t0)))  # A's 429 came at 5 s
    eq([x["key"] for x in mock.log() if x["key"] != "key-a-secret"], [],
       "no other key got the request of a client that left")
    eq(d.state()["backoff"], [], "nothing backed off for it")
    check("%s client closed its connection with a request in flight: cancelled" % via
          in d.stderr_text(), "the debug log says so:\n" + d.stderr_text()[-2000:])
    r = env.curl(args, preload=via == "shim")
    eq((r.status, r.headers.get("x-aor-key")), (200, "A"), "aord goes on serving")


def test_probe_whose_client_left_hands_its_lease_back(env):
    """Review: a shim client that left during its circuit's probe cancelled the probe
    (test_shim_client_that_leaves_ends_its_walk), which then held the circuit shut for
    its whole lease (breaker_open_s, 30 s): every request skipped a provider that may
    have been well. The cancelled probe now hands its lease back and the next request is
    the probe."""
    mock, d = two_key_setup(env, debug=True)
    mock.script("key-a-secret", [{"status": 500, "times": 2}])
    mock.script("key-b-secret", [{"status": 500, "times": 2}])
    eq(shim_chat(env).status, 500, "request 1: A and B fail (2 failures)")
    d.advance(11)  # past both backoff windows (5 s)
    eq(shim_chat(env).status, 500, "request 2: A's failure, the 3rd, opens the circuit")
    check(any(b["state"] == "open" for b in d.state()["breakers"]), "circuit open")
    r = shim_chat(env)
    eq(r.status, 429, "request 3: the circuit is open (%s)" % r.body[:200])
    d.advance(31)  # past breaker_open_s (30) and the backoff windows: half-open
    mock.script("key-a-secret", [{"kind": "slow_first_byte", "delay_ms": 30000}])
    r = env.curl(["https://api.openai.com/v1/chat/completions", "-H",
                  "Authorization: Bearer client-token", "-H", "Content-Type: application/json",
                  "-d", CHAT], timeout=1)
    eq(r.rc, 28, "the probe's client gave up after 1 s (%s)" % r.stderr)
    aortest.wait_until(lambda: "shim client closed its connection with a request in flight"
                       in d.stderr_text(), what="the probe cancelled")
    r = shim_chat(env)
    eq((r.status, r.headers.get("x-aor-key")), (200, "A"),
       "the next request is the probe and closes the circuit (%s)" % r.body[:200])
    eq([b for b in d.state()["breakers"] if b["state"] != "closed"], [], "circuit closed")


def test_all_backed_off_openai_shape(env):
    mock, d = two_key_setup(env)
    mock.script("key-a-secret", [{"status": 429, "headers": {"retry-after": "30"}, "times": -1}])
    mock.script("key-b-secret", [{"status": 429, "times": -1}])
    r = shim_chat(env)
    # The walk ran out with upstream errors: the last upstream answer as it came.
    eq(r.status, 429, "walk out of candidates")
    eq(r.headers.get("x-aor-attempts"), "2", "both tried")
    before = len(mock.log())
    r = shim_chat(env)
    eq(r.status, 429, "all backed off")
    eq(len(mock.log()), before, "no upstream call while everything is backed off")
    eq(r.headers.get("retry-after"), "5", "Retry-After = earliest expiry (B: 5 s)")
    err = r.json()["error"]
    eq(err["code"], "aor_all_backed_off", "OpenAI error code")
    check("message" in err and "type" in err, "OpenAI error shape")
    eq(r.headers.get("x-aor-attempts"), "0", "no attempts")
    d.advance(2.5)
    r = shim_chat(env)
    eq(r.headers.get("retry-after"), "3", "Retry-After rounds up (2.5 s left)")


def test_all_backed_off_names_the_failure_that_came_last(env):
    """§5.6 "the last failure reason": A failed with 429 (rate), then B with 503
    (transient), in one walk under the test clock (same time for both): the next
    request's 429 names B's transient, not A's rate (QA: the tie went to A)."""
    mock, d = two_key_setup(env)
    mock.script("key-a-secret", [{"status": 429, "times": -1}])
    mock.script("key-b-secret", [{"status": 503, "times": -1}])
    r = shim_chat(env)
    eq((r.status, r.headers.get("x-aor-attempts")), (503, "2"), "B's 503 as it came")
    r = shim_chat(env)
    eq(r.status, 429, "all backed off")
    msg = r.json()["error"]["message"]
    check("last failure: transient" in msg, "the last failure is B's: %r" % msg)


def test_all_backed_off_anthropic_shape(env):
    mock = env.start_mock(tls=True)
    port = aortest.free_port()
    env.set_keys(ANT_A="ant-a-secret")
    env.write_config(f"""
        [daemon]
        listen = 127.0.0.1:{port}
        [key "ant"]
        env = ANT_A
        [provider "anthropic"]
        dialect = anthropic
        base_url = {mock.url}
        intercept = api.anthropic.com
        ca_file = {mock.ca_path}
        keys = ant
        models = claude-sonnet-4-5
        """)
    d = env.start_daemon(fake_clock=T0)
    mock.script("ant-a-secret", [{"kind": "preset", "name": "anthropic-overloaded-529", "times": -1}])
    body = json.dumps({"model": "claude-sonnet-4-5", "max_tokens": 10,
                       "messages": [{"role": "user", "content": "hi"}]})
    args = ["https://api.anthropic.com/v1/messages", "-H", "x-api-key: client",
            "-H", "anthropic-version: 2023-06-01", "-H", "content-type: application/json",
            "-d", body]
    r = env.curl(args)
    eq(r.status, 529, "overloaded passed on when the walk runs out")
    r = env.curl(args)
    eq(r.status, 429, "all backed off")
    j = r.json()
    eq(j["type"], "error", "Anthropic error shape: type")
    check("aor_all_backed_off" in json.dumps(j), "aor_all_backed_off in the body")
    eq(j["error"]["type"], "rate_limit_error", "Anthropic SDKs see a rate limit")
    eq(r.headers.get("retry-after"), "5", "Retry-After")


def test_anthropic_stream_event_by_event(env):
    mock = env.start_mock(tls=True)
    port = aortest.free_port()
    env.set_keys(ANT_A="ant-a-secret")
    env.write_config(f"""
        [daemon]
        listen = 127.0.0.1:{port}
        [key "ant"]
        env = ANT_A
        [provider "anthropic"]
        dialect = anthropic
        base_url = {mock.url}
        intercept = api.anthropic.com
        ca_file = {mock.ca_path}
        keys = ant
        models = *
        """)
    env.start_daemon()
    mock.script("ant-a-secret", [{"kind": "gated_stream", "events": 6, "gate": "g1"}])
    body = json.dumps({"model": "claude-sonnet-4-5", "max_tokens": 10, "stream": True,
                       "messages": [{"role": "user", "content": "hi"}]})
    p = env.spawn(["curl", "-sS", "-N", "https://api.anthropic.com/v1/messages",
                   "-H", "x-api-key: client", "-H", "anthropic-version: 2023-06-01",
                   "-H", "content-type: application/json", "-d", body])
    fd = p.stdout.fileno()
    got = b""
    end = time.monotonic() + 15
    while b"\n\n" not in got and time.monotonic() < end:
        r, _, _ = select.select([fd], [], [], 0.5)
        if r:
            chunk = os.read(fd, 65536)
            if not chunk:
                break
            got += chunk
    check(b"event: message_start" in got, "first event arrived before the gate opened: %r" % got[:200])
    check(b"message_stop" not in got, "the last event had not been sent yet")
    mock.gate("g1")
    rest, err = p.communicate(timeout=15)
    got += rest
    eq(p.returncode, 0, "curl exit (%s)" % err.decode(errors="replace"))
    check(b"event: message_stop" in got, "stream completed")
    check(got.count(b"event: ") >= 6, "all events forwarded")


def test_all_backed_off_says_what_the_last_failure_was(env):
    """§5.6 "the last failure reason": not only its kind ("transient") but what happened
    (QA: a new user with a wrong base_url saw "rate limit exceeded ... last failure:
    transient" and had to read aord's log to learn that the connection was refused)."""
    port = aortest.free_port()
    closed = aortest.free_port()
    env.set_keys(KEY_A="secret-A")
    env.write_config(
        "[daemon]\nlisten = 127.0.0.1:%d\n[key \"A\"]\nenv = KEY_A\n[provider \"p\"]\n"
        "dialect = openai\nbase_url = http://127.0.0.1:%d\nkeys = A\nmodels = gpt-4o-mini\n"
        % (port, closed))  # fmt: skip
    env.start_daemon(fake_clock=T0)
    url = "http://127.0.0.1:%d/v1/chat/completions" % port
    body = json.dumps({"model": "gpt-4o-mini", "messages": [{"role": "user", "content": "hi"}]})
    args = [url, "-H", "Authorization: Bearer c", "-H", "Content-Type: application/json",
            "-d", body]  # fmt: skip
    r = env.curl(args, preload=False)
    eq(r.status, 502, "the connection is refused: 502")
    r = env.curl(args, preload=False)
    eq(r.status, 429, "then everything is backed off")
    msg = r.json()["error"]["message"]
    check("last failure: transient (network:" in msg and "refused" in msg.lower(),
          "the 429 says what failed: %r" % msg)  # fmt: skip
