/* Unit tests for daemon/rstate.c: what one recorded attempt does to the breakers
 * (spec §4.4: retryable failures count; a client's own passed-through credential counts
 * only for rate and transient). */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <sqlite3.h>

#include "config.h"
#include "log.h"
#include "rstate.h"

#define NOW 1800000000.0

typedef struct {
    char dir[64];
    aor_config *cfg;
    aor_rstate *rs;
} fx;

static int setup(void **state) {
    fx *f = calloc(1, sizeof *f);
    if (!f)
        return -1;
    snprintf(f->dir, sizeof f->dir, "/tmp/aor-test-rstate-XXXXXX");
    if (!mkdtemp(f->dir))
        return -1;
    char path[128];
    snprintf(path, sizeof path, "%s/aor.ini", f->dir);
    FILE *c = fopen(path, "w");
    if (!c)
        return -1;
    fprintf(c, "[key \"a\"]\nenv = TEST_RSTATE_KEY\n"
               "[provider \"p\"]\ndialect = openai\nbase_url = https://p.example\n"
               "keys = a\nmodels = *\n");
    fclose(c);
    setenv("TEST_RSTATE_KEY", "secret-a", 1);
    char *errs = NULL;
    f->cfg = aor_config_load(path, &errs);
    free(errs);
    if (!f->cfg)
        return -1;
    char db[128], err[256];
    snprintf(db, sizeof db, "%s/aor.db", f->dir);
    f->rs = aor_rstate_open(f->cfg, db, NOW, err, sizeof err);
    if (!f->rs)
        return -1;
    *state = f;
    return 0;
}

static int teardown(void **state) {
    fx *f = *state;
    aor_rstate_close(f->rs);
    aor_config_free(f->cfg);
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", f->dir);
    int rc = system(cmd);
    free(f);
    return rc == 0 ? 0 : -1;
}

/* 1 when the circuit of (p, m) is open at NOW + 1. */
static int is_open(fx *f) {
    aor_breaker_row row;
    return aor_breaker_get(aor_rstate_breaker(f->rs), "p", "m", NOW + 1, &row) &&
           row.state == AOR_BREAKER_OPEN;
}

/* Three failures of kind on three different keys, own_credential as given. */
static void three_failures(fx *f, aor_kind kind, int own) {
    const char *keys[] = {"k1", "k2", "k3"};
    for (int i = 0; i < 3; i++)
        assert_int_equal(
            aor_rstate_record(f->rs, "p", keys[i], "m", "client", kind, -1, NOW - 1, NOW, own), 0);
}

static void test_auth_and_quota_of_configured_keys_open_the_circuit(void **state) {
    fx *f = *state;
    three_failures(f, AOR_KIND_AUTH, 0);
    assert_true(is_open(f));
}

static void test_quota_of_configured_keys_opens_the_circuit(void **state) {
    fx *f = *state;
    three_failures(f, AOR_KIND_QUOTA, 0);
    assert_true(is_open(f));
}

static void test_own_credentials_auth_and_quota_do_not(void **state) {
    fx *f = *state;
    three_failures(f, AOR_KIND_AUTH, AOR_RSTATE_OWN);
    three_failures(f, AOR_KIND_QUOTA, AOR_RSTATE_OWN);
    assert_false(is_open(f));
}

/* QA: three clients throttled with 429 on their own keys opened the circuit, and a
 * fourth client with a healthy key got 429 aor_all_backed_off for 30 s. */
static void test_own_credentials_429_does_not(void **state) {
    fx *f = *state;
    three_failures(f, AOR_KIND_RATE, AOR_RSTATE_OWN | AOR_RSTATE_429);
    assert_false(is_open(f));
    /* A configured key's 429 is the provider's answer for this deployment: it counts
     * (other keys: k1..k3's rows make a failure sent before NOW the same episode). */
    const char *keys[] = {"k4", "k5", "k6"};
    for (int i = 0; i < 3; i++)
        assert_int_equal(aor_rstate_record(f->rs, "p", keys[i], "m", "client", AOR_KIND_RATE, -1,
                                           NOW - 1, NOW, AOR_RSTATE_429),
                         0);
    assert_true(is_open(f));
}

/* The rule as the proxy asks it (to hand back a probe's lease when its failure does not
 * count, review). */
static void test_breaker_counts_rule(void **state) {
    assert_true(aor_rstate_breaker_counts(AOR_KIND_RATE, 0));
    assert_true(aor_rstate_breaker_counts(AOR_KIND_RATE, AOR_RSTATE_429));
    assert_true(aor_rstate_breaker_counts(AOR_KIND_RATE, AOR_RSTATE_OWN));
    assert_false(aor_rstate_breaker_counts(AOR_KIND_RATE, AOR_RSTATE_OWN | AOR_RSTATE_429));
    assert_true(aor_rstate_breaker_counts(AOR_KIND_TRANSIENT, AOR_RSTATE_OWN | AOR_RSTATE_429));
    assert_false(aor_rstate_breaker_counts(AOR_KIND_QUOTA, AOR_RSTATE_OWN));
    assert_false(aor_rstate_breaker_counts(AOR_KIND_AUTH, AOR_RSTATE_OWN));
    assert_true(aor_rstate_breaker_counts(AOR_KIND_AUTH, 0));
    assert_false(aor_rstate_breaker_counts(AOR_KIND_CLIENT, 0));
    assert_false(aor_rstate_breaker_counts(AOR_KIND_OK, 0));
}

/* An overload (529 / 503 / an error event: rate without a 429) is the provider's. */
static void test_own_credentials_overload_does(void **state) {
    fx *f = *state;
    three_failures(f, AOR_KIND_RATE, AOR_RSTATE_OWN);
    assert_true(is_open(f));
}

