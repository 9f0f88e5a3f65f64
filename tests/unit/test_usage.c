/* Unit tests for common/usage.c: usage snapshots per (provider, key), spec §6. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "classify.h"
#include "usage.h"

/* 2027-01-15T08:00:00Z */
#define NOW 1800000000.0

#define NH(a) (sizeof(a) / sizeof((a)[0]))

static int setup(void **state) {
    aor_usage *u = aor_usage_new();
    if (!u)
        return -1;
    *state = u;
    return 0;
}

static int teardown(void **state) {
    aor_usage_free(*state);
    return 0;
}

/* RFC 3339 text of Unix time t (whole seconds, UTC). */
static void rfc3339(double t, char *buf, size_t cap) {
    time_t tt = (time_t)t;
    struct tm tm;
    assert_non_null(gmtime_r(&tt, &tm));
    assert_true(strftime(buf, cap, "%Y-%m-%dT%H:%M:%SZ", &tm) > 0);
}

/* OpenAI headers: windows, Go durations, exhaustion and its end. */
static void test_openai_headers(void **state) {
    aor_usage *u = *state;
    const aor_header h[] = {
        {"x-ratelimit-limit-requests", "60"},   {"X-RateLimit-Remaining-Requests", "0"},
        {"x-ratelimit-reset-requests", "6m0s"}, {"x-ratelimit-remaining-tokens", "149984"},
        {"x-ratelimit-reset-tokens", "20ms"},   {"content-type", "application/json"},
    };
    assert_int_equal(aor_usage_observe(u, "openai", "A", 200, h, NH(h), NOW, 0), 1);
    aor_usage_window w[AOR_USAGE_NWINDOWS];
    assert_int_equal(aor_usage_get(u, "openai", "A", w), 1);
    assert_true(w[AOR_USAGE_REQUESTS].known);
    assert_true(w[AOR_USAGE_REQUESTS].remaining == 0);
    assert_true(w[AOR_USAGE_REQUESTS].reset_at == NOW + 360);
    assert_true(w[AOR_USAGE_TOKENS].remaining == 149984);
    assert_true(w[AOR_USAGE_TOKENS].reset_at > NOW + 0.0199 &&
                w[AOR_USAGE_TOKENS].reset_at < NOW + 0.0201);
    assert_false(w[AOR_USAGE_A_REQUESTS].known);

    double until = 0;
    assert_int_equal(aor_usage_exhausted(u, "openai", "A", NOW + 1, &until), 1);
    assert_true(until == NOW + 360);
    /* Other keys / providers are not affected. */
    assert_int_equal(aor_usage_exhausted(u, "openai", "B", NOW + 1, &until), 0);
    assert_int_equal(aor_usage_exhausted(u, "other", "A", NOW + 1, &until), 0);
    /* Stale once its reset time has passed: trusted only until then. */
    until = -5;
    assert_int_equal(aor_usage_exhausted(u, "openai", "A", NOW + 360, &until), 0);
    assert_true(until == -5);
    assert_int_equal(aor_usage_exhausted(u, "openai", "A", NOW + 400, NULL), 0);
}

/* Fractional Go durations and durations of several units. */
static void test_openai_durations(void **state) {
    aor_usage *u = *state;
    const aor_header h[] = {
        {"x-ratelimit-remaining-requests", " 0 "},
        {"x-ratelimit-reset-requests", "1.5s"},
        {"x-ratelimit-remaining-tokens", "0"},
        {"x-ratelimit-reset-tokens", "1h2m3.5s"},
    };
    assert_int_equal(aor_usage_observe(u, "p", "k", 200, h, NH(h), NOW, 0), 1);
    double until = 0;
    /* Both windows are exhausted: the snapshot is trusted until the earlier reset (§6). */
    assert_int_equal(aor_usage_exhausted(u, "p", "k", NOW, &until), 1);
    assert_true(until == NOW + 1.5);
    /* The next check is the earliest future reset. */
    assert_true(aor_usage_next_reset(u, "p", "k", NOW) == NOW + 1.5);
    assert_true(aor_usage_next_reset(u, "p", "k", NOW + 2) == NOW + 3723.5);
    /* After the requests window reset the snapshot is stale, tokens window and all: the
     * key is tried, and the provider's answer tells again. */
    assert_int_equal(aor_usage_exhausted(u, "p", "k", NOW + 2, &until), 0);
}

