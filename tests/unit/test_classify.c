/* Classification of upstream answers (spec §4.1) with their hints (§4.3): every case of
 * tests/fixtures/provider-answers.json, plus edge cases beside them. */
#include "classify.h"
#include "fixtures.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#define NOW 1800000000.0
#define N(a) (sizeof(a) / sizeof((a)[0]))
#define MAX_HDRS 32

/* Classifies body bytes copied into an exact-size heap buffer (no NUL after it), so ASan
 * catches any read past len. */
static void classify_exact(aor_dialect d, long status, const aor_header *h, size_t nh,
                           const char *body, double now, int ignore, aor_verdict *v) {
    size_t len = body ? strlen(body) : 0;
    char *copy = len ? malloc(len) : NULL;
    if (len) {
        assert_non_null(copy);
        memcpy(copy, body, len);
    }
    aor_classify(d, status, h, nh, copy, len, now, ignore, v);
    free(copy);
}

static void expect(const char *name, const aor_verdict *v, aor_kind kind, double hint) {
    if (v->kind != kind)
        fail_msg("%s: kind %s, want %s (reason \"%s\")", name, aor_kind_name(v->kind),
                 aor_kind_name(kind), v->reason);
    int ok = hint == -2 ? v->hint_s >= 86400 : hint < 0 ? v->hint_s == -1 : v->hint_s == hint;
    if (!ok)
        fail_msg("%s: hint %g, want %g", name, v->hint_s, hint);
}

static void test_fixture_cases(void **state) {
    cJSON *root = fixture_load();
    assert_non_null(root);
    double now = cJSON_GetObjectItemCaseSensitive(root, "now_epoch")->valuedouble;
    const cJSON *c;
    int count = 0;
    cJSON_ArrayForEach(c, cJSON_GetObjectItemCaseSensitive(root, "cases")) {
        const char *name = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(c, "name"));
        aor_dialect d;
        aor_kind kind;
        assert_int_equal(
            aor_dialect_parse(cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(c, "dialect")),
                              &d),
            0);
        assert_int_equal(
            aor_kind_parse(cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(c, "kind")),
                           &kind),
            0);
        aor_header hdrs[MAX_HDRS];
        size_t nh = 0;
        const cJSON *h;
        cJSON_ArrayForEach(h, cJSON_GetObjectItemCaseSensitive(c, "headers")) {
            assert_true(nh < MAX_HDRS);
            hdrs[nh].name = h->string;
            hdrs[nh++].value = h->valuestring;
        }
        const cJSON *jb = cJSON_GetObjectItemCaseSensitive(c, "body");
        char *printed = jb ? cJSON_PrintUnformatted(jb) : NULL;
        const char *body =
            printed ? printed
                    : cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(c, "body_text"));
        long status = (long)cJSON_GetObjectItemCaseSensitive(c, "status")->valuedouble;
        aor_verdict v;
        classify_exact(d, status, hdrs, nh, body, now, 0, &v);
        expect(name, &v, kind, fixture_hint(c));
        /* retry_after = ignore: same kind, never a hint */
        classify_exact(d, status, hdrs, nh, body, now, 1, &v);
        expect(name, &v, kind, -1);
        cJSON_free(printed);
        count++;
    }
    assert_true(count >= 16);
    cJSON_Delete(root);
}

typedef struct {
    const char *name;
    aor_dialect d;
    long status;
    const char *ct;    /* Content-Type, or NULL */
    const char *extra; /* one more header "name: value", or NULL */
    const char *body;
    aor_kind kind;
    double hint;
} ccase;

#define JSON "application/json"
#define HTML "text/html; charset=utf-8"
#define OA AOR_DIALECT_OPENAI
#define AN AOR_DIALECT_ANTHROPIC
#define GE AOR_DIALECT_GEMINI

