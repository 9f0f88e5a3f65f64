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

/* aor_sse_peek_next: the events after the first, in any cut of the bytes, also when a
 * "\r\n" is split between the event's end and the next read. */
static void test_next_events(void **state) {
    (void)state;
    static const char text[] = "event: a\r\ndata: 1\r\n\r\n: c\n\nevent: b\ndata: 2\n\ndata: 3\n\n";
    size_t n = sizeof text - 1;
    for (size_t cut = 1; cut <= n; cut++) {
        aor_sse_peek s;
        aor_sse_peek_init(&s);
        size_t offs[3], lens[3], found = 0, at = 0;
        while (at < n && found < 3) {
            size_t k = n - at < cut ? n - at : cut, before = s.pos, off = 0, len = 0;
            int f = aor_sse_peek_feed(&s, text + at, k, &off, &len);
            at += s.pos - before;
            if (f) {
                offs[found] = off;
                lens[found] = len;
                found++;
                aor_sse_peek_next(&s);
            }
        }
        assert_int_equal(found, 3);
        assert_int_equal(offs[0], 0);
        assert_int_equal(lens[0], 20); /* to the empty line's CR: its LF is skipped */
        assert_memory_equal(text + offs[1], "event: b\ndata: 2\n\n", lens[1]);
        assert_int_equal(lens[1], 18);
        assert_memory_equal(text + offs[2], "data: 3\n\n", lens[2]);
        assert_int_equal(lens[2], 9);
    }
}

/* The opening events by their event: field, per dialect. */
static void test_prelude(void **state) {
    (void)state;
#define PRE(d, t) aor_sse_peek_prelude(d, t, sizeof t - 1)
    assert_int_equal(PRE(AOR_DIALECT_ANTHROPIC, "event: message_start\ndata: {}\n\n"), 1);
    assert_int_equal(PRE(AOR_DIALECT_ANTHROPIC, "event:ping\r\ndata: {}\r\n\r\n"), 1);
    assert_int_equal(PRE(AOR_DIALECT_ANTHROPIC, "data: {}\nevent: content_block_start\n\n"), 1);
    assert_int_equal(PRE(AOR_DIALECT_ANTHROPIC, "event: content_block_delta\ndata: {}\n\n"), 0);
    assert_int_equal(PRE(AOR_DIALECT_ANTHROPIC, "event: error\ndata: {}\n\n"), 0);
    assert_int_equal(PRE(AOR_DIALECT_ANTHROPIC, "event: message_started\n\n"), 0);
    assert_int_equal(PRE(AOR_DIALECT_ANTHROPIC, "event: message_star\n\n"), 0);
    assert_int_equal(PRE(AOR_DIALECT_ANTHROPIC, "event:  ping\n\n"), 0); /* value " ping" */
    assert_int_equal(PRE(AOR_DIALECT_ANTHROPIC, "data: {\"type\":\"ping\"}\n\n"), 0);
    assert_int_equal(PRE(AOR_DIALECT_ANTHROPIC, "event: response.created\n\n"), 0);
    assert_int_equal(PRE(AOR_DIALECT_OPENAI, "event: response.created\ndata: {}\n\n"), 1);
    assert_int_equal(PRE(AOR_DIALECT_OPENAI, "event: response.in_progress\n\n"), 1);
    assert_int_equal(PRE(AOR_DIALECT_OPENAI, "event: response.output_text.delta\n\n"), 0);
    assert_int_equal(PRE(AOR_DIALECT_OPENAI, "event: response.failed\n\n"), 0);
    assert_int_equal(PRE(AOR_DIALECT_OPENAI, "event: ping\n\n"), 0);
    assert_int_equal(PRE(AOR_DIALECT_OPENAI, "data: {\"choices\":[]}\n\n"), 0);
    assert_int_equal(PRE(AOR_DIALECT_GEMINI, "event: message_start\n\n"), 0);
    /* The last event: field is the event's type (WHATWG): a later other one ends it. */
    assert_int_equal(PRE(AOR_DIALECT_ANTHROPIC, "event: ping\nevent: error\n\n"), 0);
    assert_int_equal(PRE(AOR_DIALECT_ANTHROPIC, "event: error\nevent: ping\n\n"), 1);
#undef PRE
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_first_event),   cmocka_unit_test(test_found_stays),
        cmocka_unit_test(test_many_comments), cmocka_unit_test(test_next_events),
        cmocka_unit_test(test_prelude),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