/* A zero Go duration ("0s", "0ms") is a window resetting now, not an unknown reset: with
 * it limiting, the snapshot is stale at once, even though another exhausted window
 * resets later (§6, QA: "0s" was dropped, and the key held for the tokens window). */
static void test_openai_zero_reset(void **state) {
    aor_usage *u = *state;
    const char *zeros[] = {"0s", "0ms", "0m0s"};
    for (size_t i = 0; i < NH(zeros); i++) {
        const aor_header h[] = {
            {"x-ratelimit-remaining-requests", "0"},
            {"x-ratelimit-reset-requests", zeros[i]},
            {"x-ratelimit-remaining-tokens", "0"},
            {"x-ratelimit-reset-tokens", "40s"},
        };
        assert_int_equal(aor_usage_observe(u, "p", "k", 200, h, NH(h), NOW, 0), 1);
        aor_usage_window w[AOR_USAGE_NWINDOWS];
        assert_int_equal(aor_usage_get(u, "p", "k", w), 1);
        assert_true(w[AOR_USAGE_REQUESTS].reset_at == NOW);
        assert_int_equal(aor_usage_exhausted(u, "p", "k", NOW, NULL), 0);
        assert_int_equal(aor_usage_exhausted(u, "p", "k", NOW + 0.01, NULL), 0);
        /* The next look is the tokens window's reset, the only future one. */
        assert_true(aor_usage_next_reset(u, "p", "k", NOW + 0.01) == NOW + 40);
    }
    /* A retry hint of 0 stays "no hint" (§4.3). */
    assert_true(aor_hint_go_duration("0s") == -1);
    assert_true(aor_hint_go_duration_reset("0s") == 0);
    assert_true(aor_hint_go_duration_reset("-1s") == -1);
    assert_true(aor_hint_go_duration_reset("junk") == -1);
}

/* Anthropic headers: RFC 3339 resets, all four windows. */
static void test_anthropic_headers(void **state) {
    aor_usage *u = *state;
    char r1[64], r2[64], r3[64];
    rfc3339(NOW + 12, r1, sizeof r1);
    rfc3339(NOW + 60, r2, sizeof r2);
    rfc3339(NOW - 30, r3, sizeof r3); /* already past */
    const aor_header h[] = {
        {"anthropic-ratelimit-requests-limit", "50"},
        {"anthropic-ratelimit-requests-remaining", "49"},
        {"anthropic-ratelimit-requests-reset", r1},
        {"anthropic-ratelimit-tokens-remaining", "0"},
        {"anthropic-ratelimit-tokens-reset", r2},
        {"anthropic-ratelimit-input-tokens-remaining", "0"},
        {"anthropic-ratelimit-input-tokens-reset", r3},
        {"anthropic-ratelimit-output-tokens-remaining", "8000"},
        {"anthropic-ratelimit-output-tokens-reset", "2027-01-15T08:00:12.5+01:00"},
    };
    assert_int_equal(aor_usage_observe(u, "anthropic", "K", 200, h, NH(h), NOW, 0), 1);
    aor_usage_window w[AOR_USAGE_NWINDOWS];
    assert_int_equal(aor_usage_get(u, "anthropic", "K", w), 1);
    assert_true(w[AOR_USAGE_A_REQUESTS].remaining == 49);
    assert_true(w[AOR_USAGE_A_REQUESTS].reset_at == NOW + 12);
    assert_true(w[AOR_USAGE_A_TOKENS].remaining == 0);
    assert_true(w[AOR_USAGE_A_TOKENS].reset_at == NOW + 60);
    /* A past reset time is kept as it is: the window is stale. */
    assert_true(w[AOR_USAGE_A_INPUT_TOKENS].reset_at == NOW - 30);
    assert_true(w[AOR_USAGE_A_OUTPUT_TOKENS].reset_at == NOW + 12.5 - 3600);
    assert_false(w[AOR_USAGE_REQUESTS].known);

    double until = 7;
    /* tokens: 0 remaining until NOW+60. input-tokens: 0 remaining but its reset passed:
     * the earliest reset of the limiting windows, unfiltered, is past: the snapshot is
     * stale and does not hold the key (§6). */
    assert_int_equal(aor_usage_exhausted(u, "anthropic", "K", NOW, &until), 0);
    assert_true(until == 7);
    /* Next check: only future resets (NOW-30 and NOW-3587.5 are past). */
    assert_true(aor_usage_next_reset(u, "anthropic", "K", NOW) == NOW + 12);
    assert_true(aor_usage_next_reset(u, "anthropic", "K", NOW + 12) == NOW + 60);
    assert_true(aor_usage_next_reset(u, "anthropic", "K", NOW + 60) == 0);
    assert_int_equal(aor_usage_exhausted(u, "anthropic", "K", NOW + 60, NULL), 0);
    /* Only the limiting windows count: requests (49 left, reset at +12) does not end the
     * trust in tokens (0 left until +60). */
    const aor_header h2[] = {
        {"anthropic-ratelimit-requests-remaining", "49"},
        {"anthropic-ratelimit-requests-reset", r1},
        {"anthropic-ratelimit-tokens-remaining", "0"},
        {"anthropic-ratelimit-tokens-reset", r2},
    };
    assert_int_equal(aor_usage_observe(u, "anthropic", "K2", 200, h2, NH(h2), NOW, 0), 1);
    assert_int_equal(aor_usage_exhausted(u, "anthropic", "K2", NOW + 13, &until), 1);
    assert_true(until == NOW + 60);
}

