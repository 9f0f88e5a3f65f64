/* Backoff table (spec §4.2 curve, §4.3 hints): what a user sees as a key's window. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include "backoff.h"

#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#define assert_time(actual, expected)                                                              \
    do {                                                                                           \
        double a_ = (actual), e_ = (expected);                                                     \
        if (!(fabs(a_ - e_) <= 1e-9))                                                              \
            fail_msg("%s = %.9g, expected %.9g", #actual, a_, e_);                                 \
    } while (0)

static const aor_backoff_params defaults = {
    .initial_s = 5, .max_s = 86400, .quota_cooldown_s = 120, .auth_cooldown_s = 120};

static int setup(void **state) {
    *state = aor_backoff_new(&defaults);
    return *state ? 0 : -1;
}

static int teardown(void **state) {
    aor_backoff_free(*state);
    return 0;
}

/* §4.2: persistent failure, each retried exactly when its window ends:
 * 5, 10, 20, ... capped at 24 h, then held at 24 h. */
static void test_curve_persistent_failure(void **state) {
    aor_backoff *b = *state;
    static const double expected[] = {5,    10,   20,    40,    80,    160,   320,   640,   1280,
                                      2560, 5120, 10240, 20480, 40960, 81920, 86400, 86400, 86400};
    double now = 1000;
    for (size_t i = 0; i < sizeof expected / sizeof expected[0]; i++) {
        aor_backoff_row row;
        assert_int_equal(aor_backoff_fail(b, "openai", "k1", AOR_KIND_RATE, -1, now, &row), 0);
        assert_time(row.window_s, expected[i]);
        assert_time(row.until, now + expected[i]);
        assert_int_equal(row.failure_count, (int)i + 1);
        assert_int_equal(row.last_error_kind, AOR_KIND_RATE);
        assert_time(row.last_failure, now);
        assert_string_equal(row.provider, "openai");
        assert_string_equal(row.key, "k1");
        assert_int_equal(aor_backoff_blocked(b, "openai", "k1", now + expected[i] - 0.5, NULL), 1);
        now = row.until; /* the router retries exactly when the window expires */
    }
}

/* Transient failures follow the same curve. */
static void test_curve_transient(void **state) {
    aor_backoff *b = *state;
    aor_backoff_row row;
    assert_int_equal(aor_backoff_fail(b, "p", "k", AOR_KIND_TRANSIENT, -1, 0, &row), 0);
    assert_time(row.window_s, 5);
    assert_int_equal(aor_backoff_fail(b, "p", "k", AOR_KIND_TRANSIENT, -1, 5, &row), 0);
    assert_time(row.window_s, 10);
    assert_int_equal(aor_backoff_fail(b, "p", "k", AOR_KIND_RATE, -1, 15, &row), 0);
    assert_time(row.window_s, 20);
}

/* §4.2: success in between — the next failure starts again at 5 s. */
static void test_success_resets_curve(void **state) {
    aor_backoff *b = *state;
    aor_backoff_row row;
    double now = 0;
    for (int i = 0; i < 4; i++) {
        assert_int_equal(aor_backoff_fail(b, "p", "k", AOR_KIND_RATE, -1, now, &row), 0);
        now = row.until;
    }
    assert_time(row.window_s, 40);
    assert_int_equal(aor_backoff_success(b, "p", "k"), 1);
    assert_int_equal(aor_backoff_get(b, "p", "k", NULL), 0);
    assert_int_equal(aor_backoff_blocked(b, "p", "k", now, NULL), 0);
    assert_int_equal(aor_backoff_success(b, "p", "k"), 0); /* nothing to change */
    assert_int_equal(aor_backoff_fail(b, "p", "k", AOR_KIND_RATE, -1, now + 1, &row), 0);
    assert_time(row.window_s, 5);
    assert_int_equal(row.failure_count, 1);
    assert_time(row.until, now + 6);
}