static void test_own_credentials_transient_does(void **state) {
    fx *f = *state;
    three_failures(f, AOR_KIND_TRANSIENT, AOR_RSTATE_OWN);
    assert_true(is_open(f));
}

static void test_client_errors_never(void **state) {
    fx *f = *state;
    three_failures(f, AOR_KIND_CLIENT, 0);
    assert_false(is_open(f));
}

/* Three failures of requests in flight together on one key: one curve level (the same
 * episode), but three failures for the circuit breaker (§4.4 counts every retryable
 * failure; QA: a burst on a provider with one key never opened its circuit). */
static void test_in_flight_failures_count_for_the_breaker(void **state) {
    fx *f = *state;
    for (int i = 0; i < 3; i++)
        assert_int_equal(aor_rstate_record(f->rs, "p", "k1", "m", "client", AOR_KIND_TRANSIENT, -1,
                                           NOW - 1, NOW + 0.1 * i, 0),
                         0);
    aor_backoff_row row;
    assert_true(aor_backoff_get(aor_rstate_backoff(f->rs), "p", "k1", &row));
    assert_int_equal(row.failure_count, 1);
    assert_true(row.window_s == 5);
    assert_true(is_open(f));
}

/* Parallel requests on one throttled key: their 429s are one episode of that key, counted
 * once for the breaker, so the model's circuit stays closed for the provider's other keys
 * (QA: 8 parallel clients, key A throttled, half got 429 aor_all_backed_off while B was
 * fine). 429s of separate episodes (each sent after the last failure) still count. */
static void test_in_flight_429s_count_once_for_the_breaker(void **state) {
    fx *f = *state;
    for (int i = 0; i < 5; i++)
        assert_int_equal(aor_rstate_record(f->rs, "p", "k1", "m", "client", AOR_KIND_RATE, -1,
                                           NOW - 1, NOW + 0.1 * i, AOR_RSTATE_429),
                         0);
    assert_false(is_open(f));
    /* Two more episodes (sent after the latest failure, as retries after the window): open. */
    for (int i = 0; i < 2; i++)
        assert_int_equal(aor_rstate_record(f->rs, "p", "k1", "m", "client", AOR_KIND_RATE, -1,
                                           NOW + 10 + 10 * i, NOW + 11 + 10 * i, AOR_RSTATE_429),
                         0);
    assert_true(is_open(f));
}

/* A quota failure of a request in flight when a 429 set a 5 s window still gets the
 * flat quota cooldown (an account state), without a new curve level (review). */
static void test_in_flight_quota_gets_its_cooldown(void **state) {
    fx *f = *state;
    assert_int_equal(
        aor_rstate_record(f->rs, "p", "k1", "m", "client", AOR_KIND_RATE, -1, NOW - 1, NOW, 0), 0);
    assert_int_equal(
        aor_rstate_record(f->rs, "p", "k1", "m", "client", AOR_KIND_QUOTA, -1, NOW - 1, NOW + 1, 0),
        0);
    aor_backoff_row row;
    assert_true(aor_backoff_get(aor_rstate_backoff(f->rs), "p", "k1", &row));
    assert_int_equal(row.failure_count, 1);
    assert_true(row.until == NOW + 1 + 120);
    assert_int_equal(row.last_error_kind, AOR_KIND_QUOTA);
}

/* Half-open, only the probe (sent after the open time ran out) reopens the circuit; a
 * late failure of a request sent before it opened does not extend it (review). */
static void test_late_failure_does_not_reopen_a_half_open_circuit(void **state) {
    fx *f = *state;
    three_failures(f, AOR_KIND_TRANSIENT, 0); /* open until NOW + 30 */
    aor_breaker_row row;
    assert_true(aor_breaker_get(aor_rstate_breaker(f->rs), "p", "m", NOW + 31, &row));
    assert_int_equal(row.state, AOR_BREAKER_HALF_OPEN);
    assert_int_equal(aor_rstate_record(f->rs, "p", "k4", "m", "client", AOR_KIND_TRANSIENT, -1,
                                       NOW - 5, NOW + 31, 0),
                     0);
    assert_true(aor_breaker_get(aor_rstate_breaker(f->rs), "p", "m", NOW + 31, &row));
    assert_int_equal(row.state, AOR_BREAKER_HALF_OPEN);
    /* The probe's failure does. */
    assert_int_equal(aor_rstate_record(f->rs, "p", "k4", "m", "client", AOR_KIND_TRANSIENT, -1,
                                       NOW + 31, NOW + 32, 0),
                     0);
    assert_true(aor_breaker_get(aor_rstate_breaker(f->rs), "p", "m", NOW + 32, &row));
    assert_int_equal(row.state, AOR_BREAKER_OPEN);
    assert_true(row.until == NOW + 62);
}

/* A longer hint of a request that was in flight lengthens the window; the row shows the
 * window in force (QA: window_s stayed 2 while until was 60 s on). */
static void test_in_flight_longer_hint_shows_its_window(void **state) {
    fx *f = *state;
    assert_int_equal(
        aor_rstate_record(f->rs, "p", "k1", "m", "client", AOR_KIND_RATE, 2, NOW - 1, NOW, 0), 0);
    assert_int_equal(aor_rstate_record(f->rs, "p", "k1", "m", "client", AOR_KIND_RATE, 60, NOW - 1,
                                       NOW + 0.5, 0),
                     0);
    aor_backoff_row row;
    assert_true(aor_backoff_get(aor_rstate_backoff(f->rs), "p", "k1", &row));
    assert_int_equal(row.failure_count, 1);
    assert_true(row.window_s == 60);
    assert_true(row.until == NOW + 60.5);
    assert_true(row.last_failure == NOW); /* the episode's (QA: see below) */
    /* A shorter one changes nothing. */
    assert_int_equal(
        aor_rstate_record(f->rs, "p", "k1", "m", "client", AOR_KIND_RATE, 3, NOW - 1, NOW + 1, 0),
        0);
    assert_true(aor_backoff_get(aor_rstate_backoff(f->rs), "p", "k1", &row));
    assert_true(row.window_s == 60 && row.until == NOW + 60.5 && row.failure_count == 1);
}