/* §6: a 429 means throttled, never exhausted: its remaining values are not written. */
static void test_429_never_writes_zero(void **state) {
    aor_usage *u = *state;
    const aor_header h429[] = {
        {"x-ratelimit-remaining-requests", "0"},
        {"x-ratelimit-reset-requests", "30s"},
        {"anthropic-ratelimit-requests-remaining", "0"},
        {"anthropic-ratelimit-requests-reset", "2027-01-15T08:01:00Z"},
    };
    assert_int_equal(aor_usage_observe(u, "p", "k", 429, h429, NH(h429), NOW, 0), 0);
    assert_int_equal(aor_usage_exhausted(u, "p", "k", NOW + 1, NULL), 0);
    assert_int_equal(aor_usage_count(u), 0);

    /* Nor does it overwrite a healthy snapshot with 0. */
    const aor_header ok[] = {
        {"x-ratelimit-remaining-requests", "12"},
        {"x-ratelimit-reset-requests", "30s"},
    };
    assert_int_equal(aor_usage_observe(u, "p", "k", 200, ok, NH(ok), NOW, 0), 1);
    assert_int_equal(aor_usage_observe(u, "p", "k", 429, h429, NH(h429), NOW + 1, 0), 0);
    assert_int_equal(aor_usage_exhausted(u, "p", "k", NOW + 2, NULL), 0);
    aor_usage_window w[AOR_USAGE_NWINDOWS];
    assert_int_equal(aor_usage_get(u, "p", "k", w), 1);
    assert_true(w[AOR_USAGE_REQUESTS].remaining == 12);
    /* 529 (overloaded) and 5xx / no answer are ignored as well. */
    assert_int_equal(aor_usage_observe(u, "p", "k", 529, h429, NH(h429), NOW, 0), 0);
    assert_int_equal(aor_usage_observe(u, "p", "k", 503, h429, NH(h429), NOW, 0), 0);
    assert_int_equal(aor_usage_observe(u, "p", "k", 0, h429, NH(h429), NOW, 0), 0);
    assert_int_equal(aor_usage_exhausted(u, "p", "k", NOW + 2, NULL), 0);
    /* Another error answer (e.g. 400) does carry usage. */
    assert_int_equal(aor_usage_observe(u, "p", "k", 400, h429, NH(h429), NOW, 0), 1);
    assert_int_equal(aor_usage_exhausted(u, "p", "k", NOW + 2, NULL), 1);
}

