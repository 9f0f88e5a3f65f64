/* Unit tests: shim/tick.c (the counter gate of the shim's once-a-second checks). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>

#include <cmocka.h>

#include "tick.h"

/* A fake counter at 3 ticks per nanosecond, and a fake clock. */
static uint64_t g_t, g_ns;

static uint64_t fake_counter(void) {
    return g_t;
}

static uint64_t fake_mono(void) {
    return g_ns;
}

static void at(uint64_t ns) {
    g_ns = ns;
    g_t = 1000000 + 3 * ns;
}

static int setup(void **state) {
    aor_tick_set_source(fake_counter, fake_mono);
    at(5000000000u);
    return 0;
}

static int teardown(void **state) {
    aor_tick_set_source(NULL, NULL);
    return 0;
}

static const uint64_t MS = 1000000u;

static void test_closed_until_measured(void **state) {
    uint64_t t0 = g_ns;
    assert_false(aor_tick_quiet()); /* nothing measured: the caller reads the clock */
    aor_tick_mark();
    assert_false(aor_tick_quiet());
    at(t0 + 10 * MS); /* 10 ms is too short to measure the rate over */
    aor_tick_mark();
    assert_false(aor_tick_quiet());
    at(t0 + 25 * MS);
    aor_tick_mark();
    assert_true(aor_tick_quiet());
}

static void test_quiet_for_100_ms(void **state) {
    uint64_t t0 = g_ns;
    aor_tick_mark();
    at(t0 + 30 * MS);
    aor_tick_mark();
    at(t0 + 30 * MS + 99 * MS);
    assert_true(aor_tick_quiet());
    at(t0 + 30 * MS + 101 * MS);
    assert_false(aor_tick_quiet());
    aor_tick_mark(); /* the caller read the clock: quiet again */
    assert_true(aor_tick_quiet());
    at(t0 + 30 * MS + 190 * MS);
    assert_true(aor_tick_quiet());
    at(t0 + 30 * MS + 202 * MS);
    assert_false(aor_tick_quiet());
}

static void test_counter_back_closes(void **state) {
    uint64_t t0 = g_ns;
    aor_tick_mark();
    at(t0 + 30 * MS);
    aor_tick_mark();
    assert_true(aor_tick_quiet());
    g_t -= 1000; /* another CPU's counter, a little behind */
    assert_false(aor_tick_quiet());
    aor_tick_mark(); /* measured again from here */
    assert_false(aor_tick_quiet());
    g_ns += 30 * MS;
    g_t += 90 * MS;
    aor_tick_mark();
    assert_true(aor_tick_quiet());
}

static void test_jump_and_bad_rates(void **state) {
    uint64_t t0 = g_ns;
    aor_tick_mark();
    at(t0 + 30 * MS);
    aor_tick_mark();
    assert_true(aor_tick_quiet());
    /* The counter jumped ahead: ten times the rate over the next 50 ms. */
    g_ns += 50 * MS;
    g_t += 1500 * MS;
    assert_false(aor_tick_quiet());
    aor_tick_mark();
    assert_false(aor_tick_quiet()); /* a rate that moved that much is not believed */
    g_ns += 30 * MS;
    g_t += 90 * MS;
    aor_tick_mark();
    assert_true(aor_tick_quiet());

    /* A counter that does not move is no counter. */
    aor_tick_set_source(fake_counter, fake_mono);
    aor_tick_mark();
    g_ns += 30 * MS;
    aor_tick_mark();
    assert_false(aor_tick_quiet());
    g_ns += 30 * MS;
    aor_tick_mark();
    assert_false(aor_tick_quiet());
    /* Nor one that runs at 1,000 GHz. */
    aor_tick_set_source(fake_counter, fake_mono);
    aor_tick_mark();
    g_ns += 30 * MS;
    g_t += 30000000 * MS;
    aor_tick_mark();
    assert_false(aor_tick_quiet());
    /* A clock that fails (0) measures nothing. */
    aor_tick_set_source(fake_counter, fake_mono);
    g_ns = 0;
    aor_tick_mark();
    g_t += 90 * MS;
    aor_tick_mark();
    assert_false(aor_tick_quiet());
}

static void sleep_ms(long ms) {
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) != 0) {
    }
}

/* The real counter, where there is one: quiet right after a measured mark, and not
 * any more once well over 100 ms have passed. */
static void test_real_counter(void **state) {
    aor_tick_set_source(NULL, NULL);
    aor_tick_init();
    aor_tick_mark();
    sleep_ms(25);
    aor_tick_mark();
#if defined(__x86_64__) || defined(__aarch64__)
    assert_true(aor_tick_quiet());
    sleep_ms(250);
    assert_false(aor_tick_quiet());
#else
    assert_false(aor_tick_quiet());
#endif
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_closed_until_measured, setup, teardown),
        cmocka_unit_test_setup_teardown(test_quiet_for_100_ms, setup, teardown),
        cmocka_unit_test_setup_teardown(test_counter_back_closes, setup, teardown),
        cmocka_unit_test_setup_teardown(test_jump_and_bad_rates, setup, teardown),
        cmocka_unit_test_setup_teardown(test_real_counter, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