/* A request in flight when the key's window was set fails after that window ran out:
 * no new level, but the same window again from its failure, so the next request does not
 * go to the key (QA: the row stayed expired and the next request went to the key). */
static void test_in_flight_failure_after_expiry_sets_the_window_again(void **state) {
    fx *f = *state;
    assert_int_equal(
        aor_rstate_record(f->rs, "p", "k1", "m", "client", AOR_KIND_RATE, -1, NOW - 1, NOW, 0), 0);
    assert_int_equal(aor_rstate_record(f->rs, "p", "k1", "m", "client", AOR_KIND_TRANSIENT, -1,
                                       NOW - 2, NOW + 100, 0),
                     0);
    aor_backoff_row row;
    assert_true(aor_backoff_get(aor_rstate_backoff(f->rs), "p", "k1", &row));
    assert_int_equal(row.failure_count, 1);
    assert_true(row.window_s == 5);
    assert_true(row.until == NOW + 105);
    assert_true(row.last_failure == NOW); /* still the episode's */
    assert_int_equal(row.last_error_kind, AOR_KIND_TRANSIENT);
    /* Still running: unchanged (a failure never lengthens without a reason). */
    assert_int_equal(aor_rstate_record(f->rs, "p", "k1", "m", "client", AOR_KIND_TRANSIENT, -1,
                                       NOW - 2, NOW + 101, 0),
                     0);
    assert_true(aor_backoff_get(aor_rstate_backoff(f->rs), "p", "k1", &row));
    assert_true(row.until == NOW + 105 && row.failure_count == 1);
    /* An attempt sent after the episode (at NOW + 6, once its first window had run out)
     * that fails after the stale one is a new failure: the curve goes on (QA: it was
     * taken for one in flight, the stale failure having become the row's latest). */
    assert_int_equal(aor_rstate_record(f->rs, "p", "k1", "m", "client", AOR_KIND_TRANSIENT, -1,
                                       NOW + 6, NOW + 102, 0),
                     0);
    assert_true(aor_backoff_get(aor_rstate_backoff(f->rs), "p", "k1", &row));
    assert_int_equal(row.failure_count, 2);
    assert_true(row.window_s == 10);
}

/* §4.4/§4.5: the probe of a half-open circuit holds the others; its lease is memory
 * only (no write); its recorded failure reopens the circuit, written ahead; a recorded
 * success of the next probe closes it, written ahead. */
/* A success of a request without a model (GET /v1/models) makes no sticky row: there is
 * no prompt cache to keep warm, and every new client would add a row (QA). */
static void test_no_sticky_without_a_model(void **state) {
    fx *f = *state;
    assert_int_equal(
        aor_rstate_record(f->rs, "p", "a", "", "client", AOR_KIND_OK, -1, NOW - 1, NOW, 0), 0);
    assert_int_equal(aor_sticky_count(aor_rstate_sticky(f->rs)), 0);
    assert_int_equal(
        aor_rstate_record(f->rs, "p", "a", "m", "client", AOR_KIND_OK, -1, NOW - 1, NOW, 0), 0);
    assert_int_equal(aor_sticky_count(aor_rstate_sticky(f->rs)), 1);
}

static void test_probe_lease_and_its_result(void **state) {
    fx *f = *state;
    aor_breaker *br = aor_rstate_breaker(f->rs);
    three_failures(f, AOR_KIND_TRANSIENT, 0); /* open until NOW + 30 */
    assert_true(is_open(f));
    unsigned long w = aor_rstate_writes(f->rs);
    assert_int_equal(aor_breaker_allow(br, "p", "m", NOW + 30), 1); /* the probe */
    assert_int_equal(aor_breaker_allow(br, "p", "m", NOW + 31), 0); /* held */
    assert_int_equal(aor_rstate_writes(f->rs), w);                  /* lease: memory only */
    /* The probe fails: reopened until NOW + 32 + 30 (one write). */
    assert_int_equal(aor_rstate_record(f->rs, "p", "k1", "m", "client", AOR_KIND_TRANSIENT, -1,
                                       NOW + 30, NOW + 32, 0),
                     0);
    aor_breaker_row row;
    assert_int_equal(aor_breaker_get(br, "p", "m", NOW + 33, &row), 1);
    assert_int_equal(row.state, AOR_BREAKER_OPEN);
    assert_true(row.until == NOW + 62);
    assert_true(row.probe_until == 0);
    assert_true(aor_rstate_writes(f->rs) > w);
    /* The next probe succeeds: closed (written), everyone passes. */
    assert_int_equal(aor_breaker_allow(br, "p", "m", NOW + 62), 1);
    w = aor_rstate_writes(f->rs);
    assert_int_equal(
        aor_rstate_record(f->rs, "p", "k2", "m", "client", AOR_KIND_OK, -1, NOW + 62, NOW + 63, 0),
        0);
    assert_true(aor_rstate_writes(f->rs) > w);
    assert_int_equal(aor_breaker_get(br, "p", "m", NOW + 63, NULL), 0);
    assert_int_equal(aor_breaker_allow(br, "p", "m", NOW + 63), 1);
    assert_int_equal(aor_breaker_allow(br, "p", "m", NOW + 63), 1);
}

/* The probe's 429 reopens the circuit even when another request on its key failed while
 * it was in flight (which makes it "the same episode" for the key's backoff): skipped,
 * it left the circuit half-open with the probe's lease held for open_s (review). */
