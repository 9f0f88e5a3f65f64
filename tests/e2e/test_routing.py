"""Issue 3 end-to-end: classification from status and body, backoff curve, circuit
breakers, sticky thresholds, round-robin, the walk budget, terminal answers in each
dialect, model mapping and writes only on state change — through the real aord and
the mock provider."""
import json
import os
import re
import socket
import threading
import time

import aortest
from aortest import check, eq

T0 = 1800000000
CHAT_BODY = json.dumps({"model": "gpt-4o-mini", "messages": [{"role": "user", "content": "hi"}]})


def setup(env, keys=(("A", 0), ("B", 1)), routing="", provider="", models="gpt-4o-mini",
          dialect="openai", host="api.openai.com", extra="", base_suffix="", prov="p",
          extra_env=None):
    mock = env.start_mock(tls=True)
    port = aortest.free_port()
    cfg = "[daemon]\nlisten = 127.0.0.1:%d\n" % port
    if routing:
        cfg += "[routing]\n%s\n" % routing
    names = []
    for name, prio in keys:
        var = "KEY_" + name.upper()
        env.set_keys(**{var: "secret-" + name})
        cfg += '[key "%s"]\nenv = %s\npriority = %d\n' % (name, var, prio)
        names.append(name)
    cfg += ('[provider "%s"]\ndialect = %s\nbase_url = %s\nintercept = %s\nca_file = %s\n'
            "keys = %s\nmodels = %s\n%s\n" % (prov, dialect, mock.url + base_suffix, host,
                                            mock.ca_path, ", ".join(names), models, provider))
    cfg += extra
    env.write_config(cfg)
    d = env.start_daemon(fake_clock=T0, extra_env=extra_env)
    return mock, d


def chat(env, model="gpt-4o-mini", stream=False, token="client-1", extra=()):
    body = {"model": model, "messages": [{"role": "user", "content": "hi"}]}
    if stream:
        body["stream"] = True
    return env.curl(["https://api.openai.com/v1/chat/completions",
                     "-H", "Authorization: Bearer " + token,
                     "-H", "Content-Type: application/json", "-d", json.dumps(body)] + list(extra))


def row(d, key):
    rows = [b for b in d.state()["backoff"] if b["key"] == key]
    return rows[0] if rows else None


def tried(mock, name):
    return len(mock.requests(key="secret-" + name))


def writes(d):
    m = re.search(r"^aor_state_writes_total (\d+)$", d.metrics(), re.M)
    check(m, "aor_state_writes_total in /metrics")
    return int(m.group(1))


# --- §4.1 classification through the daemon ------------------------------------

def test_quota_is_flat_cooldown(env):
    mock, d = setup(env)
    mock.script("secret-A", [{"kind": "preset", "name": "openai-quota-429", "times": -1}])
    r = chat(env)
    eq((r.status, r.headers.get("x-aor-key")), (200, "B"), "walked to B")
    b = row(d, "A")
    eq((b["last_error_kind"], b["window_s"]), ("quota", 120), "quota cooldown")
    d.advance(121)
    chat(env)
    b = row(d, "A")
    eq((b["window_s"], b["until"]), (120, T0 + 121 + 120), "quota never escalates")


def test_request_too_large_is_client_error_no_walk(env):
    mock, d = setup(env)
    mock.script("secret-A", [{"kind": "preset", "name": "openai-request-too-large"}])
    r = chat(env)
    eq(r.status, 429, "returned as is")
    eq(r.headers.get("x-aor-attempts"), "1", "no walk")
    check("Request too large" in r.body, "the provider's body")
    eq(tried(mock, "B"), 0, "B not tried")
    eq(row(d, "A"), None, "no backoff for a client error")


def test_html_from_wrong_base_url_is_502(env):
    mock, d = setup(env)
    mock.script("*", [{"kind": "html", "times": -1}])
    r = chat(env)
    eq(r.status, 502, "502")
    check("'p'" in r.body and "base_url" in r.body, "message names the provider: %s" % r.body)
    eq(len(mock.log()), 1, "no retry storm")


def test_retry_after_hint_sets_window_and_curve_continues(env):
    mock, d = setup(env)
    mock.script("secret-A", [{"status": 429, "headers": {"retry-after": "30"}},
                             {"status": 429, "times": -1}])
    chat(env)
    b = row(d, "A")
    eq((b["window_s"], b["until"]), (30, T0 + 30), "hint window")
    d.advance(31)
    chat(env)
    b = row(d, "A")
    eq((b["window_s"], b["failure_count"]), (10, 2), "curve level 2 after a hinted level 1")


def test_retry_after_ignore(env):
    mock, d = setup(env, provider="retry_after = ignore")
    mock.script("secret-A", [{"status": 429, "headers": {"retry-after": "30"}}])
    chat(env)
    eq(row(d, "A")["window_s"], 5, "hint ignored")


# --- §4.2 backoff, §4.4 breakers -----------------------------------------------

def test_breaker_opens_after_three_failures_and_skips_without_call(env):
    mock, d = setup(env, keys=(("A", 0),))
    mock.script("secret-A", [{"status": 500, "times": -1}])
    eq(chat(env).status, 500, "first 500 passed on")
    d.advance(5)
    chat(env)
    d.advance(10)
    chat(env)
    eq(tried(mock, "A"), 3, "three attempts")
    st = d.state()
    eq(len(st["breakers"]), 1, "circuit open")
    br = st["breakers"][0]
    eq((br["provider"], br["model"], br["state"]), ("p", "gpt-4o-mini", "open"), "breaker row")
    eq(br["until"], T0 + 15 + 30, "open for 30 s")
    d.advance(20)  # A's 20 s window ends at T0+35; the circuit stays open until T0+45
    check(row(d, "A") is None, "backoff window over")
    r = chat(env)
    eq(r.status, 429, "open circuit: all backed off")
    eq(r.headers.get("retry-after"), "10", "until the circuit's end")
    eq(tried(mock, "A"), 3, "no upstream call while open")
    d.advance(10)
    mock.script("secret-A", [{"status": 200}])
    r = chat(env)
    eq(r.status, 200, "probe after expiry")
    eq(d.state()["breakers"], [], "success closed it")


def test_open_circuit_is_skipped_within_the_walk_and_after_a_failed_probe(env):
    """§4.4: an open circuit is skipped without an upstream call, also when it opened
    during the walk (this walk's own failure, or a failed probe): the provider's other
    keys are not tried then (QA: the probe walked every key)."""
    mock, d = setup(env)
    mock.script("secret-A", [{"status": 500, "times": -1}])
    mock.script("secret-B", [{"status": 500, "times": -1}])
    r = chat(env)
    eq((r.status, r.headers.get("x-aor-attempts")), (500, "2"), "A and B failed: 2 of 3")
    d.advance(6)  # both 5 s windows over
    r = chat(env)
    eq((r.status, r.headers.get("x-aor-attempts")), (500, "1"), "A's failure opened it")
    eq(tried(mock, "B"), 1, "B skipped: its circuit is open")
    eq([b["state"] for b in d.state()["breakers"]], ["open"], "circuit open")
    d.advance(31)  # the circuit's 30 s are over, and A's 10 s window
    r = chat(env)
    eq((r.status, r.headers.get("x-aor-attempts")), (500, "1"), "the probe: A only")
    eq(tried(mock, "B"), 1, "the failed probe reopened it: B skipped again")
    eq([b["state"] for b in d.state()["breakers"]], ["open"], "open again")


def test_breaker_counts_auth_and_quota_failures(env):
    """§4.4 counts retryable failures, and §4.1 makes quota and auth retryable: three
    keys answering 401 / 402 in one walk open the provider+model's circuit."""
    mock, d = setup(env, keys=(("A", 0), ("B", 1), ("C", 2)))
    mock.script("secret-A", [{"status": 401}])
    mock.script("secret-B", [{"status": 402}])
    mock.script("secret-C", [{"status": 401}])
    r = chat(env)
    eq(r.headers.get("x-aor-attempts"), "3", "every key tried")
    st = d.state()
    eq([(b["provider"], b["model"], b["state"]) for b in st["breakers"]],
       [("p", "gpt-4o-mini", "open")], "circuit open after auth and quota failures")


# --- §5.4 sticky and thresholds, §5.5 round-robin ------------------------------