/* Newer answers replace the windows they name; others keep theirs. */
static void test_update_and_junk(void **state) {
    aor_usage *u = *state;
    const aor_header first[] = {
        {"x-ratelimit-remaining-requests", "0"},
        {"x-ratelimit-reset-requests", "30s"},
        {"x-ratelimit-remaining-tokens", "500"},
        {"x-ratelimit-reset-tokens", "10s"},
    };
    assert_int_equal(aor_usage_observe(u, "p", "k", 200, first, NH(first), NOW, 0), 1);
    assert_int_equal(aor_usage_exhausted(u, "p", "k", NOW, NULL), 1);
    /* The requests window refilled (an answer says so); tokens not named: kept. */
    const aor_header second[] = {
        {"x-ratelimit-remaining-requests", "0"}, /* last occurrence wins */
        {"x-ratelimit-remaining-requests", "5"},
        {"x-ratelimit-reset-requests", "1s"},
    };
    assert_int_equal(aor_usage_observe(u, "p", "k", 200, second, NH(second), NOW + 1, 0), 1);
    assert_int_equal(aor_usage_exhausted(u, "p", "k", NOW + 1, NULL), 0);
    aor_usage_window w[AOR_USAGE_NWINDOWS];
    assert_int_equal(aor_usage_get(u, "p", "k", w), 1);
    assert_true(w[AOR_USAGE_TOKENS].remaining == 500);
    assert_true(w[AOR_USAGE_TOKENS].reset_at == NOW + 10);

    /* Junk values count as unknown: 0 remaining without a valid reset is not trusted. */
    const aor_header junk[] = {
        {"x-ratelimit-remaining-requests", "0"},
        {"x-ratelimit-reset-requests", "30"}, /* no unit */
        {"x-ratelimit-remaining-tokens", "-1"},
        {"x-ratelimit-reset-tokens", "30sjunk"},
    };
    assert_int_equal(aor_usage_observe(u, "p", "k", 200, junk, NH(junk), NOW + 2, 0), 1);
    assert_int_equal(aor_usage_exhausted(u, "p", "k", NOW + 2, NULL), 0);
    assert_int_equal(aor_usage_get(u, "p", "k", w), 1);
    assert_true(w[AOR_USAGE_REQUESTS].remaining == 0 && w[AOR_USAGE_REQUESTS].reset_at == 0);
    assert_true(w[AOR_USAGE_TOKENS].remaining == -1 && w[AOR_USAGE_TOKENS].reset_at == 0);
    assert_true(aor_usage_next_reset(u, "p", "k", NOW + 2) == 0);

    /* An over-long value is junk too. */
    char longv[AOR_HINT_MAX_VALUE + 8];
    memset(longv, '0', sizeof longv - 1);
    longv[sizeof longv - 1] = '\0';
    const aor_header lng[] = {
        {"x-ratelimit-remaining-requests", longv},
        {"x-ratelimit-reset-requests", "30s"},
    };
    assert_int_equal(aor_usage_observe(u, "p", "k", 200, lng, NH(lng), NOW + 3, 0), 1);
    assert_int_equal(aor_usage_exhausted(u, "p", "k", NOW + 3, NULL), 0);
}

/* Answers without usage headers create no row; bad arguments. */
static void test_no_headers_and_errors(void **state) {
    aor_usage *u = *state;
    const aor_header h[] = {{"content-type", "application/json"}, {"x-request-id", "r1"}};
    assert_int_equal(aor_usage_observe(u, "p", "k", 200, h, NH(h), NOW, 0), 0);
    assert_int_equal(aor_usage_observe(u, "p", "k", 200, NULL, 0, NOW, 0), 0);
    assert_int_equal(aor_usage_count(u), 0);
    assert_true(aor_usage_next_reset(u, "p", "k", NOW) == 0);
    errno = 0;
    assert_int_equal(aor_usage_observe(NULL, "p", "k", 200, h, NH(h), NOW, 0), -1);
    assert_int_equal(errno, EINVAL);
    assert_int_equal(aor_usage_observe(u, NULL, "k", 200, h, NH(h), NOW, 0), -1);
    assert_int_equal(aor_usage_exhausted(NULL, "p", "k", NOW, NULL), 0);
    assert_true(aor_usage_next_reset(NULL, "p", "k", NOW) == 0);
    assert_int_equal(aor_usage_count(NULL), 0);
    aor_usage_free(NULL);
}