/* §4.2: a failure after the window expired naturally (long after) still doubles. */
static void test_escalates_across_natural_expiry(void **state) {
    aor_backoff *b = *state;
    aor_backoff_row row;
    assert_int_equal(aor_backoff_fail(b, "p", "k", AOR_KIND_RATE, -1, 0, &row), 0);
    assert_time(row.until, 5);
    assert_int_equal(aor_backoff_blocked(b, "p", "k", 1000, NULL), 0);
    assert_int_equal(aor_backoff_get(b, "p", "k", NULL), 1); /* expired rows stay */
    assert_int_equal(aor_backoff_fail(b, "p", "k", AOR_KIND_RATE, -1, 1000, &row), 0);
    assert_time(row.window_s, 10);
    assert_time(row.until, 1010);
    assert_int_equal(row.failure_count, 2);
}

/* At exactly now == until the key is free, and a failure then escalates. */
static void test_exact_expiry(void **state) {
    aor_backoff *b = *state;
    aor_backoff_row row;
    double until = 0;
    assert_int_equal(aor_backoff_fail(b, "p", "k", AOR_KIND_RATE, -1, 100, &row), 0);
    assert_int_equal(aor_backoff_blocked(b, "p", "k", 104.999, &until), 1);
    assert_time(until, 105);
    assert_int_equal(aor_backoff_blocked(b, "p", "k", 105, NULL), 0);
    assert_int_equal(aor_backoff_fail(b, "p", "k", AOR_KIND_RATE, -1, 105, &row), 0);
    assert_time(row.window_s, 10);
    assert_time(row.until, 115);
}

/* §4.2: a new failure never shortens a running window: a 60 s hint, then a failure
 * 1 s later whose curve window is 10 s, keeps the 60 s until. */
static void test_never_shortens_running_window(void **state) {
    aor_backoff *b = *state;
    aor_backoff_row row;
    assert_int_equal(aor_backoff_fail(b, "p", "k", AOR_KIND_RATE, 60, 0, &row), 0);
    assert_time(row.window_s, 60);
    assert_time(row.until, 60);
    assert_int_equal(row.failure_count, 1);
    assert_int_equal(aor_backoff_fail(b, "p", "k", AOR_KIND_RATE, -1, 1, &row), 0);
    assert_int_equal(row.failure_count, 2);
    assert_time(row.window_s, 60); /* the window in force, not the 10 s this one computed */
    assert_time(row.until, 60);
    assert_int_equal(aor_backoff_blocked(b, "p", "k", 59, NULL), 1);
    /* A shorter hint later also does not shorten it. */
    assert_int_equal(aor_backoff_fail(b, "p", "k", AOR_KIND_RATE, 2, 3, &row), 0);
    assert_time(row.until, 60);
    /* The curve continued under the hints: level 4 -> 40 s. */
    assert_int_equal(aor_backoff_fail(b, "p", "k", AOR_KIND_RATE, -1, 60, &row), 0);
    assert_int_equal(row.failure_count, 4);
    assert_time(row.window_s, 40);
    assert_time(row.until, 100);
}

/* §4.3: a hint sets the window and the failure counts as a curve level, so the curve
 * continues where the headers stop; the latest (longer) hint wins. */
static void test_hint_sets_window_and_counts(void **state) {
    aor_backoff *b = *state;
    aor_backoff_row row;
    assert_int_equal(aor_backoff_fail(b, "p", "k", AOR_KIND_RATE, 30, 0, &row), 0);
    assert_time(row.window_s, 30);
    assert_time(row.until, 30);
    assert_int_equal(aor_backoff_fail(b, "p", "k", AOR_KIND_RATE, 45.5, 10, &row), 0);
    assert_time(row.window_s, 45.5);
    assert_time(row.until, 55.5);
    assert_int_equal(aor_backoff_fail(b, "p", "k", AOR_KIND_RATE, -1, 55.5, &row), 0);
    assert_int_equal(row.failure_count, 3);
    assert_time(row.window_s, 20);
    assert_time(row.until, 75.5);
}

/* §4.3: a hint over the cap is not slept on: the key is backed off to the cap. */
static void test_hint_over_cap_is_cap(void **state) {
    aor_backoff *b = *state;
    aor_backoff_row row;
    assert_int_equal(aor_backoff_fail(b, "p", "k", AOR_KIND_RATE, 200000, 10, &row), 0);
    assert_time(row.window_s, 86400);
    assert_time(row.until, 86410);
    assert_int_equal(aor_backoff_fail(b, "p", "k", AOR_KIND_RATE, INFINITY, 20, &row), 0);
    assert_time(row.window_s, 86400);
    assert_time(row.until, 86420);
}