static void test_probe_429_of_a_busy_key_reopens(void **state) {
    fx *f = *state;
    aor_breaker *br = aor_rstate_breaker(f->rs);
    three_failures(f, AOR_KIND_TRANSIENT, 0); /* open until NOW + 30; k1's row at NOW */
    assert_int_equal(aor_breaker_allow(br, "p", "m", NOW + 30), 1); /* the probe, on k1 */
    /* Another model's request on k1 fails meanwhile (sent after k1's last failure). */
    assert_int_equal(aor_rstate_record(f->rs, "p", "k1", "other", "client", AOR_KIND_RATE, -1,
                                       NOW + 29, NOW + 31, AOR_RSTATE_429),
                     0);
    assert_int_equal(aor_rstate_record(f->rs, "p", "k1", "m", "client", AOR_KIND_RATE, -1, NOW + 30,
                                       NOW + 32, AOR_RSTATE_429),
                     0);
    aor_breaker_row row;
    assert_int_equal(aor_breaker_get(br, "p", "m", NOW + 33, &row), 1);
    assert_int_equal(row.state, AOR_BREAKER_OPEN);
    assert_true(row.until == NOW + 62);
}

/* Loads a config of provider p (keys a, b from TEST_RSTATE_KEY / TEST_RSTATE_KEY_B) with
 * the [routing] lines given; NULL on error. */
static aor_config *load_cfg(fx *f, const char *routing) {
    char path[128];
    snprintf(path, sizeof path, "%s/aor2.ini", f->dir);
    FILE *c = fopen(path, "w");
    if (!c)
        return NULL;
    fprintf(c,
            "[routing]\n%s\n[key \"a\"]\nenv = TEST_RSTATE_KEY\n[key \"b\"]\n"
            "env = TEST_RSTATE_KEY_B\n[provider \"p\"]\ndialect = openai\n"
            "base_url = https://p.example\nkeys = a, b\nmodels = *\n"
            "[provider \"q\"]\ndialect = openai\nbase_url = https://q.example\nkeys = a\n"
            "models = *\n",
            routing);
    fclose(c);
    char *errs = NULL;
    aor_config *cfg = aor_config_load(path, &errs);
    if (!cfg)
        fprintf(stderr, "config: %s\n", errs ? errs : "?");
    free(errs);
    return cfg;
}

/* SIGHUP: the new backoff and breaker parameters apply to the next failure; a running
 * window keeps its until (QA: they were copied once at start). */
static void test_reload_applies_parameters(void **state) {
    fx *f = *state;
    setenv("TEST_RSTATE_KEY_B", "secret-b", 1);
    assert_int_equal(
        aor_rstate_record(f->rs, "p", "a", "m", "c", AOR_KIND_RATE, -1, NOW - 1, NOW, 0), 0);
    aor_backoff_row row;
    assert_int_equal(aor_backoff_get(aor_rstate_backoff(f->rs), "p", "a", &row), 1);
    assert_true(row.until == NOW + 5);
    aor_config *cfg = load_cfg(f, "backoff_initial_s = 2\nbreaker_failures = 1\n"
                                  "breaker_open_s = 7");
    assert_non_null(cfg);
    assert_int_equal(aor_rstate_set_config(f->rs, cfg, NOW), 0);
    assert_int_equal(aor_backoff_get(aor_rstate_backoff(f->rs), "p", "a", &row), 1);
    assert_true(row.until == NOW + 5); /* kept */
    assert_int_equal(
        aor_rstate_record(f->rs, "p", "b", "m2", "c", AOR_KIND_RATE, -1, NOW, NOW + 1, 0), 0);
    assert_int_equal(aor_backoff_get(aor_rstate_backoff(f->rs), "p", "b", &row), 1);
    assert_true(row.window_s == 2);
    aor_breaker_row br;
    assert_int_equal(aor_breaker_get(aor_rstate_breaker(f->rs), "p", "m2", NOW + 1, &br), 1);
    assert_int_equal(br.state, AOR_BREAKER_OPEN); /* one failure opens now */
    assert_true(br.until == NOW + 8);
    aor_rstate_set_config(f->rs, f->cfg, NOW + 2); /* back before cfg is freed */
    aor_config_free(cfg);
}

/* SIGHUP with a key's secret changed (same name): its backoff rows with every provider
 * and its usage snapshots are dropped, written ahead; other keys keep theirs. */
