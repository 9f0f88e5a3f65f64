/* libFuzzer target: the retry hint parsers of common/classify.h (spec §4.3):
 * Retry-After (seconds and the three HTTP-date forms), retry-after-ms, Google and Go
 * durations, RFC 3339, provider reset headers, and aor_hint_from_answer over headers and a
 * Gemini body.
 * Input: parsed as an answer (fuzz_answer.h); every single-value parser gets the whole
 * input as one C string and each header value.
 * Checks, beside memory safety: a hint is -1 or in (0, AOR_HINT_SATURATE_S] (never NaN or
 * inf); date parsers leave *out untouched on failure; a plain 1*DIGIT Retry-After gives
 * exactly that number of seconds. */
#include "fuzz_answer.h"

#include <math.h>

static const double nows[] = {1800000000.0, 0.0, 4102444800.0};
#define NNOWS (sizeof nows / sizeof nows[0])

static void check_hint(double h, const char *what) {
    FUZZ_CHECK(h == -1 || (h > 0 && h <= AOR_HINT_SATURATE_S), what);
}

/* Seconds of a value that is only blanks, 1*DIGIT, blanks; -2 when it is not that shape. */
static double plain_seconds(const char *v) {
    const char *p = v;
    while (*p == ' ' || *p == '\t')
        p++;
    const char *d = p;
    while (*p >= '0' && *p <= '9')
        p++;
    if (p == d)
        return -2;
    const char *de = p;
    while (*p == ' ' || *p == '\t')
        p++;
    if (*p != '\0')
        return -2;
    double s = 0;
    for (const char *q = d; q < de; q++)
        s = s * 10 + (*q - '0');
    return s;
}

static void one_value(const char *v) {
    for (size_t i = 0; i < NNOWS; i++) {
        double h = aor_hint_retry_after(v, nows[i]);
        check_hint(h, "Retry-After hint");
        double plain = plain_seconds(v);
        if (plain >= 0 && strlen(v) <= AOR_HINT_MAX_VALUE) {
            double want = plain == 0 ? -1 : fmin(plain, AOR_HINT_SATURATE_S);
            FUZZ_CHECK(h == want || fabs(h - want) <= want * 1e-12,
                       "1*DIGIT Retry-After is that many seconds");
        }
        check_hint(aor_hint_reset(v, nows[i]), "reset header hint");
        double out = 12345.0;
        int r = aor_http_date_parse(v, nows[i], &out);
        FUZZ_CHECK(r == 0 || r == -1, "HTTP-date result");
        FUZZ_CHECK(r == 0 ? isfinite(out) : out == 12345.0, "HTTP-date output");
    }
    check_hint(aor_hint_retry_after_ms(v), "retry-after-ms hint");
    check_hint(aor_hint_duration(v), "Google duration hint");
    check_hint(aor_hint_go_duration(v), "Go duration hint");
    double out = 12345.0;
    int r = aor_rfc3339_parse(v, &out);
    FUZZ_CHECK(r == 0 || r == -1, "RFC 3339 result");
    FUZZ_CHECK(r == 0 ? isfinite(out) : out == 12345.0, "RFC 3339 output");
    int rh = aor_hint_is_reset_header(v);
    FUZZ_CHECK(rh == 0 || rh == 1, "reset header name test");
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    char *whole = fuzz_strndup(data, size);
    one_value(whole);
    free(whole);

    fuzz_answer a;
    fuzz_answer_split(&a, data, size);
    for (size_t i = 0; i < a.n; i++)
        one_value(a.h[i].value);
    /* The body as an exact-size heap copy: ASan sees reads past its end. */
    char *body = malloc(a.body_len ? a.body_len : 1);
    FUZZ_CHECK(body != NULL, "out of memory in the harness");
    if (a.body_len)
        memcpy(body, a.body, a.body_len);
    for (size_t i = 0; i < NNOWS; i++) {
        aor_dialect d = (aor_dialect)(i % 3);
        check_hint(aor_hint_from_answer(d, a.h, a.n, body, a.body_len, nows[i]),
                   "hint from an answer");
        for (unsigned f = 1; f <= AOR_HINT_ALL; f++)
            check_hint(aor_hint_pick(a.h, a.n, body, a.body_len, nows[i], f), "picked hint");
    }
    free(body);
    fuzz_answer_free(&a);
    return 0;
}
