/* Dialect differences (spec §5.1, §5.6, §3.2): model in body and path, key headers,
 * error bodies as SDKs parse them, path -> dialect. */
#include "classify.h"
#include "dialect.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

/* Heap copy without a NUL, so ASan catches reads past len. */
static char *exact(const char *s, size_t *len) {
    *len = strlen(s);
    char *c = malloc(*len ? *len : 1);
    assert_non_null(c);
    memcpy(c, s, *len);
    return c;
}

static char *body_model(const char *s) {
    size_t n;
    char *b = exact(s, &n);
    char *m = aor_dialect_body_model(b, n);
    free(b);
    return m;
}

static void test_body_model(void **state) {
    char *m = body_model("{\"model\":\"gpt-4o\",\"messages\":[]}");
    assert_string_equal(m, "gpt-4o");
    free(m);
    m = body_model("{\"messages\":[{\"model\":\"inner\"}],\"model\":\"claude-\\u0033\"}");
    assert_string_equal(m, "claude-3");
    free(m);
    errno = 0;
    assert_null(body_model("{\"model\":42}"));
    assert_int_equal(errno, EINVAL);
    assert_null(body_model("{\"messages\":[]}"));
    assert_null(body_model("not json"));
    assert_null(body_model("[\"model\"]"));
    assert_null(body_model("{\"model\":\"gpt-4o\""));
    assert_null(aor_dialect_body_model(NULL, 0));
    /* Named twice: the last one, as Python's json and JSON.parse read it (what the
     * upstream serves); QA: aord routed on the first. */
    m = body_model("{\"model\":\"a\",\"messages\":[],\"model\":\"gpt-4o\"}");
    assert_string_equal(m, "gpt-4o");
    free(m);
}

static void check_set(const char *body, const char *model, const char *want) {
    size_t n, out_len = 0;
    char *b = exact(body, &n);
    char *r = aor_dialect_body_set_model(b, n, model, &out_len);
    free(b);
    if (!want) {
        assert_null(r);
        return;
    }
    assert_non_null(r);
    assert_string_equal(r, want);
    assert_int_equal(out_len, strlen(want));
    free(r);
}

/* The buffer form: a short plain model goes into buf, a long or escaped one is
 * allocated (and named in *own); no model is NULL with EINVAL. */
static void test_body_model_buf(void **state) {
    char buf[8], *own = NULL;
    const char *b1 = "{\"model\":\"gpt-4o\",\"x\":1}";
    const char *m = aor_dialect_body_model_buf(b1, strlen(b1), buf, sizeof buf, &own);
    assert_ptr_equal(m, buf);
    assert_null(own);
    assert_string_equal(m, "gpt-4o");
    const char *b2 = "{\"model\":\"gpt-4o-mini\"}"; /* 11 bytes: does not fit 8 */
    m = aor_dialect_body_model_buf(b2, strlen(b2), buf, sizeof buf, &own);
    assert_non_null(own);
    assert_ptr_equal(m, own);
    assert_string_equal(m, "gpt-4o-mini");
    free(own);
    const char *b3 = "{\"model\":\"a\\u0062\"}"; /* escaped: cJSON decides */
    m = aor_dialect_body_model_buf(b3, strlen(b3), buf, sizeof buf, &own);
    assert_non_null(own);
    assert_string_equal(m, "ab");
    free(own);
    const char *b4 = "{\"x\":1}";
    errno = 0;
    assert_null(aor_dialect_body_model_buf(b4, strlen(b4), buf, sizeof buf, &own));
    assert_null(own);
    assert_int_equal(errno, EINVAL);
}

