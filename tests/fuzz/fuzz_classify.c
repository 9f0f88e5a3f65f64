/* libFuzzer target: classification of upstream answers and SSE error events
 * (common/classify.h, spec §4.1, §5.3).
 * Input: byte 0 holds flags (bit 0: retry_after = ignore), bytes 1-2 the HTTP status
 * (little-endian, modulo 1000); the rest is an answer as fuzz_answer.h splits it (headers,
 * empty line, body). aor_classify runs for every dialect; aor_classify_sse_error gets the
 * body as an event's data.
 * Checks, beside memory safety: the verdict is one of the kinds, its reason printable
 * and NUL-terminated, its hint -1 or positive and only on rate/transient verdicts (never
 * with ignore_hints); the status rules that do not depend on the body hold (0 -> transient,
 * 401 -> auth, 2xx -> ok or config, 304 -> client, other 3xx -> config, 1xx and >= 600 ->
 * transient); a non-error event leaves the verdict untouched. */
#include "fuzz_answer.h"

#include <math.h>

static void check_verdict(const aor_verdict *v, int ignore_hints) {
    FUZZ_CHECK(v->kind >= AOR_KIND_OK && v->kind <= AOR_KIND_CONFIG, "a known kind");
    FUZZ_CHECK(fuzz_printable(v->reason, sizeof v->reason), "reason is printable ASCII");
    FUZZ_CHECK(v->hint_s == -1 || (v->hint_s > 0 && isfinite(v->hint_s)), "hint -1 or positive");
    if (v->hint_s != -1)
        FUZZ_CHECK(v->kind == AOR_KIND_RATE || v->kind == AOR_KIND_TRANSIENT,
                   "hints only on rate and transient verdicts");
    if (ignore_hints)
        FUZZ_CHECK(v->hint_s == -1, "no hint with retry_after = ignore");
}

static void check_status_rules(long status, aor_kind k) {
    if (status == 0 || (status >= 100 && status < 200) || status >= 600)
        FUZZ_CHECK(k == AOR_KIND_TRANSIENT, "no answer, 1xx and >= 600 are transient");
    else if (status == 401)
        FUZZ_CHECK(k == AOR_KIND_AUTH, "401 is auth whatever the body says");
    else if (status >= 200 && status < 300)
        FUZZ_CHECK(k == AOR_KIND_OK || k == AOR_KIND_CONFIG, "2xx is ok or config");
    else if (status == 304)
        FUZZ_CHECK(k == AOR_KIND_CLIENT, "304 answers the client's conditional request");
    else if (status >= 300 && status < 400)
        FUZZ_CHECK(k == AOR_KIND_CONFIG, "3xx but 304 is config");
    else
        FUZZ_CHECK(k != AOR_KIND_OK, "an error status is never ok");
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    unsigned flags = fuzz_take_byte(&data, &size);
    long status = (long)(fuzz_take_u16(&data, &size) % 1000);
    int ignore_hints = flags & 1;
    fuzz_answer a;
    fuzz_answer_split(&a, data, size);
    /* The body as an exact-size heap copy: ASan sees reads past its end. */
    char *body = malloc(a.body_len ? a.body_len : 1);
    FUZZ_CHECK(body != NULL, "out of memory in the harness");
    if (a.body_len)
        memcpy(body, a.body, a.body_len);

    for (int d = AOR_DIALECT_OPENAI; d <= AOR_DIALECT_GEMINI; d++) {
        aor_verdict v;
        memset(&v, 0x5a, sizeof v);
        aor_classify((aor_dialect)d, status, a.h, a.n, body, a.body_len, 1800000000.0, ignore_hints,
                     &v);
        check_verdict(&v, ignore_hints);
        check_status_rules(status, v.kind);

        aor_verdict s, untouched;
        memset(&s, 0x5a, sizeof s);
        memcpy(&untouched, &s, sizeof s);
        int r = aor_classify_sse_error((aor_dialect)d, body, a.body_len, &s);
        FUZZ_CHECK(r == 0 || r == 1, "SSE result is 0 or 1");
        if (r == 1) {
            check_verdict(&s, 0);
            FUZZ_CHECK(s.kind != AOR_KIND_OK, "an SSE error event is never ok");
        } else {
            FUZZ_CHECK(memcmp(&s, &untouched, sizeof s) == 0, "no error event: out untouched");
        }
    }
    free(body);
    fuzz_answer_free(&a);
    return 0;
}
