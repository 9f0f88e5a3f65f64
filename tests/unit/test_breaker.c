/* Circuit breakers per (provider, model) (spec §4.4). */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include "breaker.h"

#include <errno.h>
#include <math.h>
#include <string.h>

#define assert_time(actual, expected)                                                              \
    do {                                                                                           \
        double a_ = (actual), e_ = (expected);                                                     \
        if (!(fabs(a_ - e_) <= 1e-9))                                                              \
            fail_msg("%s = %.9g, expected %.9g", #actual, a_, e_);                                 \
    } while (0)

static const aor_breaker_params defaults = {.failures = 3, .window_s = 60, .open_s = 30};

static int setup(void **state) {
    *state = aor_breaker_new(&defaults);
    return *state ? 0 : -1;
}

static int teardown(void **state) {
    aor_breaker_free(*state);
    return 0;
}

/* Opens the circuit of (p, m) with failures at 0, 10, 20: open until 50. */
static void open_at_20(aor_breaker *b) {
    assert_int_equal(aor_breaker_fail(b, "p", "m", 0), 0);
    assert_int_equal(aor_breaker_fail(b, "p", "m", 10), 0);
    assert_int_equal(aor_breaker_fail(b, "p", "m", 20), 1);
}

/* 3 failures within 60 s open the circuit for 30 s; it is skipped meanwhile. */
static void test_three_failures_open(void **state) {
    aor_breaker *b = *state;
    aor_breaker_row row;
    assert_int_equal(aor_breaker_allow(b, "p", "m", 0), 1);
    assert_int_equal(aor_breaker_fail(b, "p", "m", 0), 0);
    assert_int_equal(aor_breaker_fail(b, "p", "m", 10), 0);
    assert_int_equal(aor_breaker_get(b, "p", "m", 15, &row), 1);
    assert_int_equal(row.state, AOR_BREAKER_CLOSED);
    assert_int_equal(row.recent_failures, 2);
    assert_time(row.until, 0);
    assert_int_equal(aor_breaker_allow(b, "p", "m", 15), 1);

    assert_int_equal(aor_breaker_fail(b, "p", "m", 20), 1);
    assert_int_equal(aor_breaker_allow(b, "p", "m", 20), 0);
    assert_int_equal(aor_breaker_allow(b, "p", "m", 49.9), 0);
    assert_int_equal(aor_breaker_get(b, "p", "m", 30, &row), 1);
    assert_int_equal(row.state, AOR_BREAKER_OPEN);
    assert_time(row.until, 50);
    assert_string_equal(row.provider, "p");
    assert_string_equal(row.model, "m");
    /* Other models and providers are not affected. */
    assert_int_equal(aor_breaker_allow(b, "p", "m2", 30), 1);
    assert_int_equal(aor_breaker_allow(b, "q", "m", 30), 1);
}

/* 3 failures spread over more than 60 s don't open it (sliding window); a failure
 * more than 60 s old no longer counts. */
static void test_spread_failures_do_not_open(void **state) {
    aor_breaker *b = *state;
    aor_breaker_row row;
    assert_int_equal(aor_breaker_fail(b, "p", "m", 0), 0);
    assert_int_equal(aor_breaker_fail(b, "p", "m", 30), 0);
    assert_int_equal(aor_breaker_fail(b, "p", "m", 61), 0);
    assert_int_equal(aor_breaker_allow(b, "p", "m", 61), 1);
    assert_int_equal(aor_breaker_get(b, "p", "m", 61, &row), 1);
    assert_int_equal(row.recent_failures, 2);

    assert_int_equal(aor_breaker_fail(b, "p", "m2", 100), 0);
    assert_int_equal(aor_breaker_fail(b, "p", "m2", 130), 0);
    assert_int_equal(aor_breaker_fail(b, "p", "m2", 160.5), 0); /* 100 is 60.5 s old */
    /* 130, 160.5, 170 are within 60 s: opens. */
    assert_int_equal(aor_breaker_fail(b, "p", "m2", 170), 1);
    assert_int_equal(aor_breaker_allow(b, "p", "m2", 171), 0);
}

/* QA: spec §4.4 "3 failures within 60 s": failures at +40, +80, +100 (exactly 60 s from
 * the first to the last) did not open the circuit, +41, +80, +100 did. The window
 * includes its ends. */
static void test_window_includes_its_ends(void **state) {
    aor_breaker *b = *state;
    const double t0 = 1800000000.0;
    aor_breaker_row row;
    assert_int_equal(aor_breaker_fail(b, "p", "m", t0 + 40), 0);
    assert_int_equal(aor_breaker_fail(b, "p", "m", t0 + 80), 0);
    assert_int_equal(aor_breaker_get(b, "p", "m", t0 + 100, &row), 1);
    assert_int_equal(row.recent_failures, 2); /* +40 is exactly 60 s old: still in */
    double until = 0;
    assert_int_equal(aor_breaker_preview_fail(b, "p", "m", t0 + 100, &until), 1);
    assert_int_equal(aor_breaker_fail(b, "p", "m", t0 + 100), 1);
    assert_int_equal(aor_breaker_allow(b, "p", "m", t0 + 100), 0);
    assert_time(until, t0 + 130);

    /* Just over: +40, +80, +100.001 do not open. */
    assert_int_equal(aor_breaker_fail(b, "p", "m2", t0 + 40), 0);
    assert_int_equal(aor_breaker_fail(b, "p", "m2", t0 + 80), 0);
    assert_int_equal(aor_breaker_fail(b, "p", "m2", t0 + 100.001), 0);
    assert_int_equal(aor_breaker_allow(b, "p", "m2", t0 + 100.001), 1);
}

/* After the open time the first request is the probe (half-open); a success closes it. */
static void test_probe_after_expiry_and_success_closes(void **state) {
    aor_breaker *b = *state;
    aor_breaker_row row;
    open_at_20(b);
    assert_int_equal(aor_breaker_get(b, "p", "m", 50, &row), 1);
    assert_int_equal(row.state, AOR_BREAKER_HALF_OPEN);
    assert_time(row.probe_until, 0);                         /* no probe yet */
    assert_int_equal(aor_breaker_allow(b, "p", "m", 50), 1); /* the probe */
    assert_int_equal(aor_breaker_get(b, "p", "m", 51, &row), 1);
    assert_int_equal(row.state, AOR_BREAKER_HALF_OPEN);
    assert_time(row.probe_until, 80); /* its lease: open_s */
    assert_int_equal(aor_breaker_success(b, "p", "m"), 1);
    assert_int_equal(aor_breaker_get(b, "p", "m", 52, NULL), 0);
    assert_int_equal(aor_breaker_allow(b, "p", "m", 52), 1);
    assert_int_equal(aor_breaker_allow(b, "p", "m", 52), 1); /* closed: everyone */
    assert_int_equal(aor_breaker_success(b, "p", "m"), 0);   /* already closed */
    /* Failures were forgotten: it takes 3 new ones to open again. */
    assert_int_equal(aor_breaker_fail(b, "p", "m", 53), 0);
    assert_int_equal(aor_breaker_fail(b, "p", "m", 54), 0);
    assert_int_equal(aor_breaker_fail(b, "p", "m", 55), 1);
}

/* QA repro (§4.4): while the probe is in flight the other requests skip the circuit as
 * if it were open; its failure reopens it and they keep skipping. */
static void test_probe_in_flight_holds_others(void **state) {
    aor_breaker *b = *state;
    aor_breaker_row row;
    open_at_20(b);
    assert_int_equal(aor_breaker_allow(b, "p", "m", 50), 1);   /* request 1: the probe */
    assert_int_equal(aor_breaker_allow(b, "p", "m", 50.4), 0); /* request 2: skips */
    assert_int_equal(aor_breaker_allow(b, "p", "m", 79.9), 0);
    assert_int_equal(aor_breaker_get(b, "p", "m", 60, &row), 1);
    assert_int_equal(row.state, AOR_BREAKER_HALF_OPEN);
    assert_time(row.until, 50);
    /* Other circuits are not held. */
    assert_int_equal(aor_breaker_allow(b, "p", "m2", 51), 1);
    assert_int_equal(aor_breaker_allow(b, "q", "m", 51), 1);
    /* The probe fails at 51.5: open again until 81.5, the lease ends with it. */
    assert_int_equal(aor_breaker_fail(b, "p", "m", 51.5), 1);
    assert_int_equal(aor_breaker_get(b, "p", "m", 52, &row), 1);
    assert_int_equal(row.state, AOR_BREAKER_OPEN);
    assert_time(row.probe_until, 0);
    assert_int_equal(aor_breaker_allow(b, "p", "m", 81.4), 0);
    /* The next expiry has its own single probe. */
    assert_int_equal(aor_breaker_allow(b, "p", "m", 81.5), 1);
    assert_int_equal(aor_breaker_allow(b, "p", "m", 81.5), 0);
}

/* A probe whose result is never recorded (client gone, attempt cancelled) does not wedge
 * the circuit: after its lease (open_s) the next request is the probe. */
static void test_lost_probe_lease_expires(void **state) {
    aor_breaker *b = *state;
    aor_breaker_row row;
    open_at_20(b);
    assert_int_equal(aor_breaker_allow(b, "p", "m", 55), 1);   /* lost */
    assert_int_equal(aor_breaker_allow(b, "p", "m", 84.9), 0); /* lease until 85 */
    assert_int_equal(aor_breaker_get(b, "p", "m", 85, &row), 1);
    assert_int_equal(row.state, AOR_BREAKER_HALF_OPEN);
    assert_time(row.probe_until, 0);                          /* lease over */
    assert_int_equal(aor_breaker_allow(b, "p", "m", 85), 1);  /* the new probe */
    assert_int_equal(aor_breaker_allow(b, "p", "m", 86), 0);  /* holds the others */
    assert_int_equal(aor_breaker_allow(b, "p", "m", 115), 1); /* lost too: next one */
    assert_int_equal(aor_breaker_success(b, "p", "m"), 1);    /* it answered: closed */
    assert_int_equal(aor_breaker_allow(b, "p", "m", 116), 1);
    assert_int_equal(aor_breaker_allow(b, "p", "m", 116), 1);
}

/* Review: a probe whose client went away (its attempt cancelled) hands its lease back,
 * so the next request probes at once instead of every request skipping the circuit
 * until the lease would have ended; a lease that is not the one given changes nothing. */
static void test_cancelled_probe_releases_its_lease(void **state) {
    aor_breaker *b = *state;
    aor_breaker_row row;
    open_at_20(b);
    assert_int_equal(aor_breaker_allow(b, "p", "m", 55), 1); /* the probe */
    assert_int_equal(aor_breaker_get(b, "p", "m", 55, &row), 1);
    double lease = row.probe_until;
    assert_time(lease, 85);
    assert_int_equal(aor_breaker_allow(b, "p", "m", 56), 0);
    aor_breaker_release_probe(b, "p", "m", 80);        /* another lease: no change */
    aor_breaker_release_probe(b, "p", "other", lease); /* another circuit: none */
    assert_int_equal(aor_breaker_allow(b, "p", "m", 56), 0);
    aor_breaker_release_probe(b, "p", "m", lease); /* cancelled */
    assert_int_equal(aor_breaker_get(b, "p", "m", 57, &row), 1);
    assert_int_equal(row.state, AOR_BREAKER_HALF_OPEN);
    assert_time(row.probe_until, 0);
    assert_int_equal(aor_breaker_allow(b, "p", "m", 57), 1); /* the next probe, at once */
    assert_int_equal(aor_breaker_allow(b, "p", "m", 58), 0); /* one in flight again */
    aor_breaker_release_probe(b, "p", "m", lease);           /* the old lease: no change */
    assert_int_equal(aor_breaker_allow(b, "p", "m", 58), 0);
    /* Once the probe failed (open again), a late release changes nothing. */
    assert_int_equal(aor_breaker_get(b, "p", "m", 58, &row), 1);
    lease = row.probe_until;
    assert_int_equal(aor_breaker_fail(b, "p", "m", 59), 1);
    aor_breaker_release_probe(b, "p", "m", lease);
    assert_int_equal(aor_breaker_get(b, "p", "m", 60, &row), 1);
    assert_int_equal(row.state, AOR_BREAKER_OPEN);
    assert_int_equal(aor_breaker_allow(b, "p", "m", 60), 0);
}

/* A replayed (restored) circuit has no lease, even over a probe in flight: the first
 * request after its expiry is the probe. */
static void test_restore_forgets_lease(void **state) {
    aor_breaker *b = *state;
    open_at_20(b);
    assert_int_equal(aor_breaker_allow(b, "p", "m", 50), 1);
    assert_int_equal(aor_breaker_restore(b, "p", "m", 60), 0);
    assert_int_equal(aor_breaker_allow(b, "p", "m", 59), 0);
    assert_int_equal(aor_breaker_allow(b, "p", "m", 60), 1);
    assert_int_equal(aor_breaker_allow(b, "p", "m", 61), 0);
}

/* breaker_open_s = 0: no lease, every request after the expiry goes through. */
static void test_open_zero_has_no_lease(void **state) {
    aor_breaker_params p = {.failures = 1, .window_s = 60, .open_s = 0};
    aor_breaker *b = aor_breaker_new(&p);
    assert_non_null(b);
    assert_int_equal(aor_breaker_fail(b, "p", "m", 10), 1);
    assert_int_equal(aor_breaker_allow(b, "p", "m", 10), 1);
    assert_int_equal(aor_breaker_allow(b, "p", "m", 10), 1);
    aor_breaker_free(b);
}

/* allow_walk: a walk further down its sequence. The walk that took the probe in its
 * aor_route_select (chosen at the probe's time) goes on; a walk chosen earlier skips
 * the circuit until the lease ends; with no probe in flight the walk becomes it. */
static void test_allow_walk(void **state) {
    aor_breaker *b = *state;
    double until = -1;
    /* Closed / unknown: 1, until untouched. */
    assert_int_equal(aor_breaker_allow_walk(b, "p", "m", 0, 0, &until), 1);
    assert_time(until, -1);
    open_at_20(b);
    /* Open: 0 with the open-until. */
    assert_int_equal(aor_breaker_allow_walk(b, "p", "m", 30, 5, &until), 0);
    assert_time(until, 50);
    /* Request R chose its sequence at 52 and took the probe there. */
    assert_int_equal(aor_breaker_allow(b, "p", "m", 52), 1);
    until = -1;
    assert_int_equal(aor_breaker_allow_walk(b, "p", "m", 53, 52, &until), 1); /* R */
    assert_time(until, -1);
    /* W chose its sequence at 10 (circuit closed then): skips until the lease ends. */
    assert_int_equal(aor_breaker_allow_walk(b, "p", "m", 53, 10, &until), 0);
    assert_time(until, 82);
    assert_int_equal(aor_breaker_allow_walk(b, "p", "m", 81.9, 10, NULL), 0);
    /* Lease over: W becomes the probe (at 82); R's old sequence is held now. */
    assert_int_equal(aor_breaker_allow_walk(b, "p", "m", 82, 10, &until), 1);
    assert_int_equal(aor_breaker_allow_walk(b, "p", "m", 83, 52, &until), 0);
    assert_time(until, 112);
    assert_int_equal(aor_breaker_allow(b, "p", "m", 83), 0);
    assert_int_equal(aor_breaker_success(b, "p", "m"), 1);
    assert_int_equal(aor_breaker_allow_walk(b, "p", "m", 84, 10, NULL), 1);
    assert_int_equal(aor_breaker_allow_walk(b, NULL, "m", 84, 10, NULL), 1);
}

/* A failure in half-open reopens at once for open_s. */
static void test_failure_in_half_open_reopens(void **state) {
    aor_breaker *b = *state;
    double until = 0;
    open_at_20(b);
    assert_int_equal(aor_breaker_allow(b, "p", "m", 50), 1);
    assert_int_equal(aor_breaker_preview_fail(b, "p", "m", 51, &until), 1);
    assert_time(until, 81);
    assert_int_equal(aor_breaker_fail(b, "p", "m", 51), 1);
    assert_int_equal(aor_breaker_allow(b, "p", "m", 60), 0);
    assert_int_equal(aor_breaker_allow(b, "p", "m", 80.9), 0);
    assert_int_equal(aor_breaker_allow(b, "p", "m", 81), 1);
    assert_int_equal(aor_breaker_allow(b, "p", "m", 81), 0); /* one probe */
}

/* A failure after the open time passed, before any allow(), also reopens (the circuit
 * is half-open as of now). */
static void test_failure_after_expiry_reopens(void **state) {
    aor_breaker *b = *state;
    open_at_20(b);
    assert_int_equal(aor_breaker_fail(b, "p", "m", 70), 1);
    assert_int_equal(aor_breaker_allow(b, "p", "m", 99), 0);
    assert_int_equal(aor_breaker_allow(b, "p", "m", 100), 1);
}

/* Late failures while open (requests sent before it opened) change nothing; a success
 * while open closes it (any success closes). */
static void test_open_ignores_failures_success_closes(void **state) {
    aor_breaker *b = *state;
    aor_breaker_row row;
    double until = -1;
    open_at_20(b);
    assert_int_equal(aor_breaker_preview_fail(b, "p", "m", 25, &until), 0);
    assert_time(until, -1); /* untouched */
    assert_int_equal(aor_breaker_fail(b, "p", "m", 25), 0);
    assert_int_equal(aor_breaker_get(b, "p", "m", 26, &row), 1);
    assert_int_equal(row.state, AOR_BREAKER_OPEN);
    assert_time(row.until, 50);
    assert_int_equal(aor_breaker_success(b, "p", "m"), 1);
    assert_int_equal(aor_breaker_allow(b, "p", "m", 26), 1);
}

/* A success while closed forgets the counted failures and changes no state. */
static void test_success_forgets_failures(void **state) {
    aor_breaker *b = *state;
    assert_int_equal(aor_breaker_fail(b, "p", "m", 0), 0);
    assert_int_equal(aor_breaker_fail(b, "p", "m", 10), 0);
    assert_int_equal(aor_breaker_success(b, "p", "m"), 0);
    assert_int_equal(aor_breaker_fail(b, "p", "m", 20), 0);
    assert_int_equal(aor_breaker_fail(b, "p", "m", 21), 0);
    assert_int_equal(aor_breaker_fail(b, "p", "m", 22), 1);
}

/* Preview tells whether a failure would open and when until, changing nothing. */
static void test_preview_fail(void **state) {
    aor_breaker *b = *state;
    aor_breaker_row row;
    double until = 0;
    assert_int_equal(aor_breaker_preview_fail(b, "p", "m", 0, &until), 0);
    assert_int_equal(aor_breaker_get(b, "p", "m", 0, NULL), 0);
    assert_int_equal(aor_breaker_fail(b, "p", "m", 0), 0);
    assert_int_equal(aor_breaker_fail(b, "p", "m", 10), 0);
    assert_int_equal(aor_breaker_preview_fail(b, "p", "m", 20, &until), 1);
    assert_time(until, 50);
    assert_int_equal(aor_breaker_preview_fail(b, "p", "m", 20, NULL), 1);
    assert_int_equal(aor_breaker_get(b, "p", "m", 20, &row), 1);
    assert_int_equal(row.state, AOR_BREAKER_CLOSED);
    assert_int_equal(row.recent_failures, 2);
    assert_int_equal(aor_breaker_allow(b, "p", "m", 20), 1);
    /* Later, the first failure fell out of the window: no longer opens. */
    assert_int_equal(aor_breaker_preview_fail(b, "p", "m", 60.5, &until), 0);
    assert_int_equal(aor_breaker_fail(b, "p", "m", 20), 1);
}

typedef struct {
    int n;
    int open;
    int half;
} visit_ctx;

static void count_row(const aor_breaker_row *row, void *arg) {
    visit_ctx *v = arg;
    v->n++;
    if (row->state == AOR_BREAKER_OPEN)
        v->open++;
    if (row->state == AOR_BREAKER_HALF_OPEN)
        v->half++;
    assert_int_not_equal(row->state, AOR_BREAKER_CLOSED);
}

/* Replay restores open circuits; foreach lists open and half-open ones only; reset
 * removes them per provider or all. */
static void test_restore_foreach_reset(void **state) {
    aor_breaker *b = *state;
    assert_int_equal(aor_breaker_restore(b, "p1", "m1", 100), 0);
    assert_int_equal(aor_breaker_restore(b, "p1", "m2", 40), 0);
    assert_int_equal(aor_breaker_restore(b, "p2", "m1", 100), 0);
    assert_int_equal(aor_breaker_fail(b, "p3", "m1", 45), 0); /* closed, one failure */
    assert_int_equal(aor_breaker_allow(b, "p1", "m1", 50), 0);
    assert_int_equal(aor_breaker_allow(b, "p2", "m1", 99), 0);

    visit_ctx v = {0};
    aor_breaker_foreach(b, 50, count_row, &v);
    assert_int_equal(v.n, 3);
    assert_int_equal(v.open, 2);
    assert_int_equal(v.half, 1); /* p1/m2: its time passed */

    assert_int_equal(aor_breaker_reset(b, "nobody"), 0);
    assert_int_equal(aor_breaker_reset(b, "p1"), 2);
    assert_int_equal(aor_breaker_allow(b, "p1", "m1", 50), 1);
    v = (visit_ctx){0};
    aor_breaker_foreach(b, 50, count_row, &v);
    assert_int_equal(v.n, 1);
    assert_int_equal(aor_breaker_reset(b, NULL), 1); /* p2/m1; p3's closed one goes too */
    assert_int_equal(aor_breaker_get(b, "p3", "m1", 50, NULL), 0);
    v = (visit_ctx){0};
    aor_breaker_foreach(b, 50, count_row, &v);
    assert_int_equal(v.n, 0);
}

/* breaker_failures = 1: every retryable failure opens the circuit. */
static void test_single_failure_threshold(void **state) {
    aor_breaker_params p = {.failures = 1, .window_s = 60, .open_s = 10};
    aor_breaker *b = aor_breaker_new(&p);
    assert_non_null(b);
    assert_int_equal(aor_breaker_fail(b, "p", "m", 0), 1);
    assert_int_equal(aor_breaker_allow(b, "p", "m", 9), 0);
    assert_int_equal(aor_breaker_allow(b, "p", "m", 10), 1);
    aor_breaker_free(b);
}

static void test_invalid(void **state) {
    aor_breaker_params p = defaults;
    p.failures = 0;
    errno = 0;
    assert_null(aor_breaker_new(&p));
    assert_int_equal(errno, EINVAL);
    p = defaults;
    p.failures = AOR_BREAKER_FAILURES_MAX + 1;
    assert_null(aor_breaker_new(&p));
    p = defaults;
    p.window_s = -1;
    assert_null(aor_breaker_new(&p));
    p = defaults;
    p.open_s = INFINITY;
    assert_null(aor_breaker_new(&p));

    aor_breaker *b = aor_breaker_new(&defaults);
    assert_non_null(b);
    errno = 0;
    assert_int_equal(aor_breaker_fail(b, NULL, "m", 0), -1);
    assert_int_equal(errno, EINVAL);
    assert_int_equal(aor_breaker_restore(b, "p", NULL, 0), -1);
    aor_breaker_free(b);
}

/* SIGHUP reload: a lower breaker_failures applies to the failures already counted; a
 * higher one needs the new count (closed circuits forget what they held); an open
 * circuit keeps its until; open_s applies to the next opening. */
static void test_set_params(void **state) {
    aor_breaker *b = *state;
    assert_int_equal(aor_breaker_fail(b, "p", "m", 0), 0);
    aor_breaker_params one = {.failures = 2, .window_s = 60, .open_s = 10};
    assert_int_equal(aor_breaker_set_params(b, &one), 0);
    assert_int_equal(aor_breaker_fail(b, "p", "m", 1), 1); /* 2 within 60 s: open */
    aor_breaker_row row;
    assert_int_equal(aor_breaker_get(b, "p", "m", 2, &row), 1);
    assert_time(row.until, 11); /* the new open_s */

    aor_breaker_params five = {.failures = 5, .window_s = 60, .open_s = 30};
    assert_int_equal(aor_breaker_fail(b, "p", "other", 3), 0); /* closed, 1 failure */
    assert_int_equal(aor_breaker_set_params(b, &five), 0);
    assert_int_equal(aor_breaker_get(b, "p", "m", 4, &row), 1); /* open one kept */
    assert_int_equal(row.state, AOR_BREAKER_OPEN);
    assert_time(row.until, 11);
    for (int i = 0; i < 4; i++)
        assert_int_equal(aor_breaker_fail(b, "p", "other", 10 + i), 0);
    assert_int_equal(aor_breaker_fail(b, "p", "other", 14), 1); /* the 5th opens */
    assert_int_equal(aor_breaker_get(b, "p", "other", 15, &row), 1);
    assert_time(row.until, 44);

    /* Down again: a circuit created under 5 still counts right under 3. */
    assert_int_equal(aor_breaker_fail(b, "q", "m", 20), 0);
    assert_int_equal(aor_breaker_set_params(b, &defaults), 0);
    assert_int_equal(aor_breaker_fail(b, "q", "m", 21), 0);
    assert_int_equal(aor_breaker_fail(b, "q", "m", 22), 1);

    aor_breaker_params bad = {.failures = 0, .window_s = 60, .open_s = 30};
    errno = 0;
    assert_int_equal(aor_breaker_set_params(b, &bad), -1);
    assert_int_equal(errno, EINVAL);
    assert_int_equal(aor_breaker_set_params(NULL, &defaults), -1);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_set_params, setup, teardown),
        cmocka_unit_test_setup_teardown(test_three_failures_open, setup, teardown),
        cmocka_unit_test_setup_teardown(test_spread_failures_do_not_open, setup, teardown),
        cmocka_unit_test_setup_teardown(test_window_includes_its_ends, setup, teardown),
        cmocka_unit_test_setup_teardown(test_cancelled_probe_releases_its_lease, setup, teardown),
        cmocka_unit_test_setup_teardown(test_probe_after_expiry_and_success_closes, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_probe_in_flight_holds_others, setup, teardown),
        cmocka_unit_test_setup_teardown(test_lost_probe_lease_expires, setup, teardown),
        cmocka_unit_test_setup_teardown(test_restore_forgets_lease, setup, teardown),
        cmocka_unit_test(test_open_zero_has_no_lease),
        cmocka_unit_test_setup_teardown(test_allow_walk, setup, teardown),
        cmocka_unit_test_setup_teardown(test_failure_in_half_open_reopens, setup, teardown),
        cmocka_unit_test_setup_teardown(test_failure_after_expiry_reopens, setup, teardown),
        cmocka_unit_test_setup_teardown(test_open_ignores_failures_success_closes, setup, teardown),
        cmocka_unit_test_setup_teardown(test_success_forgets_failures, setup, teardown),
        cmocka_unit_test_setup_teardown(test_preview_fail, setup, teardown),
        cmocka_unit_test_setup_teardown(test_restore_foreach_reset, setup, teardown),
        cmocka_unit_test(test_single_failure_threshold),
        cmocka_unit_test(test_invalid),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