static void test_reload_rotated_key(void **state) {
    fx *f = *state;
    setenv("TEST_RSTATE_KEY_B", "secret-b", 1);
    aor_config *c1 = load_cfg(f, "");
    assert_non_null(c1);
    assert_int_equal(aor_rstate_set_config(f->rs, c1, NOW), 0);
    aor_backoff *b = aor_rstate_backoff(f->rs);
    const char *rows[][2] = {{"p", "a"}, {"q", "a"}, {"p", "b"}};
    for (int i = 0; i < 3; i++)
        assert_int_equal(aor_rstate_record(f->rs, rows[i][0], rows[i][1], "m", "c", AOR_KIND_AUTH,
                                           -1, NOW - 1, NOW, 0),
                         0);
    const aor_header h[] = {{"x-ratelimit-remaining-requests", "0"},
                            {"x-ratelimit-reset-requests", "60s"}};
    aor_usage *u = aor_rstate_usage(f->rs);
    assert_int_equal(aor_usage_observe(u, "p", "a", 200, h, 2, NOW, 0), 1);
    assert_int_equal(aor_usage_observe(u, "p", "b", 200, h, 2, NOW, 0), 1);

    /* Same secrets: nothing changes, nothing written. */
    aor_config *same = load_cfg(f, "");
    assert_non_null(same);
    unsigned long w = aor_rstate_writes(f->rs);
    assert_int_equal(aor_rstate_set_config(f->rs, same, NOW + 1), 0);
    assert_int_equal(aor_rstate_writes(f->rs), w);
    assert_int_equal(aor_backoff_get(b, "p", "a", NULL), 1);

    setenv("TEST_RSTATE_KEY", "secret-a-rotated", 1);
    aor_config *c2 = load_cfg(f, "");
    assert_non_null(c2);
    assert_int_equal(aor_rstate_set_config(f->rs, c2, NOW + 1), 0);
    assert_true(aor_rstate_writes(f->rs) > w);
    assert_int_equal(aor_backoff_get(b, "p", "a", NULL), 0);
    assert_int_equal(aor_backoff_get(b, "q", "a", NULL), 0);
    assert_int_equal(aor_backoff_get(b, "p", "b", NULL), 1);
    assert_int_equal(aor_usage_exhausted(u, "p", "a", NOW + 1, NULL), 0);
    assert_int_equal(aor_usage_exhausted(u, "p", "b", NOW + 1, NULL), 1);

    /* The reset is durable: a fresh open of the store replays it. */
    char db[128], err[256];
    snprintf(db, sizeof db, "%s/aor.db", f->dir);
    aor_rstate *again = aor_rstate_open(c2, db, NOW + 2, err, sizeof err);
    assert_non_null(again);
    assert_int_equal(aor_backoff_get(aor_rstate_backoff(again), "p", "a", NULL), 0);
    assert_int_equal(aor_backoff_get(aor_rstate_backoff(again), "q", "a", NULL), 0);
    assert_int_equal(aor_backoff_get(aor_rstate_backoff(again), "p", "b", NULL), 1);
    aor_rstate_close(again);

    setenv("TEST_RSTATE_KEY", "secret-a", 1);
    aor_rstate_set_config(f->rs, f->cfg, NOW + 2);
    aor_config_free(c1);
    aor_config_free(same);
    aor_config_free(c2);
}

/* Admin reset of one key: its backoff row and usage snapshot go, circuits stay; the
 * provider reset and clear drop usage snapshots too and report the exhausted ones. */
static void test_reset_key_and_usage(void **state) {
    fx *f = *state;
    three_failures(f, AOR_KIND_TRANSIENT, 0); /* k1..k3 backed off, circuit open */
    const aor_header h[] = {{"x-ratelimit-remaining-requests", "0"},
                            {"x-ratelimit-reset-requests", "60s"}};
    aor_usage *u = aor_rstate_usage(f->rs);
    assert_int_equal(aor_usage_observe(u, "p", "k1", 200, h, 2, NOW, 0), 1);
    assert_int_equal(aor_usage_observe(u, "p", "k2", 200, h, 2, NOW, 0), 1);
    assert_int_equal(aor_usage_observe(u, "p", "k3", 200, h, 2, NOW, 0), 1);
    unsigned long w = aor_rstate_writes(f->rs);
    int uc = -1;
    assert_int_equal(aor_rstate_reset(f->rs, "p", "k1", NOW + 1, &uc), 1);
    assert_int_equal(uc, 1);
    assert_true(aor_rstate_writes(f->rs) > w); /* written ahead */
    aor_backoff *b = aor_rstate_backoff(f->rs);
    assert_int_equal(aor_backoff_get(b, "p", "k1", NULL), 0);
    assert_int_equal(aor_backoff_get(b, "p", "k2", NULL), 1);
    assert_int_equal(aor_usage_exhausted(u, "p", "k1", NOW + 1, NULL), 0);
    assert_int_equal(aor_usage_exhausted(u, "p", "k2", NOW + 1, NULL), 1);
    assert_true(is_open(f)); /* circuits are per model, not per key */
    /* Provider reset: rows, the circuit and the usage snapshots. */
    assert_int_equal(aor_rstate_reset(f->rs, "p", NULL, NOW + 1, &uc), 3);
    assert_int_equal(uc, 2);
    assert_false(is_open(f));
    assert_int_equal(aor_usage_count(u), 0);
    /* clear (NULL, NULL) drops every snapshot; NULL out pointer allowed. */
    assert_int_equal(aor_usage_observe(u, "x", "y", 200, h, 2, NOW, 0), 1);
    assert_int_equal(aor_rstate_reset(f->rs, NULL, NULL, NOW + 1, NULL), 0);
    assert_int_equal(aor_usage_count(u), 0);
}

/* The text of a key's latest failure (§5.6 "last failure"): kept, replaced by the next,
 * cut to its buffer, NULL for unknown pairs; past 4,096 pairs the table starts over. */
static void test_failure_texts(void **state) {
    fx *f = *state;
    assert_null(aor_rstate_failure_text(f->rs, "p", "a"));
    assert_int_equal(aor_rstate_note_failure(f->rs, "p", "a", "transient (network: refused)"), 0);
    assert_string_equal(aor_rstate_failure_text(f->rs, "p", "a"), "transient (network: refused)");
    assert_int_equal(aor_rstate_note_failure(f->rs, "p", "a", "rate (429)"), 0);
    assert_string_equal(aor_rstate_failure_text(f->rs, "p", "a"), "rate (429)");
    assert_null(aor_rstate_failure_text(f->rs, "p", "b"));
    assert_null(aor_rstate_failure_text(f->rs, NULL, "a"));
    char longer[400];
    memset(longer, 'x', sizeof longer - 1);
    longer[sizeof longer - 1] = '\0';
    assert_int_equal(aor_rstate_note_failure(f->rs, "p", "a", longer), 0);
    assert_int_equal(strlen(aor_rstate_failure_text(f->rs, "p", "a")), 159);
    char key[32];
    for (int i = 0; i < 4096; i++) {
        snprintf(key, sizeof key, "client-%d", i);
        assert_int_equal(aor_rstate_note_failure(f->rs, "p", key, "transient (x)"), 0);
    }
    /* 4,097 pairs: the table started over at the last one */
    assert_null(aor_rstate_failure_text(f->rs, "p", "a"));
    assert_string_equal(aor_rstate_failure_text(f->rs, "p", "client-4095"), "transient (x)");
}