static const ccase cases[] = {
    {"no answer", OA, 0, NULL, NULL, NULL, AOR_KIND_TRANSIENT, -1},
    {"200 json", OA, 200, JSON, NULL, "{\"id\":\"x\"}", AOR_KIND_OK, -1},
    {"200 sse", AN, 200, "text/event-stream", NULL, "event: message_start\n", AOR_KIND_OK, -1},
    {"200 html", OA, 200, HTML, NULL, "<html></html>", AOR_KIND_CONFIG, -1},
    {"200 html sniffed", OA, 200, NULL, NULL, "\n  <!DOCTYPE html><html>", AOR_KIND_CONFIG, -1},
    {"200 json that looks odd", OA, 200, JSON, NULL, "<html>", AOR_KIND_OK, -1},
    {"301 redirect", OA, 301, HTML, "location: https://example.com/", "", AOR_KIND_CONFIG, -1},
    {"304 not modified", OA, 304, NULL, "etag: \"x\"", "", AOR_KIND_CLIENT, -1},
    {"404 html page", OA, 404, HTML, NULL, "<html><body>Not Found</body></html>", AOR_KIND_CONFIG,
     -1},
    {"404 html page mentioning billing", OA, 404, HTML, NULL,
     "<html><a href=/billing>Billing</a></html>", AOR_KIND_CONFIG, -1},
    {"405 empty", AN, 405, NULL, NULL, "", AOR_KIND_CONFIG, -1},
    {"501 html from a static web server (QA)", OA, 501, HTML, NULL,
     "<html><body><h1>Error response</h1><p>Error code: 501</p>"
     "<p>Message: Unsupported method ('POST').</p></body></html>",
     AOR_KIND_CONFIG, -1},
    {"501 in the dialect's shape stays transient", OA, 501, JSON, NULL,
     "{\"error\":{\"message\":\"not implemented\",\"type\":\"server_error\"}}", AOR_KIND_TRANSIENT,
     -1},
    {"502 html from a proxy stays transient", OA, 502, HTML, NULL,
     "<html><body>Bad Gateway</body></html>", AOR_KIND_TRANSIENT, -1},
    {"400 plain text from a proxy keeps its status", OA, 400, "text/plain", NULL, "Bad Request",
     AOR_KIND_CLIENT, -1},
    {"422 json not of the dialect", OA, 422, JSON, NULL, "{\"detail\":\"bad\"}", AOR_KIND_CLIENT,
     -1},
    {"400 html page", OA, 400, HTML, NULL, "<html>Bad</html>", AOR_KIND_CONFIG, -1},
    {"404 json not of the dialect", OA, 404, JSON, NULL, "{\"detail\":\"Not Found\"}",
     AOR_KIND_CONFIG, -1},
    {"404 fastapi json", OA, 404, JSON, NULL, "{\"detail\":\"Not Found\"}", AOR_KIND_CONFIG, -1},
    {"400 plain http to https port", OA, 400, HTML, NULL,
     "<html><center>The plain HTTP request was sent to HTTPS port</center></html>", AOR_KIND_CONFIG,
     -1},
    {"407 proxy", OA, 407, HTML, NULL, "<html>Proxy Authentication Required</html>",
     AOR_KIND_CONFIG, -1},
    {"404 model not found", OA, 404, JSON, NULL,
     "{\"error\":{\"message\":\"The model `gpt-9` does not exist\",\"type\":"
     "\"invalid_request_error\",\"param\":null,\"code\":\"model_not_found\"}}",
     AOR_KIND_CLIENT, -1},
    {"404 cut json", OA, 404, JSON, NULL, "{\"error\":{\"message\":\"The mo", AOR_KIND_CLIENT, -1},
    {"404 gemini", GE, 404, JSON, NULL,
     "{\"error\":{\"code\":404,\"message\":\"models/x is not found\",\"status\":\"NOT_FOUND\"}}",
     AOR_KIND_CLIENT, -1},
    {"400 anthropic invalid", AN, 400, JSON, NULL,
     "{\"type\":\"error\",\"error\":{\"type\":\"invalid_request_error\",\"message\":"
     "\"max_tokens: field required\"}}",
     AOR_KIND_CLIENT, -1},
    {"400 anthropic credit balance", AN, 400, JSON, NULL,
     "{\"type\":\"error\",\"error\":{\"type\":\"invalid_request_error\",\"message\":\"Your "
     "credit balance is too low to access the Anthropic API. Please go to Plans & Billing to "
     "upgrade or purchase credits.\"}}",
     AOR_KIND_QUOTA, -1},
    {"400 openai-compatible error string", OA, 400, JSON, NULL, "{\"error\":\"bad field\"}",
     AOR_KIND_CLIENT, -1},
    {"413 nginx", OA, 413, HTML, NULL, "<html>413 Request Entity Too Large</html>", AOR_KIND_CLIENT,
     -1},
    {"413 anthropic", AN, 413, JSON, NULL,
     "{\"type\":\"error\",\"error\":{\"type\":\"request_too_large\",\"message\":\"Request "
     "exceeds the maximum allowed number of bytes.\"}}",
     AOR_KIND_CLIENT, -1},
    {"422", OA, 422, JSON, NULL, "{\"error\":{\"message\":\"bad\",\"type\":\"x\"}}",
     AOR_KIND_CLIENT, -1},
    /* Groq's answer to a prompt over its tokens-per-minute limit (QA: read as rate, one
     * oversized prompt backed off every key): §4.1 413 is client, whatever the code. */
    {"413 groq request too large with a rate code", OA, 413, JSON, "retry-after: 7",
     "{\"error\":{\"message\":\"Request too large for model `llama-3.3-70b-versatile` in "
     "organization `org_x` service tier `on_demand` on tokens per minute (TPM): Limit 12000, "
     "Requested 30500, please reduce your message size and try again.\",\"type\":\"tokens\","
     "\"code\":\"rate_limit_exceeded\"}}",
     AOR_KIND_CLIENT, -1},
    /* QA: "request too large" outside the dialect's error object was read as rate, so one
     * oversized prompt backed off every key and opened the circuit. */
    {"429 request too large as plain text", OA, 429, "text/plain", NULL,
     "Request too large for gpt-4o on tokens per min (TPM): Limit 30000, Requested 50000.",
     AOR_KIND_CLIENT, -1},
    {"429 request too large in a json body without an error object", OA, 429, JSON, NULL,
     "{\"message\":\"Request too large for gpt-4o on tokens per min\",\"code\":429}",
     AOR_KIND_CLIENT, -1},
    {"429 plain text rate limit stays rate", OA, 429, "text/plain", NULL,
     "Too many requests, slow down.", AOR_KIND_RATE, -1},
    /* Anthropic's spend limit as sent without details.error_code (QA; claude-code issue
     * 38035): quota, not a client error that never walks. */
    {"400 anthropic api usage limits", AN, 400, JSON, NULL,
     "{\"type\":\"error\",\"error\":{\"type\":\"invalid_request_error\",\"message\":"
     "\"You have reached your specified API usage limits. You will regain access on "
     "2026-04-01 at 00:00 UTC.\"},\"request_id\":\"req_011CZLrUfBVkVHn5T6EqQaf7\"}",
     AOR_KIND_QUOTA, -1},
    {"413 with a quota code", OA, 413, JSON, NULL,
     "{\"error\":{\"message\":\"x\",\"code\":\"insufficient_quota\"}}", AOR_KIND_CLIENT, -1},
    /* A rate code on the other statuses §4.1 lists as client; and on a 4xx it does not list
     * (409), still rate. The rate code still keeps "billing" in the message from making
     * the 400 quota. */
    {"400 with a rate code", OA, 400, JSON, NULL,
     "{\"error\":{\"message\":\"see https://platform.openai.com/account/billing\","
     "\"type\":\"tokens\",\"code\":\"rate_limit_exceeded\"}}",
     AOR_KIND_CLIENT, -1},
    {"422 with a rate code", AN, 422, JSON, NULL,
     "{\"type\":\"error\",\"error\":{\"type\":\"rate_limit_error\",\"message\":\"x\"}}",
     AOR_KIND_CLIENT, -1},
    {"404 with a rate code", GE, 404, JSON, NULL,
     "{\"error\":{\"code\":404,\"message\":\"x\",\"status\":\"RESOURCE_EXHAUSTED\"}}",
     AOR_KIND_CLIENT, -1},
    {"409 with a rate code", OA, 409, JSON, NULL,
     "{\"error\":{\"message\":\"x\",\"code\":\"rate_limit_exceeded\"}}", AOR_KIND_RATE, -1},
    {"408", OA, 408, NULL, NULL, "", AOR_KIND_TRANSIENT, -1},
    {"401 html", OA, 401, HTML, NULL, "<html>Unauthorized</html>", AOR_KIND_AUTH, -1},
    {"401 with quota words", OA, 401, JSON, NULL,
     "{\"error\":{\"message\":\"billing\",\"code\":\"insufficient_quota\"}}", AOR_KIND_AUTH, -1},
    {"400 gemini invalid key", GE, 400, JSON, NULL,
     "{\"error\":{\"code\":400,\"message\":\"API key not valid. Please pass a valid API "
     "key.\",\"status\":\"INVALID_ARGUMENT\",\"details\":[{\"@type\":\"type.googleapis.com/"
     "google.rpc.ErrorInfo\",\"reason\":\"API_KEY_INVALID\",\"domain\":\"googleapis.com\"}]}}",
     AOR_KIND_AUTH, -1},
    {"403 region", OA, 403, JSON, NULL,
     "{\"error\":{\"code\":\"unsupported_country_region_territory\",\"message\":\"Country, "
     "region, or territory not supported\",\"param\":null,\"type\":\"request_forbidden\"}}",
     AOR_KIND_AUTH, -1},
    {"403 html waf", OA, 403, HTML, NULL, "<html>Attention Required! | Cloudflare</html>",
     AOR_KIND_AUTH, -1},
    {"403 gemini billing disabled", GE, 403, JSON, NULL,
     "{\"error\":{\"code\":403,\"message\":\"This API method requires billing to be "
     "enabled.\",\"status\":\"PERMISSION_DENIED\",\"details\":[{\"@type\":\"type.googleapis.com/"
     "google.rpc.ErrorInfo\",\"reason\":\"BILLING_DISABLED\",\"domain\":\"googleapis.com\"}]}}",
     AOR_KIND_QUOTA, -1},
    /* OpenRouter moderation (ModerationErrorMetadata): the input is at fault, not the key
     * (QA: classified auth, every key got a 120 s cooldown and the circuit opened). */
    {"403 openrouter moderation reasons only", OA, 403, JSON, NULL,
     "{\"error\":{\"code\":403,\"message\":\"Your input was flagged\",\"metadata\":{"
     "\"reasons\":[\"violence\",\"harassment\"]}}}",
     AOR_KIND_CLIENT, -1},
    {"403 openrouter moderation flagged_input only", OA, 403, JSON, "retry-after: 30",
     "{\"error\":{\"code\":403,\"message\":\"flagged\",\"metadata\":{\"flagged_input\":"
     "\"...\"}}}",
     AOR_KIND_CLIENT, -1},
    {"403 metadata without moderation fields", OA, 403, JSON, NULL,
     "{\"error\":{\"code\":403,\"message\":\"Forbidden\",\"metadata\":{\"provider_name\":"
     "\"OpenAI\"}}}",
     AOR_KIND_AUTH, -1},
    {"401 with moderation metadata stays auth", OA, 401, JSON, NULL,
     "{\"error\":{\"code\":401,\"message\":\"x\",\"metadata\":{\"reasons\":[]}}}", AOR_KIND_AUTH,
     -1},
    {"403 openrouter key limit", OA, 403, JSON, NULL,
     "{\"error\":{\"code\":403,\"message\":\"Key limit exceeded\",\"metadata\":{"
     "\"limit_source\":\"openrouter_key_limit\"}}}",
     AOR_KIND_QUOTA, -1},
    {"402 deepseek", OA, 402, JSON, NULL,
     "{\"error\":{\"message\":\"Insufficient Balance\",\"type\":\"unknown_error\",\"param\":"
     "null,\"code\":\"invalid_request_error\"}}",
     AOR_KIND_QUOTA, -1},
    {"402 html", OA, 402, HTML, NULL, "<html>Payment Required</html>", AOR_KIND_QUOTA, -1},
    {"429 spend limit", OA, 429, JSON, NULL,
     "{\"error\":{\"message\":\"You have hit your spend limit\",\"type\":\"requests\","
     "\"code\":\"project_spend_limit_exceeded\"}}",
     AOR_KIND_QUOTA, -1},
    {"429 credit balance exhausted", OA, 429, JSON, "retry-after: 30",
     "{\"error\":{\"message\":\"x\",\"code\":\"credit_balance_exhausted\"}}", AOR_KIND_QUOTA, -1},
    {"429 openai rate message links billing", OA, 429, JSON, "retry-after: 20",
     "{\"error\":{\"message\":\"Rate limit reached for gpt-4o. You can increase your rate "
     "limit by adding a payment method at https://platform.openai.com/account/billing.\","
     "\"type\":\"requests\",\"param\":null,\"code\":\"rate_limit_exceeded\"}}",
     AOR_KIND_RATE, 20},
    {"429 cloudflare html", OA, 429, HTML, "Retry-After: 60",
     "<html>Error 1015 You are being rate limited</html>", AOR_KIND_RATE, 60},
    {"429 quota text without code", OA, 429, JSON, NULL,
     "{\"error\":{\"message\":\"Monthly quota exceeded for this key\"}}", AOR_KIND_QUOTA, -1},
    {"429 gemini without details says quota", GE, 429, JSON, NULL,
     "{\"error\":{\"code\":429,\"message\":\"Quota exceeded for metric: generate_content, "
     "check billing\",\"status\":\"RESOURCE_EXHAUSTED\"}}",
     AOR_KIND_RATE, -1},
    {"429 reset header only", OA, 429, JSON, "x-ratelimit-reset-tokens: 1.5s",
     "{\"error\":{\"code\":\"rate_limit_exceeded\",\"message\":\"m\"}}", AOR_KIND_RATE, 1.5},
    {"429 openrouter reset ms", OA, 429, JSON, "X-RateLimit-Reset: 1800000042000",
     "{\"error\":{\"code\":429,\"message\":\"Rate limit exceeded: free-models-per-min\","
     "\"metadata\":{\"error_type\":\"rate_limit_exceeded\"}}}",
     AOR_KIND_RATE, 42},
    {"429 reset past", OA, 429, JSON, "X-RateLimit-Reset: 1700000000000",
     "{\"error\":{\"code\":429,\"message\":\"Rate limit exceeded\"}}", AOR_KIND_RATE, -1},
    {"429 retry-after over cap", OA, 429, JSON, "retry-after: 200000",
     "{\"error\":{\"code\":\"rate_limit_exceeded\"}}", AOR_KIND_RATE, 200000},
    {"503 reset headers do not count", OA, 503, JSON, "x-ratelimit-reset-requests: 6m0s",
     "{\"error\":{\"message\":\"busy\",\"type\":\"server_error\"}}", AOR_KIND_TRANSIENT, -1},
    {"503 retry-after", OA, 503, JSON, "retry-after: 10",
     "{\"error\":{\"message\":\"busy\",\"type\":\"server_error\"}}", AOR_KIND_TRANSIENT, 10},
    {"502 proxy text", OA, 502, "text/plain", NULL, "502 Bad Gateway", AOR_KIND_TRANSIENT, -1},
    {"502 nginx html", OA, 502, HTML, NULL,
     "<html><head><title>502 Bad Gateway</title></head></html>", AOR_KIND_TRANSIENT, -1},
    {"522 cloudflare", OA, 522, HTML, NULL, "<!DOCTYPE html><title>Connection timed out</title>",
     AOR_KIND_TRANSIENT, -1},
    {"503 overloaded text", OA, 503, "text/plain", NULL, "The model is overloaded", AOR_KIND_RATE,
     -1},
    {"503 gemini unavailable", GE, 503, JSON, NULL,
     "{\"error\":{\"code\":503,\"message\":\"The service is currently unavailable.\","
     "\"status\":\"UNAVAILABLE\"}}",
     AOR_KIND_TRANSIENT, -1},
    {"500 anthropic api_error", AN, 500, JSON, NULL,
     "{\"type\":\"error\",\"error\":{\"type\":\"api_error\",\"message\":\"Internal server "
     "error\"}}",
     AOR_KIND_TRANSIENT, -1},
    {"529 with retry-after", AN, 529, JSON, "retry-after: 4",
     "{\"type\":\"error\",\"error\":{\"type\":\"overloaded_error\",\"message\":\"Overloaded\"}}",
     AOR_KIND_RATE, 4},
    {"529 bare", AN, 529, NULL, NULL, "", AOR_KIND_RATE, -1},
    {"gemini per-minute in array", GE, 429, JSON, NULL,
     "[{\"error\":{\"code\":429,\"status\":\"RESOURCE_EXHAUSTED\",\"details\":[{\"@type\":"
     "\"type.googleapis.com/google.rpc.QuotaFailure\",\"violations\":[{\"quotaId\":"
     "\"GenerateContentInputTokensPerModelPerMinute-FreeTier\"}]},{\"@type\":"
     "\"type.googleapis.com/google.rpc.RetryInfo\",\"retryDelay\":\"3.700s\"}]}}]",
     AOR_KIND_RATE, 3.7},
    {"600", OA, 600, NULL, NULL, "", AOR_KIND_TRANSIENT, -1},
};

