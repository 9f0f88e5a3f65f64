/* Unit tests for daemon/sni.c: the SNI of real ClientHellos made by OpenSSL, split
 * records, hellos over one record, truncation and malformed input; the Host header of
 * plain HTTP request heads. */
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

static unsigned char g_pad[65535];
static size_t g_pad_len;

static int add_pad(SSL *s, unsigned int ext_type, const unsigned char **out, size_t *outlen,
                   int *al, void *arg) {
    *out = g_pad;
    *outlen = g_pad_len;
    return 1;
}

/* make_hello with an extra extension of pad bytes (a GREASE type, RFC 8701): a hello
 * over several records, as post-quantum key shares and many PSK identities make. */
static size_t make_big_hello(const char *name, size_t pad, unsigned char *out, size_t cap) {
    SSL_CTX *ctx = SSL_CTX_new(TLS_client_method());
    g_pad_len = pad;
    assert_int_equal(SSL_CTX_add_client_custom_ext(ctx, 0xfafa, add_pad, NULL, NULL, NULL, NULL),
                     1);
    SSL *ssl = SSL_new(ctx);
    BIO *rb = BIO_new(BIO_s_mem()), *wb = BIO_new(BIO_s_mem());
    SSL_set_bio(ssl, rb, wb);
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

static void test_hello_over_one_record(void **state) {
    static unsigned char buf[80000];
    char host[254];
    /* ~20 KiB: two records, read to the SNI (QA: over 16 KiB was "no SNI"). */
    size_t n = make_big_hello("api.openai.com", 20000, buf, sizeof buf);
    assert_true(n > 16 * 1024 + 5);
    assert_int_equal(aor_sni_parse(buf, n, host, sizeof host), 1);
    assert_string_equal(host, "api.openai.com");
    for (size_t cut = 1; cut < n; cut += 997)
        assert_int_equal(aor_sni_parse(buf, cut, host, sizeof host), -2);
    /* Over AOR_SNI_MAX_HELLO: no decision possible, -1 (aord passes it through). */
    /* The largest extension OpenSSL still sends (the extensions' length field is 16 bits):
     * a handshake message over 64 KiB. */
    for (size_t pad = 65530; (n = make_big_hello("api.openai.com", pad, buf, sizeof buf)) < 1000;
         pad -= 10)
        ;
    size_t hs_len = ((size_t)buf[6] << 16 | (size_t)buf[7] << 8 | buf[8]) + 4;
    assert_true(hs_len > AOR_SNI_MAX_HELLO);
    assert_int_equal(aor_sni_parse(buf, n, host, sizeof host), -1);
    /* decided as soon as the handshake header shows the length */
    assert_int_equal(aor_sni_parse(buf, 9, host, sizeof host), -1);
    assert_int_equal(aor_sni_parse(buf, 8, host, sizeof host), -2);
}

static int http_host(const char *head, char *host, size_t hostlen) {
    return aor_sni_http_host(head, strlen(head), host, hostlen);
}

static void test_http_host(void **state) {
    char host[254];
    const char *req = "GET /v1/models HTTP/1.1\r\nAccept: */*\r\nHost: Example.ORG:8080\r\n"
                      "User-Agent: t\r\n\r\n";
    assert_int_equal(http_host(req, host, sizeof host), 1);
    assert_string_equal(host, "example.org");
    /* Every prefix before the Host line ends needs more. */
    size_t end = (size_t)(strstr(req, "8080") - req) + 4 + 2;
    for (size_t cut = 0; cut < end; cut++)
        assert_int_equal(aor_sni_http_host(req, cut, host, sizeof host), -2);
    assert_int_equal(aor_sni_http_host(req, end, host, sizeof host), 1);
    assert_int_equal(http_host("POST /x HTTP/1.0\nhost:  api.openai.com \n\n", host, sizeof host),
                     1);
    assert_string_equal(host, "api.openai.com");
    assert_int_equal(http_host("GET / HTTP/1.1\r\nHost: [::1]:443\r\n\r\n", host, sizeof host), 1);
    assert_string_equal(host, "::1");
    assert_int_equal(http_host("GET / HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n", host, sizeof host), 1);
    assert_string_equal(host, "127.0.0.1");
    assert_int_equal(http_host("GET / HTTP/1.1\r\nHost: a.b:\r\n\r\n", host, sizeof host), 1);
    assert_string_equal(host, "a.b");
    /* The head ends without a Host field. */
    assert_int_equal(
        http_host("GET / HTTP/1.0\r\nAccept: */*\r\n\r\nHost: x\r\n", host, sizeof host), 0);
}

static void test_http_host_bad(void **state) {
    char host[254], tiny[4];
    const char *bad[] = {
        "\x16\x03\x01",                                /* not text */
        "SSH-2.0-OpenSSH_9.6\r\n",                     /* not a request line */
        "GET /\r\nHost: a\r\n\r\n",                    /* HTTP/0.9 */
        "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n",            /* HTTP/2 preface */
        "GET / HTTP/1.1\r\nX-A: 1\r\n folded\r\n\r\n", /* obsolete folding */
        "GET / HTTP/1.1\r\nHost : a\r\n\r\n",          /* space before colon */
        "GET / HTTP/1.1\r\nno colon\r\n\r\n",          /* no colon */
        "GET / HTTP/1.1\r\nHost: \r\n\r\n",            /* empty */
        "GET / HTTP/1.1\r\nHost: a/b\r\n\r\n",         /* not a host */
        "GET / HTTP/1.1\r\nHost: a b\r\n\r\n",         /* not a host */
        "GET / HTTP/1.1\r\nHost: a:8x\r\n\r\n",        /* bad port */
        "GET / HTTP/1.1\r\nHost: a:123456\r\n\r\n",    /* bad port */
        "GET / HTTP/1.1\r\nHost: [::1\r\n\r\n",        /* unclosed bracket */
        "GET / HTTP/1.1\r\nHost: []\r\n\r\n",          /* empty literal */
        "GET / HTTP/1.1\r\nHost: [::1]x\r\n\r\n",      /* junk after literal */
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        assert_int_equal(http_host(bad[i], host, sizeof host), -1);
    assert_int_equal(http_host("GET / HTTP/1.1\r\nHost: abcd\r\n\r\n", tiny, sizeof tiny), -1);
    /* No Host within AOR_SNI_MAX_HTTP_HEAD bytes: -1, below it: need more. */
    static char big[AOR_SNI_MAX_HTTP_HEAD + 100];
    memset(big, 'a', sizeof big);
    memcpy(big, "GET / HTTP/1.1\r\nX: ", 20);
    assert_int_equal(aor_sni_http_host(big, AOR_SNI_MAX_HTTP_HEAD - 1, host, sizeof host), -2);
    assert_int_equal(aor_sni_http_host(big, AOR_SNI_MAX_HTTP_HEAD, host, sizeof host), -1);
    assert_int_equal(aor_sni_http_host(big, sizeof big, host, sizeof host), -1);
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
        cmocka_unit_test(test_malformed),  cmocka_unit_test(test_hello_over_one_record),
        cmocka_unit_test(test_http_host),  cmocka_unit_test(test_http_host_bad),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