/* Past AOR_USAGE_PRUNE_AT rows, rows with no future reset are dropped. */
static void test_prune(void **state) {
    aor_usage *u = *state;
    const aor_header h[] = {
        {"x-ratelimit-remaining-requests", "0"},
        {"x-ratelimit-reset-requests", "10s"},
    };
    char key[32];
    for (int i = 0; i < AOR_USAGE_PRUNE_AT; i++) {
        snprintf(key, sizeof key, "client-%06d", i);
        assert_int_equal(aor_usage_observe(u, "p", key, 200, h, NH(h), NOW, 0), 1);
    }
    assert_int_equal(aor_usage_count(u), AOR_USAGE_PRUNE_AT);
    /* 20 s later every row is stale: the next new row prunes them. */
    assert_int_equal(aor_usage_observe(u, "p", "fresh", 200, h, NH(h), NOW + 20, 0), 1);
    assert_int_equal(aor_usage_count(u), 1);
    assert_int_equal(aor_usage_exhausted(u, "p", "fresh", NOW + 21, NULL), 1);
}

/* Many rate-limit headers before the ones that count (more than the 16 picked out
 * without an allocation): the windows are still read, the last valid value wins. */
static void test_many_ratelimit_headers(void **state) {
    aor_usage *u = *state;
    aor_header h[40];
    char names[30][48];
    size_t n = 0;
    for (int i = 0; i < 30; i++) {
        snprintf(names[i], sizeof names[i], "X-RateLimit-Other-%d", i);
        h[n++] = (aor_header){names[i], "7"};
    }
    h[n++] = (aor_header){"server", "mock"};
    h[n++] = (aor_header){"anthropic-ratelimit-requests-remaining", "5"};
    h[n++] = (aor_header){"x-ratelimit-remaining-requests", "3"};
    h[n++] = (aor_header){"x-ratelimit-remaining-requests", "0"};
    h[n++] = (aor_header){"x-ratelimit-reset-requests", "1m"};
    assert_int_equal(aor_usage_observe(u, "openai", "A", 200, h, n, NOW, 0), 1);
    aor_usage_window w[AOR_USAGE_NWINDOWS];
    assert_int_equal(aor_usage_get(u, "openai", "A", w), 1);
    assert_true(w[AOR_USAGE_REQUESTS].remaining == 0);
    assert_true(w[AOR_USAGE_REQUESTS].reset_at == NOW + 60);
    assert_true(w[AOR_USAGE_A_REQUESTS].remaining == 5);
    assert_false(w[AOR_USAGE_TOKENS].known);
    /* Only headers that are not rate-limit windows: nothing recorded. */
    const aor_header other[] = {{"x-request-id", "r1"}, {"age", "0"}, {"X-RateLimit-Limit", "9"}};
    assert_int_equal(aor_usage_observe(u, "openai", "B", 200, other, 3, NOW, 0), 0);
    assert_int_equal(aor_usage_get(u, "openai", "B", w), 0);
}

/* OpenRouter: unsuffixed x-ratelimit-* on a 200, reset in Unix epoch milliseconds; 0
 * remaining marks the key exhausted until then (QA: these headers were ignored). */