def test_client_is_the_sha256_of_the_token(env):
    """§5.1: the client is the SHA-256 of the credential presented: the token of a bearer
    header (not "Bearer ..."), the same for that token sent as x-api-key."""
    import hashlib
    mock, d = setup(env)
    chat(env, token="tok-123")
    want = hashlib.sha256(b"tok-123").hexdigest()
    eq([s["client"] for s in d.state()["sticky"]], [want], "sticky client of a bearer token")
    env.curl(["https://api.openai.com/v1/chat/completions", "-H", "x-api-key: tok-123",
              "-H", "Content-Type: application/json", "-d",
              json.dumps({"model": "gpt-4o-mini", "messages": []})])
    eq([s["client"] for s in d.state()["sticky"]], [want], "x-api-key: the same client")


def test_redacting_a_credential_found_in_its_own_replacement_ends(env):
    """A client token that "[redacted]" contains (or is), in an upstream error: the
    redaction goes on after each replacement instead of finding it again for ever
    (review: aord hung)."""
    mock, d = setup(env)
    mock.script("secret-A", [{"status": 500, "body": {"error": {"code": "x [redacted] y",
                                                                 "type": "server_error"}}}])
    r = chat(env, token="[redacted]")
    eq((r.status, r.headers.get("x-aor-key")), (200, "B"), "walked on to B")
    eq(d.healthz(), 200, "aord still answers")


def test_sticky_moves_only_on_success_and_threshold(env):
    mock, d = setup(env, routing="key_priority_cache_threshold = 1")
    mock.script("secret-A", [{"status": 429}])
    r = chat(env)
    eq(r.headers.get("x-aor-key"), "B", "failover to B")
    st = d.state()["sticky"]
    eq([(s["model"], s["key"]) for s in st], [("gpt-4o-mini", "B")], "sticky moved to B")
    d.advance(6)
    r = chat(env)
    eq(r.headers.get("x-aor-key"), "B", "gap 1 == threshold 1: the warm sticky wins")
    eq(tried(mock, "A"), 1, "A not re-probed")


def test_threshold_zero_reprobes_preferred(env):
    mock, d = setup(env)
    mock.script("secret-A", [{"status": 429}])
    chat(env)
    d.advance(6)
    r = chat(env)
    eq(r.headers.get("x-aor-key"), "A", "gap 1 > threshold 0: preferred A re-probed")
    eq(d.state()["sticky"][0]["key"], "A", "sticky moved back on A's success")


def test_sticky_does_not_move_on_failure(env):
    mock, d = setup(env, keys=(("A", 0), ("B", 0)))
    r = chat(env)
    first = r.headers.get("x-aor-key")
    other = "B" if first == "A" else "A"
    mock.script("secret-" + first, [{"status": 500, "times": -1}])
    mock.script("secret-" + other, [{"status": 500, "times": -1}])
    r = chat(env)
    eq(r.status, 500, "both failed")
    eq(d.state()["sticky"][0]["key"], first, "sticky stays after failures")


def test_round_robin_two_successes_per_key(env):
    mock, d = setup(env, keys=(("A", 0), ("B", 0)), routing="strategy = round-robin")
    seq = [chat(env).headers.get("x-aor-key") for _ in range(6)]
    check(seq[0] == seq[1] and seq[2] == seq[3] and seq[4] == seq[5], "pairs: %s" % seq)
    check(seq[1] != seq[2] and seq[3] != seq[4], "advances after 2: %s" % seq)


def test_round_robin_streak_survives_a_restart(env):
    """§5.5 across kill -9: after a key's two successes, a restart must not start its count
    again (review: the streak was memory only, so the key got a third in a row)."""
    mock, d = setup(env, keys=(("A", 0), ("B", 0)), routing="strategy = round-robin")
    pair = [chat(env).headers.get("x-aor-key") for _ in range(2)]
    eq(pair[0], pair[1], "two successes on one key")
    d.kill9()
    env.start_daemon(fake_clock=T0)
    seq = [chat(env).headers.get("x-aor-key") for _ in range(3)]
    check(seq[0] != pair[0] and seq[1] == seq[0] and seq[2] == pair[0],
          "the other key's pair, then back: %s then %s" % (pair, seq))


# --- §5.3 the walk --------------------------------------------------------------

def test_budget_zero_first_attempt_only(env):
    mock, d = setup(env, routing="max_opaque_retries = 0")
    mock.script("secret-A", [{"status": 429}])
    r = chat(env)
    eq((r.status, r.headers.get("x-aor-attempts")), (429, "1"), "first attempt only")
    eq(tried(mock, "B"), 0, "B not tried")
    r = chat(env)
    eq(r.headers.get("x-aor-key"), "B", "A backed off anyway: next request goes to B")


def test_per_model_budget(env):
    mock, d = setup(env, keys=(("A", 0), ("B", 1), ("C", 2)),
                    extra='[model "gpt-4o-mini"]\nmax_opaque_retries = 1\n')
    mock.script("*", [{"status": 503, "times": -1}])
    r = chat(env)
    eq(r.headers.get("x-aor-attempts"), "2", "1 retry")
    eq(tried(mock, "C"), 0, "C not tried")


def test_auto_fallback_off_still_records(env):
    mock, d = setup(env, routing="auto_fallback = false")
    mock.script("secret-A", [{"status": 429}])
    r = chat(env)
    eq((r.status, r.headers.get("x-aor-key")), (429, "A"), "no fallback")
    check(row(d, "A") is not None, "backoff recorded")
    eq(chat(env).headers.get("x-aor-key"), "B", "A skipped next time")


def test_cut_stream_after_first_byte_is_an_error(env):
    mock, d = setup(env)
    mock.script("secret-A", [{"kind": "cut_after", "events": 2}])
    r = chat(env, stream=True)
    check(r.rc != 0, "curl sees an error, not a clean end (rc %d)" % r.rc)
    check("[DONE]" not in r.body, "no terminator")
    eq(tried(mock, "B"), 0, "no walk after the first byte")
    check(row(d, "A") is not None, "the failure is recorded")


def failed_streams_escalate(env, d, seen):
    """Three streamed requests to key A, 0, 6 and 11 s apart, each answer checked by
    seen(r), each a failure: the curve escalates (5, 10, 20 s), the third opens the
    circuit, and no failed stream makes a sticky."""
    windows = []
    for wait in (0, 6, 11):
        d.advance(wait) if wait else None
        seen(chat(env, stream=True))
        windows.append((row(d, "A")["window_s"], row(d, "A")["failure_count"]))
    eq(windows, [(5, 1), (10, 2), (20, 3)], "the curve escalates")
    st = d.state()
    eq([(b["provider"], b["state"]) for b in st["breakers"]], [("p", "open")],
       "three failures in 60 s open the circuit")  # fmt: skip
    eq(st["sticky"], [], "a failed stream makes no sticky")


def test_streams_that_end_with_an_error_event_are_failures(env):
    """QA: an error event after the first byte (OpenAI's data: {"error": ...}, then the
    stream's end) was recorded as a success: the backoff row was cleared, the key became
    sticky, the circuit never opened. The client gets the event as it came; the attempt
    is a failure of its kind (§4.1 transient for a 500 error object)."""
    mock, d = setup(env, keys=(("A", 0),))
    mock.script("secret-A", [{"kind": "sse_error_after", "events": 2, "times": -1}])

    def seen(r):
        eq(r.status, 200, "the stream started")
        check('"error"' in r.body, "the client gets the error event: %r" % r.body[-300:])

    failed_streams_escalate(env, d, seen)


def anthropic_stream_args():
    """curl arguments for a streamed Messages request to claude-x through the shim."""
    body = json.dumps({"model": "claude-x", "max_tokens": 10, "stream": True,
                       "messages": [{"role": "user", "content": "hi"}]})  # fmt: skip
    return ["https://api.anthropic.com/v1/messages", "-H", "x-api-key: client-1",
            "-H", "anthropic-version: 2023-06-01", "-H", "content-type: application/json",
            "-d", body]  # fmt: skip