static void test_edge_cases(void **state) {
    for (size_t i = 0; i < N(cases); i++) {
        const ccase *c = &cases[i];
        aor_header h[2];
        char extra_name[64];
        size_t nh = 0;
        if (c->ct) {
            h[nh].name = "Content-Type";
            h[nh++].value = c->ct;
        }
        if (c->extra) {
            const char *colon = strchr(c->extra, ':');
            assert_non_null(colon);
            assert_true((size_t)(colon - c->extra) < sizeof extra_name);
            memcpy(extra_name, c->extra, (size_t)(colon - c->extra));
            extra_name[colon - c->extra] = '\0';
            h[nh].name = extra_name;
            h[nh++].value = colon + 2;
        }
        aor_verdict v;
        classify_exact(c->d, c->status, h, nh, c->body, NOW, 0, &v);
        expect(c->name, &v, c->kind, c->hint);
    }
}

static void test_reasons(void **state) {
    aor_verdict v;
    const aor_header h[] = {{"retry-after", "7"}};
    classify_exact(OA, 429, h, 1,
                   "{\"error\":{\"message\":\"Rate limit reached\",\"type\":\"requests\","
                   "\"code\":\"rate_limit_exceeded\"}}",
                   NOW, 0, &v);
    assert_string_equal(v.reason, "429 rate_limit_exceeded");
    /* the message of an auth error may show part of the key: it never reaches reason */
    classify_exact(OA, 401, NULL, 0,
                   "{\"error\":{\"message\":\"Incorrect API key provided: sk-proj-****abcd.\","
                   "\"type\":\"invalid_request_error\",\"code\":\"invalid_api_key\"}}",
                   NOW, 0, &v);
    assert_string_equal(v.reason, "401 invalid_api_key");
    /* control characters from upstream are neutralised */
    classify_exact(OA, 500, NULL, 0, "{\"error\":{\"code\":\"bad\\nline\\u0007\"}}", NOW, 0, &v);
    assert_null(strchr(v.reason, '\n'));
    assert_null(strchr(v.reason, '\a'));
    /* a long code is truncated, never overflows */
    char body[2048];
    char code[1200];
    memset(code, 'x', sizeof code - 1);
    code[sizeof code - 1] = '\0';
    snprintf(body, sizeof body, "{\"error\":{\"code\":\"%s\"}}", code);
    classify_exact(OA, 500, NULL, 0, body, NOW, 0, &v);
    assert_true(strlen(v.reason) < sizeof v.reason);
    /* ... and not shown in part: a key quoted as the code, longer than a label, would
     * leave its start in the reason, which redaction masks only whole (QA) */
    char keyish[99]; /* a key's shape, made here: no key-like literal in the source */
    memcpy(keyish, "sk-", 3);
    for (size_t i = 3; i < sizeof keyish - 1; i++)
        keyish[i] = (char)('A' + i % 26);
    keyish[sizeof keyish - 1] = '\0';
    snprintf(body, sizeof body, "{\"error\":{\"message\":\"x\",\"code\":\"%s\"}}", keyish);
    classify_exact(OA, 401, NULL, 0, body, NOW, 0, &v);
    assert_string_equal(v.reason, "401 a value of 98 characters");
    classify_exact(OA, 500, NULL, 0, body, NOW, 0, &v);
    assert_null(strstr(v.reason, "xxx"));
    /* config reasons name the dialect and say what came back */
    classify_exact(AN, 404, (const aor_header[]){{"content-type", "text/html"}}, 1, "<html>", NOW,
                   0, &v);
    assert_non_null(strstr(v.reason, "anthropic"));
    assert_non_null(strstr(v.reason, "text/html"));
    assert_non_null(strstr(v.reason, "base_url"));
    classify_exact(GE, 429, NULL, 0,
                   "{\"error\":{\"code\":429,\"status\":\"RESOURCE_EXHAUSTED\",\"details\":[{"
                   "\"@type\":\"type.googleapis.com/google.rpc.QuotaFailure\",\"violations\":[{"
                   "\"quotaId\":\"GenerateRequestsPerDayPerProjectPerModel-FreeTier\"}]}]}}",
                   NOW, 0, &v);
    assert_int_equal(v.kind, AOR_KIND_QUOTA);
    assert_non_null(strstr(v.reason, "per-day"));
    /* a moderation refusal names the category, never the flagged text or the message */
    classify_exact(OA, 403, NULL, 0,
                   "{\"error\":{\"code\":403,\"message\":\"Your input was flagged for "
                   "\\\"harassment\\\"\",\"metadata\":{\"reasons\":[\"harassment\"],"
                   "\"flagged_input\":\"secret words\",\"provider_name\":\"OpenAI\"}}}",
                   NOW, 0, &v);
    assert_int_equal(v.kind, AOR_KIND_CLIENT);
    assert_string_equal(v.reason, "403 moderation_flagged (harassment)");
    /* JSON without an error object is not "not a JSON answer" (QA) */
    classify_exact(OA, 429, (const aor_header[]){{"content-type", "application/json"}}, 1, "{}",
                   NOW, 0, &v);
    assert_string_equal(v.reason, "429 rate: a JSON answer without an error object "
                                  "(application/json)");
    classify_exact(OA, 500, NULL, 0, "oops", NOW, 0, &v);
    assert_non_null(strstr(v.reason, "not a JSON answer"));
}

