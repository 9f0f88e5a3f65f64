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

#include "config.h"
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
    three_failures(f, AOR_KIND_AUTH, 1);
    three_failures(f, AOR_KIND_QUOTA, 1);
    assert_false(is_open(f));
}

static void test_own_credentials_transient_does(void **state) {
    fx *f = *state;
    three_failures(f, AOR_KIND_TRANSIENT, 1);
    assert_true(is_open(f));
}

static void test_client_errors_never(void **state) {
    fx *f = *state;
    three_failures(f, AOR_KIND_CLIENT, 0);
    assert_false(is_open(f));
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

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_auth_and_quota_of_configured_keys_open_the_circuit,
                                        setup, teardown),
        cmocka_unit_test_setup_teardown(test_quota_of_configured_keys_opens_the_circuit, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_own_credentials_auth_and_quota_do_not, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_own_credentials_transient_does, setup, teardown),
        cmocka_unit_test_setup_teardown(test_client_errors_never, setup, teardown),
        cmocka_unit_test_setup_teardown(test_probe_lease_and_its_result, setup, teardown),
        cmocka_unit_test_setup_teardown(test_no_sticky_without_a_model, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
