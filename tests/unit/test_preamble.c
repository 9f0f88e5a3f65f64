/* Unit tests: common/preamble.c (spec §7 shim -> daemon preamble). */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "preamble.h"

static int parse_str(const char *s, aor_preamble *out, const char **err) {
    return aor_preamble_parse(s, strlen(s), out, err);
}

static void test_round_trip_ipv4(void **state) {
    char buf[AOR_PREAMBLE_MAX + 1];
    aor_preamble p;
    const char *err = NULL;
    int n = aor_preamble_format(buf, sizeof(buf), "api.openai.com", "162.159.140.245", 443);
    assert_int_equal(n, (int)strlen("AOR/1 api.openai.com 162.159.140.245 443\n"));
    assert_string_equal(buf, "AOR/1 api.openai.com 162.159.140.245 443\n");
    assert_int_equal(aor_preamble_parse(buf, (size_t)n, &p, &err), n);
    assert_string_equal(p.host, "api.openai.com");
    assert_string_equal(p.ip, "162.159.140.245");
    assert_int_equal(p.port, 443);
}

static void test_round_trip_ipv6_no_host(void **state) {
    char buf[AOR_PREAMBLE_MAX + 1];
    aor_preamble p;
    int n = aor_preamble_format(buf, sizeof(buf), NULL, "2606:4700::6810:1", 8443);
    assert_string_equal(buf, "AOR/1 - 2606:4700::6810:1 8443\n");
    assert_int_equal(aor_preamble_parse(buf, (size_t)n, &p, NULL), n);
    assert_string_equal(p.host, "");
    assert_string_equal(p.ip, "2606:4700::6810:1");
    assert_int_equal(p.port, 8443);
    /* "" means "-" too */
    n = aor_preamble_format(buf, sizeof(buf), "", "1.2.3.4", 1);
    assert_string_equal(buf, "AOR/1 - 1.2.3.4 1\n");
}

static void test_client_bytes_follow(void **state) {
    /* A TLS ClientHello follows the line: only the line is consumed. */
    static const char data[] = "AOR/1 api.anthropic.com 1.2.3.4 443\n\x16\x03\x01\x02\x00";
    aor_preamble p;
    int n = aor_preamble_parse(data, sizeof(data) - 1, &p, NULL);
    assert_int_equal(n, (int)strlen("AOR/1 api.anthropic.com 1.2.3.4 443\n"));
    assert_string_equal(p.host, "api.anthropic.com");
}

static void test_need_more(void **state) {
    aor_preamble p;
    const char *err = NULL;
    assert_int_equal(parse_str("", &p, &err), 0);
    assert_int_equal(parse_str("AOR", &p, &err), 0);
    assert_int_equal(parse_str("AOR/1 api.openai.com 1.2.3.4 443", &p, &err), 0);
    char buf[AOR_PREAMBLE_MAX];
    memset(buf, 'a', sizeof(buf));
    memcpy(buf, "AOR/1 ", 6);
    assert_int_equal(aor_preamble_parse(buf, AOR_PREAMBLE_MAX - 1, &p, &err), 0);
}

static void test_bad_magic(void **state) {
    aor_preamble p;
    const char *err = NULL;
    assert_int_equal(parse_str("GET / HTTP/1.1\r\n", &p, &err), -1);
    assert_non_null(strstr(err, "magic"));
    err = NULL;
    assert_int_equal(parse_str("AOX", &p, &err), -1); /* known bad before the newline */
    assert_non_null(strstr(err, "magic"));
    assert_int_equal(parse_str("AOR/2 h 1.2.3.4 443\n", &p, &err), -1);
    assert_int_equal(parse_str("\x16\x03\x01", &p, &err), -1);
}

static void test_too_long(void **state) {
    aor_preamble p;
    const char *err = NULL;
    char buf[400];
    memset(buf, 'a', sizeof(buf));
    memcpy(buf, "AOR/1 ", 6);
    assert_int_equal(aor_preamble_parse(buf, sizeof(buf), &p, &err), -1);
    assert_non_null(strstr(err, "too long"));
    /* exactly AOR_PREAMBLE_MAX bytes without a newline is already too long */
    assert_int_equal(aor_preamble_parse(buf, AOR_PREAMBLE_MAX, &p, &err), -1);
}

static void test_host_limits(void **state) {
    char host[300], line[400];
    aor_preamble p;
    const char *err = NULL;
    memset(host, 'h', sizeof(host));
    host[AOR_HOST_MAX] = '\0';
    snprintf(line, sizeof(line), "AOR/1 %s 1.2.3.4 443\n", host);
    assert_int_equal(parse_str(line, &p, &err), (int)strlen(line));
    assert_int_equal(strlen(p.host), AOR_HOST_MAX);
    host[AOR_HOST_MAX] = 'h';
    host[AOR_HOST_MAX + 1] = '\0';
    snprintf(line, sizeof(line), "AOR/1 %s 1.2.3.4 443\n", host);
    assert_int_equal(parse_str(line, &p, &err), -1);
    assert_non_null(strstr(err, "host"));
    /* spaces in a host make five fields */
    assert_int_equal(parse_str("AOR/1 api openai.com 1.2.3.4 443\n", &p, &err), -1);
    assert_int_equal(parse_str("AOR/1  1.2.3.4 443\n", &p, &err), -1);     /* empty host */
    assert_int_equal(parse_str("AOR/1 a\tb 1.2.3.4 443\n", &p, &err), -1); /* control */
    assert_int_equal(parse_str("AOR/1 a/b 1.2.3.4 443\n", &p, &err), -1);  /* slash */
    static const char nul[] = "AOR/1 a\0b 1.2.3.4 443\n";
    assert_int_equal(aor_preamble_parse(nul, sizeof(nul) - 1, &p, &err), -1);
}