/* Makes f's store fail every write from now on, as a full disk would: its event table is
 * dropped behind its back. */
static void break_store(fx *f) {
    char db[128];
    snprintf(db, sizeof db, "%s/aor.db", f->dir);
    sqlite3 *h = NULL;
    assert_int_equal(sqlite3_open(db, &h), SQLITE_OK);
    assert_int_equal(sqlite3_exec(h, "DROP TABLE state_events", NULL, NULL, NULL), SQLITE_OK);
    sqlite3_close(h);
}

/* The store stops writing (here its event table is dropped behind its back; in life a
 * full disk or a read-only file system): routing goes on from memory. It did not: a
 * failed write left memory unchanged, so backoff and circuits stopped working (QA: a
 * full disk, every request tried the 429ing key first). */
static void test_store_failure_keeps_routing_in_memory(void **state) {
    fx *f = *state;
    break_store(f);
    unsigned long writes = aor_rstate_writes(f->rs);
    assert_int_equal(aor_rstate_write_errors(f->rs), 0);

    three_failures(f, AOR_KIND_RATE, 0);
    aor_backoff_row row;
    assert_true(aor_backoff_get(aor_rstate_backoff(f->rs), "p", "k1", &row));
    assert_true(row.until == NOW + 5 && row.failure_count == 1);
    assert_true(is_open(f));
    assert_int_equal(aor_rstate_writes(f->rs), writes); /* nothing reached the disk */
    assert_true(aor_rstate_write_errors(f->rs) >= 4);   /* 3 backoff rows, the circuit */

    /* A success clears the row and moves the sticky, in memory. */
    assert_int_equal(
        aor_rstate_record(f->rs, "p", "k1", "m", "client", AOR_KIND_OK, -1, NOW, NOW + 1, 0), 0);
    assert_false(aor_backoff_get(aor_rstate_backoff(f->rs), "p", "k1", &row));
    aor_sticky_row st;
    assert_true(aor_sticky_get(aor_rstate_sticky(f->rs), "client", "m", &st));
    assert_string_equal(st.key, "k1");
    /* An admin reset clears memory too. */
    assert_true(aor_rstate_reset(f->rs, "p", NULL, NOW + 2, NULL) >= 2);
    assert_false(aor_backoff_get(aor_rstate_backoff(f->rs), "p", "k2", &row));
}

/* Backoff rows of (provider, key) in the state file at f's path, as a new aord would
 * replay them: 1 when there is one, 0 when not. */
static int replayed_row(fx *f, const char *key) {
    char db[128], err[256];
    snprintf(db, sizeof db, "%s/aor.db", f->dir);
    aor_rstate *rs = aor_rstate_open(f->cfg, db, NOW + 3, err, sizeof err);
    assert_non_null(rs);
    aor_backoff_row row;
    int found = aor_backoff_get(aor_rstate_backoff(rs), "p", key, &row);
    aor_rstate_close(rs);
    return found;
}

/* Once the store takes writes again (the disk has room), the state in memory is written
 * over it, so the changes it could not take are not lost at the next start (QA: they
 * were, though later writes worked). Here the stop path does it at once; while aord runs
 * the next state change does, at most once a minute. */
static void test_state_lost_while_the_store_failed_is_written_later(void **state) {
    fx *f = *state;
    char db[128];
    snprintf(db, sizeof db, "%s/aor.db", f->dir);
    break_store(f);
    assert_int_equal(
        aor_rstate_record(f->rs, "p", "k2", "m", "client", AOR_KIND_RATE, -1, NOW, NOW, 0), 0);
    assert_true(aor_rstate_write_errors(f->rs) >= 1);
    /* The store works again (its table back, as a new open makes it). */
    char err[256];
    aor_store *again = aor_store_open(db, err, sizeof err);
    assert_non_null(again);
    aor_store_close(again);
    aor_rstate_sync(f->rs, NOW + 1);
    assert_true(replayed_row(f, "k2"));
}

/* The state file removed under aord with no state change after it (rm aor.db*, then
 * SIGTERM): the stop path writes the state in memory to a new file (QA: it was lost). */
static void test_state_file_removed_before_a_stop_is_written_again(void **state) {
    fx *f = *state;
    assert_int_equal(
        aor_rstate_record(f->rs, "p", "k3", "m", "client", AOR_KIND_RATE, -1, NOW, NOW, 0), 0);
    char path[160];
    static const char *const files[] = {"aor.db", "aor.db-wal", "aor.db-shm"};
    for (size_t i = 0; i < 3; i++) {
        snprintf(path, sizeof path, "%s/%s", f->dir, files[i]);
        unlink(path);
    }
    aor_rstate_sync(f->rs, NOW + 1);
    assert_true(replayed_row(f, "k3"));
}

/* The event log is compacted while aord runs (it only grew until a restart: QA, 1M
 * events, 114 MB): after compact_every events, the tables hold the state and the log is
 * empty; a store opened on the file replays to the same state. */
static long long count_sql(fx *f, const char *sql) {
    char db[128];
    snprintf(db, sizeof db, "%s/aor.db", f->dir);
    sqlite3 *h = NULL;
    sqlite3_stmt *q = NULL;
    long long n = -1;
    if (sqlite3_open(db, &h) == SQLITE_OK &&
        sqlite3_prepare_v2(h, sql, -1, &q, NULL) == SQLITE_OK && sqlite3_step(q) == SQLITE_ROW)
        n = sqlite3_column_int64(q, 0);
    sqlite3_finalize(q);
    sqlite3_close(h);
    return n;
}