static void test_openrouter_unsuffixed_headers(void **state) {
    aor_usage *u = *state;
    const double now = 1735689590; /* 10 s before 2025-01-01T00:00:00Z */
    const aor_header h[] = {
        {"X-RateLimit-Limit", "20"},
        {"X-RateLimit-Remaining", "0"},
        {"X-RateLimit-Reset", "1735689600000"},
    };
    assert_int_equal(aor_usage_observe(u, "openrouter", "K", 200, h, NH(h), now, 0), 1);
    aor_usage_window w[AOR_USAGE_NWINDOWS];
    assert_int_equal(aor_usage_get(u, "openrouter", "K", w), 1);
    assert_true(w[AOR_USAGE_PLAIN].known);
    assert_true(w[AOR_USAGE_PLAIN].remaining == 0);
    assert_true(w[AOR_USAGE_PLAIN].reset_at == 1735689600);
    assert_false(w[AOR_USAGE_REQUESTS].known);
    double until = 0;
    assert_int_equal(aor_usage_exhausted(u, "openrouter", "K", now, &until), 1);
    assert_true(until == 1735689600);
    assert_true(aor_usage_next_reset(u, "openrouter", "K", now) == 1735689600);
    /* Trusted only until its reset. */
    assert_int_equal(aor_usage_exhausted(u, "openrouter", "K", 1735689600, NULL), 0);

    /* A 429 never writes 0 remaining: a fresh key stays usable. */
    assert_int_equal(aor_usage_observe(u, "openrouter", "L", 429, h, NH(h), now, 0), 0);
    assert_int_equal(aor_usage_exhausted(u, "openrouter", "L", now, NULL), 0);
    /* Nor does it overwrite a healthy snapshot. */
    const aor_header ok[] = {{"x-ratelimit-remaining", "7"},
                             {"x-ratelimit-reset", "1735689600000"}};
    assert_int_equal(aor_usage_observe(u, "openrouter", "L", 200, ok, NH(ok), now, 0), 1);
    assert_int_equal(aor_usage_observe(u, "openrouter", "L", 429, h, NH(h), now + 1, 0), 0);
    assert_int_equal(aor_usage_get(u, "openrouter", "L", w), 1);
    assert_true(w[AOR_USAGE_PLAIN].remaining == 7);
    assert_int_equal(aor_usage_exhausted(u, "openrouter", "L", now + 1, NULL), 0);
}

/* The unsuffixed reset's other forms: epoch seconds, a Go duration; junk, a bare small
 * number and absurd values are unknown (0 remaining then is not trusted); a past epoch is
 * kept and stale. The unsuffixed window is apart from the suffixed ones. */