def test_anthropic_overloaded_error_mid_stream_backs_the_key_off(env):
    """Anthropic sends event: error / overloaded_error in the middle of a stream: a rate
    failure (§4.1), so the next request goes to the other key, not back to the overloaded
    one. The client gets the event, and then a response without its terminator, although
    the provider ended its stream cleanly (§5.3: an upstream failure after the first byte
    is never a clean end; it was passed on as one)."""
    mock, d = setup(env, dialect="anthropic", host="api.anthropic.com", models="claude-x")
    # message_start, content_block_start, ping, a delta: the error comes after content
    mock.script("secret-A", [{"kind": "sse_error_after", "events": 4}])
    args = anthropic_stream_args()
    r = env.curl(args)
    eq((r.status, r.headers.get("x-aor-key")), (200, "A"), "the stream came from A")
    check("overloaded_error" in r.body, "the client gets the error event")
    eq(r.rc, 18, "curl: partial transfer, the response ended without its terminator (%s)"
       % r.stderr.strip())
    a = row(d, "A")
    check(a is not None and a["last_error_kind"] == "rate", "A is backed off as rate: %r" % a)
    r = env.curl(args)
    eq((r.status, r.headers.get("x-aor-key")), (200, "B"), "the next request goes to B")
    check("overloaded_error" not in r.body, "a clean stream from B")
    eq(r.rc, 0, "and a clean end (%s)" % r.stderr.strip())


def test_long_gemini_stream_ending_with_an_error_event_is_a_failure(env):
    """The same for a Gemini SSE stream (events end with CRLF CRLF) longer than the 4 KiB
    aor keeps of a stream's end: its last event is still found and classified (503
    UNAVAILABLE "The model is overloaded": rate, §4.1)."""
    mock, d = setup(env, keys=(("A", 0), ("B", 1)), dialect="gemini",
                    host="generativelanguage.googleapis.com", models="gemini-x")  # fmt: skip
    mock.script("secret-A", [{"kind": "sse_error_after", "events": 60}])
    url = ("https://generativelanguage.googleapis.com/v1beta/models/gemini-x:"
           "streamGenerateContent?alt=sse")  # fmt: skip
    body = json.dumps({"contents": [{"role": "user", "parts": [{"text": "hi"}]}]})
    args = [url, "-H", "x-goog-api-key: client-1", "-H", "content-type: application/json",
            "-d", body]  # fmt: skip
    r = env.curl(args)
    eq((r.status, r.headers.get("x-aor-key")), (200, "A"), "the stream came from A")
    check(len(r.body) > 4096, "longer than 4 KiB (%d bytes)" % len(r.body))
    check("UNAVAILABLE" in r.body[-600:], "it ends with the error event")
    a = row(d, "A")
    check(a is not None and a["last_error_kind"] == "rate", "A backed off: %r" % a)
    eq(env.curl(args).headers.get("x-aor-key"), "B", "the next request goes to B")


def test_streams_cut_after_the_first_byte_escalate_and_open_the_circuit(env):
    """A stream cut after its first event is a failure only (§5.3): not a success first.
    Before, the first event recorded a success (clearing the curve, closing the circuit,
    making the key sticky), so a provider whose streams always broke stayed at 5 s."""
    mock, d = setup(env, keys=(("A", 0),))
    mock.script("secret-A", [{"kind": "cut_after", "events": 2, "times": -1}])
    failed_streams_escalate(
        env, d, lambda r: check(r.rc != 0, "the client sees an error (rc %d)" % r.rc))
    # A stream that ends cleanly is a success: the row goes, the key becomes sticky.
    d.admin("POST", "/admin/api/backoff/clear")
    mock.script("secret-A", [{"status": 200}])
    r = chat(env, stream=True)
    eq(r.status, 200, "clean stream")
    check("[DONE]" in r.body, "complete")
    st = d.state()
    eq((st["backoff"], [s["key"] for s in st["sticky"]]), ([], ["A"]), "success recorded")
    m = d.metrics()
    eq([int(re.search(r"^%s (\d+)$" % n, m, re.M).group(1)) for n in
        ("aor_upstream_attempts_total", "aor_upstream_failures_total")], [4, 3],
       "every attempt and every failure counted, streamed ones too")


def test_stream_that_ends_cleanly_without_its_terminator_is_a_failure(env):
    """QA: a stream whose HTTP body ended cleanly but without the event that ends its
    endpoint's streams (a gateway that closes a failed stream's body cleanly) went to
    the client as a clean end and was recorded as a success: backoff row cleared, key
    made sticky (§4.1 "a stream that ends without its terminator"; §5.3 "never a clean
    end"). From an upstream that has sent the terminator before, it is now a transient
    failure and the client's response is left unfinished. An upstream never seen to
    send one (an OpenAI-compatible server without data: [DONE]) is not cut."""
    mock, d = setup(env, keys=(("A", 0), ("B", 1)))
    # Not seen yet from this upstream: passed on as it ended, a success.
    mock.script("secret-A", [{"kind": "end_after", "events": 2}])
    r = chat(env, stream=True)
    eq((r.status, r.headers.get("x-aor-key"), r.rc), (200, "A", 0),
       "first stream without [DONE]: a clean end (%s)" % r.stderr.strip())
    check("[DONE]" not in r.body, "the mock left the terminator out")
    eq(d.state()["backoff"], [], "no failure recorded for it")
    # A complete stream: the upstream is now one that sends data: [DONE].
    r = chat(env, stream=True)
    eq((r.status, r.rc), (200, 0), "complete stream")
    check(r.body.rstrip().endswith("data: [DONE]"), "it ends with [DONE]: %r" % r.body[-80:])
    # Now a stream that ends cleanly without it is cut short: failure, unfinished answer.
    mock.script("secret-A", [{"kind": "end_after", "events": 2}])
    r = chat(env, stream=True)
    eq((r.status, r.headers.get("x-aor-key")), (200, "A"), "the stream came from A")
    eq(len([x for x in r.body.split("\n\n") if x.strip()]), 2, "its 2 events reached the client")
    eq(r.rc, 18, "curl: partial transfer, the response ended without its terminator (%s)"
       % r.stderr.strip())
    a = row(d, "A")
    check(a is not None and a["last_error_kind"] == "transient", "A backed off: %r" % a)
    check("without its terminator (data: [DONE])" in d.stderr_text(),
          "aord says why:\n" + d.stderr_text()[-1500:])
    r = chat(env, stream=True)
    eq((r.status, r.headers.get("x-aor-key"), r.rc), (200, "B", 0),
       "the next request goes to B, and ends cleanly")


def test_anthropic_stream_without_message_stop_is_a_failure(env):
    """The same for Anthropic's Messages stream, which ends with message_stop."""
    mock2, d2 = setup(env, keys=(("A", 0),), dialect="anthropic", host="api.anthropic.com",
                      models="claude-x")  # fmt: skip
    args = anthropic_stream_args()
    r = env.curl(args)
    eq((r.status, r.rc), (200, 0), "a complete Anthropic stream")
    check("message_stop" in r.body[-200:], "it ends with message_stop")
    stop = 'event: message_stop\ndata: {"type":"message_stop"}\n\n'
    mock2.script("secret-A", [sse_answer(stop + 'event: ping\ndata: {"type": "ping"}\n\n')])
    eq(env.curl(args).rc, 0, "a ping after message_stop: complete (Anthropic sends pings)")
    mock2.script("secret-A", [{"kind": "end_after", "events": 4}])
    r = env.curl(args)
    eq((r.status, r.rc), (200, 18), "without message_stop: left unfinished (%s)"
       % r.stderr.strip())
    a = row(d2, "A")
    check(a is not None and a["last_error_kind"] == "transient", "A backed off: %r" % a)


def sse_answer(text):
    """A mock answer of raw SSE text, ended cleanly (Content-Length)."""
    return {"body_text": text, "content_type": "text/event-stream"}


def chunk_event(text):
    return ('data: {"id":"c","object":"chat.completion.chunk","choices":[{"index":0,'
            '"delta":{"content":"%s"}}]}\n\n' % text)


def responses(env):
    body = json.dumps({"model": "gpt-4o-mini", "input": "hi", "stream": True})
    return env.curl(["https://api.openai.com/v1/responses", "-H", "Authorization: Bearer c",
                     "-H", "Content-Type: application/json", "-d", body])


