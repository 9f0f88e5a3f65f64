/* Unit tests for daemon/sni.c: the SNI of real ClientHellos made by OpenSSL, split
 * records, truncation and malformed input. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "sni.h"

#include <openssl/bio.h>
#include <openssl/ssl.h>
#include <string.h>

/* A ClientHello as OpenSSL's client writes it, with SNI `name` (NULL: none). */
static size_t make_hello(const char *name, unsigned char *out, size_t cap) {
    SSL_CTX *ctx = SSL_CTX_new(TLS_client_method());
    SSL *ssl = SSL_new(ctx);
    BIO *rb = BIO_new(BIO_s_mem()), *wb = BIO_new(BIO_s_mem());
    SSL_set_bio(ssl, rb, wb);
    if (name)
        SSL_set_tlsext_host_name(ssl, name);
    SSL_set_connect_state(ssl);
    SSL_do_handshake(ssl);
    int n = BIO_read(wb, out, (int)cap);
    SSL_free(ssl);
    SSL_CTX_free(ctx);
    assert_true(n > 0);
    return (size_t)n;
}

static void test_real_hello(void **state) {
    unsigned char buf[8192];
    char host[254];
    size_t n = make_hello("API.OpenAI.com", buf, sizeof buf);
    assert_int_equal(aor_sni_parse(buf, n, host, sizeof host), 1);
    assert_string_equal(host, "api.openai.com");
}

static void test_no_sni(void **state) {
    unsigned char buf[8192];
    char host[254];
    size_t n = make_hello(NULL, buf, sizeof buf);
    assert_int_equal(aor_sni_parse(buf, n, host, sizeof host), 0);
}

static void test_needs_more(void **state) {
    unsigned char buf[8192];
    char host[254];
    size_t n = make_hello("api.anthropic.com", buf, sizeof buf);
    for (size_t cut = 1; cut < n; cut += 7)
        assert_int_equal(aor_sni_parse(buf, cut, host, sizeof host), -2);
}

static void test_split_records(void **state) {
    unsigned char buf[8192], split[8300];
    char host[254];
    size_t n = make_hello("openrouter.ai", buf, sizeof buf);
    /* Re-frame the handshake into two records of the same type. */
    size_t body = n - 5, first = 40;
    memcpy(split, buf, 5);
    split[3] = (unsigned char)(first >> 8);
    split[4] = (unsigned char)first;
    memcpy(split + 5, buf + 5, first);
    memcpy(split + 5 + first, buf, 5);
    split[5 + first + 3] = (unsigned char)((body - first) >> 8);
    split[5 + first + 4] = (unsigned char)(body - first);
    memcpy(split + 10 + first, buf + 5 + first, body - first);
    assert_int_equal(aor_sni_parse(split, n + 5, host, sizeof host), 1);
    assert_string_equal(host, "openrouter.ai");
}

static void test_malformed(void **state) {
    unsigned char buf[8192];
    char host[254], tiny[4];
    assert_int_equal(
        aor_sni_parse((const unsigned char *)"GET / HTTP/1.1\r\n", 16, host, sizeof host), -1);
    size_t n = make_hello("api.openai.com", buf, sizeof buf);
    assert_int_equal(aor_sni_parse(buf, n, tiny, sizeof tiny), -1); /* name too long */
    buf[5] = 0x02;                                                  /* not a ClientHello */
    assert_int_equal(aor_sni_parse(buf, n, host, sizeof host), -1);
    unsigned char bad[5] = {0x16, 0x03, 0x01, 0xff, 0xff}; /* record too long */
    assert_int_equal(aor_sni_parse(bad, sizeof bad, host, sizeof host), -1);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_real_hello), cmocka_unit_test(test_no_sni),
        cmocka_unit_test(test_needs_more), cmocka_unit_test(test_split_records),
        cmocka_unit_test(test_malformed),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