static void test_unsuffixed_reset_forms(void **state) {
    aor_usage *u = *state;
    aor_usage_window w[AOR_USAGE_NWINDOWS];
    struct {
        const char *reset;
        double reset_at; /* expected; 0 = unknown */
        int exhausted;   /* at NOW */
    } cases[] = {
        {"1800000045", NOW + 45, 1},          /* epoch seconds */
        {" 1800000045000 ", NOW + 45, 1},     /* epoch ms, spaces trimmed */
        {"1800000002500.5", NOW + 2.5005, 1}, /* fractional ms */
        {"20s", NOW + 20, 1},                 /* Go duration */
        {"1m30s", NOW + 90, 1},               /* Go duration */
        {"1799999995000", NOW - 5, 0},        /* past epoch ms: kept, stale */
        {"30", 0, 0},                         /* bare small number: not clearly one */
        {"999999999", 0, 0},                  /* just below 1e9 */
        {"100000000000000", 0, 0},            /* 1e14 ms: past the year 5000 */
        {"2027-01-15T08:00:30Z", 0, 0},       /* not a form of this header */
        {"1800000045junk", 0, 0},             /* junk */
        {"-1800000045", 0, 0},                /* negative */
    };
    for (size_t i = 0; i < NH(cases); i++) {
        const aor_header h[] = {{"x-ratelimit-remaining", "0"},
                                {"x-ratelimit-reset", cases[i].reset}};
        char key[16];
        snprintf(key, sizeof key, "k%zu", i);
        assert_int_equal(aor_usage_observe(u, "p", key, 200, h, NH(h), NOW, 0), 1);
        assert_int_equal(aor_usage_get(u, "p", key, w), 1);
        if (!(w[AOR_USAGE_PLAIN].reset_at > cases[i].reset_at - 1e-6 &&
              w[AOR_USAGE_PLAIN].reset_at < cases[i].reset_at + 1e-6))
            fail_msg("reset %s: reset_at %.6f, expected %.6f", cases[i].reset,
                     w[AOR_USAGE_PLAIN].reset_at, cases[i].reset_at);
        if (aor_usage_exhausted(u, "p", key, NOW, NULL) != cases[i].exhausted)
            fail_msg("reset %s: exhausted should be %d", cases[i].reset, cases[i].exhausted);
    }

    /* Suffixed and unsuffixed windows side by side: each keeps its own values. */
    const aor_header both[] = {
        {"x-ratelimit-remaining-requests", "5"}, {"x-ratelimit-reset-requests", "10s"},
        {"x-ratelimit-remaining", "0"},          {"x-ratelimit-reset", "1800000060000"},
        {"x-ratelimit-remaining-tokens", "900"}, {"x-ratelimit-reset-tokens", "1s"},
    };
    assert_int_equal(aor_usage_observe(u, "p", "both", 200, both, NH(both), NOW, 0), 1);
    assert_int_equal(aor_usage_get(u, "p", "both", w), 1);
    assert_true(w[AOR_USAGE_REQUESTS].remaining == 5 && w[AOR_USAGE_REQUESTS].reset_at == NOW + 10);
    assert_true(w[AOR_USAGE_TOKENS].remaining == 900);
    assert_true(w[AOR_USAGE_PLAIN].remaining == 0 && w[AOR_USAGE_PLAIN].reset_at == NOW + 60);
    double until = 0;
    assert_int_equal(aor_usage_exhausted(u, "p", "both", NOW, &until), 1);
    assert_true(until == NOW + 60);
    /* A later answer naming only the suffixed windows keeps the unsuffixed one. */
    const aor_header later[] = {{"x-ratelimit-remaining-requests", "4"}};
    assert_int_equal(aor_usage_observe(u, "p", "both", 200, later, NH(later), NOW + 1, 0), 1);
    assert_int_equal(aor_usage_exhausted(u, "p", "both", NOW + 1, NULL), 1);
    /* One that names it with remaining > 0 frees the key. */
    const aor_header refill[] = {{"x-ratelimit-remaining", "19"}};
    assert_int_equal(aor_usage_observe(u, "p", "both", 200, refill, NH(refill), NOW + 2, 0), 1);
    assert_int_equal(aor_usage_exhausted(u, "p", "both", NOW + 2, NULL), 0);
}

typedef struct {
    int rows;
    int exhausted_windows;
    char last[64];
} visit_count;

static void count_visit(const char *provider, const char *key, const aor_usage_window *w,
                        void *arg) {
    visit_count *v = arg;
    v->rows++;
    for (int i = 0; i < AOR_USAGE_NWINDOWS; i++)
        if (w[i].known && w[i].remaining == 0 && w[i].reset_at > NOW)
            v->exhausted_windows++;
    snprintf(v->last, sizeof v->last, "%s/%s", provider, key);
}

