/* libFuzzer target: the HTTP/1.1 request reader (daemon/http.h over llhttp) and
 * what the daemon does next with a request (daemon/guard.h admission, path and model
 * lookups of common/dialect.h), driven like daemon/conn.c drives them.
 * Input: byte 0 picks body_max, bytes 1-2 a split point; the rest is the byte stream of
 * one client connection, delivered in two reads cut at the split point.
 * Checks, beside memory safety: the reader never spins (requests over and over with
 * nothing consumed) and always has a request to take after AOR_HTTP_REQUEST, errors carry a 4xx/5xx
 * status and a reason, and the requests seen and whether the connection ends in an error do not
 * depend on where TCP cut the stream (same summary as one read). */
#include "fuzz_util.h"
#include "dialect.h"
#include "guard.h"
#include "http.h"

#include <stdio.h>

static const size_t body_maxes[4] = {0, 16, 4096, 32u * 1024 * 1024};

/* Records what the daemon would see of one request into the summary stream. */
static void note_request(FILE *sum, aor_http_request *req, int sidecar) {
    FUZZ_CHECK(req->url != NULL, "a complete request has a target");
    FUZZ_CHECK(req->nfields <= AOR_HTTP_MAX_HEADERS, "field count within the limit");
    size_t blen = evbuffer_get_length(req->body);
    fprintf(sum, "R %u %u.%u ka=%d up=%d url=%s nf=%zu body=%zu\n", req->method, req->http_major,
            req->http_minor, req->keep_alive, req->upgrade, req->url, req->nfields, blen);
    for (size_t i = 0; i < req->nfields; i++) {
        FUZZ_CHECK(req->fields[i].name && req->fields[i].value, "fields have name and value");
        fprintf(sum, " %s: %s\n", req->fields[i].name, req->fields[i].value);
    }
    const char *body = blen ? (const char *)evbuffer_pullup(req->body, -1) : "";
    FUZZ_CHECK(body != NULL, "body can be pulled up");
    fwrite(body, 1, blen, sum);

    const char *why = NULL;
    int g = aor_guard_check(req, sidecar, sidecar ? "http://127.0.0.1:8787" : NULL, &why);
    FUZZ_CHECK(g == 0 || ((g == 400 || g == 403 || g == 405 || g == 417) && why), "guard answer");
    fprintf(sum, "\nG %d\n", g);
    if (g != 0)
        return;

    /* What daemon/proxy.c does with an admitted request. */
    char *path = aor_http_request_path(req);
    FUZZ_CHECK(path != NULL, "path of a request");
    aor_dialect d = aor_dialect_of_path(path);
    FUZZ_CHECK(d == AOR_DIALECT_OPENAI || d == AOR_DIALECT_ANTHROPIC || d == AOR_DIALECT_GEMINI,
               "a known dialect");
    const char *q = req->url ? strchr(req->url, '?') : NULL;
    char *key = q ? aor_dialect_query_key(q + 1) : NULL;
    char *clean = q ? aor_dialect_query_drop_key(q + 1) : strdup("");
    FUZZ_CHECK(clean != NULL, "drop_key only fails on ENOMEM");
    char *model = aor_dialect_path_model(path);
    if (!model && blen)
        model = aor_dialect_body_model(body, blen);
    fprintf(sum, "P %s d=%d clean=%s key=%s model=%s\n", path, (int)d, clean, key ? key : "-",
            model ? model : "-");
    free(model);
    free(clean);
    free(key);
    free(path);
}

/* Feeds the first `avail` bytes of stream from *pos on, like conn.c's process_input.
 * Returns 1 when the connection is over (error or upgrade), else 0. */
static int process(aor_http_reader *r, const char *stream, size_t avail, size_t *pos, FILE *sum,
                   int sidecar) {
    int idle = 0;
    while (*pos < avail) {
        size_t used = 0;
        int status = 0;
        const char *why = NULL;
        aor_http_result res =
            aor_http_reader_feed(r, stream + *pos, avail - *pos, &used, &status, &why);
        FUZZ_CHECK(used <= avail - *pos, "consumed within what was fed");
        *pos += used;
        if (res == AOR_HTTP_ERROR) {
            FUZZ_CHECK(status >= 400 && status <= 599 && why && *why, "error status and reason");
            /* Only that it failed: which check fires first (400 or 431, and the reason)
             * may depend on where a read ended. */
            fprintf(sum, "E\n");
            return 1;
        }
        if (res == AOR_HTTP_NEED_MORE) {
            if (used == 0)
                break; /* as conn.c: wait for more bytes */
            continue;
        }
        if (res == AOR_HTTP_CONTINUE)
            continue; /* timing of 100 Continue depends on the cut: not in the summary */
        aor_http_request *req = aor_http_reader_take(r);
        FUZZ_CHECK(req != NULL, "a request to take after AOR_HTTP_REQUEST");
        FUZZ_CHECK(aor_http_reader_take(r) == NULL, "only one request to take");
        idle = used == 0 ? idle + 1 : 0;
        FUZZ_CHECK(idle < 3, "the reader makes progress");
        int upgrade = req->upgrade;
        note_request(sum, req, sidecar);
        aor_http_request_free(req);
        if (upgrade)
            return 1; /* proxy.c answers 426 and the connection ends */
    }
    return 0;
}

/* Runs one connection over stream with the given read cut; returns the summary (malloc'd). */
static char *run(const char *stream, size_t len, size_t cut, size_t body_max, int sidecar) {
    char *text = NULL;
    size_t text_len = 0;
    FILE *sum = open_memstream(&text, &text_len);
    FUZZ_CHECK(sum != NULL, "open_memstream");
    aor_http_reader *r = aor_http_reader_new(body_max);
    FUZZ_CHECK(r != NULL, "reader");
    size_t pos = 0;
    if (!process(r, stream, cut, &pos, sum, sidecar))
        process(r, stream, len, &pos, sum, sidecar);
    aor_http_reader_free(r);
    FUZZ_CHECK(fclose(sum) == 0, "summary stream");
    return text;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    unsigned opts = fuzz_take_byte(&data, &size);
    size_t body_max = body_maxes[opts & 3];
    int sidecar = (opts >> 2) & 1;
    size_t cut = fuzz_take_u16(&data, &size);
    if (cut > size)
        cut = size ? cut % (size + 1) : 0;
    /* Exact-size heap copy: ASan sees any read past the end of what arrived. */
    char *stream = malloc(size ? size : 1);
    FUZZ_CHECK(stream != NULL, "out of memory in the harness");
    if (size)
        memcpy(stream, data, size);

    char *whole = run(stream, size, size, body_max, sidecar);
    char *split = run(stream, size, cut, body_max, sidecar);
    if (strcmp(whole, split) != 0) {
        fprintf(stderr, "one read:\n%s\ncut at %zu:\n%s\n", whole, cut, split);
        FUZZ_CHECK(0, "the same requests whatever the read boundaries");
    }
    free(whole);
    free(split);
    free(stream);
    return 0;
}
