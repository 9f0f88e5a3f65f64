/* Unit tests: shim/addrmap.c (per-process record of resolved addresses, spec §2 step 1). */
#include <errno.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "addrmap.h"
#include "ipaddr.h"

static aor_ip ip_of(const char *text) {
    aor_ip ip;
    assert_int_equal(aor_ip_parse(text, strlen(text), &ip), 0);
    return ip;
}

static void test_record_lookup(void **state) {
    aor_addrmap *m = aor_addrmap_new(8);
    char host[254];
    int syn = -1;
    aor_ip a = ip_of("162.159.140.245"), b = ip_of("2606:4700::1");
    assert_int_equal(aor_addrmap_lookup(m, &a, host, sizeof(host), &syn), 0);
    assert_int_equal(aor_addrmap_record(m, &a, "api.openai.com", 0), 0);
    assert_int_equal(aor_addrmap_record(m, &b, "api.openai.com", 0), 0);
    assert_int_equal(aor_addrmap_lookup(m, &a, host, sizeof(host), &syn), 1);
    assert_string_equal(host, "api.openai.com");
    assert_int_equal(syn, 0);
    assert_int_equal(aor_addrmap_lookup(m, &b, host, sizeof(host), NULL), 1);
    /* an IPv4-mapped IPv6 address is the same address */
    aor_ip mapped = ip_of("::ffff:162.159.140.245");
    assert_int_equal(aor_addrmap_lookup(m, &mapped, host, sizeof(host), NULL), 1);
    /* recording again is not a new entry */
    assert_int_equal(aor_addrmap_record(m, &a, "api.openai.com", 0), 0);
    assert_int_equal(aor_addrmap_count(m), 2);
    /* a small buffer gets a cut name, still terminated */
    char tiny[4];
    assert_int_equal(aor_addrmap_lookup(m, &a, tiny, sizeof(tiny), NULL), 1);
    assert_string_equal(tiny, "api");
    aor_addrmap_free(m);
}

static void test_ambiguous_and_synthetic(void **state) {
    aor_addrmap *m = aor_addrmap_new(8);
    char host[254];
    int syn = 0;
    aor_ip a = ip_of("1.1.1.1"), f = ip_of("198.18.3.4");
    aor_addrmap_record(m, &a, "one.test", 0);
    aor_addrmap_record(m, &a, "two.test", 0);
    assert_int_equal(aor_addrmap_lookup(m, &a, host, sizeof(host), NULL), 2);
    assert_string_equal(host, "");
    aor_addrmap_record(m, &f, "off.test", 1);
    assert_int_equal(aor_addrmap_lookup(m, &f, host, sizeof(host), &syn), 1);
    assert_int_equal(syn, 1);
    /* a resolver later returning the same address makes it a real one */
    aor_addrmap_record(m, &f, "off.test", 0);
    assert_int_equal(aor_addrmap_lookup(m, &f, host, sizeof(host), &syn), 1);
    assert_int_equal(syn, 0);
    aor_addrmap_free(m);
}

static void test_bounded(void **state) {
    aor_addrmap *m = aor_addrmap_new(4);
    char host[254];
    for (int i = 1; i <= 6; i++) {
        char text[32];
        snprintf(text, sizeof(text), "10.0.0.%d", i);
        aor_ip ip = ip_of(text);
        assert_int_equal(aor_addrmap_record(m, &ip, "h.test", 0), 0);
    }
    assert_int_equal(aor_addrmap_count(m), 4);
    aor_ip first = ip_of("10.0.0.1"), second = ip_of("10.0.0.2"), last = ip_of("10.0.0.6");
    assert_int_equal(aor_addrmap_lookup(m, &first, host, sizeof(host), NULL), 0);
    assert_int_equal(aor_addrmap_lookup(m, &second, host, sizeof(host), NULL), 0);
    assert_int_equal(aor_addrmap_lookup(m, &last, host, sizeof(host), NULL), 1);
    aor_addrmap_free(m);
}

static void test_bad_args(void **state) {
    aor_addrmap *m = aor_addrmap_new(4);
    aor_ip a = ip_of("1.2.3.4");
    char longname[300];
    memset(longname, 'a', sizeof(longname));
    longname[299] = '\0';
    errno = 0;
    assert_int_equal(aor_addrmap_record(m, &a, "", 0), -1);
    assert_int_equal(errno, EINVAL);
    assert_int_equal(aor_addrmap_record(m, &a, longname, 0), -1);
    assert_int_equal(aor_addrmap_record(NULL, &a, "h", 0), -1);
    assert_null(aor_addrmap_new(0));
    assert_int_equal(aor_addrmap_lookup(NULL, &a, NULL, 0, NULL), 0);
    aor_addrmap_free(m);
}

static aor_addrmap *g_shared;

static void *worker(void *arg) {
    int id = (int)(intptr_t)arg;
    char host[254], name[32], text[32];
    snprintf(name, sizeof(name), "t%d.test", id);
    for (int i = 0; i < 200; i++) {
        snprintf(text, sizeof(text), "10.%d.%d.1", id, i);
        aor_ip ip;
        aor_ip_parse(text, strlen(text), &ip);
        aor_addrmap_record(g_shared, &ip, name, 0);
        if (aor_addrmap_lookup(g_shared, &ip, host, sizeof(host), NULL) == 1 &&
            strcmp(host, name) != 0)
            return (void *)1;
    }
    return NULL;
}

static void test_threads(void **state) {
    g_shared = aor_addrmap_new(256);
    pthread_t t[16];
    for (int i = 0; i < 16; i++)
        pthread_create(&t[i], NULL, worker, (void *)(intptr_t)i);
    int bad = 0;
    for (int i = 0; i < 16; i++) {
        void *r;
        pthread_join(t[i], &r);
        bad += r != NULL;
    }
    assert_int_equal(bad, 0);
    assert_int_equal(aor_addrmap_count(g_shared), 256);
    aor_addrmap_free(g_shared);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_record_lookup), cmocka_unit_test(test_ambiguous_and_synthetic),
        cmocka_unit_test(test_bounded),       cmocka_unit_test(test_bad_args),
        cmocka_unit_test(test_threads),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
