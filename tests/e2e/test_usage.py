"""Usage awareness end-to-end (spec §6, §5.2 step 2): provider rate-limit headers make
a key with an exhausted window skipped until the window resets; a 429 is a throttle,
never exhaustion — through the real aord and the mock provider, on the fake clock."""
import aortest
from aortest import check, eq
from test_routing import T0, chat, row, setup, tried

EXHAUSTED_30S = {"x-ratelimit-remaining-requests": "0", "x-ratelimit-reset-requests": "30s",
                 "x-ratelimit-remaining-tokens": "90000", "x-ratelimit-reset-tokens": "1s"}


OPENROUTER_EXHAUSTED_45S = {"x-ratelimit-limit": "20", "x-ratelimit-remaining": "0",
                            "x-ratelimit-reset": str((T0 + 45) * 1000)}


def skipped_until_reset(env, headers, reset_s):
    """A answers 200 with headers whose window is exhausted for reset_s seconds: A is
    skipped (no call, no backoff row) until exactly then."""
    mock, d = setup(env)
    mock.script("secret-A", [{"status": 200, "headers": headers}])
    r = chat(env)
    eq((r.status, r.headers.get("x-aor-key")), (200, "A"), "A answered (its last request)")
    r = chat(env)
    eq((r.status, r.headers.get("x-aor-key"), r.headers.get("x-aor-attempts")), (200, "B", "1"),
       "next request straight to B")
    eq(tried(mock, "A"), 1, "A not touched while its window is exhausted")
    eq(row(d, "A"), None, "exhaustion is not a backoff row")
    d.advance(reset_s - 1)
    eq(chat(env).headers.get("x-aor-key"), "B", "still exhausted 1 s before the reset")
    eq(tried(mock, "A"), 1, "A still not touched")
    d.advance(1)
    r = chat(env)
    eq((r.status, r.headers.get("x-aor-key")), (200, "A"), "A used again at its reset")
    eq(tried(mock, "A"), 2, "one more request to A")


def test_exhausted_window_skips_key_until_reset(env):
    skipped_until_reset(env, EXHAUSTED_30S, 30)


def test_a_reset_past_the_cap_holds_the_key_until_the_cap(env):
    """QA: a reset of "9999999h" (or the year 9999) held the key for centuries, every
    request a 429 with Retry-After 35999996400. It is capped at backoff_max_s (here
    3600 s), as a retry hint over the cap is (§4.3)."""
    mock, d = setup(env, routing="backoff_max_s = 3600")
    mock.script("secret-A", [{"status": 200, "headers": {
        "x-ratelimit-remaining-requests": "0", "x-ratelimit-reset-requests": "9999999h"}}])
    eq(chat(env).headers.get("x-aor-key"), "A", "A answered")
    eq(chat(env).headers.get("x-aor-key"), "B", "then A is held back")
    d.advance(3599)
    eq(chat(env).headers.get("x-aor-key"), "B", "1 s before the cap")
    d.advance(1)
    eq(chat(env).headers.get("x-aor-key"), "A", "A used again at the cap")


def test_openrouter_remaining_zero_skips_key_until_reset(env):
    """OpenRouter's unsuffixed x-ratelimit-remaining / -reset (epoch milliseconds); QA:
    they were ignored, so remaining 0 never held the key back."""
    skipped_until_reset(env, OPENROUTER_EXHAUSTED_45S, 45)


def test_retry_after_ignore_takes_no_usage_window_either(env):
    """§4.3: retry_after = ignore "never derives timing from its headers": an exhausted
    x-ratelimit window with a 30 s reset does not hold A back (QA: it did, for 30 s)."""
    mock, d = setup(env, provider="retry_after = ignore")
    mock.script("secret-A", [{"status": 200, "headers": EXHAUSTED_30S}])
    eq(chat(env).headers.get("x-aor-key"), "A", "A answered with remaining 0")
    r = chat(env)
    eq((r.status, r.headers.get("x-aor-key")), (200, "A"), "A is used again at once")
    eq(d.state().get("usage", []), [], "no usage window shown")


def test_all_exhausted_is_429_with_retry_after(env):
    mock, d = setup(env, keys=(("A", 0),))
    mock.script("secret-A", [{"status": 200, "headers": EXHAUSTED_30S}])
    eq(chat(env).status, 200, "first request served")
    r = chat(env)
    eq(r.status, 429, "every key exhausted")
    eq(r.headers.get("retry-after"), "30", "Retry-After = until the window resets")
    check("aor_all_backed_off" in r.body, "error code: %s" % r.body)
    check("exhausted usage window" in r.body and "no upstream failure" in r.body,
          "says why, without a failure that did not happen: %s" % r.body)
    eq(tried(mock, "A"), 1, "no upstream call")
    d.advance(30)
    eq(chat(env).status, 200, "served again at the reset")
    eq(tried(mock, "A"), 2, "A called again")


def not_exhausted_by_a_429(env, headers):
    """A 429 with Retry-After 5 and headers saying 0 remaining: A is backed off by its hint
    only; the remaining 0 must not keep A away beyond it (§6: a 429 never writes "0
    remaining")."""
    mock, d = setup(env)
    mock.script("secret-A", [{"status": 429, "headers": dict(headers, **{"retry-after": "5"})}])
    r = chat(env)
    eq((r.status, r.headers.get("x-aor-key")), (200, "B"), "walked to B")
    b = row(d, "A")
    eq((b["last_error_kind"], b["until"]), ("rate", T0 + 5), "A backed off by its hint")
    d.advance(6)
    r = chat(env)
    eq((r.status, r.headers.get("x-aor-key")), (200, "A"),
       "A tried again once its backoff expired")
    eq(tried(mock, "A"), 2, "A called again")


def test_429_with_zero_remaining_is_not_exhaustion(env):
    not_exhausted_by_a_429(env, {"x-ratelimit-remaining-requests": "0",
                                 "x-ratelimit-reset-requests": "60s"})


def test_openrouter_429_is_not_exhaustion(env):
    not_exhausted_by_a_429(env, OPENROUTER_EXHAUSTED_45S)


def test_two_exhausted_windows_hold_the_key_until_the_first_reset(env):
    """§6: "trusted only until the earliest reset time of its limiting window": requests
    and tokens both at 0, resetting in 10 s and 60 s, hold A back for 10 s; then the
    snapshot is stale and A is tried again (the provider's answer tells where it is)."""
    skipped_until_reset(env, {"x-ratelimit-remaining-requests": "0",
                              "x-ratelimit-reset-requests": "10s",
                              "x-ratelimit-remaining-tokens": "0",
                              "x-ratelimit-reset-tokens": "60s"}, 10)


def test_a_past_reset_among_the_limiting_windows_makes_the_snapshot_stale(env):
    """§6 "(unfiltered)": of two windows at 0, one whose reset time the provider sent is
    already past: the earliest reset is past, the snapshot is not trusted, A is not
    skipped (the other window's future reset does not hold it alone)."""
    past = "2020-01-01T00:00:00Z"
    future = "2030-01-01T00:00:00Z"
    mock, d = setup(env)
    mock.script("secret-A", [{"status": 200, "headers": {
        "anthropic-ratelimit-requests-remaining": "0", "anthropic-ratelimit-requests-reset": past,
        "anthropic-ratelimit-tokens-remaining": "0", "anthropic-ratelimit-tokens-reset": future}}])
    eq(chat(env).headers.get("x-aor-key"), "A", "A answered with both windows at 0")
    r = chat(env)
    eq((r.status, r.headers.get("x-aor-key")), (200, "A"), "A is used again at once")
