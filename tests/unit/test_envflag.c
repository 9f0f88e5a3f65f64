/* Unit tests for common/envflag.c (AOR_STRICT, AOR_NO_TRUST, ... on/off, spec §9). */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include "envflag.h"

static void test_off_values(void **state) {
    assert_false(aor_envflag_on(NULL));
    assert_false(aor_envflag_on(""));
    assert_false(aor_envflag_on("0"));
    /* QA: AOR_STRICT=false made connections fail closed. */
    assert_false(aor_envflag_on("false"));
    assert_false(aor_envflag_on("FALSE"));
    assert_false(aor_envflag_on("no"));
    assert_false(aor_envflag_on("Off"));
    assert_false(aor_envflag_on(" 0"));
    assert_false(aor_envflag_on("no\t"));
    assert_false(aor_envflag_on("  "));
}

static void test_on_values(void **state) {
    assert_true(aor_envflag_on("1"));
    assert_true(aor_envflag_on("yes"));
    assert_true(aor_envflag_on("true"));
    assert_true(aor_envflag_on("on"));
    assert_true(aor_envflag_on("00")); /* not exactly "0": on, as before */
    assert_true(aor_envflag_on("falsey"));
    assert_true(aor_envflag_on(" 1 "));
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_off_values),
        cmocka_unit_test(test_on_values),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
