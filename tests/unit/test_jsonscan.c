/* The allocation-free "model" scan (common/jsonscan.h, spec §5.1): answers for plain
 * valid bodies, leaves everything unusual to cJSON, and never disagrees with cJSON where
 * it answers. */
#include "jsonscan.h"

#include <cjson/cJSON.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

/* Heap copy without a NUL, so ASan catches reads past the end. */
static int scan(const char *s, size_t len, const char **val, size_t *vlen, char **copy) {
    *copy = malloc(len ? len : 1);
    assert_non_null(*copy);
    memcpy(*copy, s, len);
    return aor_json_top_string(*copy, len, "model", val, vlen);
}

/* Runs the scan on s; when it answers (0/1) cJSON must say the same. Returns the answer;
 * *model gets a malloc'd copy of the value for 1. */
static int check(const char *s, char **model) {
    size_t len = strlen(s), vlen = 0;
    const char *val = NULL;
    char *copy;
    int r = scan(s, len, &val, &vlen, &copy);
    *model = NULL;
    if (r == 1)
        *model = strndup(val, vlen);
    free(copy);
    if (r < 0)
        return r;
    cJSON *root = cJSON_ParseWithLength(s, len);
    const char *want = cJSON_IsObject(root)
                           ? cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(root, "model"))
                           : NULL;
    if (!cJSON_IsObject(root))
        fail_msg("scan answered %d for %s, cJSON does not see an object", r, s);
    if (r == 1 && (!want || strcmp(want, *model) != 0))
        fail_msg("scan found \"%s\" in %s, cJSON %s", *model, s, want ? want : "(none)");
    if (r == 0 && want)
        fail_msg("scan found no model in %s, cJSON \"%s\"", s, want);
    cJSON_Delete(root);
    return r;
}

static void expect(const char *s, int want_r, const char *want_model) {
    char *m;
    int r = check(s, &m);
    if (r != want_r)
        fail_msg("%s: scan answered %d, expected %d", s, r, want_r);
    if (want_model)
        assert_string_equal(m, want_model);
    free(m);
}

static void test_found(void **state) {
    expect("{\"model\":\"gpt-4o\",\"messages\":[]}", 1, "gpt-4o");
    expect(" \r\n\t{ \"messages\" : [ {\"model\":\"inner\"} ] , \"model\" : \"claude\" } \n", 1,
           "claude");
    expect("\xef\xbb\xbf{\"model\":\"bom\"}", 1, "bom");
    expect("{\"model\":\"\"}", 1, "");
    expect("{\"model\":\"caf\xc3\xa9\",\"x\":\"\\u00e9\\n\\\"\"}", 1, "caf\xc3\xa9");
    expect("{\"a\":[1,-0.5,2e10,1E-3,true,false,null,{},[],\"\"],\"model\":\"m\"}", 1, "m");
}

static void test_not_found(void **state) {
    expect("{\"messages\":[]}", 0, NULL);
    expect("{}", 0, NULL);
    expect("{\"model\":42}", 0, NULL);
    expect("{\"models\":\"x\",\"Model\":\"y\"}", 0, NULL);
}

static void test_undecided(void **state) {
    /* named twice: parsers differ on which counts; dialect.c's full parse takes the last */
    expect("{\"model\":\"first\",\"model\":\"second\"}", -1, NULL);
    expect("{\"model\":null,\"model\":\"later\"}", -1, NULL);
    expect("not json", -1, NULL);
    expect("[\"model\"]", -1, NULL);
    expect("{\"model\":\"gpt-4o\"", -1, NULL);
    expect("{\"model\":\"a\"} trailing", -1, NULL);
    expect("{\"model\":\"claude-\\u0033\"}", -1, NULL);             /* escaped value */
    expect("{\"mod\\u0065l\":\"x\",\"model\":\"y\"}", -1, NULL);    /* escaped key */
    expect("{\"model\":\"a\",\"x\":\"\\ud83d\\ude00\"}", -1, NULL); /* surrogates */
    expect("{\"model\":\"a\",\"x\":\"raw\ttab\"}", -1, NULL);
    expect("{\"model\":\"a\",\"x\":01}", -1, NULL);
    expect("{\"model\":\"a\",\"x\":1.}", -1, NULL);
    expect("{\"model\":\"a\",\"x\":tru}", -1, NULL);
    expect("{\"model\":\"a\",\"x\":[1,]}", -1, NULL);
    expect("{\"model\":\"a\",}", -1, NULL);
    expect("{\"model\":\"a\"\f}", -1, NULL);
    expect("{\"model\":\"a\",\"x\":\"\\q\"}", -1, NULL);
    expect("", -1, NULL);
    /* a number longer than cJSON reads */
    expect("{\"model\":\"a\",\"x\":1234567890123456789012345678901234567890123456789012345678901}",
           -1, NULL);
}