def test_terminator_check_takes_complete_streams_as_they_are(env):
    """Review of the check above: it looked at the last event in the 4 KiB kept of a
    stream's end, so a response.completed longer than that (it carries the whole response)
    followed by data: [DONE] was cut as unterminated, and a cut stream whose last event
    was long went unseen. The terminator's line is now looked for as the bytes go by.
    Complete streams pass whatever their shape; a cut one is seen however long its last
    event; the check is per endpoint and model."""
    mock, d = setup(env, keys=(("A", 0),))
    mock.script("secret-A", [sse_answer(chunk_event("1") + "data: [DONE]\n\n")])
    eq(chat(env, stream=True).rc, 0, "learned: this upstream ends its chat streams with [DONE]")
    complete = [
        chunk_event("1") + "data: [DONE]\n\n: keep-alive\n\n",
        (chunk_event("1") + "data: [DONE]\n\n").replace("\n", "\r\n"),
        chunk_event("1") + "data: [DONE]",
        chunk_event("x" * 6000) + "data: [DONE]\n\n",
        chunk_event("1") + "data: [DONE]\n\n: " + "p" * 6000 + "\n\n",
    ]  # fmt: skip
    for text in complete:
        mock.script("secret-A", [sse_answer(text)])
        r = chat(env, stream=True)
        eq((r.status, r.rc), (200, 0), "complete stream ending %r" % text[-40:])
    eq(d.state()["backoff"], [], "none of them a failure")
    mock.script("secret-A", [sse_answer(chunk_event("1") + chunk_event("y" * 6000))])
    r = chat(env, stream=True)
    eq(r.rc, 18, "a cut stream whose last event is over 4 KiB is seen (%s)" % r.stderr.strip())
    d.admin("POST", "/admin/api/backoff/clear")
    # Another model, never seen with [DONE] here: passed on.
    mock.script("secret-A", [sse_answer(chunk_event("1"))])
    eq(chat(env, model="gpt-4o", stream=True).rc, 0, "another model: not expected, not cut")
    # Responses: a response.completed over 4 KiB, then a [DONE] some servers add.
    created = 'event: response.created\ndata: {"type":"response.created"}\n\n'
    done = ('event: response.completed\ndata: {"type":"response.completed","response":'
            '{"instructions":"%s"}}\n\n' % ("x" * 6000))  # fmt: skip
    for text in (created + done, created + done + "data: [DONE]\n\n", created + done):
        mock.script("secret-A", [sse_answer(text)])
        r = responses(env)
        eq((r.status, r.rc), (200, 0), "a complete Responses stream")
    mock.script("secret-A", [sse_answer(created)])
    eq(responses(env).rc, 18, "a Responses stream without response.completed is cut")
    # An upstream replaced by one that never sends the terminator: two cuts, then trusted.
    d.admin("POST", "/admin/api/backoff/clear")
    mock.script("secret-A", [sse_answer(chunk_event("1") + "data: [DONE]\n\n")])
    eq(chat(env, stream=True).rc, 0, "a complete stream: expected again, no misses")
    rcs = []
    for _ in range(4):
        mock.script("secret-A", [sse_answer(chunk_event("1"))])
        rcs.append(chat(env, stream=True).rc)
        d.advance(100)
    eq(rcs, [18, 18, 0, 0], "no longer expected after two misses in a row")


def test_streams_cut_together_are_all_seen(env):
    """QA: six streams cut at once by one outage counted as six misses in a row, so the
    rule that forgets an upstream after two (a server replaced behind its base_url) let
    the other four through as whole answers and cleared the key's failure. Streams in
    flight when a miss is counted now count with it as one. Also: a [DONE] line with a
    trailing blank is the terminator, as for the SDKs (startsWith("[DONE]"))."""
    mock, d = setup(env, keys=(("A", 0),))
    mock.script("secret-A", [sse_answer(chunk_event("1") + "data: [DONE] \n\n")])
    r = chat(env, stream=True)
    eq((r.status, r.rc), (200, 0), "learned, from a [DONE] with a trailing blank")
    mock.script("secret-A", [{"kind": "end_after", "events": 3, "times": 6,
                              "interval_ms": 300}])  # fmt: skip
    res = [None] * 6
    threads = [threading.Thread(target=lambda i=i: res.__setitem__(i, chat(env, stream=True)))
               for i in range(6)]  # fmt: skip
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    eq([r.rc for r in res], [18] * 6, "every stream of the outage is left unfinished")
    a = row(d, "A")
    check(a is not None and a["last_error_kind"] == "transient", "A backed off: %r" % a)


def test_a_failed_connect_at_the_end_does_not_hide_the_last_response(env):
    """§5.6: the walk ran out with upstream errors -> the last upstream *response* as it
    came. A last attempt that got no response (connection refused) used to turn the answer
    into a 502 without the earlier 429's Retry-After."""
    closed = aortest.free_port()
    env.set_keys(KEY_D="secret-D")
    mock, d = setup(env, keys=(("A", 0),), extra=(
        '[key "D"]\nenv = KEY_D\n[provider "dead"]\ndialect = openai\n'
        "base_url = http://127.0.0.1:%d\nkeys = D\nmodels = gpt-4o-mini\npriority = 1\n"
        % closed))
    mock.script("secret-A", [{"status": 429, "headers": {"retry-after": "30"}}])
    r = chat(env)
    eq((r.status, r.headers.get("retry-after"), r.headers.get("x-aor-provider"),
        r.headers.get("x-aor-attempts")), (429, "30", "p", "2"), "A's 429 as it came")
    check("rate_limit" in r.body, "its body: %r" % r.body)
    eq(row(d, "D")["last_error_kind"], "transient", "the refused connect is still recorded")


def test_sse_error_before_first_byte_walks_on(env):
    mock, d = setup(env)
    mock.script("secret-A", [{"kind": "sse_error_first"}])
    r = chat(env, stream=True)
    eq((r.status, r.headers.get("x-aor-key"), r.headers.get("x-aor-attempts")), (200, "B", "2"),
       "failed first event -> next candidate")
    check("[DONE]" in r.body and "error" not in r.body, "clean stream from B")


def test_configured_key_quoted_in_an_error_body_is_redacted(env):
    """§3.2: a secret never reaches an error body. An upstream 401 that quotes the key aor
    sent ("Incorrect API key provided: <key>") is returned with the key replaced; the
    client never had that key."""
    mock, d = setup(env)
    for name in ("A", "B"):
        msg = "Incorrect API key provided: secret-%s. Check secret-%s!" % (name, name)
        mock.script("secret-" + name, [{"status": 401, "body": {"error": {
            "message": msg, "type": "invalid_request_error", "code": "invalid_api_key"}}}])
    r = chat(env)
    eq((r.status, r.headers.get("x-aor-key")), (401, "B"), "last answer as it came")
    check("secret-" not in r.body, "no configured key in the body: %r" % r.body)
    eq(r.json()["error"]["message"], "Incorrect API key provided: [redacted]. Check [redacted]!",
       "the rest of the body unchanged")
    eq(r.headers.get("content-length"), str(len(r.body.encode())), "length of what was sent")
    # A client error (no walk) is redacted too.
    mock.script("secret-A", [{"status": 400, "body": {"error": {
        "message": "bad request for key secret-A", "type": "invalid_request_error"}}}])
    d.admin("POST", "/admin/api/backoff/clear")
    r = chat(env)
    eq(r.status, 400, "client error passed on")
    eq(r.json()["error"]["message"], "bad request for key [redacted]", "redacted")


def test_a_version_given_twice_is_sent_once(env):
    """base_url copied from OPENAI_BASE_URL (ending in /v1), and a client base URL that
    ends in /v1 for an SDK that adds /v1 itself: the upstream gets /v1 once (QA: the
    upstream got /v1/v1/chat/completions, a 404 and no walk)."""
    mock, d = setup(env, base_suffix="/v1")
    body = json.loads(CHAT_BODY)
    for path in ("/v1/chat/completions", "/v1/v1/chat/completions"):
        st, hdrs, _ = d.http("POST", path, body, {"authorization": "Bearer client"})
        eq((st, mock.log()[-1]["path"]), (200, "/v1/chat/completions"), "upstream path for " + path)
    r = chat(env)  # through the shim: the client's /v1 path under the base_url's /v1
    eq((r.status, mock.log()[-1]["path"]), (200, "/v1/chat/completions"), "shim path")


def test_the_clients_openai_account_headers_stay_behind_with_a_configured_key(env):
    """OpenAI-Organization / OpenAI-Project name the account of the client's own key: sent
    with a configured key of another account they make OpenAI answer 401."""
    mock, d = setup(env)
    r = chat(env, extra=["-H", "OpenAI-Organization: org-client", "-H", "OpenAI-Project: p1",
                         "-H", "X-Other: kept"])
    eq(r.status, 200, "answered")
    h = mock.log()[-1]["headers"]
    check("openai-organization" not in h and "openai-project" not in h, "not forwarded: %r" % h)
    eq(h.get("x-other"), "kept", "other headers forwarded")


