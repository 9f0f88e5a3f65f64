/* Unit tests for common/hash.c (spec §5.1 client identity, §5.2 tie-breaking). */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <string.h>

#include "hash.h"

/* FIPS 180-2 test vectors. */
static void test_sha256_known_vectors(void **state) {
    char out[65];
    aor_hash_sha256_hex("abc", 3, out);
    assert_string_equal(out, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
    aor_hash_sha256_hex("", 0, out);
    assert_string_equal(out, "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
    aor_hash_sha256_hex(NULL, 0, out);
    assert_string_equal(out, "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
    aor_hash_sha256_hex("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq", 56, out);
    assert_string_equal(out, "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
}

/* A client's credential becomes a hex id, never the credential itself. */
static void test_sha256_of_credential(void **state) {
    char out[65];
    const char *cred = "sk-test";
    aor_hash_sha256_hex(cred, strlen(cred), out);
    assert_int_equal(strlen(out), 64);
    assert_string_equal(out, "f3abf2a6cc4f00987743db5f544ba345b4899ae31f326d8ee9c4816de153c9e0");
    assert_null(strstr(out, cred));
}

/* Length is honoured: bytes after len do not count, embedded NULs do. */
static void test_sha256_uses_len(void **state) {
    char a[65], b[65];
    aor_hash_sha256_hex("abcXYZ", 3, a);
    aor_hash_sha256_hex("abc", 3, b);
    assert_string_equal(a, b);
    aor_hash_sha256_hex("a\0b", 3, a);
    aor_hash_sha256_hex("a", 1, b);
    assert_string_not_equal(a, b);
}

/* pair64 = first 8 bytes (big-endian) of SHA-256(a || 0x00 || b). */
static void test_pair64_known_values(void **state) {
    assert_true(aor_hash_pair64("a", "b") == UINT64_C(0x59b271ae1bbcb1d3));
    assert_true(aor_hash_pair64("client", "openai/k1") == UINT64_C(0x8adebe508a711c1a));
    assert_true(aor_hash_pair64("", "") == UINT64_C(0x6e340b9cffb37a98));
    assert_true(aor_hash_pair64(NULL, NULL) == UINT64_C(0x6e340b9cffb37a98));
}

/* The separator keeps ("ab","c") and ("a","bc") apart; results are stable. */
static void test_pair64_separator_and_stability(void **state) {
    assert_true(aor_hash_pair64("ab", "c") != aor_hash_pair64("a", "bc"));
    assert_true(aor_hash_pair64("x", "y") == aor_hash_pair64("x", "y"));
    assert_true(aor_hash_pair64("x", "y") != aor_hash_pair64("y", "x"));
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_sha256_known_vectors),
        cmocka_unit_test(test_sha256_of_credential),
        cmocka_unit_test(test_sha256_uses_len),
        cmocka_unit_test(test_pair64_known_values),
        cmocka_unit_test(test_pair64_separator_and_stability),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