static long long count_events(fx *f) {
    return count_sql(f, "SELECT count(*) FROM state_events");
}

static void test_compaction_while_running(void **state) {
    fx *f = *state;
    aor_rstate_set_compact_every(f->rs, 8);
    char client[32];
    /* Sticky moves: one event each, one new row each (the rows grow with the events). */
    for (int i = 0; i < 7; i++) {
        snprintf(client, sizeof client, "c%d", i);
        assert_int_equal(
            aor_rstate_record(f->rs, "p", "k1", "m", client, AOR_KIND_OK, -1, NOW, NOW, 0), 0);
    }
    assert_int_equal(count_events(f), 7); /* below 8: not yet */
    /* Failures of one key: events without new rows. */
    for (int i = 0; i < 12; i++)
        assert_int_equal(aor_rstate_record(f->rs, "p", "k2", "m", "c0", AOR_KIND_TRANSIENT, -1,
                                           NOW + i, NOW + i, 0),
                         0);
    long long left = count_events(f);
    assert_true(left >= 0 && left < 8); /* compacted at least once */
    aor_backoff_row row;
    assert_true(aor_backoff_get(aor_rstate_backoff(f->rs), "p", "k2", &row));
    unsigned count = row.failure_count;

    /* What a restart sees: the same rows. */
    char db[128], err[256];
    snprintf(db, sizeof db, "%s/aor.db", f->dir);
    aor_rstate_close(f->rs);
    f->rs = aor_rstate_open(f->cfg, db, NOW + 20, err, sizeof err);
    assert_non_null(f->rs);
    assert_true(aor_backoff_get(aor_rstate_backoff(f->rs), "p", "k2", &row));
    assert_int_equal(row.failure_count, count);
    assert_int_equal(aor_sticky_count(aor_rstate_sticky(f->rs)), 7);
    assert_int_equal(count_events(f), 0);
}

/* The whole of a small file, NUL-terminated (caller frees); NULL when unreadable. */
static char *slurp(const char *path) {
    FILE *fp = fopen(path, "r");
    if (!fp)
        return NULL;
    char *buf = calloc(1, 65536);
    if (buf)
        buf[fread(buf, 1, 65535, fp)] = '\0';
    fclose(fp);
    return buf;
}

/* QA: with AOR_FAKE_CLOCK=4000000000 one transient failure, then a normal start: the key
 * answered 429 "free again in 2203878330 s" (and a circuit would have stayed open as
 * long). At start no backoff window may end later than now + the longest window the
 * config allows, no circuit later than now + breaker_open_s; a failure in the future is
 * taken as a failure now, with what was left of its window. One warning names the rows
 * (provider/key, provider/model; never a secret). */
static void test_rows_from_the_future_are_clamped_at_start(void **state) {
    fx *f = *state;
    const double ahead = 4000000000.0;
    char db[128], err[256], logpath[128];
    snprintf(db, sizeof db, "%s/aor.db", f->dir);
    snprintf(logpath, sizeof logpath, "%s/aord.log", f->dir);
    assert_int_equal(aor_log_open(logpath), 0);
    three_failures(f, AOR_KIND_RATE, 0); /* at NOW on k1..k3: opens (p, m) until NOW + 30 */
    assert_int_equal(
        aor_rstate_record(f->rs, "p", "f1", "m3", "c", AOR_KIND_TRANSIENT, -1, ahead, ahead, 0), 0);
    for (int i = 0; i < 3; i++) /* f2 climbs 5, 10, 20 s; (p, m2) opens far ahead */
        assert_int_equal(aor_rstate_record(f->rs, "p", "f2", "m2", "c", AOR_KIND_RATE, -1,
                                           ahead + i, ahead + i, 0),
                         0);
    aor_rstate_close(f->rs);

    double now = NOW + 10;
    f->rs = aor_rstate_open(f->cfg, db, now, err, sizeof err);
    assert_non_null(f->rs);
    aor_log_close();
    aor_backoff_row row;
    assert_true(aor_backoff_get(aor_rstate_backoff(f->rs), "p", "f1", &row));
    assert_true(row.until == now + 5);
    assert_true(row.last_failure == now);
    assert_int_equal(row.failure_count, 1);
    assert_false(aor_backoff_blocked(aor_rstate_backoff(f->rs), "p", "f1", now + 5, NULL));
    /* f2's row: failed at ahead + 2 with a 20 s window (third level): now + 20, level kept. */
    assert_true(aor_backoff_get(aor_rstate_backoff(f->rs), "p", "f2", &row));
    assert_true(row.until == now + 20);
    assert_int_equal(row.failure_count, 3);
    /* Rows within the limits keep their times. */
    assert_true(aor_backoff_get(aor_rstate_backoff(f->rs), "p", "k3", &row));
    assert_true(row.until == NOW + 5 && row.last_failure == NOW);
    aor_breaker_row br;
    assert_true(aor_breaker_get(aor_rstate_breaker(f->rs), "p", "m2", now, &br));
    assert_int_equal(br.state, AOR_BREAKER_OPEN);
    assert_true(br.until == now + 30);
    assert_true(aor_breaker_get(aor_rstate_breaker(f->rs), "p", "m", now, &br));
    assert_true(br.until == NOW + 30);

    char *log = slurp(logpath);
    assert_non_null(log);
    const char *line = strstr(log, "state at start: 2 backoff rows and 1 circuit ended later");
    if (!line)
        fail_msg("no clamp warning in: %s", log);
    assert_non_null(strstr(line, "key p/f1 until 2096-10-02T07:06:45Z (failed in the future)"));
    assert_non_null(strstr(line, "circuit p/m2 until"));
    assert_null(strstr(line, "p/k3"));
    assert_null(strstr(log, "secret-a"));
    free(log);

    /* The fix is stored: the next start has nothing to clamp and logs nothing. */
    aor_rstate_close(f->rs);
    unlink(logpath);
    assert_int_equal(aor_log_open(logpath), 0);
    f->rs = aor_rstate_open(f->cfg, db, now, err, sizeof err);
    aor_log_close();
    assert_non_null(f->rs);
    log = slurp(logpath);
    assert_true(log == NULL || strstr(log, "state at start") == NULL);
    free(log);
}

