/* Unit tests for daemon/cfgref.c: configs replaced by a reload are freed when the last
 * request that held them ends, not kept until exit (and not freed under a request). */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include "cfgref.h"

#include <stdlib.h>
#include <string.h>

#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/asan_interface.h>
/* 1 when cfg was freed (AddressSanitizer keeps freed memory poisoned for a while). */
static int is_freed(const aor_config *cfg) {
    return __asan_address_is_poisoned(cfg) != 0;
}
#define CAN_SEE_FREE 1
#else
static int is_freed(const aor_config *cfg) {
    (void)cfg;
    return 0;
}
#define CAN_SEE_FREE 0
#endif

static aor_config *new_cfg(const char *source) {
    aor_config *c = calloc(1, sizeof *c);
    assert_non_null(c);
    c->source = strdup(source);
    assert_non_null(c->source);
    return c;
}

/* Nothing holds the current config: a reload frees it at once. */
static void test_unheld_freed_at_replace(void **state) {
    aor_config *a = new_cfg("a"), *b = new_cfg("b");
    aor_cfgref *r = aor_cfgref_new(a);
    assert_non_null(r);
    assert_ptr_equal(aor_cfgref_current(r), a);
    assert_int_equal(aor_cfgref_replace(r, b), 0);
    assert_ptr_equal(aor_cfgref_current(r), b);
    assert_int_equal(aor_cfgref_retired(r), 0);
    if (CAN_SEE_FREE)
        assert_true(is_freed(a));
    aor_cfgref_free(r);
}

/* A request that started before the reload keeps its config, readable, until it ends;
 * the last release frees it. */
static void test_held_until_last_release(void **state) {
    aor_config *a = new_cfg("a"), *b = new_cfg("b"), *c = new_cfg("c");
    aor_cfgref *r = aor_cfgref_new(a);
    const aor_config *h1 = aor_cfgref_hold(r), *h2 = aor_cfgref_hold(r);
    assert_ptr_equal(h1, a);
    assert_ptr_equal(h2, a);
    assert_int_equal(aor_cfgref_replace(r, b), 0);
    assert_int_equal(aor_cfgref_retired(r), 1);
    const aor_config *h3 = aor_cfgref_hold(r); /* a request after the reload */
    assert_ptr_equal(h3, b);
    assert_int_equal(aor_cfgref_replace(r, c), 0); /* b is held too now */
    assert_int_equal(aor_cfgref_retired(r), 2);
    assert_string_equal(h1->source, "a");
    aor_cfgref_release(r, h1);
    assert_int_equal(aor_cfgref_retired(r), 2);
    assert_false(is_freed(a));
    assert_string_equal(h2->source, "a");
    aor_cfgref_release(r, h2);
    assert_int_equal(aor_cfgref_retired(r), 1);
    if (CAN_SEE_FREE)
        assert_true(is_freed(a));
    assert_string_equal(h3->source, "b");
    aor_cfgref_release(r, h3);
    assert_int_equal(aor_cfgref_retired(r), 0);
    if (CAN_SEE_FREE)
        assert_true(is_freed(b));
    assert_false(is_freed(c));
    aor_cfgref_free(r);
}

/* Holds of the current config do not free it when released; unknown pointers and NULL
 * are ignored; a thousand reloads under one long request keep one config. */
static void test_current_and_strays(void **state) {
    aor_config *a = new_cfg("a");
    aor_cfgref *r = aor_cfgref_new(a);
    const aor_config *h = aor_cfgref_hold(r);
    aor_cfgref_release(r, h);
    aor_cfgref_release(r, h); /* one too many: no underflow, still current */
    aor_cfgref_release(r, NULL);
    aor_config stray = {0};
    aor_cfgref_release(r, &stray);
    assert_false(is_freed(a));
    assert_string_equal(aor_cfgref_current(r)->source, "a");
    const aor_config *held = aor_cfgref_hold(r);
    for (int i = 0; i < 1000; i++) {
        assert_int_equal(aor_cfgref_replace(r, new_cfg("n")), 0);
        assert_int_equal(aor_cfgref_retired(r), 1); /* only the held one is kept */
    }
    aor_cfgref_release(r, held);
    assert_int_equal(aor_cfgref_retired(r), 0);
    aor_cfgref_free(r);
}

/* Freeing the set frees what requests still hold (at exit, after every request). */
static void test_free_with_holders(void **state) {
    aor_cfgref *r = aor_cfgref_new(new_cfg("a"));
    (void)aor_cfgref_hold(r);
    assert_int_equal(aor_cfgref_replace(r, new_cfg("b")), 0);
    (void)aor_cfgref_hold(r);
    aor_cfgref_free(r); /* LeakSanitizer fails the test if anything is left */
    aor_cfgref_free(NULL);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_unheld_freed_at_replace),
        cmocka_unit_test(test_held_until_last_release),
        cmocka_unit_test(test_current_and_strays),
        cmocka_unit_test(test_free_with_holders),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
