/* Unit tests for daemon/sse_peek.c: the first SSE event that is not only comments, the
 * same whatever the read boundaries. */
#include "sse_peek.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

/* Feeds text in pieces of step bytes (0: whole); returns found, with *off and *len. */
static int scan(const char *text, size_t step, size_t *off, size_t *len) {
    aor_sse_peek s;
    aor_sse_peek_init(&s);
    size_t n = strlen(text), at = 0;
    int found = 0;
    if (step == 0)
        step = n ? n : 1;
    while (at < n) {
        size_t k = n - at < step ? n - at : step;
        found = aor_sse_peek_feed(&s, text + at, k, off, len);
        at += k;
    }
    return found;
}

/* text's first event is at want_off, want_len bytes long, for every read size. */
static void finds(const char *text, size_t want_off, size_t want_len) {
    for (size_t step = 0; step <= 7; step++) {
        size_t off = 99, len = 99;
        if (!scan(text, step, &off, &len))
            fail_msg("%s: not found with reads of %zu", text, step);
        if (off != want_off || len != want_len)
            fail_msg("%s: reads of %zu: at %zu, %zu bytes; want %zu, %zu", text, step, off, len,
                     want_off, want_len);
    }
}

static void not_yet(const char *text) {
    for (size_t step = 0; step <= 7; step++) {
        size_t off = 99, len = 99;
        if (scan(text, step, &off, &len))
            fail_msg("%s: found with reads of %zu", text, step);
    }
}

static void test_first_event(void **state) {
    (void)state;
    finds("data: x\n\n", 0, 9);
    finds("event: a\ndata: b\n\nevent: c\n", 0, 18);
    finds(": OPENROUTER PROCESSING\n\ndata: x\n\n", 25, 9);
    finds(":a\n:b\n\n\n\ndata:1\n\n", 9, 8);    /* blank events are skipped */
    finds(": c\r\n\r\ndata: x\r\n\r\n", 7, 10); /* up to the '\r' that ends it */
    finds(":c\r\rdata: x\r\r", 4, 9);           /* bare CRs */
    finds(":c\n\ndata: x\r\n\r\n", 4, 10);
    finds("data\n\n", 0, 6); /* a field without a value is a field */
    not_yet("data: x\n");
    not_yet(": only\n\n:comments\n\n");
    not_yet("data: x\r");
    not_yet("");
}

/* Found once, it stays found: more bytes change nothing. */
static void test_found_stays(void **state) {
    (void)state;
    aor_sse_peek s;
    aor_sse_peek_init(&s);
    size_t off = 0, len = 0;
    assert_int_equal(aor_sse_peek_feed(&s, ":x\n\ndata: 1\n\n", 13, &off, &len), 1);
    assert_int_equal(off, 4);
    assert_int_equal(len, 9);
    off = len = 0;
    assert_int_equal(aor_sse_peek_feed(&s, "data: 2\n\n", 9, &off, &len), 1);
    assert_int_equal(off, 4);
    assert_int_equal(len, 9);
    assert_int_equal(aor_sse_peek_feed(&s, NULL, 0, &off, &len), 1);
}

/* Many comment events, one byte at a time: each byte looked at once (a test that cannot
 * time this, only that the answer is right at the end). */
static void test_many_comments(void **state) {
    (void)state;
    aor_sse_peek s;
    aor_sse_peek_init(&s);
    size_t off = 0, len = 0;
    static const char unit[] = ":\n\n"; /* a comment event */
    for (int i = 0; i < 3 * 40000; i++)
        assert_int_equal(aor_sse_peek_feed(&s, unit + i % 3, 1, &off, &len), 0);
    assert_int_equal(aor_sse_peek_feed(&s, "data: z\n\n", 9, &off, &len), 1);
    assert_int_equal(off, 3 * 40000);
    assert_int_equal(len, 9);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_first_event),
        cmocka_unit_test(test_found_stays),
        cmocka_unit_test(test_many_comments),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
