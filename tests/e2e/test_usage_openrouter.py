"""§6 end-to-end: OpenRouter's unsuffixed x-ratelimit-limit / -remaining / -reset (reset
in Unix epoch milliseconds) on a 200 mark the key exhausted until the reset (QA: they
were ignored, so remaining 0 never held the key back); a 429 never does."""
from aortest import eq
from test_routing import T0, chat, row, setup, tried

OPENROUTER_EXHAUSTED_45S = {"x-ratelimit-limit": "20", "x-ratelimit-remaining": "0",
                            "x-ratelimit-reset": str((T0 + 45) * 1000)}


def test_openrouter_remaining_zero_skips_key_until_reset(env):
    mock, d = setup(env)
    mock.script("secret-A", [{"status": 200, "headers": OPENROUTER_EXHAUSTED_45S}])
    r = chat(env)
    eq((r.status, r.headers.get("x-aor-key")), (200, "A"), "A answered (its last request)")
    r = chat(env)
    eq((r.status, r.headers.get("x-aor-key"), r.headers.get("x-aor-attempts")), (200, "B", "1"),
       "next request straight to B")
    eq(tried(mock, "A"), 1, "A not touched while its window is exhausted")
    d.advance(44)
    eq(chat(env).headers.get("x-aor-key"), "B", "still exhausted 1 s before the reset")
    d.advance(1)
    r = chat(env)
    eq((r.status, r.headers.get("x-aor-key")), (200, "A"), "A used again at its reset")
    eq(tried(mock, "A"), 2, "one more request to A")


def test_openrouter_429_is_not_exhaustion(env):
    mock, d = setup(env)
    mock.script("secret-A", [{"status": 429, "headers": dict(OPENROUTER_EXHAUSTED_45S,
                                                              **{"retry-after": "5"})}])
    r = chat(env)
    eq((r.status, r.headers.get("x-aor-key")), (200, "B"), "walked to B")
    eq(row(d, "A")["until"], T0 + 5, "A backed off by its Retry-After")
    d.advance(6)
    r = chat(env)
    eq((r.status, r.headers.get("x-aor-key")), (200, "A"),
       "A tried again once its backoff expired: the 429's remaining 0 was not written")
