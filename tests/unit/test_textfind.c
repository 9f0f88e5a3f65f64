/* aor_text_find (common/textfind.c) against glibc's memmem: the same answer for needles
 * at every offset around the 16-byte blocks, near misses, repeats and random text. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "textfind.h"

static void same_as_memmem(const char *t, size_t len, const char *n, size_t nl) {
    const char *want = memmem(t, len, n, nl);
    const char *got = aor_text_find(t, len, n, nl);
    if (nl == 0)
        want = NULL; /* memmem finds the empty needle at 0; ours says there is none */
    if (got != want)
        fail_msg("len %zu needle %zu: got offset %td, want %td", len, nl, got ? got - t : -1,
                 want ? want - t : -1);
}

/* The needle placed at every offset of texts 1..80 bytes long, in copies that end where
 * the text ends (no byte after it to read), and with its last byte changed. */
static void test_every_offset(void **state) {
    const char key[] = "sk-test-raw-upstream";
    size_t kl = sizeof key - 1;
    for (size_t len = 1; len <= 80; len++) {
        for (size_t off = 0; off + kl <= len; off++) {
            char *t = malloc(len);
            assert_non_null(t);
            memset(t, 's', len);
            memcpy(t + off, key, kl);
            same_as_memmem(t, len, key, kl);
            assert_ptr_equal(aor_text_find(t, len, key, kl), t + off);
            t[off + kl - 1] = 'x'; /* first byte right, last wrong */
            same_as_memmem(t, len, key, kl);
            t[off + kl - 1] = 'm';
            t[off + 5] = 'X'; /* first and last right, middle wrong */
            same_as_memmem(t, len, key, kl);
            free(t);
        }
        char *t = malloc(len);
        assert_non_null(t);
        memset(t, 'a', len);
        same_as_memmem(t, len, key, kl); /* shorter than the key, or no match */
        free(t);
    }
}

static void test_small_needles_and_edges(void **state) {
    const char *t = "abcabcabd";
    assert_ptr_equal(aor_text_find(t, 9, "abd", 3), t + 6);
    assert_ptr_equal(aor_text_find(t, 9, "d", 1), t + 8);
    assert_ptr_equal(aor_text_find(t, 9, "ca", 2), t + 2);
    assert_null(aor_text_find(t, 9, "", 0));
    assert_null(aor_text_find(t, 2, "abc", 3));
    assert_null(aor_text_find(t, 9, "abe", 3));
    assert_ptr_equal(aor_text_find(t, 9, t, 9), t);
}

/* Random text over a small alphabet (many near misses) against memmem. */
static void test_random_against_memmem(void **state) {
    uint64_t x = 0x9e3779b97f4a7c15ull;
    char text[300], needle[40];
    for (int round = 0; round < 200000; round++) {
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        size_t len = x % sizeof text, nl = 1 + (x >> 20) % 12;
        for (size_t i = 0; i < len; i++) {
            x ^= x << 13, x ^= x >> 7, x ^= x << 17;
            text[i] = (char)('a' + x % 3);
        }
        for (size_t i = 0; i < nl; i++) {
            x ^= x << 13, x ^= x >> 7, x ^= x << 17;
            needle[i] = (char)('a' + x % 3);
        }
        same_as_memmem(text, len, needle, nl);
    }
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_every_offset),
        cmocka_unit_test(test_small_needles_and_edges),
        cmocka_unit_test(test_random_against_memmem),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