static void test_body_set_model(void **state) {
    /* every other byte stays as sent, big integers and float text included */
    check_set("{\"model\": \"fast\", \"seed\": 12345678901234567890, \"t\": 0.10}", "gpt-4o-mini",
              "{\"model\": \"gpt-4o-mini\", \"seed\": 12345678901234567890, \"t\": 0.10}");
    check_set("{\"messages\":[{\"role\":\"user\",\"content\":\"say \\\"model\\\": x\"}],"
              "\"model\":\"a\",\"stream\":true}",
              "b",
              "{\"messages\":[{\"role\":\"user\",\"content\":\"say \\\"model\\\": x\"}],"
              "\"model\":\"b\",\"stream\":true}");
    /* a nested "model" is not the request's */
    check_set("{\"meta\":{\"model\":\"n\"},\"model\":\"a\"}", "b",
              "{\"meta\":{\"model\":\"n\"},\"model\":\"b\"}");
    /* duplicates are all replaced */
    check_set("{\"model\":\"a\",\"model\":\"c\"}", "b", "{\"model\":\"b\",\"model\":\"b\"}");
    /* the new id is JSON-escaped */
    check_set("{\"model\":\"a\"}", "we\"ird\\\n", "{\"model\":\"we\\\"ird\\\\\\n\"}");
    /* escaped key: cJSON re-serialises */
    check_set("{\"mod\\u0065l\":\"a\",\"n\":1}", "b", "{\"model\":\"b\",\"n\":1}");
    check_set("\xef\xbb\xbf {\"model\":\"a\"}\n", "b", "\xef\xbb\xbf {\"model\":\"b\"}\n");
    check_set("{\"model\":null}", "b", NULL);
    check_set("{\"other\":1}", "b", NULL);
    check_set("nope", "b", NULL);
    size_t ol;
    assert_null(aor_dialect_body_set_model("{\"model\":\"a\"}", 13, NULL, &ol));
}

static void test_path_model(void **state) {
    static const struct {
        const char *path, *model;
    } t[] = {
        {"/v1beta/models/gemini-2.0-flash:generateContent", "gemini-2.0-flash"},
        {"/v1beta/models/gemini-2.0-flash:streamGenerateContent?alt=sse", "gemini-2.0-flash"},
        {"/v1/models/gemini-1.5-pro-002:countTokens", "gemini-1.5-pro-002"},
        {"/v1beta/models/gemini-2.0-flash", "gemini-2.0-flash"},
        {"/v1beta/models/gemini-2.0-flash?key=abc", "gemini-2.0-flash"},
        {"/v1beta/models/:generateContent", NULL},
        {"/v1beta/models", NULL},
        {"/v1beta/openai/chat/completions", NULL},
        {"/v1beta/tunedModels/x:generateContent", NULL},
        {"/v1beta/files?next=/models/x", NULL},
        {NULL, NULL},
    };
    for (size_t i = 0; i < sizeof t / sizeof t[0]; i++) {
        char *m = aor_dialect_path_model(t[i].path);
        if (t[i].model) {
            assert_non_null(m);
            assert_string_equal(m, t[i].model);
        } else {
            assert_null(m);
        }
        free(m);
    }
}

static void test_path_set_model(void **state) {
    char *p = aor_dialect_path_set_model("/v1beta/models/fast:streamGenerateContent?alt=sse",
                                         "gemini-2.0-flash");
    assert_string_equal(p, "/v1beta/models/gemini-2.0-flash:streamGenerateContent?alt=sse");
    free(p);
    p = aor_dialect_path_set_model("/v1beta/models/fast", "gemini-1.5-pro");
    assert_string_equal(p, "/v1beta/models/gemini-1.5-pro");
    free(p);
    errno = 0;
    assert_null(aor_dialect_path_set_model("/v1beta/models/fast:x", "a/b"));
    assert_int_equal(errno, EINVAL);
    assert_null(aor_dialect_path_set_model("/v1beta/models/fast:x", "a?key=1"));
    assert_null(aor_dialect_path_set_model("/v1beta/models/fast:x", ""));
    assert_null(aor_dialect_path_set_model("/v1/chat/completions", "x"));
}