def test_configured_key_quoted_in_an_error_header_is_not_forwarded(env):
    mock, d = setup(env, keys=(("A", 0),))
    mock.script("secret-A", [{"status": 401, "headers": {"x-echo-key": "got secret-A",
                                                          "x-other": "kept"}}])
    r = chat(env)
    eq(r.status, 401, "the answer as it came")
    check("x-echo-key" not in r.headers and b"secret-A" not in r.raw, "no key: %r" % r.headers)
    eq(r.headers.get("x-other"), "kept", "the other headers are")


def test_sse_comments_before_an_error_event_still_walk_on(env):
    """OpenRouter sends ": OPENROUTER PROCESSING" comment lines before its first event; an
    error event after them is still the first event (comments are not events), so the
    attempt fails and the walk goes on. Before, the comment committed the stream."""
    mock, d = setup(env)
    err = 'data: {"error":{"message":"Provider returned error","code":502}}\n\n'
    for lead in (": OPENROUTER PROCESSING\n\n", "\n\n", ": a\r\n: b\r\n\r\n"):
        mock.script("secret-A", [{"status": 200, "content_type": "text/event-stream",
                                  "body_text": lead + err}])
        r = chat(env, stream=True)
        eq((r.status, r.headers.get("x-aor-key"), r.headers.get("x-aor-attempts")),
           (200, "B", "2"), "error event after %r -> next candidate" % lead)
        check("[DONE]" in r.body and "Provider returned error" not in r.body,
              "clean stream from B")
        d.admin("POST", "/admin/api/backoff/clear")
    # A stream of comments only that ends is no answer either: transient, walk on.
    mock.script("secret-A", [{"status": 200, "content_type": "text/event-stream",
                              "body_text": ": keep-alive\n\n"}])
    r = chat(env, stream=True)
    eq((r.status, r.headers.get("x-aor-key")), (200, "B"), "comments-only stream -> next")
    eq(row(d, "A")["last_error_kind"], "transient", "recorded as transient")
    # Comments before a good first event are forwarded with it.
    mock.script("secret-A", [{"status": 200, "content_type": "text/event-stream",
                              "body_text": ": hi\n\ndata: {\"x\":1}\n\ndata: [DONE]\n\n"}])
    d.admin("POST", "/admin/api/backoff/clear")
    r = chat(env, stream=True)
    eq((r.status, r.headers.get("x-aor-key")), (200, "A"), "good stream after a comment")
    check(r.body.startswith(": hi") and "[DONE]" in r.body, "comment forwarded: %r" % r.body)


def test_last_candidates_stream_without_an_event_reaches_the_client_unfinished(env):
    """QA: the only candidate's 200 stream ended before its first event (nothing, or a
    keep-alive comment): aord recorded a transient failure but, the walk over, returned
    it "as it came" framed with a Content-Length, so the client saw a clean, empty 200
    (curl exit 0). It came unfinished, and now reaches the client so (spec §5.3: never a
    clean end): chunked, without its last chunk."""
    mock, d = setup(env, keys=(("A", 0),))
    for body in (": keep-alive\n\n", ""):
        mock.script("secret-A", [{"status": 200, "content_type": "text/event-stream",
                                  "body_text": body}])
        r = chat(env, stream=True)
        eq((r.status, r.headers.get("x-aor-key")), (200, "A"), "the last answer: %r" % body)
        check("content-length" not in r.headers, "not framed as whole: %r" % r.headers)
        eq(r.rc, 18, "curl: partial transfer (%s)" % r.stderr.strip())
        eq(row(d, "A")["last_error_kind"], "transient", "recorded as transient")
        d.admin("POST", "/admin/api/backoff/clear")


def test_error_event_behind_a_good_first_event_in_one_read_walks_on(env):
    """QA: the Responses API's stream began with response.created and, in the same read,
    response.failed; only the first event was looked at, so the error went to the client
    as a committed 200. Every event that arrived before the first byte went out counts
    (§5.3)."""
    mock, d = setup(env)
    created = 'event: response.created\ndata: {"type":"response.created","response":{}}\n\n'
    failed = ('event: response.failed\ndata: {"type":"response.failed","response":'
              '{"error":{"code":"server_error","message":"The server had an error"}}}\n\n')
    mock.script("secret-A", [{"status": 200, "content_type": "text/event-stream",
                              "body_text": created + failed}])
    r = chat(env, stream=True)
    eq((r.status, r.headers.get("x-aor-key"), r.headers.get("x-aor-attempts")),
       (200, "B", "2"), "response.failed behind response.created -> next candidate")
    check("The server had an error" not in r.body, "A's failed stream did not reach the client")
    check(row(d, "A") is not None, "A is backed off")
    # A good stream of several events in one read is still forwarded whole.
    d.admin("POST", "/admin/api/backoff/clear")
    mock.script("secret-A", [{"status": 200, "content_type": "text/event-stream",
                              "body_text": created + 'data: {"x":1}\n\ndata: [DONE]\n\n'}])
    r = chat(env, stream=True)
    eq((r.status, r.headers.get("x-aor-key")), (200, "A"), "good events in one read")
    check(r.body.startswith("event: response.created") and "[DONE]" in r.body, r.body)


def test_error_event_after_opening_events_in_later_reads_walks_on(env):
    """QA: Anthropic streams open with message_start (then content_block_start, ping) and
    the Responses API with response.created, response.in_progress; an overloaded_error or
    error event right after them, in a later read, went to the client as a committed 200:
    those events were sent on at once, so no error after them was walked past. They tell
    the client nothing yet: aord holds them with the first event that counts (§5.3)."""
    mock, d = setup(env, dialect="anthropic", host="api.anthropic.com", models="claude-x")
    args = anthropic_stream_args()
    for n in (1, 3):  # message_start; message_start, content_block_start, ping
        mock.script("secret-A", [{"kind": "sse_error_after", "events": n, "interval_ms": 150}])
        r = env.curl(args)
        eq((r.status, r.headers.get("x-aor-key"), r.headers.get("x-aor-attempts")),
           (200, "B", "2"), "overloaded_error after %d opening events -> next key" % n)
        check("overloaded_error" not in r.body and "message_stop" in r.body,
              "a clean stream from B: %r" % r.body[-300:])
        eq(r.rc, 0, "and a clean end (%s)" % r.stderr.strip())
        eq(row(d, "A")["last_error_kind"], "rate", "A backed off as rate")
        d.admin("POST", "/admin/api/backoff/clear")
    # A stream cut after its opening events: nothing reached the client, transient, walk on.
    mock.script("secret-A", [{"kind": "cut_after", "events": 2, "interval_ms": 150}])
    r = env.curl(args)
    eq((r.status, r.headers.get("x-aor-key"), r.headers.get("x-aor-attempts"), r.rc),
       (200, "B", "2", 0), "cut after message_start, content_block_start -> next key")
    eq(row(d, "A")["last_error_kind"], "transient", "A backed off as transient")
    d.admin("POST", "/admin/api/backoff/clear")
    # An error in an event named as an opening one is an error all the same (QA).
    err = ('{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}')
    for name in ("ping", "message_start"):
        mock.script("secret-A", [{"status": 200, "content_type": "text/event-stream",
                                  "body_text": "event: %s\ndata: %s\n\n" % (name, err)}])
        r = env.curl(args)
        eq((r.status, r.headers.get("x-aor-key"), r.headers.get("x-aor-attempts")),
           (200, "B", "2"), "an overloaded_error in a %s event -> next key" % name)
        d.admin("POST", "/admin/api/backoff/clear")
    # A good stream whose events come apart is forwarded whole and unchanged.
    mock.script("secret-A", [{"interval_ms": 100}])
    r = env.curl(args)
    eq((r.status, r.headers.get("x-aor-key"), r.rc), (200, "A", 0), "good stream from A")
    check(r.body.startswith("event: message_start") and r.body.count("event: ping") == 1
          and "message_stop" in r.body, "every event, in order: %r" % r.body)
    # The Responses API: response.created, response.in_progress, then an error event.
    d.stop()
    mock2, d2 = setup(env)
    mock2.script("secret-A", [{"kind": "sse_error_after", "events": 2, "interval_ms": 150}])
    body = json.dumps({"model": "gpt-4o-mini", "input": "hi", "stream": True})
    r = env.curl(["https://api.openai.com/v1/responses", "-H", "Authorization: Bearer c",
                  "-H", "Content-Type: application/json", "-d", body])
    eq((r.status, r.headers.get("x-aor-key"), r.headers.get("x-aor-attempts")),
       (200, "B", "2"), "error after response.created, response.in_progress -> next key")
    check("server_error" not in r.body and "response.completed" in r.body,
          "a clean stream from B: %r" % r.body[-300:])