/* "No hint" values (0, negative, NaN) fall back to the curve. */
static void test_no_hint_values_use_curve(void **state) {
    aor_backoff *b = *state;
    aor_backoff_row row;
    assert_int_equal(aor_backoff_fail(b, "p", "k", AOR_KIND_RATE, 0, 0, &row), 0);
    assert_time(row.window_s, 5);
    assert_int_equal(aor_backoff_fail(b, "p", "k", AOR_KIND_RATE, -3, 5, &row), 0);
    assert_time(row.window_s, 10);
    assert_int_equal(aor_backoff_fail(b, "p", "k", AOR_KIND_RATE, NAN, 15, &row), 0);
    assert_time(row.window_s, 20);
    assert_time(row.until, 35);
}

/* Quota and auth: flat cooldowns that never escalate; hints are ignored. */
static void test_quota_auth_flat(void **state) {
    aor_backoff *b = *state;
    aor_backoff_row row;
    double now = 0;
    for (int i = 1; i <= 6; i++) {
        assert_int_equal(aor_backoff_fail(b, "p", "q", AOR_KIND_QUOTA, 999, now, &row), 0);
        assert_time(row.window_s, 120);
        assert_time(row.until, now + 120);
        assert_int_equal(row.failure_count, i);
        assert_int_equal(row.last_error_kind, AOR_KIND_QUOTA);
        now = row.until;
    }
    now = 0;
    for (int i = 1; i <= 6; i++) {
        assert_int_equal(aor_backoff_fail(b, "p", "a", AOR_KIND_AUTH, -1, now, &row), 0);
        assert_time(row.window_s, 120);
        assert_time(row.until, now + 120);
        assert_int_equal(row.last_error_kind, AOR_KIND_AUTH);
        now = row.until + 1000; /* also after natural expiry: still flat */
    }
}

/* Distinct cooldowns are used per kind. */
static void test_quota_auth_own_cooldowns(void **state) {
    aor_backoff_params p = defaults;
    p.quota_cooldown_s = 300;
    p.auth_cooldown_s = 45;
    aor_backoff *b = aor_backoff_new(&p);
    assert_non_null(b);
    aor_backoff_row row;
    assert_int_equal(aor_backoff_fail(b, "p", "q", AOR_KIND_QUOTA, -1, 0, &row), 0);
    assert_time(row.until, 300);
    assert_int_equal(aor_backoff_fail(b, "p", "a", AOR_KIND_AUTH, -1, 0, &row), 0);
    assert_time(row.until, 45);
    aor_backoff_free(b);
}

/* A quota failure on a key in rate escalation: flat 120 s, but it never shortens the
 * longer rate window still running; the curve level keeps counting. */
static void test_quota_on_escalated_row(void **state) {
    aor_backoff *b = *state;
    aor_backoff_row row;
    double now = 0;
    for (int i = 0; i < 8; i++) { /* 5 .. 640 */
        assert_int_equal(aor_backoff_fail(b, "p", "k", AOR_KIND_RATE, -1, now, &row), 0);
        now = row.until;
    }
    assert_time(row.window_s, 640);
    double running = row.until;
    assert_int_equal(aor_backoff_fail(b, "p", "k", AOR_KIND_QUOTA, -1, running - 600, &row), 0);
    assert_time(row.window_s, 640); /* the running window is in force; until - window_s is
                                       when it started */
    assert_time(row.until, running);
    assert_int_equal(row.failure_count, 9);
    assert_int_equal(row.last_error_kind, AOR_KIND_QUOTA);
    /* After it ran out, quota stays flat. */
    assert_int_equal(aor_backoff_fail(b, "p", "k", AOR_KIND_QUOTA, -1, running, &row), 0);
    assert_time(row.until, running + 120);
    /* And a rate failure continues the curve above the quota failures: level 11. */
    assert_int_equal(aor_backoff_fail(b, "p", "k", AOR_KIND_RATE, -1, running + 120, &row), 0);
    assert_int_equal(row.failure_count, 11);
    assert_time(row.window_s, 5120);
}