static void test_bad_ip(void **state) {
    aor_preamble p;
    const char *err = NULL;
    assert_int_equal(parse_str("AOR/1 h 999.1.1.1 443\n", &p, &err), -1);
    assert_non_null(strstr(err, "ip"));
    assert_int_equal(parse_str("AOR/1 h api.openai.com 443\n", &p, &err), -1);
    assert_int_equal(parse_str("AOR/1 h 1.2.3 443\n", &p, &err), -1);
    assert_int_equal(parse_str("AOR/1 h :::: 443\n", &p, &err), -1);
    assert_int_equal(parse_str("AOR/1 h  443\n", &p, &err), -1);
}

static void test_bad_port(void **state) {
    aor_preamble p;
    const char *err = NULL;
    static const char *const bad[] = {
        "AOR/1 h 1.2.3.4 0\n",     "AOR/1 h 1.2.3.4 65536\n",  "AOR/1 h 1.2.3.4 -1\n",
        "AOR/1 h 1.2.3.4 +443\n",  "AOR/1 h 1.2.3.4 44a\n",    "AOR/1 h 1.2.3.4 \n",
        "AOR/1 h 1.2.3.4 443\r\n", "AOR/1 h 1.2.3.4 999999\n", "AOR/1 h 1.2.3.4 443 x\n",
        "AOR/1 h 1.2.3.4\n",
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        err = NULL;
        assert_int_equal(parse_str(bad[i], &p, &err), -1);
        assert_non_null(err);
    }
    assert_int_equal(parse_str("AOR/1 h 1.2.3.4 65535\n", &p, &err), 22);
    assert_int_equal(p.port, 65535);
    assert_int_equal(parse_str("AOR/1 h 1.2.3.4 1\n", &p, &err), 18);
    assert_int_equal(p.port, 1);
}

/* The shared port parser: only the n bytes given count, 1..65535, digits only. */
static void test_port_parse(void **state) {
    assert_int_equal(aor_preamble_port_parse("443", 3), 443);
    assert_int_equal(aor_preamble_port_parse("4431", 3), 443);
    assert_int_equal(aor_preamble_port_parse("00080", 5), 80);
    assert_int_equal(aor_preamble_port_parse("65535", 5), 65535);
    assert_int_equal(aor_preamble_port_parse("65536", 5), -1);
    assert_int_equal(aor_preamble_port_parse("0", 1), -1);
    assert_int_equal(aor_preamble_port_parse("", 0), -1);
    assert_int_equal(aor_preamble_port_parse("000443", 6), -1);
    assert_int_equal(aor_preamble_port_parse("+443", 4), -1);
    assert_int_equal(aor_preamble_port_parse(" 443", 4), -1);
    assert_int_equal(aor_preamble_port_parse(NULL, 3), -1);
}

static void test_format_errors(void **state) {
    char buf[AOR_PREAMBLE_MAX + 1];
    errno = 0;
    assert_int_equal(aor_preamble_format(buf, sizeof(buf), "h", "1.2.3.4", 0), -1);
    assert_int_equal(errno, EINVAL);
    errno = 0;
    assert_int_equal(aor_preamble_format(buf, sizeof(buf), "h", "1.2.3.4", 65536), -1);
    assert_int_equal(errno, EINVAL);
    errno = 0;
    assert_int_equal(aor_preamble_format(buf, sizeof(buf), "h", "not-an-ip", 443), -1);
    assert_int_equal(errno, EINVAL);
    errno = 0;
    assert_int_equal(aor_preamble_format(buf, sizeof(buf), "a b", "1.2.3.4", 443), -1);
    assert_int_equal(errno, EINVAL);
    errno = 0;
    assert_int_equal(aor_preamble_format(buf, 10, "h", "1.2.3.4", 443), -1);
    assert_int_equal(errno, ENOSPC);
    /* exactly enough room */
    assert_int_equal(aor_preamble_format(buf, 21, "h", "1.2.3.4", 443), 20);
    assert_int_equal(aor_preamble_format(buf, 20, "h", "1.2.3.4", 443), -1);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_round_trip_ipv4),
        cmocka_unit_test(test_round_trip_ipv6_no_host),
        cmocka_unit_test(test_client_bytes_follow),
        cmocka_unit_test(test_need_more),
        cmocka_unit_test(test_bad_magic),
        cmocka_unit_test(test_too_long),
        cmocka_unit_test(test_host_limits),
        cmocka_unit_test(test_bad_ip),
        cmocka_unit_test(test_bad_port),
        cmocka_unit_test(test_port_parse),
        cmocka_unit_test(test_format_errors),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