def test_opening_events_are_held_for_3_s_at_most(env):
    """The hold of the opening events (above) is bounded: a model that takes long before
    its first output must not leave the client without even the answer's head. After 3 s
    they go out, and an error after that is one after the first byte: no walk, the
    response ends unfinished (§5.3)."""
    mock, d = setup(env, dialect="anthropic", host="api.anthropic.com", models="claude-x")
    mock.script("secret-A", [{"kind": "sse_error_after", "events": 1, "interval_ms": 4500}])
    r = env.curl(anthropic_stream_args())
    eq((r.status, r.headers.get("x-aor-key"), r.headers.get("x-aor-attempts")),
       (200, "A", "1"), "the opening event went out after 3 s: no walk")
    check(r.body.startswith("event: message_start") and "overloaded_error" in r.body,
          "message_start, then the error: %r" % r.body)
    eq(r.rc, 18, "curl: partial transfer (%s)" % r.stderr.strip())


def test_geminis_openai_compatible_api_goes_to_the_gemini_providers(env):
    """QA: on the sidecar, /v1beta/openai/... (the OpenAI SDK pointed at Gemini's
    OpenAI-compatible API) went to the OpenAI-dialect providers, and with none configured
    the client's Gemini key went to api.openai.com. It is the Gemini providers' (their
    keys, backoff, walk), as through the shim on Gemini's host; a model alias is applied
    in the body there, where this API names the model (it was not applied on either
    path)."""
    mock, d = setup(env, dialect="gemini", host="generativelanguage.googleapis.com",
                    models="flash=gemini-x")
    mock.script("secret-A", [{"status": 429, "times": -1}])
    body = {"model": "flash", "messages": [{"role": "user", "content": "hi"}]}
    st, hdrs, got = d.http("POST", "/v1beta/openai/chat/completions", body,
                           {"authorization": "Bearer client-gemini-key"})
    eq((st, hdrs.get("x-aor-provider"), hdrs.get("x-aor-key"), hdrs.get("x-aor-attempts")),
       (200, "p", "B", "2"), "sidecar: the gemini provider's keys, A then B")
    last = mock.log()[-1]
    eq((last["path"], last["key"], last["model"]),
       ("/v1beta/openai/chat/completions", "secret-B", "gemini-x"), "upstream request")
    check(b"choices" in got, "the OpenAI-shaped answer: %r" % got[:200])
    r = env.curl(["https://generativelanguage.googleapis.com/v1beta/openai/chat/completions",
                  "-H", "Authorization: Bearer client-gemini-key",
                  "-H", "content-type: application/json", "-d", json.dumps(body)])
    eq((r.status, r.headers.get("x-aor-key")), (200, "B"), "shim: the same")
    eq(mock.log()[-1]["model"], "gemini-x", "shim: the alias applied in the body")


# --- §5.2 models ------------------------------------------------------------------

def test_model_mapping_and_unlisted_model(env):
    mock, d = setup(env, models="fast=gpt-4o-mini")
    r = chat(env, model="fast")
    eq(r.status, 200, "mapped model")
    eq(mock.log()[-1]["model"], "gpt-4o-mini", "upstream id sent")
    r = chat(env, model="o3")
    eq(r.status, 200, "unlisted model goes to the host's provider")
    eq(mock.log()[-1]["model"], "o3", "unchanged")


# --- §5.6 terminal answers -------------------------------------------------------

def test_gemini_all_backed_off_shape(env):
    mock, d = setup(env, keys=(("G", 0),), dialect="gemini", models="gemini-2.0-flash",
                    host="generativelanguage.googleapis.com")
    mock.script("secret-G", [{"kind": "preset", "name": "gemini-per-minute", "times": -1}])
    url = "https://generativelanguage.googleapis.com/v1beta/models/gemini-2.0-flash:generateContent"
    args = [url, "-H", "x-goog-api-key: client", "-H", "content-type: application/json",
            "-d", json.dumps({"contents": [{"parts": [{"text": "hi"}]}]})]
    r = env.curl(args)
    eq(r.status, 429, "Gemini 429 passed on")
    eq(row(d, "G")["window_s"], 19, "RetryInfo.retryDelay hint")
    r = env.curl(args)
    eq(r.status, 429, "all backed off")
    j = r.json()["error"]
    eq((j["code"], j["status"]), (429, "RESOURCE_EXHAUSTED"), "Gemini error shape")
    check("aor_all_backed_off" in r.body, "reason in the body")
    eq(r.headers.get("retry-after"), "19", "Retry-After")


# --- §4.5 no writes when nothing changed ------------------------------------------

def test_no_write_without_state_change(env):
    mock, d = setup(env)
    chat(env)  # first success: sticky created (a write)
    w = writes(d)
    for _ in range(3):
        eq(chat(env).status, 200, "ok")
    eq(writes(d), w, "successful requests on the sticky key write nothing")
    mock.script("secret-A", [{"status": 429}])
    chat(env)
    check(writes(d) > w, "a failure is written")


def test_sidecar_models_list_of_each_dialect(env):
    """QA: /v1/models is a path of both the OpenAI and the Anthropic API. The Anthropic
    SDK's models.list() on the sidecar (anthropic-version and x-api-key headers) went to
    the OpenAI provider with the OpenAI key; it goes to the Anthropic provider."""
    mock = env.start_mock(tls=True)
    port = aortest.free_port()
    env.set_keys(KEY_O="secret-O", KEY_N="secret-N")
    env.write_config(
        "[daemon]\nlisten = 127.0.0.1:%d\n"
        '[key "O"]\nenv = KEY_O\n[key "N"]\nenv = KEY_N\n'
        '[provider "openai"]\ndialect = openai\nbase_url = %s\nca_file = %s\nkeys = O\n'
        "models = gpt-4o-mini\n"
        '[provider "anthropic"]\ndialect = anthropic\nbase_url = %s\nca_file = %s\nkeys = N\n'
        "models = claude-x\n" % (port, mock.url, mock.ca_path, mock.url, mock.ca_path))
    d = env.start_daemon(fake_clock=T0)
    anth = {"x-api-key": "client-key", "anthropic-version": "2023-06-01"}
    for path in ("/v1/models", "/v1/models?limit=5", "/v1/models/claude-x", "/v1/models/"):
        status, headers, body = d.http("GET", path, headers=anth)
        eq(headers.get("x-aor-provider"), "anthropic", path + " (anthropic)")
        if path != "/v1/models/":  # the mock has no model "": 404, as it came
            eq(status, 200, path + " status")
        eq(mock.log()[-1]["key"], "secret-N", path + ": the Anthropic key upstream")
    status, headers, body = d.http("GET", "/v1/models", headers={"x-api-key": "client-key"})
    eq(headers.get("x-aor-provider"), "anthropic", "x-api-key alone (no Authorization)")
    status, headers, body = d.http("GET", "/v1/models", headers={"authorization": "Bearer c"})
    eq((status, headers.get("x-aor-provider")), (200, "openai"), "an OpenAI client")
    eq(json.loads(body)["object"], "list", "the OpenAI list")
    eq(mock.log()[-1]["key"], "secret-O", "the OpenAI key upstream")


def test_intercept_localhost_is_intercepted(env):
    """§2: the names of an intercept list are intercepted, localhost too (it was left out
    of the published hosts silently, as a base_url's localhost is): a program's
    https://localhost/... goes through aor to the provider, with the configured key.
    Written with its trailing dot it is the same name (QA: "localhost." was published as
    written, aord found no address for it, and curl, which resolves the name itself, went
    direct)."""
    body = json.dumps({"model": "gpt-4o-mini", "messages": [{"role": "user", "content": "hi"}]})
    hosts = os.path.join(env.env["XDG_RUNTIME_DIR"], "aor", "hosts")

    def published_address():
        try:
            with open(hosts) as f:
                return any(ln.startswith("a ") and ln.split()[-1] == "localhost" for ln in f)
        except OSError:
            return False

    for written in ("localhost", "Localhost."):
        mock, d = setup(env, keys=(("A", 0),), host=written)
        # curl resolves localhost itself (no getaddrinfo for the shim to see): only the
        # address aord's resolver thread publishes, shortly after start, makes the
        # connect go to aord (CI under load ran curl before it: a direct connect).
        end = time.monotonic() + 10
        while not published_address() and time.monotonic() < end:
            time.sleep(0.05)
        check(published_address(), "aord published localhost's address")
        r = env.curl(["https://localhost/v1/chat/completions", "-H",
                      "Authorization: Bearer client-1", "-H", "Content-Type: application/json",
                      "-d", body])
        eq((r.status, r.headers.get("x-aor-provider"), r.headers.get("x-aor-key")),
           (200, "p", "A"), "intercept = %s: routed by aor (curl: %s)" % (written, r.stderr.strip()))
        eq(len(mock.requests(key="secret-A")), 1, "the provider got it with the configured key")
        with open(hosts) as f:
            check("localhost" in f.read().split(), "localhost is published")
        d.stop()


