/* Unit tests for common/utf8.c (RFC 3629 validity, U+FFFD replacement). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "utf8.h"

static size_t seq(const char *s, unsigned *cp) {
    return aor_utf8_seq(s, strlen(s), cp);
}

static void test_valid_sequences(void **state) {
    unsigned cp = 0;
    assert_int_equal(seq("A", &cp), 1);
    assert_int_equal(cp, 0x41);
    assert_int_equal(seq("\xc2\xa0", &cp), 2);
    assert_int_equal(cp, 0xa0);
    assert_int_equal(seq("\xc3\xa9", &cp), 2); /* é */
    assert_int_equal(cp, 0xe9);
    assert_int_equal(seq("\xe2\x82\xac", &cp), 3); /* € */
    assert_int_equal(cp, 0x20ac);
    assert_int_equal(seq("\xef\xbf\xbd", &cp), 3);
    assert_int_equal(cp, 0xfffd);
    assert_int_equal(seq("\xf0\x9f\x98\x80", &cp), 4); /* U+1F600 */
    assert_int_equal(cp, 0x1f600);
    assert_int_equal(seq("\xf4\x8f\xbf\xbf", &cp), 4);
    assert_int_equal(cp, 0x10ffff);
    assert_true(aor_utf8_valid("caf\xc3\xa9 \xe2\x82\xac", 9));
    assert_true(aor_utf8_valid("", 0));
}

static void test_invalid_sequences(void **state) {
    static const char *const bad[] = {
        "\xe9",             /* Latin-1 é */
        "\x80",             /* stray continuation */
        "\xc0\xaf",         /* overlong '/' */
        "\xc1\xbf",         /* overlong */
        "\xe0\x80\xaf",     /* overlong, 3 bytes */
        "\xf0\x80\x80\xaf", /* overlong, 4 bytes */
        "\xed\xa0\x80",     /* surrogate U+D800 */
        "\xed\xbf\xbf",     /* surrogate U+DFFF */
        "\xf4\x90\x80\x80", /* above U+10FFFF */
        "\xf5\x80\x80\x80", /* lead byte F5 */
        "\xff",
        "\xc3",         /* cut */
        "\xe2\x82",     /* cut */
        "\xc3\x41",     /* continuation missing */
        "\xe2\x82\x41", /* continuation missing */
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        assert_int_equal(seq(bad[i], NULL), 0);
        assert_false(aor_utf8_valid(bad[i], strlen(bad[i])));
    }
    /* n limits what may be read: a sequence cut by n is not valid */
    assert_int_equal(aor_utf8_seq("\xe2\x82\xac", 2, NULL), 0);
    assert_int_equal(aor_utf8_seq("A", 0, NULL), 0);
    assert_int_equal(aor_utf8_seq(NULL, 3, NULL), 0);
}

static void test_sanitize(void **state) {
    char *s = aor_utf8_sanitize("caf\xe9 ok");
    assert_non_null(s);
    assert_string_equal(s, "caf\xef\xbf\xbd ok");
    free(s);
    s = aor_utf8_sanitize("\xc3\xa9\xed\xa0\x80\xc3");
    assert_non_null(s);
    assert_string_equal(s, "\xc3\xa9\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd");
    assert_true(aor_utf8_valid(s, strlen(s)));
    free(s);
    s = aor_utf8_sanitize("plain");
    assert_non_null(s);
    assert_string_equal(s, "plain");
    free(s);
    assert_null(aor_utf8_sanitize(NULL));
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_valid_sequences),
        cmocka_unit_test(test_invalid_sequences),
        cmocka_unit_test(test_sanitize),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
