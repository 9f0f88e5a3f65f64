/* Unit tests: shim/hostlist.c (built-in list, AOR_HOSTS parsing; spec §2, §9). */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "hostlist.h"

static int find(const aor_hostlist *l, const char *name) {
    return aor_hostlist_find(l, name, strlen(name));
}

static void test_builtin(void **state) {
    static const char *const want[] = {
        "api.openai.com",   "api.anthropic.com", "generativelanguage.googleapis.com",
        "openrouter.ai",    "api.mistral.ai",    "api.groq.com",
        "api.deepseek.com", "api.x.ai",          "api.together.xyz",
        "api.fireworks.ai",
    };
    aor_hostlist *l = aor_hostlist_builtin();
    assert_non_null(l);
    assert_int_equal(aor_hostlist_count(l), 10);
    for (size_t i = 0; i < 10; i++) {
        int k = find(l, want[i]);
        assert_true(k >= 0);
        assert_int_equal(aor_hostlist_port(l, (size_t)k), 0);
    }
    /* case and the fully qualified form match; look-alikes do not */
    assert_true(find(l, "API.OpenAI.com.") >= 0);
    assert_int_equal(find(l, "openai.com"), -1);
    assert_int_equal(find(l, "xapi.openai.com"), -1);
    assert_int_equal(find(l, "api.openai.com.evil.test"), -1);
    assert_int_equal(find(l, ""), -1);
    assert_int_equal(aor_hostlist_find(l, "api.openai.comXYZ", 14), find(l, "api.openai.com"));
    aor_hostlist_free(l);
}

static void test_parse_entries(void **state) {
    int nbad = -1;
    aor_hostlist *l =
        aor_hostlist_parse(" a.example , B.Example:8443,bad host,,x.test:0,y.test:65536,"
                           "z.test:abc, a.example:9999 ,w.test:",
                           &nbad);
    assert_non_null(l);
    assert_int_equal(aor_hostlist_count(l), 3);
    assert_string_equal(aor_hostlist_name(l, 0), "a.example");
    assert_int_equal(aor_hostlist_port(l, 0), 0);
    assert_string_equal(aor_hostlist_name(l, 1), "b.example");
    assert_int_equal(aor_hostlist_port(l, 1), 8443);
    /* a name may come with several ports */
    assert_int_equal(find(l, "a.example"), 0);
    assert_true(aor_hostlist_has_port(l, "A.example", 9, 9999));
    assert_true(aor_hostlist_has_port(l, "b.example", 9, 8443));
    assert_false(aor_hostlist_has_port(l, "b.example", 9, 9999));
    assert_false(aor_hostlist_has_port(l, "c.example", 9, 8443));
    /* bad host, empty, port 0, port 65536, port abc, empty port */
    assert_int_equal(nbad, 6);
    assert_int_equal(find(l, "api.openai.com"), -1); /* overrides the built-in list */
    aor_hostlist_free(l);
}

static void test_parse_blank_and_trailing(void **state) {
    int nbad = -1;
    aor_hostlist *l = aor_hostlist_parse("", &nbad);
    assert_non_null(l);
    assert_int_equal(aor_hostlist_count(l), 0);
    assert_int_equal(nbad, 0);
    aor_hostlist_free(l);
    l = aor_hostlist_parse("   ", &nbad);
    assert_int_equal(aor_hostlist_count(l), 0);
    assert_int_equal(nbad, 0);
    aor_hostlist_free(l);
    l = aor_hostlist_parse("one.test,", &nbad);
    assert_int_equal(aor_hostlist_count(l), 1);
    assert_int_equal(nbad, 1);
    aor_hostlist_free(l);
    l = aor_hostlist_parse(NULL, NULL);
    assert_int_equal(aor_hostlist_count(l), 0);
    aor_hostlist_free(l);
}

static void test_parse_bounded(void **state) {
    /* 300 entries: AOR_HOSTS_MAX kept, the rest counted as bad. */
    size_t cap = 300 * 16;
    char *spec = malloc(cap);
    assert_non_null(spec);
    size_t off = 0;
    for (int i = 0; i < 300; i++) {
        int n = snprintf(spec + off, cap - off, "%sh%d.test", i ? "," : "", i);
        assert_true(n > 0 && (size_t)n < cap - off);
        off += (size_t)n;
    }
    int nbad = 0;
    aor_hostlist *l = aor_hostlist_parse(spec, &nbad);
    assert_int_equal(aor_hostlist_count(l), AOR_HOSTS_MAX);
    assert_int_equal(nbad, 300 - AOR_HOSTS_MAX);
    assert_true(find(l, "h0.test") >= 0);
    assert_int_equal(find(l, "h299.test"), -1);
    aor_hostlist_free(l);
    free(spec);
}

static void test_normalize(void **state) {
    char out[300];
    assert_int_equal(aor_host_normalize("API.X.AI.", 9, out, sizeof(out)), 8);
    assert_string_equal(out, "api.x.ai");
    assert_int_equal(aor_host_normalize("", 0, out, sizeof(out)), -1);
    assert_int_equal(aor_host_normalize(".", 1, out, sizeof(out)), -1);
    assert_int_equal(aor_host_normalize("..", 2, out, sizeof(out)), -1);
    assert_int_equal(aor_host_normalize("a b", 3, out, sizeof(out)), -1);
    assert_int_equal(aor_host_normalize("a:b", 3, out, sizeof(out)), -1);
    assert_int_equal(aor_host_normalize("under_score-ok.test", 19, out, sizeof(out)), 19);
    char long_name[260];
    memset(long_name, 'a', sizeof(long_name));
    assert_int_equal(aor_host_normalize(long_name, 253, out, sizeof(out)), 253);
    assert_int_equal(aor_host_normalize(long_name, 254, out, sizeof(out)), -1);
    assert_int_equal(aor_host_normalize("abc", 3, out, 3), -1); /* no room for the NUL */
}

static void test_add(void **state) {
    aor_hostlist *l = aor_hostlist_new();
    assert_int_equal(aor_hostlist_add(l, "Mock.Test", 9, 8443), 0);
    assert_int_equal(aor_hostlist_add(l, "mock.test", 9, 8443), 0); /* exact duplicate */
    assert_int_equal(aor_hostlist_count(l), 1);
    assert_int_equal(aor_hostlist_add(l, "mock.test", 9, 9000), 0); /* another port */
    assert_int_equal(aor_hostlist_count(l), 2);
    assert_true(aor_hostlist_has_port(l, "mock.test", 9, 9000));
    assert_true(aor_hostlist_has_port(l, "mock.test", 9, 8443));
    errno = 0;
    assert_int_equal(aor_hostlist_add(l, "bad name", 8, 0), -1);
    assert_int_equal(errno, EINVAL);
    assert_int_equal(aor_hostlist_add(l, "ok.test", 7, 70000), -1);
    assert_int_equal(aor_hostlist_count(l), 2);
    aor_hostlist_free(l);
    aor_hostlist_free(NULL);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_builtin),
        cmocka_unit_test(test_parse_entries),
        cmocka_unit_test(test_parse_blank_and_trailing),
        cmocka_unit_test(test_parse_bounded),
        cmocka_unit_test(test_normalize),
        cmocka_unit_test(test_add),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