/* Keys are independent: one key's failures don't touch another's curve. */
static void test_keys_independent(void **state) {
    aor_backoff *b = *state;
    aor_backoff_row row;
    assert_int_equal(aor_backoff_fail(b, "p", "k1", AOR_KIND_RATE, -1, 0, &row), 0);
    assert_int_equal(aor_backoff_fail(b, "p", "k1", AOR_KIND_RATE, -1, 5, &row), 0);
    assert_int_equal(aor_backoff_fail(b, "p", "k2", AOR_KIND_RATE, -1, 5, &row), 0);
    assert_time(row.window_s, 5);
    assert_int_equal(aor_backoff_fail(b, "q", "k1", AOR_KIND_RATE, -1, 5, &row), 0);
    assert_time(row.window_s, 5);
    assert_int_equal(aor_backoff_blocked(b, "p", "k1", 10, NULL), 1);
    assert_int_equal(aor_backoff_blocked(b, "p", "k2", 10, NULL), 0);
    assert_int_equal(aor_backoff_blocked(b, "nobody", "k1", 0, NULL), 0);
}

/* Preview computes the row without changing the table; fail == preview + restore. */
static void test_preview_does_not_change(void **state) {
    aor_backoff *b = *state;
    const char *provider = "openai", *key = "main";
    aor_backoff_row pv, row;
    assert_int_equal(aor_backoff_preview(b, provider, key, AOR_KIND_RATE, -1, 10, &pv), 0);
    assert_ptr_equal(pv.provider, provider);
    assert_ptr_equal(pv.key, key);
    assert_time(pv.until, 15);
    assert_int_equal(pv.failure_count, 1);
    assert_int_equal(aor_backoff_get(b, provider, key, NULL), 0);
    assert_int_equal(aor_backoff_blocked(b, provider, key, 10, NULL), 0);

    assert_int_equal(aor_backoff_restore(b, &pv), 0);
    assert_int_equal(aor_backoff_get(b, provider, key, &row), 1);
    assert_ptr_not_equal(row.provider, provider); /* the table copied the strings */
    assert_time(row.until, 15);

    assert_int_equal(aor_backoff_preview(b, provider, key, AOR_KIND_RATE, -1, 15, &pv), 0);
    assert_int_equal(pv.failure_count, 2);
    assert_time(pv.until, 25);
    assert_int_equal(aor_backoff_get(b, provider, key, &row), 1);
    assert_int_equal(row.failure_count, 1);
    assert_time(row.until, 15);

    /* The same event sequence through fail and through preview+restore gives equal rows. */
    aor_backoff *c = aor_backoff_new(&defaults);
    assert_non_null(c);
    static const struct {
        aor_kind kind;
        double hint, now;
    } ev[] = {{AOR_KIND_RATE, -1, 0},   {AOR_KIND_RATE, 60, 1},  {AOR_KIND_TRANSIENT, -1, 61},
              {AOR_KIND_QUOTA, -1, 70}, {AOR_KIND_AUTH, 5, 500}, {AOR_KIND_RATE, 1e9, 900},
              {AOR_KIND_RATE, -1, 1e6}};
    for (size_t i = 0; i < sizeof ev / sizeof ev[0]; i++) {
        aor_backoff_row r1, r2;
        assert_int_equal(aor_backoff_fail(c, "x", "y", ev[i].kind, ev[i].hint, ev[i].now, &r1), 0);
        assert_int_equal(aor_backoff_preview(b, "x", "y", ev[i].kind, ev[i].hint, ev[i].now, &r2),
                         0);
        assert_int_equal(aor_backoff_restore(b, &r2), 0);
        assert_int_equal(aor_backoff_get(b, "x", "y", &r2), 1);
        assert_time(r1.until, r2.until);
        assert_time(r1.window_s, r2.window_s);
        assert_int_equal(r1.failure_count, r2.failure_count);
        assert_int_equal(r1.last_error_kind, r2.last_error_kind);
        assert_time(r1.last_failure, r2.last_failure);
    }
    aor_backoff_free(c);
}