/* QA: a client sending ever new model names grew the sticky table without bound. A new
 * sticky in a full table drops the least recently used row (a repeated success is a
 * use), written ahead as a sticky_drop event: a restart that replays the events has
 * exactly the rows aord had. The log says so once. */
static void test_full_sticky_table_drops_the_oldest_and_replays(void **state) {
    fx *f = *state;
    char db[128], err[256], logpath[128];
    snprintf(db, sizeof db, "%s/aor.db", f->dir);
    snprintf(logpath, sizeof logpath, "%s/aord.log", f->dir);
    assert_int_equal(aor_log_open(logpath), 0);
    aor_sticky_set_max(aor_rstate_sticky(f->rs), 3);
    const char *models[] = {"m0", "m1", "m2", "m0", "m3", "m4"};
    for (int i = 0; i < 6; i++)
        assert_int_equal(aor_rstate_record(f->rs, "p", "k1", models[i], "client", AOR_KIND_OK, -1,
                                           NOW + i, NOW + i, 0),
                         0);
    aor_log_close();
    aor_sticky *s = aor_rstate_sticky(f->rs);
    assert_int_equal(aor_sticky_count(s), 3);
    assert_true(aor_sticky_get(s, "client", "m0", NULL));
    assert_false(aor_sticky_get(s, "client", "m1", NULL));
    assert_false(aor_sticky_get(s, "client", "m2", NULL));
    assert_true(aor_sticky_get(s, "client", "m3", NULL));
    assert_true(aor_sticky_get(s, "client", "m4", NULL));
    assert_int_equal(count_sql(f, "SELECT count(*) FROM state_events WHERE type = 'sticky_drop'"),
                     2);

    aor_rstate_close(f->rs);
    f->rs = aor_rstate_open(f->cfg, db, NOW + 10, err, sizeof err);
    assert_non_null(f->rs);
    s = aor_rstate_sticky(f->rs);
    assert_int_equal(aor_sticky_count(s), 3);
    assert_true(aor_sticky_get(s, "client", "m0", NULL));
    assert_true(aor_sticky_get(s, "client", "m3", NULL));
    assert_true(aor_sticky_get(s, "client", "m4", NULL));
    assert_int_equal(count_sql(f, "SELECT count(*) FROM sticky"), 3);

    char *log = slurp(logpath);
    assert_non_null(log);
    const char *line = strstr(log, "sticky: 3 (client, model) rows, the most kept");
    if (!line)
        fail_msg("no sticky-full line in: %s", log);
    assert_null(strstr(line + 1, "sticky: 3 (client, model) rows")); /* once */
    assert_null(strstr(log, "secret-a"));
    free(log);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_in_flight_quota_gets_its_cooldown, setup, teardown),
        cmocka_unit_test_setup_teardown(test_late_failure_does_not_reopen_a_half_open_circuit,
                                        setup, teardown),
        cmocka_unit_test_setup_teardown(test_in_flight_failures_count_for_the_breaker, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_in_flight_429s_count_once_for_the_breaker, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_probe_429_of_a_busy_key_reopens, setup, teardown),
        cmocka_unit_test_setup_teardown(test_in_flight_longer_hint_shows_its_window, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_in_flight_failure_after_expiry_sets_the_window_again,
                                        setup, teardown),
        cmocka_unit_test_setup_teardown(test_state_lost_while_the_store_failed_is_written_later,
                                        setup, teardown),
        cmocka_unit_test_setup_teardown(test_state_file_removed_before_a_stop_is_written_again,
                                        setup, teardown),
        cmocka_unit_test_setup_teardown(test_auth_and_quota_of_configured_keys_open_the_circuit,
                                        setup, teardown),
        cmocka_unit_test_setup_teardown(test_quota_of_configured_keys_opens_the_circuit, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_own_credentials_auth_and_quota_do_not, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_own_credentials_transient_does, setup, teardown),
        cmocka_unit_test_setup_teardown(test_own_credentials_429_does_not, setup, teardown),
        cmocka_unit_test_setup_teardown(test_own_credentials_overload_does, setup, teardown),
        cmocka_unit_test_setup_teardown(test_breaker_counts_rule, setup, teardown),
        cmocka_unit_test_setup_teardown(test_client_errors_never, setup, teardown),
        cmocka_unit_test_setup_teardown(test_failure_texts, setup, teardown),
        cmocka_unit_test_setup_teardown(test_probe_lease_and_its_result, setup, teardown),
        cmocka_unit_test_setup_teardown(test_no_sticky_without_a_model, setup, teardown),
        cmocka_unit_test_setup_teardown(test_full_sticky_table_drops_the_oldest_and_replays, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_reload_applies_parameters, setup, teardown),
        cmocka_unit_test_setup_teardown(test_reload_rotated_key, setup, teardown),
        cmocka_unit_test_setup_teardown(test_reset_key_and_usage, setup, teardown),
        cmocka_unit_test_setup_teardown(test_store_failure_keeps_routing_in_memory, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_compaction_while_running, setup, teardown),
        cmocka_unit_test_setup_teardown(test_rows_from_the_future_are_clamped_at_start, setup,
                                        teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
