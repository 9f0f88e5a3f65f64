/* libFuzzer target: the SSE event scanner that finds a stream's first events that count
 * (daemon/sse_peek.h, spec §5.3 "an error event ... before any byte went to the client").
 * Input: byte 0 the dialect; bytes 1-2 the size of the pieces the stream is fed in (0:
 * the whole at once); rest: the stream's bytes. Checks, beside memory safety: fed in any
 * pieces, with aor_sse_peek_next after each event found, the scanner reports exactly the
 * events a reference finds in the whole stream (lines ended by LF, CRLF or a bare CR; an
 * event ends at an empty line, reported up to that line's first terminator byte; events
 * of comment and blank lines only are skipped); aor_sse_peek_prelude says 0 for Gemini. */
#include "fuzz_util.h"
#include "sse_peek.h"

typedef struct {
    size_t off, len;
} event;

/* The reference over the whole stream; returns how many events it found (at most cap). */
static size_t reference(const char *d, size_t len, event *out, size_t cap) {
    size_t i = 0, start = 0, n = 0;
    int field = 0;
    while (i < len) {
        size_t j = i;
        while (j < len && d[j] != '\n' && d[j] != '\r')
            j++;
        if (j == len)
            break; /* a line without its end: no event ends in it */
        size_t after = j + 1;
        size_t next = after + (d[j] == '\r' && after < len && d[after] == '\n' ? 1 : 0);
        if (j > i) {
            if (d[i] != ':')
                field = 1;
        } else {
            if (field && n < cap)
                out[n++] = (event){start, after - start};
            field = 0;
            start = next;
        }
        i = next;
    }
    return n;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    aor_dialect dialect = (aor_dialect)(fuzz_take_byte(&data, &size) % 3);
    size_t step = fuzz_take_u16(&data, &size);
    char *buf = malloc(size ? size : 1); /* exact size: a read past it is an ASan report */
    event *ref = malloc((size / 2 + 1) * sizeof *ref);
    FUZZ_CHECK(buf != NULL && ref != NULL, "out of memory in the harness");
    if (size)
        memcpy(buf, data, size);
    size_t nref = reference(buf, size, ref, size / 2 + 1);
    aor_sse_peek s;
    aor_sse_peek_init(&s);
    size_t piece = step ? step : (size ? size : 1), at = 0, k = 0;
    while (at < size) {
        size_t n = size - at < piece ? size - at : piece, before = s.pos, off = 0, len = 0;
        int found = aor_sse_peek_feed(&s, buf + at, n, &off, &len);
        size_t used = s.pos - before;
        FUZZ_CHECK(used <= n && (found || used == n), "reads all it is given unless it found");
        at += used;
        if (!found)
            continue;
        FUZZ_CHECK(k < nref, "no event the reference does not find");
        FUZZ_CHECK(off == ref[k].off && len == ref[k].len, "the reference's event");
        FUZZ_CHECK(off + len <= at, "the event lies in what was fed");
        int pre = aor_sse_peek_prelude(dialect, buf + off, len);
        FUZZ_CHECK(pre == 0 || pre == 1, "prelude is 0 or 1");
        if (dialect == AOR_DIALECT_GEMINI)
            FUZZ_CHECK(!pre, "Gemini streams have no opening events");
        k++;
        aor_sse_peek_next(&s);
    }
    FUZZ_CHECK(k == nref, "every event the reference finds");
    free(ref);
    free(buf);
    return 0;
}