/* Kinds that never back a key off are refused; nothing changes. */
static void test_invalid_kinds(void **state) {
    aor_backoff *b = *state;
    aor_backoff_row row;
    static const aor_kind bad[] = {AOR_KIND_OK, AOR_KIND_CLIENT, AOR_KIND_CONFIG};
    for (size_t i = 0; i < 3; i++) {
        errno = 0;
        assert_int_equal(aor_backoff_fail(b, "p", "k", bad[i], -1, 0, &row), -1);
        assert_int_equal(errno, EINVAL);
        errno = 0;
        assert_int_equal(aor_backoff_preview(b, "p", "k", bad[i], -1, 0, &row), -1);
        assert_int_equal(errno, EINVAL);
    }
    assert_int_equal(aor_backoff_get(b, "p", "k", NULL), 0);
    errno = 0;
    assert_int_equal(aor_backoff_fail(b, NULL, "k", AOR_KIND_RATE, -1, 0, NULL), -1);
    assert_int_equal(errno, EINVAL);
    aor_backoff_row nul = {0};
    assert_int_equal(aor_backoff_restore(b, &nul), -1);
}

static void test_invalid_params(void **state) {
    aor_backoff_params p = defaults;
    p.initial_s = 0;
    errno = 0;
    assert_null(aor_backoff_new(&p));
    assert_int_equal(errno, EINVAL);
    p = defaults;
    p.max_s = 1;
    assert_null(aor_backoff_new(&p));
    p = defaults;
    p.quota_cooldown_s = NAN;
    assert_null(aor_backoff_new(&p));
    assert_null(aor_backoff_new(NULL));
}

/* Huge failure counts (a key failing for months, or a replayed row) stay at the cap and
 * saturate instead of overflowing. */
static void test_huge_counts_stay_capped(void **state) {
    aor_backoff *b = *state;
    aor_backoff_row row = {.provider = "p",
                           .key = "k",
                           .until = 0,
                           .window_s = 86400,
                           .failure_count = INT_MAX - 1,
                           .last_error_kind = AOR_KIND_RATE,
                           .last_failure = 0};
    assert_int_equal(aor_backoff_restore(b, &row), 0);
    assert_int_equal(aor_backoff_fail(b, "p", "k", AOR_KIND_RATE, -1, 10, &row), 0);
    assert_int_equal(row.failure_count, INT_MAX);
    assert_time(row.window_s, 86400);
    assert_int_equal(aor_backoff_fail(b, "p", "k", AOR_KIND_RATE, -1, 86410, &row), 0);
    assert_int_equal(row.failure_count, INT_MAX);
    assert_time(row.window_s, 86400);
    /* Level 2000 (far past 2^1023) is still the cap. */
    aor_backoff_row mid = row;
    mid.failure_count = 1999;
    assert_int_equal(aor_backoff_restore(b, &mid), 0);
    assert_int_equal(aor_backoff_fail(b, "p", "k", AOR_KIND_RATE, -1, 1e6, &row), 0);
    assert_int_equal(row.failure_count, 2000);
    assert_time(row.window_s, 86400);
}

typedef struct {
    int n;
    int p1;
    int expired;
    double now;
} visit_ctx;

static void count_row(const aor_backoff_row *row, void *arg) {
    visit_ctx *v = arg;
    v->n++;
    if (strcmp(row->provider, "p1") == 0)
        v->p1++;
    if (!(row->until > v->now))
        v->expired++;
}

/* Replay puts rows back as they were; foreach sees active and expired rows; reset
 * removes per provider or all. */