static void test_big_and_null_bodies(void **state) {
    aor_verdict v;
    aor_classify(OA, 429, NULL, 0, NULL, 100, NOW, 0, &v); /* NULL body with a length */
    expect("null body", &v, AOR_KIND_RATE, -1);
    size_t n = AOR_CLASSIFY_MAX_BODY * 2;
    char *big = malloc(n);
    assert_non_null(big);
    memset(big, ' ', n);
    memcpy(big, "<html>", 6);
    aor_classify(OA, 404, NULL, 0, big, n, NOW, 0, &v);
    expect("big html", &v, AOR_KIND_CONFIG, -1);
    free(big);
}

/* SSE error events inside a 200 stream (§5.3) */
static int sse(aor_dialect d, const char *data, aor_verdict *v) {
    size_t len = data ? strlen(data) : 0;
    char *copy = len ? malloc(len) : NULL;
    if (len)
        memcpy(copy, data, len);
    int r = aor_classify_sse_error(d, copy, len, v);
    free(copy);
    return r;
}

static void test_sse_errors(void **state) {
    static const struct {
        const char *name;
        aor_dialect d;
        const char *data;
        aor_kind kind;
        double hint;
    } t[] = {
        {"anthropic overloaded", AN,
         "{\"type\":\"error\",\"error\":{\"type\":\"overloaded_error\",\"message\":"
         "\"Overloaded\"}}",
         AOR_KIND_RATE, -1},
        {"anthropic rate", AN,
         "{\"type\":\"error\",\"error\":{\"type\":\"rate_limit_error\",\"message\":\"x\"}}",
         AOR_KIND_RATE, -1},
        {"anthropic api_error", AN,
         "{\"type\":\"error\",\"error\":{\"type\":\"api_error\",\"message\":\"x\"}}",
         AOR_KIND_TRANSIENT, -1},
        {"anthropic invalid", AN,
         "{\"type\":\"error\",\"error\":{\"type\":\"invalid_request_error\",\"message\":\"x\"}}",
         AOR_KIND_CLIENT, -1},
        {"anthropic billing", AN,
         "{\"type\":\"error\",\"error\":{\"type\":\"billing_error\",\"message\":\"x\"}}",
         AOR_KIND_QUOTA, -1},
        {"openai server_error", OA,
         "{\"error\":{\"message\":\"The server had an error\",\"type\":\"server_error\","
         "\"param\":null,\"code\":null}}",
         AOR_KIND_TRANSIENT, -1},
        {"openai quota", OA,
         "{\"error\":{\"message\":\"quota\",\"type\":\"insufficient_quota\",\"code\":"
         "\"insufficient_quota\"}}",
         AOR_KIND_QUOTA, -1},
        {"openrouter chunk 429", OA,
         "{\"id\":\"c\",\"object\":\"chat.completion.chunk\",\"error\":{\"code\":429,"
         "\"message\":\"Rate limit exceeded\"},\"choices\":[{\"index\":0,\"delta\":{"
         "\"content\":\"\"},\"finish_reason\":\"error\"}]}",
         AOR_KIND_RATE, -1},
        {"openrouter chunk 502", OA, "{\"error\":{\"code\":502,\"message\":\"upstream\"}}",
         AOR_KIND_TRANSIENT, -1},
        {"openrouter chunk moderation 403", OA,
         "{\"error\":{\"code\":403,\"message\":\"flagged\",\"metadata\":{\"reasons\":["
         "\"sexual\"],\"flagged_input\":\"...\"}}}",
         AOR_KIND_CLIENT, -1},
        {"responses error event", OA,
         "{\"type\":\"error\",\"code\":\"rate_limit_exceeded\",\"message\":\"x\",\"param\":"
         "null}",
         AOR_KIND_RATE, -1},
        {"responses failed", OA,
         "{\"type\":\"response.failed\",\"response\":{\"status\":\"failed\",\"error\":{"
         "\"code\":\"server_error\",\"message\":\"x\"}}}",
         AOR_KIND_TRANSIENT, -1},
        {"gemini array", GE,
         "[{\"error\":{\"code\":429,\"status\":\"RESOURCE_EXHAUSTED\",\"details\":[{\"@type\":"
         "\"type.googleapis.com/google.rpc.RetryInfo\",\"retryDelay\":\"7s\"}]}}]",
         AOR_KIND_RATE, 7},
        {"gemini unavailable overloaded", GE,
         "{\"error\":{\"code\":503,\"message\":\"The model is overloaded.\",\"status\":"
         "\"UNAVAILABLE\"}}",
         AOR_KIND_RATE, -1},
    };
    for (size_t i = 0; i < N(t); i++) {
        aor_verdict v;
        if (sse(t[i].d, t[i].data, &v) != 1)
            fail_msg("%s: not seen as an error event", t[i].name);
        expect(t[i].name, &v, t[i].kind, t[i].hint);
        assert_non_null(strstr(v.reason, "stream error"));
    }
    static const char *const not_errors[] = {
        "[DONE]",
        "{\"id\":\"c\",\"choices\":[{\"delta\":{\"content\":\"error\"}}]}",
        "{\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"end_turn\"}}",
        "{\"type\":\"response.output_text.delta\",\"delta\":\"error\"}",
        "{\"candidates\":[{\"content\":{\"parts\":[{\"text\":\"hi\"}]}}]}",
        "",
        "{\"error\":",
    };
    for (size_t i = 0; i < N(not_errors); i++) {
        aor_verdict v;
        v.kind = AOR_KIND_OK;
        if (sse(OA, not_errors[i], &v) != 0)
            fail_msg("\"%s\" taken as an error event", not_errors[i]);
        assert_int_equal(v.kind, AOR_KIND_OK); /* untouched */
    }
    aor_verdict v;
    assert_int_equal(aor_classify_sse_error(OA, NULL, 0, &v), 0);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_fixture_cases), cmocka_unit_test(test_edge_cases),
        cmocka_unit_test(test_reasons),       cmocka_unit_test(test_big_and_null_bodies),
        cmocka_unit_test(test_sse_errors),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