def test_a_dialect_no_provider_speaks_is_named_as_such(env):
    """An Anthropic request to a sidecar whose only provider speaks OpenAI: the 404 said
    "no configured provider serves model 'claude-...'", blaming the model although every
    model is served (fresh-user pass). It names the missing dialect now, in the request's
    own error shape. (Since 2026-12-02 the known provider of a dialect no section speaks
    is there keyless; a section that takes its name, as here, leaves it out.)"""
    mock, d = setup(env, keys=(("A", 0),), models="*", prov="anthropic")
    body = {"model": "claude-3-5-haiku-latest", "max_tokens": 5,
            "messages": [{"role": "user", "content": "hi"}]}
    status, headers, raw = d.http("POST", "/v1/messages", body=body,
                                  headers={"x-api-key": "c", "anthropic-version": "2023-06-01"})
    eq(status, 404, "status")
    err = json.loads(raw)
    eq(err.get("type"), "error", "the Anthropic error shape: %r" % err)
    msg = err["error"]["message"]
    check("speaks the anthropic API" in msg and "dialect = anthropic" in msg,
          "names the dialect no provider speaks: %r" % msg)
    eq(mock.requests(), [], "nothing went upstream")


class _ConnectRecorder:
    """An HTTPS_PROXY on loopback that records each CONNECT target and refuses it
    (502), so a test sees where aord would have gone without reaching the internet."""

    def __init__(self):
        self.targets = []
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(8)
        self.url = "http://127.0.0.1:%d" % self.sock.getsockname()[1]
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self):
        while True:
            try:
                c, _ = self.sock.accept()
            except OSError:
                return
            with c:
                c.settimeout(5)
                head = b""
                try:
                    while b"\r\n\r\n" not in head and len(head) < 65536:
                        chunk = c.recv(4096)
                        if not chunk:
                            break
                        head += chunk
                    self.targets.append(head.split(b"\r\n", 1)[0].decode("latin-1"))
                    c.sendall(b"HTTP/1.1 502 Bad Gateway\r\nContent-Length: 0\r\n\r\n")
                except OSError:
                    pass

    def close(self):
        self.sock.close()


def test_a_builtin_host_no_section_covers_is_passed_through(env):
    """A config whose sections cover OpenAI only; the program under the shim also calls
    api.anthropic.com (a built-in host, so intercepted) with its own key. aord answered
    404 "no configured provider speaks the anthropic API" and broke the program. Now
    the known provider is there keyless (docs/config.md): the request goes to
    api.anthropic.com with the client's own credential, with backoff keyed by its hash,
    as the embedded default does; on the sidecar too, for a dialect no section speaks.
    An HTTPS_PROXY on loopback shows where aord went, without reaching the internet."""
    proxy = _ConnectRecorder()
    try:
        mock, d = setup(env, keys=(("A", 0),), host="localhost",
                        extra_env={"HTTPS_PROXY": proxy.url, "NO_PROXY": "127.0.0.1,localhost"})
        body = json.dumps({"model": "claude-sonnet-4-5", "max_tokens": 5, "messages": []})
        r = env.curl(["https://api.anthropic.com/v1/messages", "-H", "x-api-key: my-own-key",
                      "-H", "anthropic-version: 2023-06-01", "-H",
                      "content-type: application/json", "-d", body])
        eq((r.status, r.headers.get("x-aor-provider")), (502, "anthropic"),
           "forwarded to Anthropic, whose proxy refused (body %r)" % r.body[:300])
        eq(proxy.targets, ["CONNECT api.anthropic.com:443 HTTP/1.1"], "where aord went")
        rows = [b for b in d.state()["backoff"] if b["provider"] == "anthropic"]
        eq(len(rows), 1, "a backoff row for the pass-through credential")
        check(rows[0]["key"].startswith("client-"), "keyed by a hash: %s" % rows[0]["key"])
        provs = {p["name"]: p for p in d.state()["providers"]}
        check(provs["anthropic"]["implicit"] and provs["anthropic"]["passthrough"],
              "listed as implicit: %r" % provs.get("anthropic"))
        check(not provs["p"]["implicit"], "the section's provider is not implicit")
        # Sidecar, the dialect no section speaks: the same provider (another credential,
        # so not backed off).
        status, headers, raw = d.http("POST", "/v1/messages", body=json.loads(body),
                                      headers={"x-api-key": "other-key",
                                               "anthropic-version": "2023-06-01"})
        eq((status, headers.get("x-aor-provider")), (502, "anthropic"), "sidecar: %r" % raw[:300])
        eq(len(proxy.targets), 2, "the sidecar request went to Anthropic too")
        # The section's dialect on the sidecar: the section only, never the known host.
        status, headers, raw = d.http("POST", "/v1/chat/completions",
                                      body={"model": "gpt-x", "messages": []},
                                      headers={"Authorization": "Bearer c"})
        eq((status, headers.get("x-aor-provider")), (200, "p"), "an unlisted model: the section")
        eq(len(proxy.targets), 2, "nothing went to api.openai.com")
        eq(len(mock.requests(key="secret-A")), 1, "the section's provider got it")
        check("1 provider, 1 key" in d.stderr_text(), "the ready line counts the sections only")
    finally:
        proxy.close()


def test_gemini_query_key_is_percent_decoded(env):
    """A Gemini client's ?key= is percent-encoded in the URL; aord took it as written, so
    a key with a reserved character (%2F for '/') went upstream as `x-goog-api-key:
    abc%2Fdef` in pass-through (QA) and was another client than the same key sent as the
    header. The client identity (spec §5.1, a hash of the credential) shows it: one
    sticky row for both forms."""
    mock, d = setup(env, keys=(("G", 0),), dialect="gemini", models="gemini-2.0-flash",
                    host="generativelanguage.googleapis.com")
    path = "/v1beta/models/gemini-2.0-flash:generateContent"
    body = {"contents": [{"parts": [{"text": "hi"}]}]}
    st, h, raw = d.http("POST", path, body=body, headers={"x-goog-api-key": "AIzaQA/k+y"})
    eq(st, 200, "header form: %r" % raw[:200])
    st, h, raw = d.http("POST", path + "?key=AIzaQA%2Fk%2By&alt=json", body=body)
    eq(st, 200, "query form: %r" % raw[:200])
    clients = {s["client"] for s in d.state()["sticky"]}
    eq(len(clients), 1, "one client for the key in either form: %r" % clients)
    # An escape that would decode to a control character is left as it came (it could
    # only split a header): a client of its own, and no error.
    st, h, raw = d.http("POST", path + "?key=AIzaQA%0d%0aX:1", body=body)
    eq(st, 200, "undecodable form: %r" % raw[:200])
    eq(len({s["client"] for s in d.state()["sticky"]}), 2, "another client")
    check("key=" not in mock.log()[-1]["query"], "no key= upstream: %r" % mock.log()[-1])
    # QA: a name with its letters escaped (k%65y, %6Bey) is the same parameter: it was
    # left in the URL and the client counted as one without a credential; an empty key=
    # before the real one took its place.
    for q in ("?k%65y=AIzaQA%2Fk%2By", "?%6Bey=AIzaQA%2Fk%2By", "?key=&key=AIzaQA%2Fk%2By"):
        st, h, raw = d.http("POST", path + q + "&alt=json", body=body)
        eq(st, 200, q + ": %r" % raw[:200])
        eq(len({s["client"] for s in d.state()["sticky"]}), 2, q + ": the same client as before")
        up = mock.log()[-1]["query"]
        eq(up, "alt=json", q + ": no key upstream in the URL")
    # The other parameters go upstream byte for byte, empty ones and a trailing '&' too
    # (the key's removal dropped the last '&').
    st, h, raw = d.http("POST", path + "?alt=json&&key=AIzaQA%2Fk%2By&x=%41&", body=body)
    eq(st, 200, "empty parameters: %r" % raw[:200])
    eq(mock.log()[-1]["query"], "alt=json&&x=%41&", "the query upstream")