static void test_auth_header(void **state) {
    char *h = aor_dialect_auth_header(AOR_DIALECT_OPENAI, "sk-test");
    assert_string_equal(h, "Authorization: Bearer sk-test");
    free(h);
    h = aor_dialect_auth_header(AOR_DIALECT_ANTHROPIC, "sk-ant-test");
    assert_string_equal(h, "x-api-key: sk-ant-test");
    free(h);
    h = aor_dialect_auth_header(AOR_DIALECT_GEMINI, "AIzaTest");
    assert_string_equal(h, "x-goog-api-key: AIzaTest");
    free(h);
    errno = 0;
    assert_null(aor_dialect_auth_header(AOR_DIALECT_OPENAI, "sk\r\nX-Evil: 1"));
    assert_int_equal(errno, EINVAL);
    assert_null(aor_dialect_auth_header(AOR_DIALECT_OPENAI, ""));
    assert_null(aor_dialect_auth_header(AOR_DIALECT_OPENAI, NULL));
    assert_null(aor_dialect_auth_header((aor_dialect)7, "k"));

    assert_true(aor_dialect_is_auth_header("Authorization"));
    assert_true(aor_dialect_is_auth_header("X-API-Key"));
    assert_true(aor_dialect_is_auth_header("x-goog-api-key"));
    assert_true(aor_dialect_is_auth_header("api-key"));
    assert_false(aor_dialect_is_auth_header("content-type"));
    assert_false(aor_dialect_is_auth_header("x-api-keys"));
    assert_false(aor_dialect_is_auth_header(NULL));
}

/* Drops every key= parameter of q; checks the rest against want and that no key is left. */
static void drop_is(const char *q, const char *want) {
    char *r = aor_dialect_query_drop_key(q);
    assert_non_null(r);
    assert_string_equal(r, want);
    char *k = aor_dialect_query_key(r);
    assert_null(k);
    assert_int_equal(errno, 0);
    free(r);
}

/* The credential aor_dialect_query_key finds in q: want, or none (want NULL). */
static void key_is(const char *q, const char *want) {
    char *k = aor_dialect_query_key(q);
    if (!want) {
        assert_null(k);
        assert_int_equal(errno, 0);
        return;
    }
    assert_non_null(k);
    assert_string_equal(k, want);
    free(k);
}

static void test_query_key(void **state) {
    (void)state;
    drop_is("alt=sse&key=AIza%2Bx&x=1", "alt=sse&x=1");
    drop_is("key=abc", "");
    drop_is("keys=1&pageSize=5&key", "keys=1&pageSize=5&key"); /* not named key=, kept */
    drop_is("k%65y=s&%6B%45y=t&x=%6bey", "%6B%45y=t&x=%6bey"); /* names are case-sensitive */
    drop_is("key=&&key=a&key=b%", "");
    drop_is("", "");
    drop_is("a=1&&b=2&", "a=1&&b=2&"); /* empty parameters keep their bytes */
    drop_is("&key=s&a", "&a");
    assert_null(aor_dialect_query_drop_key(NULL));
    assert_int_equal(errno, EINVAL);

    key_is("alt=sse&key=AIza%2Bx&x=1", "AIza+x");
    key_is("key=&key=K2", "K2"); /* an empty key= is no credential */
    key_is("k%65y=Enc&key=b", "Enc");
    key_is("key=a&key=b", "a");   /* the first one */
    key_is("key=a%0Ab", "a%0Ab"); /* would decode to a control character: as it came */
    key_is("key=a%2", "a%2");     /* a cut escape is kept */
    key_is("keys=1&key", NULL);
    key_is("", NULL);
    key_is(NULL, NULL);
}

/* Parses an error body and returns the string at a dotted path, e.g. "error.code". */
static const cJSON *at(const cJSON *root, const char *a, const char *b, const char *c) {
    const cJSON *x = cJSON_GetObjectItemCaseSensitive(root, a);
    if (b)
        x = cJSON_GetObjectItemCaseSensitive(x, b);
    if (c)
        x = cJSON_GetObjectItemCaseSensitive(x, c);
    return x;
}