static void test_restore_foreach_reset(void **state) {
    aor_backoff *b = *state;
    aor_backoff_row r = {.provider = "p1",
                         .key = "k1",
                         .until = 500,
                         .window_s = 40,
                         .failure_count = 4,
                         .last_error_kind = AOR_KIND_RATE,
                         .last_failure = 460};
    assert_int_equal(aor_backoff_restore(b, &r), 0);
    r.key = "k2";
    r.until = 100; /* expired at 200: still kept for the curve level */
    assert_int_equal(aor_backoff_restore(b, &r), 0);
    r.provider = "p2";
    r.key = "k1";
    r.until = 300;
    r.last_error_kind = AOR_KIND_QUOTA;
    assert_int_equal(aor_backoff_restore(b, &r), 0);

    visit_ctx v = {.now = 200};
    aor_backoff_foreach(b, count_row, &v);
    assert_int_equal(v.n, 3);
    assert_int_equal(v.p1, 2);
    assert_int_equal(v.expired, 1);

    /* The replayed level continues: level 5 -> 80 s, and the running window holds. */
    aor_backoff_row row;
    assert_int_equal(aor_backoff_fail(b, "p1", "k1", AOR_KIND_RATE, -1, 470, &row), 0);
    assert_int_equal(row.failure_count, 5);
    assert_time(row.until, 550);
    assert_int_equal(aor_backoff_fail(b, "p1", "k2", AOR_KIND_RATE, -1, 200, &row), 0);
    assert_int_equal(row.failure_count, 5);
    assert_time(row.until, 280);

    /* Restore overwrites every field, even from the table's own strings. */
    assert_int_equal(aor_backoff_get(b, "p2", "k1", &row), 1);
    row.until = 999;
    row.failure_count = 1;
    assert_int_equal(aor_backoff_restore(b, &row), 0);
    assert_int_equal(aor_backoff_get(b, "p2", "k1", &row), 1);
    assert_time(row.until, 999);
    assert_int_equal(row.failure_count, 1);
    assert_int_equal(row.last_error_kind, AOR_KIND_QUOTA);

    assert_int_equal(aor_backoff_reset(b, "nobody"), 0);
    assert_int_equal(aor_backoff_reset(b, "p1"), 2);
    assert_int_equal(aor_backoff_blocked(b, "p1", "k1", 470, NULL), 0);
    assert_int_equal(aor_backoff_blocked(b, "p2", "k1", 470, NULL), 1);
    assert_int_equal(aor_backoff_reset(b, NULL), 1);
    v = (visit_ctx){.now = 0};
    aor_backoff_foreach(b, count_row, &v);
    assert_int_equal(v.n, 0);
}

/* 1,000 keys: each keeps its own row. */
static void test_thousand_keys(void **state) {
    aor_backoff *b = *state;
    char key[32];
    for (int i = 0; i < 1000; i++) {
        int n = snprintf(key, sizeof key, "key-%d", i);
        assert_true(n > 0 && (size_t)n < sizeof key);
        for (int j = 0; j <= i % 4; j++)
            assert_int_equal(aor_backoff_fail(b, i % 2 ? "odd" : "even", key, AOR_KIND_RATE, -1,
                                              j * 1000.0, NULL),
                             0);
    }
    for (int i = 0; i < 1000; i++) {
        aor_backoff_row row;
        int n = snprintf(key, sizeof key, "key-%d", i);
        assert_true(n > 0 && (size_t)n < sizeof key);
        assert_int_equal(aor_backoff_get(b, i % 2 ? "odd" : "even", key, &row), 1);
        assert_int_equal(row.failure_count, i % 4 + 1);
        assert_int_equal(aor_backoff_get(b, i % 2 ? "even" : "odd", key, NULL), 0);
    }
    assert_int_equal(aor_backoff_reset(b, "odd"), 500);
    visit_ctx v = {.now = 0};
    aor_backoff_foreach(b, count_row, &v);
    assert_int_equal(v.n, 500);
}

/* SIGHUP reload: new parameters apply to the next failure; a running window keeps its
 * until; the row keeps its curve level. Bad parameters are refused, table unchanged. */
static void test_set_params(void **state) {
    aor_backoff *b = *state;
    aor_backoff_row out;
    assert_int_equal(aor_backoff_fail(b, "p", "k", AOR_KIND_RATE, -1, 0, &out), 0);
    assert_time(out.until, 5);
    aor_backoff_params np = {
        .initial_s = 2, .max_s = 100, .quota_cooldown_s = 7, .auth_cooldown_s = 9};
    assert_int_equal(aor_backoff_set_params(b, &np), 0);
    assert_int_equal(aor_backoff_get(b, "p", "k", &out), 1);
    assert_time(out.until, 5); /* running window kept */
    /* A new key starts the new curve: 2 s. */
    assert_int_equal(aor_backoff_fail(b, "p", "fresh", AOR_KIND_RATE, -1, 10, &out), 0);
    assert_time(out.window_s, 2);
    /* The old row goes on at its level with the new initial: 2 * 2^1. */
    assert_int_equal(aor_backoff_fail(b, "p", "k", AOR_KIND_RATE, -1, 10, &out), 0);
    assert_time(out.window_s, 4);
    assert_int_equal(aor_backoff_fail(b, "p", "q", AOR_KIND_QUOTA, -1, 10, &out), 0);
    assert_time(out.window_s, 7);
    assert_int_equal(aor_backoff_fail(b, "p", "q", AOR_KIND_RATE, 500, 20, &out), 0);
    assert_time(out.window_s, 100); /* the new cap */

    aor_backoff_params bad = np;
    bad.max_s = 1; /* under initial_s */
    errno = 0;
    assert_int_equal(aor_backoff_set_params(b, &bad), -1);
    assert_int_equal(errno, EINVAL);
    assert_int_equal(aor_backoff_set_params(b, NULL), -1);
    assert_int_equal(aor_backoff_set_params(NULL, &np), -1);
    assert_int_equal(aor_backoff_fail(b, "p", "other", AOR_KIND_RATE, -1, 30, &out), 0);
    assert_time(out.window_s, 2); /* still np */
}