static void test_depth(void **state) {
    size_t d = AOR_JSONSCAN_MAX_DEPTH + 10;
    char *s = malloc(2 * d + 64);
    assert_non_null(s);
    size_t n = 0;
    n += (size_t)snprintf(s, 64, "{\"model\":\"m\",\"x\":");
    for (size_t i = 0; i < d; i++)
        s[n++] = '[';
    for (size_t i = 0; i < d; i++)
        s[n++] = ']';
    s[n++] = '}';
    s[n] = '\0';
    expect(s, -1, NULL);
    free(s);
    expect("{\"model\":\"m\",\"x\":[[[[{\"y\":[[]]}]]]]}", 1, "m");
}

static void test_large_body(void **state) {
    size_t big = 1 << 20;
    char *s = malloc(big + 64);
    assert_non_null(s);
    size_t n = (size_t)snprintf(s, 64, "{\"messages\":[{\"role\":\"user\",\"content\":\"");
    while (n < big) {
        s[n] = (char)('a' + n % 26);
        n++;
    }
    n += (size_t)snprintf(s + n, 64, "\"}],\"model\":\"big\"}");
    const char *val;
    size_t vlen;
    char *copy;
    assert_int_equal(scan(s, n, &val, &vlen, &copy), 1);
    assert_int_equal(vlen, 3);
    assert_memory_equal(val, "big", 3);
    free(copy);
    free(s);
}

/* Every stop byte at every position of the 8-byte steps through long strings. */
static void test_offsets(void **state) {
    for (size_t len = 0; len < 40; len++) {
        for (size_t at = 0; at <= len; at++) {
            char text[128], body[256];
            memset(text, 'x', len);
            text[len] = '\0';
            int r;
            /* a string of len plain bytes */
            r = snprintf(body, sizeof body, "{\"x\":\"%s\",\"model\":\"m\"}", text);
            assert_true(r > 0 && (size_t)r < sizeof body);
            expect(body, 1, "m");
            if (at == len)
                continue;
            /* an escape inside it: still valid */
            char esc[128];
            memcpy(esc, text, at);
            memcpy(esc + at, "\\n", 2);
            memcpy(esc + at + 2, text + at, len - at + 1);
            r = snprintf(body, sizeof body, "{\"x\":\"%s\",\"model\":\"m\"}", esc);
            assert_true(r > 0 && (size_t)r < sizeof body);
            expect(body, 1, "m");
            /* a raw control character inside it: undecided */
            text[at] = '\x01';
            r = snprintf(body, sizeof body, "{\"x\":\"%s\",\"model\":\"m\"}", text);
            assert_true(r > 0 && (size_t)r < sizeof body);
            expect(body, -1, NULL);
            /* high bytes (UTF-8) are plain text */
            text[at] = '\xc3';
            r = snprintf(body, sizeof body, "{\"model\":\"%s\"}", text);
            assert_true(r > 0 && (size_t)r < sizeof body);
            expect(body, 1, text);
        }
    }
}

static void test_bad_arguments(void **state) {
    const char *v;
    size_t l;
    assert_int_equal(aor_json_top_string(NULL, 0, "model", &v, &l), -1);
    assert_int_equal(aor_json_top_string("{}", 2, NULL, &v, &l), -1);
    assert_int_equal(aor_json_top_string("{}", 2, "a\"b", &v, &l), -1);
    assert_int_equal(aor_json_top_string("{}", 2, "model", NULL, &l), -1);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_found),         cmocka_unit_test(test_not_found),
        cmocka_unit_test(test_undecided),     cmocka_unit_test(test_depth),
        cmocka_unit_test(test_large_body),    cmocka_unit_test(test_offsets),
        cmocka_unit_test(test_bad_arguments),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