def test_a_section_named_after_a_known_provider_owns_its_host(env):
    """A section named "openai" with another base_url takes the known provider's place,
    its host too (docs/config.md "to send a known host's traffic elsewhere, give it a
    section"). Nothing owned api.openai.com then: a request to it without a model
    (models.list()) or with a model no section lists got 404 "no provider serves model ''
    on api.openai.com" (fresh-user pass). It goes to the section, with its key."""
    mock, d = setup(env, keys=(("A", 0),), host="localhost", prov="openai")
    r = chat(env, model="zz")
    eq((r.status, r.headers.get("x-aor-provider"), r.headers.get("x-aor-key")),
       (200, "openai", "A"), "an unlisted model (%s)" % r.body[:300])
    eq(mock.log()[-1]["key"], "secret-A", "with the section's key")
    r = env.curl(["https://api.openai.com/v1/models", "-H", "Authorization: Bearer c"])
    eq((r.status, r.headers.get("x-aor-key")), (200, "A"), "GET /v1/models: %s" % r.body[:300])
    eq(mock.log()[-1]["path"], "/v1/models", "upstream path")
    eq(chat(env).status, 200, "a model the section lists goes to it as before")


def parallel_clients(env, n, tag, stream):
    """n curl clients through the shim at once, each with its own token (tag + number),
    asking for gpt-4o-mini (a stream when stream): their (status, x-aor-key) pairs,
    sorted, status "none" when no answer came."""
    body = {"model": "gpt-4o-mini", "messages": []}
    if stream:
        body["stream"] = True
    procs = [env.spawn(["curl", "-sS", "-o", "/dev/null", "-D", "-",
                        "https://api.openai.com/v1/chat/completions",
                        "-H", "Authorization: Bearer %s%d" % (tag, i),
                        "-H", "Content-Type: application/json", "-d", json.dumps(body)])
             for i in range(n)]  # fmt: skip
    heads = [p.communicate(timeout=60)[0].decode("latin-1").lower() for p in procs]
    return sorted((h.split(" ", 2)[1] if h.startswith("http/") else "none",
                   re.search(r"x-aor-key: (\S+)", h).group(1) if "x-aor-key" in h else "-")
                  for h in heads)  # fmt: skip


def test_parallel_429s_on_one_key_leave_the_other_keys_open(env):
    """QA: 8 agents in flight together on key A when A throttles (429): each 429 counted
    for the (provider, model) circuit, the third opened it, and the other walks then
    skipped healthy key B: half the clients got 429 aor_all_backed_off. The 429s of one
    episode of a key count once for the breaker (docs/routing.md §4): every client fails
    over to B."""
    mock, d = setup(env)
    mock.script("secret-A", [{"status": 429, "delay_ms": 400, "times": -1}])
    # B answers late, so no success of B closes a circuit before the last 429 came.
    mock.script("secret-B", [{"kind": "slow_first_byte", "delay_ms": 1500, "times": -1}])
    got = parallel_clients(env, 8, "par", stream=False)
    eq(got, [("200", "b")] * 8, "every client failed over to B")
    eq(d.state()["breakers"], [], "no circuit opened")
    eq(len(mock.requests(key="secret-A")), 8, "all 8 were in flight on A together")


def test_parallel_stream_rate_errors_leave_the_other_keys_open(env):
    """The same as a 429 when the throttle comes as the first event of a 200 stream
    (rate_limit_exceeded): one episode of key A, counted once for the breaker. QA: such
    streams opened the circuit (3 failures, their status 200 not taken as a 429) and two
    of four clients got A's error stream with B never tried."""
    mock, d = setup(env)
    err = {"error": {"type": "requests", "code": "rate_limit_exceeded",
                     "message": "Rate limit reached"}}
    mock.script("secret-A", [{"kind": "sse_error_first", "delay_ms": 400, "times": -1,
                              "error": err}])
    mock.script("secret-B", [{"kind": "slow_first_byte", "delay_ms": 1500, "times": -1}])
    got = parallel_clients(env, 4, "str", stream=True)
    eq(got, [("200", "b")] * 4, "every client failed over to B")
    eq(d.state()["breakers"], [], "no circuit opened")
    eq(len(mock.requests(key="secret-A")), 4, "all 4 were in flight on A together")


def test_stream_error_retry_info_ignored_with_retry_after_ignore(env):
    """§4.3: retry_after = ignore never derives timing from the provider; nor from the
    RetryInfo of a Gemini stream's error event (QA: its "60s" set the window)."""
    mock, d = setup(env, dialect="gemini", models="gemini-x", host="localhost",
                    provider="retry_after = ignore")
    err = {"error": {"code": 429, "status": "RESOURCE_EXHAUSTED", "message": "slow down",
                     "details": [{"@type": "type.googleapis.com/google.rpc.RetryInfo",
                                  "retryDelay": "60s"}]}}
    mock.script("secret-A", [{"kind": "sse_error_first", "error": err}])
    r = aortest.http("POST", d.url + "/v1beta/models/gemini-x:streamGenerateContent?alt=sse",
                     json.dumps({"contents": [{"parts": [{"text": "hi"}]}]}),
                     {"x-goog-api-key": "client-1", "Content-Type": "application/json"})
    eq((r[0], r[1].get("x-aor-key")), (200, "B"), "walked to B")
    eq((row(d, "A")["window_s"], row(d, "A")["until"]), (5, T0 + 5), "the curve's 5 s, no hint")


def test_request_dropped_on_a_reused_connection_walks_on(env):
    """§5.3: no (provider, key) is tried twice in one walk. The upstream reads the request
    on a kept-alive connection that answered a moment before, then closes without an
    answer: a transient failure of key A (backoff row), and the walk goes on to B. Until
    2026-12-03 aord sent it again to A on a new connection, unrecorded (QA: a POST, and
    its bill, twice). Only a connection idle for a second or more, which the provider's
    keep-alive timeout may have closed just then, gets its request sent once more."""
    mock, d = setup(env)
    r = chat(env)
    eq((r.status, r.headers.get("x-aor-key")), (200, "A"), "first answer from A")
    mock.script("secret-A", [{"kind": "drop"}])
    before = tried(mock, "A")
    r = chat(env)
    eq((r.status, r.headers.get("x-aor-key"), r.headers.get("x-aor-attempts")), (200, "B", "2"),
       "walked on to B after the drop")
    eq(tried(mock, "A") - before, 1, "A got the request once")
    a = row(d, "A")
    check(a is not None and a["last_error_kind"] == "transient", "A backed off: %r" % a)


def test_oauth_beta_stays_behind_with_a_configured_anthropic_key(env):
    """Claude Code with a claude.ai subscription sends its OAuth token with
    `anthropic-beta: oauth-2025-04-20`. With a configured API key in its place that beta
    names a flow the request no longer uses (Anthropic answers a beta it does not accept
    with 400): it is removed, the other betas are forwarded in order, and the header goes
    when nothing is left (QA, 2026-12-03: it was forwarded)."""
    mock, d = setup(env, dialect="anthropic", host="api.anthropic.com", models="*")
    body = json.dumps({"model": "claude-x", "max_tokens": 5,
                       "messages": [{"role": "user", "content": "hi"}]})
    sent = []
    for beta in ("oauth-2025-04-20, interleaved-thinking-2025-05-14,fine-grained-tool-streaming",
                 "OAuth-2025-04-20", "prompt-caching-2024-07-31"):
        r = env.curl(["https://api.anthropic.com/v1/messages", "-H", "content-type: application/json",
                      "-H", "authorization: Bearer sk-ant-oat01-client", "-H",
                      "anthropic-version: 2023-06-01", "-H", "anthropic-beta: " + beta, "-d", body])
        eq(r.status, 200, "answered (beta %r)" % beta)
        sent.append(mock.log()[-1]["headers"].get("anthropic-beta"))
    eq(sent, ["interleaved-thinking-2025-05-14,fine-grained-tool-streaming", None,
              "prompt-caching-2024-07-31"], "anthropic-beta as sent upstream")
    h = mock.log()[-1]["headers"]
    eq((h.get("x-api-key"), h.get("authorization")), ("secret-A", None), "the configured key only")