static cJSON *error_body(aor_dialect d, int status, const char *code, const char *msg) {
    size_t len = 0;
    char *b = aor_dialect_error_body(d, status, code, msg, &len);
    assert_non_null(b);
    assert_int_equal(len, strlen(b));
    cJSON *root = cJSON_ParseWithLength(b, len);
    free(b);
    assert_non_null(root);
    return root;
}

static void test_error_body_openai(void **state) {
    cJSON *r = error_body(AOR_DIALECT_OPENAI, 429, "aor_all_backed_off",
                          "every key is backed off; last: 429 \"rate\"\n");
    assert_string_equal(at(r, "error", "code", NULL)->valuestring, "aor_all_backed_off");
    assert_string_equal(at(r, "error", "type", NULL)->valuestring, "rate_limit_exceeded");
    assert_string_equal(at(r, "error", "message", NULL)->valuestring,
                        "every key is backed off; last: 429 \"rate\"\n");
    assert_true(cJSON_IsNull(at(r, "error", "param", NULL)));
    cJSON_Delete(r);
    r = error_body(AOR_DIALECT_OPENAI, 502, NULL, NULL);
    assert_true(cJSON_IsNull(at(r, "error", "code", NULL)));
    assert_string_equal(at(r, "error", "type", NULL)->valuestring, "server_error");
    assert_string_equal(at(r, "error", "message", NULL)->valuestring, "");
    cJSON_Delete(r);
}

static void test_error_body_anthropic(void **state) {
    cJSON *r = error_body(AOR_DIALECT_ANTHROPIC, 429, "aor_all_backed_off", "all keys wait");
    assert_string_equal(at(r, "type", NULL, NULL)->valuestring, "error");
    assert_string_equal(at(r, "error", "type", NULL)->valuestring, "rate_limit_error");
    assert_string_equal(at(r, "error", "details", "error_code")->valuestring, "aor_all_backed_off");
    assert_non_null(strstr(at(r, "error", "message", NULL)->valuestring, "aor_all_backed_off"));
    assert_non_null(strstr(at(r, "error", "message", NULL)->valuestring, "all keys wait"));
    cJSON_Delete(r);
    r = error_body(AOR_DIALECT_ANTHROPIC, 502, NULL, "bad gateway");
    assert_string_equal(at(r, "error", "type", NULL)->valuestring, "api_error");
    assert_string_equal(at(r, "error", "message", NULL)->valuestring, "bad gateway");
    assert_null(at(r, "error", "details", NULL));
    cJSON_Delete(r);
    r = error_body(AOR_DIALECT_ANTHROPIC, 529, NULL, "x");
    assert_string_equal(at(r, "error", "type", NULL)->valuestring, "overloaded_error");
    cJSON_Delete(r);
}

static void test_error_body_gemini(void **state) {
    cJSON *r = error_body(AOR_DIALECT_GEMINI, 429, "aor_all_backed_off", "wait");
    assert_int_equal((int)at(r, "error", "code", NULL)->valuedouble, 429);
    assert_string_equal(at(r, "error", "status", NULL)->valuestring, "RESOURCE_EXHAUSTED");
    const cJSON *info = cJSON_GetArrayItem(at(r, "error", "details", NULL), 0);
    assert_string_equal(cJSON_GetObjectItemCaseSensitive(info, "@type")->valuestring,
                        "type.googleapis.com/google.rpc.ErrorInfo");
    assert_string_equal(cJSON_GetObjectItemCaseSensitive(info, "reason")->valuestring,
                        "aor_all_backed_off");
    assert_string_equal(cJSON_GetObjectItemCaseSensitive(info, "domain")->valuestring, "aor");
    cJSON_Delete(r);
    static const struct {
        int status;
        const char *s;
    } t[] = {{503, "UNAVAILABLE"},       {500, "INTERNAL"},          {400, "INVALID_ARGUMENT"},
             {401, "UNAUTHENTICATED"},   {403, "PERMISSION_DENIED"}, {404, "NOT_FOUND"},
             {504, "DEADLINE_EXCEEDED"}, {502, "UNAVAILABLE"}};
    for (size_t i = 0; i < sizeof t / sizeof t[0]; i++) {
        r = error_body(AOR_DIALECT_GEMINI, t[i].status, NULL, "m");
        assert_string_equal(at(r, "error", "status", NULL)->valuestring, t[i].s);
        assert_null(at(r, "error", "details", NULL));
        cJSON_Delete(r);
    }
}