/* foreach shows every row with its windows; forget drops by provider, key or both. */
static void test_foreach_forget(void **state) {
    aor_usage *u = *state;
    const aor_header h[] = {{"x-ratelimit-remaining-requests", "0"},
                            {"x-ratelimit-reset-requests", "60s"}};
    assert_int_equal(aor_usage_observe(u, "p1", "A", 200, h, NH(h), NOW, 0), 1);
    assert_int_equal(aor_usage_observe(u, "p1", "B", 200, h, NH(h), NOW, 0), 1);
    assert_int_equal(aor_usage_observe(u, "p2", "A", 200, h, NH(h), NOW, 0), 1);
    assert_int_equal(aor_usage_observe(u, "p3", "C", 200, h, NH(h), NOW, 0), 1);
    visit_count v = {0};
    aor_usage_foreach(u, count_visit, &v);
    assert_int_equal(v.rows, 4);
    assert_int_equal(v.exhausted_windows, 4);
    aor_usage_foreach(NULL, count_visit, &v);
    aor_usage_foreach(u, NULL, NULL);
    assert_int_equal(v.rows, 4);

    assert_int_equal(aor_usage_forget(u, "p1", "A"), 1);
    assert_int_equal(aor_usage_exhausted(u, "p1", "A", NOW + 1, NULL), 0);
    assert_int_equal(aor_usage_exhausted(u, "p1", "B", NOW + 1, NULL), 1);
    assert_int_equal(aor_usage_forget(u, NULL, "A"), 1); /* p2/A */
    assert_int_equal(aor_usage_exhausted(u, "p2", "A", NOW + 1, NULL), 0);
    assert_int_equal(aor_usage_forget(u, "p1", NULL), 1); /* p1/B */
    assert_int_equal(aor_usage_count(u), 1);
    assert_int_equal(aor_usage_forget(u, NULL, NULL), 1);
    assert_int_equal(aor_usage_count(u), 0);
    assert_int_equal(aor_usage_forget(NULL, NULL, NULL), 0);

    assert_string_equal(aor_usage_window_name(AOR_USAGE_REQUESTS), "requests");
    assert_string_equal(aor_usage_window_name(AOR_USAGE_A_OUTPUT_TOKENS),
                        "anthropic-output-tokens");
    assert_string_equal(aor_usage_window_name(AOR_USAGE_NWINDOWS), "?");
}

/* A reset further ahead than max_s (backoff_max_s) holds the key until now + max_s only,
 * as a retry hint over the cap does (§4.3; QA: "9999999h" held it for 1,141 years). */
static void test_reset_capped(void **state) {
    aor_usage *u = *state;
    const aor_header h1[] = {{"x-ratelimit-remaining-requests", "0"},
                             {"x-ratelimit-reset-requests", "9999999h"}};
    const aor_header h2[] = {{"anthropic-ratelimit-requests-remaining", "0"},
                             {"anthropic-ratelimit-requests-reset", "9999-12-31T23:59:59Z"}};
    const aor_header h3[] = {{"x-ratelimit-remaining", "0"},
                             {"x-ratelimit-reset", "99999999999999"}};
    const aor_header h4[] = {{"x-ratelimit-remaining-requests", "0"},
                             {"x-ratelimit-reset-requests", "1h"}};
    const aor_header *hs[] = {h1, h2, h3};
    for (size_t i = 0; i < 3; i++) {
        assert_int_equal(aor_usage_observe(u, "p", "k", 200, hs[i], 2, NOW, 86400), 1);
        double until = 0;
        assert_int_equal(aor_usage_exhausted(u, "p", "k", NOW + 1, &until), 1);
        assert_true(until == NOW + 86400);
        assert_int_equal(aor_usage_exhausted(u, "p", "k", NOW + 86400, NULL), 0);
        aor_usage_forget(u, NULL, NULL);
    }
    /* Within the cap: as sent. Without a cap (0): as sent too. */
    assert_int_equal(aor_usage_observe(u, "p", "k", 200, h4, 2, NOW, 86400), 1);
    double until = 0;
    assert_int_equal(aor_usage_exhausted(u, "p", "k", NOW + 1, &until), 1);
    assert_true(until == NOW + 3600);
    assert_int_equal(aor_usage_observe(u, "p", "k", 200, h1, 2, NOW, 0), 1);
    assert_int_equal(aor_usage_exhausted(u, "p", "k", NOW + 1, &until), 1);
    assert_true(until == NOW + 9999999.0 * 3600);
}

#define T(f) cmocka_unit_test_setup_teardown(f, setup, teardown)

int main(void) {
    const struct CMUnitTest tests[] = {
        T(test_foreach_forget),
        T(test_openai_headers),
        T(test_openai_durations),
        T(test_openai_zero_reset),
        T(test_anthropic_headers),
        T(test_429_never_writes_zero),
        T(test_update_and_junk),
        T(test_no_headers_and_errors),
        T(test_prune),
        T(test_many_ratelimit_headers),
        T(test_openrouter_unsuffixed_headers),
        T(test_unsuffixed_reset_forms),
        T(test_reset_capped),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
