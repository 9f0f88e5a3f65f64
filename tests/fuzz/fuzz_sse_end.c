/* libFuzzer target: the stream-terminator scanner (daemon/sse_end.h, spec §4.1 "a stream
 * that ends without its terminator"). Input: byte 0 the endpoint kind; bytes 1-2 the size
 * of the pieces the stream is fed in (0: the whole at once); rest: the stream's bytes.
 * Checks, beside memory safety: fed in any pieces, the scanner finds the terminator
 * exactly when a reference does (the stream split at each LF into lines, a CR before it
 * dropped, each line checked with aor_sse_end_line, the last line without its LF too);
 * NONE never finds one; a line is never the terminator of two kinds' streams at once
 * unless the kinds share it. */
#include "fuzz_util.h"
#include "sse_end.h"

/* The reference: every line of data checked on its own. */
static int reference(aor_sse_end kind, const char *data, size_t len) {
    size_t start = 0;
    for (size_t i = 0; i <= len; i++) {
        if (i < len && data[i] != '\n')
            continue;
        size_t l = i - start;
        if (i == len && l == 0)
            break;
        if (l && data[start + l - 1] == '\r')
            l--;
        if (aor_sse_end_line(kind, data + start, l))
            return 1;
        start = i + 1;
    }
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    aor_sse_end kind = (aor_sse_end)(fuzz_take_byte(&data, &size) % 5);
    size_t step = fuzz_take_byte(&data, &size);
    step = step << 8 | fuzz_take_byte(&data, &size);
    char *buf = malloc(size ? size : 1); /* exact size: a read past it is an ASan report */
    FUZZ_CHECK(buf != NULL, "out of memory in the harness");
    if (size)
        memcpy(buf, data, size);
    aor_sse_end_scan s;
    aor_sse_end_scan_init(&s, kind);
    size_t piece = step ? step : (size ? size : 1);
    for (size_t at = 0; at < size; at += piece)
        aor_sse_end_scan_feed(&s, buf + at, size - at < piece ? size - at : piece);
    int seen = aor_sse_end_scan_finish(&s);
    FUZZ_CHECK(seen == 0 || seen == 1, "seen is 0 or 1");
    FUZZ_CHECK(seen == reference(kind, buf, size), "the scanner agrees with the reference, "
                                                   "whatever the pieces");
    if (kind == AOR_SSE_END_NONE)
        FUZZ_CHECK(!seen, "NONE never sees a terminator");
    FUZZ_CHECK(s.len <= AOR_SSE_END_LINE_MAX + 2, "the kept line is bounded");
    free(buf);
    return 0;
}
