/* libFuzzer target: the request-side parsers of common/dialect.h (spec §5.1, §3.2, §5.6):
 * model from a JSON body or a Gemini path, replacing it, the Gemini ?key= move, URL
 * redaction, auth headers and error bodies.
 * Input: a first line (up to '\n') is the model name used for replacements, the rest is
 * both the request body and (as a C string) the request target.
 * Checks, beside memory safety: body_model and body_set_model agree on which bodies have a
 * model and the new body names the new model; the same for paths; taking the key and
 * redacting are idempotent; no auth header carries CR/LF; error bodies are valid JSON. */
#include "fuzz_util.h"
#include "dialect.h"

#include <cjson/cJSON.h>
#include <errno.h>

static void body_checks(const char *body, size_t len, const char *model) {
    char *old = aor_dialect_body_model(body, len);
    size_t out_len = 0;
    char *nb = aor_dialect_body_set_model(body, len, model, &out_len);
    if (!old || !nb)
        FUZZ_CHECK(!old && !nb, "body_model and body_set_model agree on having a model");
    if (nb) {
        FUZZ_CHECK(strlen(nb) <= out_len && nb[out_len] == '\0', "new body length");
        char *now = aor_dialect_body_model(nb, out_len);
        FUZZ_CHECK(now != NULL && strcmp(now, model) == 0, "the new body names the new model");
        free(now);
    }
    free(nb);
    free(old);
}

static int model_char_ok(char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' ||
           c == '_' || c == '~' || c == '-';
}

static void path_checks(const char *path, const char *model) {
    char *old = aor_dialect_path_model(path);
    if (old)
        FUZZ_CHECK(*old && !strpbrk(old, ":/?#"), "a path model is one non-empty segment");
    char *np = aor_dialect_path_set_model(path, model);
    int model_ok = *model != '\0';
    for (const char *m = model; *m; m++)
        model_ok &= model_char_ok(*m);
    if (np) {
        FUZZ_CHECK(old && model_ok, "set_model only with a model segment and a clean model");
        char *now = aor_dialect_path_model(np);
        FUZZ_CHECK(now && strcmp(now, model) == 0, "the new path names the new model");
        free(now);
    } else {
        FUZZ_CHECK(!old || !model_ok, "set_model succeeds with a model segment and clean model");
    }
    free(np);
    free(old);

    aor_dialect d = aor_dialect_of_path(path);
    FUZZ_CHECK(d == AOR_DIALECT_OPENAI || d == AOR_DIALECT_ANTHROPIC || d == AOR_DIALECT_GEMINI,
               "a known dialect");

    const char *q = strchr(path, '?');
    q = q ? q + 1 : path;
    char *key = aor_dialect_query_key(q);
    FUZZ_CHECK(key || errno == 0, "query_key only fails on ENOMEM");
    FUZZ_CHECK(!key || *key != '\0', "an empty key= is no credential");
    char *clean = aor_dialect_query_drop_key(q);
    FUZZ_CHECK(clean != NULL && strlen(clean) <= strlen(q), "drop_key only fails on ENOMEM");
    char *key2 = aor_dialect_query_key(clean);
    FUZZ_CHECK(!key2 && errno == 0, "no key is left after drop_key");
    char *clean2 = aor_dialect_query_drop_key(clean);
    FUZZ_CHECK(clean2 && strcmp(clean, clean2) == 0, "dropping the key is idempotent");
    free(clean2);
    free(clean);
    if (key)
        explicit_bzero(key, strlen(key));
    free(key);
}

static void output_checks(const char *text) {
    for (int d = AOR_DIALECT_OPENAI; d <= AOR_DIALECT_GEMINI; d++) {
        char *h = aor_dialect_auth_header((aor_dialect)d, text);
        if (h)
            FUZZ_CHECK(!strpbrk(h, "\r\n"), "an auth header is one line");
        else
            FUZZ_CHECK(errno == EINVAL, "auth header refused as EINVAL");
        free(h);
        size_t len = 0;
        char *eb = aor_dialect_error_body((aor_dialect)d, 429, text, text, &len);
        FUZZ_CHECK(eb != NULL && strlen(eb) == len, "error body and its length");
        cJSON *j = cJSON_ParseWithLength(eb, len);
        FUZZ_CHECK(j != NULL, "an error body is valid JSON");
        cJSON_Delete(j);
        free(eb);
    }
    int a = aor_dialect_is_auth_header(text);
    FUZZ_CHECK(a == 0 || a == 1, "auth header name test");
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    const uint8_t *nl = memchr(data, '\n', size);
    size_t mlen = nl ? (size_t)(nl - data) : 0;
    char *model = fuzz_strndup(data, mlen);
    const uint8_t *rest = nl ? nl + 1 : data;
    size_t rlen = nl ? size - mlen - 1 : size;

    /* The body as an exact-size heap copy: ASan sees reads past its end. */
    char *body = malloc(rlen ? rlen : 1);
    FUZZ_CHECK(body != NULL, "out of memory in the harness");
    if (rlen)
        memcpy(body, rest, rlen);
    body_checks(body, rlen, model);
    free(body);

    char *path = fuzz_strndup(rest, rlen);
    path_checks(path, model);
    free(path);

    output_checks(model);
    free(model);
    return 0;
}
