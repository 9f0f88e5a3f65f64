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

/* pair64 = XXH3-64 of a || 0x00 || b; the values are what `printf 'a\0b' | xxhsum -H3`
 * (Debian package xxhash) prints. */
static void test_pair64_known_values(void **state) {
    assert_true(aor_hash_pair64("a", "b") == UINT64_C(0xd5a06cd078125351));
    assert_true(aor_hash_pair64("client", "openai/k1") == UINT64_C(0x75ff0a9d1ba9753a));
    assert_true(aor_hash_pair64("", "") == UINT64_C(0xc44bdff4074eecdb));
    assert_true(aor_hash_pair64(NULL, NULL) == UINT64_C(0xc44bdff4074eecdb));
    /* Around and past 256 bytes (hashed in one piece from the stack up to there, streamed
     * beyond): 'c' x 255 || 0x00; 'c' x 200 || 0x00 || 'k' x 55 (256) and x 56 (257);
     * 'c' x 300 || 0x00 || "openai/k1". */
    char c[301], k[57];
    memset(c, 'c', sizeof c - 1);
    memset(k, 'k', sizeof k - 1);
    k[56] = '\0';
    c[255] = '\0';
    assert_true(aor_hash_pair64(c, "") == UINT64_C(0xb1ed12237bbabbd8));
    c[255] = 'c';
    c[200] = '\0';
    assert_true(aor_hash_pair64(c, k + 1) == UINT64_C(0x2847e471f06ef20d));
    assert_true(aor_hash_pair64(c, k) == UINT64_C(0xfc43fb8c96b3392d));
    c[200] = 'c';
    c[300] = '\0';
    assert_true(aor_hash_pair64(c, "openai/k1") == UINT64_C(0x890c4f704d5652e1));
}

/* The separator keeps ("ab","c") and ("a","bc") apart; results are stable. */
static void test_pair64_separator_and_stability(void **state) {
    assert_true(aor_hash_pair64("ab", "c") != aor_hash_pair64("a", "bc"));
    assert_true(aor_hash_pair64("x", "y") == aor_hash_pair64("x", "y"));
    assert_true(aor_hash_pair64("x", "y") != aor_hash_pair64("y", "x"));
}

/* pair64_many gives aor_hash_pair64(a, b[i]) bit for bit, whatever the lengths: a short,
 * a 64-digit client id, a || 0x00 || b on both sides of the 256 bytes hashed from the
 * stack (a alone fitting or not); b empty, NULL and long. */
static void test_pair64_many_matches_pair64(void **state) {
    char a[300], longb[150];
    const size_t alens[] = {0, 1, 55, 63, 64, 65, 106, 107, 128, 199, 254, 255, 256, 299};
    memset(a, 'c', sizeof a);
    memset(longb, 'k', sizeof longb - 1);
    longb[sizeof longb - 1] = '\0';
    const char *bs[] = {"openai/k1", "",         NULL,
                        "p/k",       longb,      "anthropic/client-0123456789ab",
                        longb + 100, "openai/k1"};
    const size_t nb = sizeof bs / sizeof bs[0];
    uint64_t out[sizeof bs / sizeof bs[0]];

    for (size_t i = 0; i < sizeof alens / sizeof alens[0]; i++) {
        char prefix[sizeof a + 1];
        memcpy(prefix, a, alens[i]);
        prefix[alens[i]] = '\0';
        aor_hash_pair64_many(prefix, bs, nb, out);
        for (size_t j = 0; j < nb; j++) {
            if (out[j] != aor_hash_pair64(prefix, bs[j]))
                fail_msg("a of %zu bytes, b #%zu: %016llx", alens[i], j,
                         (unsigned long long)out[j]);
        }
        /* The same b gives the same hash within one call. */
        assert_true(out[0] == out[nb - 1]);
    }
    /* Known value, NULL a, and a client id as the daemon makes it. */
    const char *one[] = {"openai/k1"};
    aor_hash_pair64_many("client", one, 1, out);
    assert_true(out[0] == UINT64_C(0x75ff0a9d1ba9753a));
    const char *empty[] = {""};
    aor_hash_pair64_many(NULL, empty, 1, out);
    assert_true(out[0] == UINT64_C(0xc44bdff4074eecdb));
    char id[65];
    aor_hash_sha256_hex("sk-test", 7, id);
    aor_hash_pair64_many(id, bs, nb, out);
    for (size_t j = 0; j < nb; j++)
        assert_true(out[j] == aor_hash_pair64(id, bs[j]));
    /* Plain hashes in between use the same per-thread context: still right after. */
    char hex[65];
    aor_hash_sha256_hex("abc", 3, hex);
    assert_string_equal(hex, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
    /* n == 0 writes nothing. */
    out[0] = 42;
    aor_hash_pair64_many(id, bs, 0, out);
    assert_true(out[0] == 42);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_sha256_known_vectors),
        cmocka_unit_test(test_sha256_of_credential),
        cmocka_unit_test(test_sha256_uses_len),
        cmocka_unit_test(test_pair64_known_values),
        cmocka_unit_test(test_pair64_separator_and_stability),
        cmocka_unit_test(test_pair64_many_matches_pair64),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