/* Per-key reset: one (provider, key), or one key with every provider. */
static void test_reset_key(void **state) {
    aor_backoff *b = *state;
    assert_int_equal(aor_backoff_fail(b, "p1", "k", AOR_KIND_RATE, -1, 0, NULL), 0);
    assert_int_equal(aor_backoff_fail(b, "p2", "k", AOR_KIND_RATE, -1, 0, NULL), 0);
    assert_int_equal(aor_backoff_fail(b, "p1", "other", AOR_KIND_RATE, -1, 0, NULL), 0);
    assert_int_equal(aor_backoff_fail(b, "p3", "k", AOR_KIND_RATE, -1, 0, NULL), 0);
    assert_int_equal(aor_backoff_reset_key(b, "p1", "k"), 1);
    assert_int_equal(aor_backoff_get(b, "p1", "k", NULL), 0);
    assert_int_equal(aor_backoff_get(b, "p2", "k", NULL), 1);
    assert_int_equal(aor_backoff_reset_key(b, "p1", "nosuch"), 0);
    assert_int_equal(aor_backoff_reset_key(b, NULL, "k"), 2);
    assert_int_equal(aor_backoff_get(b, "p2", "k", NULL), 0);
    assert_int_equal(aor_backoff_get(b, "p3", "k", NULL), 0);
    assert_int_equal(aor_backoff_get(b, "p1", "other", NULL), 1);
    assert_int_equal(aor_backoff_reset_key(b, NULL, NULL), 0);
    assert_int_equal(aor_backoff_reset_key(NULL, NULL, "k"), 0);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_set_params, setup, teardown),
        cmocka_unit_test_setup_teardown(test_reset_key, setup, teardown),
        cmocka_unit_test_setup_teardown(test_curve_persistent_failure, setup, teardown),
        cmocka_unit_test_setup_teardown(test_curve_transient, setup, teardown),
        cmocka_unit_test_setup_teardown(test_success_resets_curve, setup, teardown),
        cmocka_unit_test_setup_teardown(test_escalates_across_natural_expiry, setup, teardown),
        cmocka_unit_test_setup_teardown(test_exact_expiry, setup, teardown),
        cmocka_unit_test_setup_teardown(test_never_shortens_running_window, setup, teardown),
        cmocka_unit_test_setup_teardown(test_hint_sets_window_and_counts, setup, teardown),
        cmocka_unit_test_setup_teardown(test_hint_over_cap_is_cap, setup, teardown),
        cmocka_unit_test_setup_teardown(test_no_hint_values_use_curve, setup, teardown),
        cmocka_unit_test_setup_teardown(test_quota_auth_flat, setup, teardown),
        cmocka_unit_test(test_quota_auth_own_cooldowns),
        cmocka_unit_test_setup_teardown(test_quota_on_escalated_row, setup, teardown),
        cmocka_unit_test_setup_teardown(test_keys_independent, setup, teardown),
        cmocka_unit_test_setup_teardown(test_preview_does_not_change, setup, teardown),
        cmocka_unit_test_setup_teardown(test_invalid_kinds, setup, teardown),
        cmocka_unit_test(test_invalid_params),
        cmocka_unit_test_setup_teardown(test_huge_counts_stay_capped, setup, teardown),
        cmocka_unit_test_setup_teardown(test_restore_foreach_reset, setup, teardown),
        cmocka_unit_test_setup_teardown(test_thousand_keys, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