/* Our own terminal answers classify as what they say (an aor behind an aor). */
static void test_error_body_round_trip(void **state) {
    for (int d = 0; d < 3; d++) {
        size_t len;
        char *b = aor_dialect_error_body((aor_dialect)d, 429, "aor_all_backed_off", "m", &len);
        aor_verdict v;
        aor_classify((aor_dialect)d, 429, NULL, 0, b, len, 0, 0, &v);
        assert_int_equal(v.kind, AOR_KIND_RATE);
        assert_non_null(strstr(v.reason, "aor_all_backed_off"));
        free(b);
    }
}

static void test_dialect_of_path(void **state) {
    static const struct {
        const char *path;
        aor_dialect d;
    } t[] = {
        {"/v1/messages", AOR_DIALECT_ANTHROPIC},
        {"/v1/messages?beta=true", AOR_DIALECT_ANTHROPIC},
        {"/v1/messages/count_tokens", AOR_DIALECT_ANTHROPIC},
        {"/v1/messagesx", AOR_DIALECT_OPENAI},
        {"/v1beta/models/gemini-2.0-flash:generateContent", AOR_DIALECT_GEMINI},
        {"/v1beta/models", AOR_DIALECT_GEMINI},
        {"/v1alpha/models/gemini-2.0-flash:generateContent", AOR_DIALECT_GEMINI},
        {"/v1alphax/models", AOR_DIALECT_OPENAI},
        {"/v1/models/gemini-1.5-pro:generateContent", AOR_DIALECT_GEMINI},
        {"/v1beta/openai/chat/completions", AOR_DIALECT_GEMINI},
        {"/v1/models", AOR_DIALECT_OPENAI},
        {"/v1/models/gpt-4o", AOR_DIALECT_OPENAI},
        {"/v1/models/gpt-4o?x=a:b", AOR_DIALECT_OPENAI},
        {"/v1/chat/completions", AOR_DIALECT_OPENAI},
        {"/v1/responses", AOR_DIALECT_OPENAI},
        {"/v1/embeddings", AOR_DIALECT_OPENAI},
        {"", AOR_DIALECT_OPENAI},
        {NULL, AOR_DIALECT_OPENAI},
    };
    for (size_t i = 0; i < sizeof t / sizeof t[0]; i++)
        if (aor_dialect_of_path(t[i].path) != t[i].d)
            fail_msg("%s: %s, want %s", t[i].path ? t[i].path : "(null)",
                     aor_dialect_name(aor_dialect_of_path(t[i].path)), aor_dialect_name(t[i].d));
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_body_model),
        cmocka_unit_test(test_body_model_buf),
        cmocka_unit_test(test_body_set_model),
        cmocka_unit_test(test_path_model),
        cmocka_unit_test(test_path_set_model),
        cmocka_unit_test(test_auth_header),
        cmocka_unit_test(test_query_key),
        cmocka_unit_test(test_error_body_openai),
        cmocka_unit_test(test_error_body_anthropic),
        cmocka_unit_test(test_error_body_gemini),
        cmocka_unit_test(test_error_body_round_trip),
        cmocka_unit_test(test_dialect_of_path),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
