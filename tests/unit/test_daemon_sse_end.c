/* Unit tests for daemon/sse_end.c: which endpoint's streams end with which line, the
 * scanner over pieces of a stream (lines split anywhere, CRLF, long lines, look-alikes
 * in the data), and the set of upstreams seen to send the terminator (per upstream,
 * endpoint and model; forgotten after misses in a row; bounded). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "sse_end.h"

#include <stdio.h>
#include <string.h>

static int line(aor_sse_end kind, const char *l) {
    return aor_sse_end_line(kind, l, strlen(l));
}

static void test_end_of_path(void **state) {
    (void)state;
    assert_int_equal(aor_sse_end_of(AOR_DIALECT_OPENAI, "/v1/chat/completions"), AOR_SSE_END_CHAT);
    assert_int_equal(aor_sse_end_of(AOR_DIALECT_OPENAI, "/openai/v1/chat/completions/"),
                     AOR_SSE_END_CHAT);
    assert_int_equal(aor_sse_end_of(AOR_DIALECT_OPENAI, "/openai/deployments/gpt/chat/completions"),
                     AOR_SSE_END_CHAT);
    assert_int_equal(aor_sse_end_of(AOR_DIALECT_OPENAI, "/v1/completions"),
                     AOR_SSE_END_COMPLETIONS);
    assert_int_equal(aor_sse_end_of(AOR_DIALECT_OPENAI, "/v1/responses"), AOR_SSE_END_RESPONSES);
    assert_int_equal(aor_sse_end_of(AOR_DIALECT_ANTHROPIC, "/v1/messages"), AOR_SSE_END_MESSAGES);
    /* Others have none: a Gemini stream, Anthropic's count_tokens, OpenAI's audio. */
    assert_int_equal(aor_sse_end_of(AOR_DIALECT_GEMINI, "/v1beta/models/g:streamGenerateContent"),
                     AOR_SSE_END_NONE);
    assert_int_equal(aor_sse_end_of(AOR_DIALECT_ANTHROPIC, "/v1/messages/count_tokens"),
                     AOR_SSE_END_NONE);
    assert_int_equal(aor_sse_end_of(AOR_DIALECT_OPENAI, "/v1/audio/speech"), AOR_SSE_END_NONE);
    assert_int_equal(aor_sse_end_of(AOR_DIALECT_OPENAI, "/v1/messages"), AOR_SSE_END_NONE);
    assert_int_equal(aor_sse_end_of(AOR_DIALECT_ANTHROPIC, "/v1/chat/completions"),
                     AOR_SSE_END_NONE);
    assert_int_equal(aor_sse_end_of(AOR_DIALECT_OPENAI, "/"), AOR_SSE_END_NONE);
    assert_int_equal(aor_sse_end_of(AOR_DIALECT_OPENAI, ""), AOR_SSE_END_NONE);
    assert_int_equal(aor_sse_end_of(AOR_DIALECT_OPENAI, NULL), AOR_SSE_END_NONE);
}

static void test_lines(void **state) {
    (void)state;
    assert_true(line(AOR_SSE_END_CHAT, "data: [DONE]"));
    assert_true(line(AOR_SSE_END_COMPLETIONS, "data:[DONE]"));
    assert_false(line(AOR_SSE_END_CHAT, "data:  [DONE]")); /* the value is " [DONE]" */
    assert_true(line(AOR_SSE_END_CHAT, "data: [DONE] "));  /* the SDKs: startsWith("[DONE]") */
    assert_true(line(AOR_SSE_END_CHAT, "data: [DONE]x"));
    assert_false(line(AOR_SSE_END_CHAT, "data: x[DONE]"));
    assert_false(line(AOR_SSE_END_CHAT, "event: [DONE]"));
    assert_false(line(AOR_SSE_END_CHAT, ": [DONE]"));
    assert_false(line(AOR_SSE_END_CHAT, "data: [DON"));
    assert_false(line(AOR_SSE_END_CHAT, ""));
    assert_true(line(AOR_SSE_END_MESSAGES, "event: message_stop"));
    assert_true(line(AOR_SSE_END_MESSAGES, "event:message_stop"));
    assert_false(line(AOR_SSE_END_MESSAGES, "event: message_stopped"));
    assert_true(line(AOR_SSE_END_MESSAGES, "event: message_stop \t"));
    assert_false(line(AOR_SSE_END_MESSAGES, "data: {\"type\":\"message_stop\"}"));
    assert_false(line(AOR_SSE_END_MESSAGES, "data: [DONE]"));
    assert_true(line(AOR_SSE_END_RESPONSES, "event: response.completed"));
    assert_true(line(AOR_SSE_END_RESPONSES, "event: response.incomplete"));
    assert_true(line(AOR_SSE_END_RESPONSES, "event: response.failed"));
    assert_false(line(AOR_SSE_END_RESPONSES, "event: response.created"));
    assert_false(line(AOR_SSE_END_RESPONSES, "event: response.output_text.done"));
    assert_false(line(AOR_SSE_END_NONE, "data: [DONE]"));
    assert_false(aor_sse_end_line(AOR_SSE_END_CHAT, NULL, 4));
    assert_string_equal(aor_sse_end_name(AOR_SSE_END_CHAT), "data: [DONE]");
    assert_string_equal(aor_sse_end_name(AOR_SSE_END_COMPLETIONS), "data: [DONE]");
    assert_string_equal(aor_sse_end_name(AOR_SSE_END_MESSAGES), "message_stop");
    assert_string_equal(aor_sse_end_name(AOR_SSE_END_RESPONSES), "response.completed");
    assert_string_equal(aor_sse_end_name(AOR_SSE_END_NONE), "");
}

/* Feeds text to a new scan of kind in pieces of step bytes (0: whole); returns seen
 * after finish. */
static int scan(aor_sse_end kind, const char *text, size_t step) {
    aor_sse_end_scan s;
    aor_sse_end_scan_init(&s, kind);
    size_t n = strlen(text);
    if (!step)
        step = n ? n : 1;
    for (size_t at = 0; at < n; at += step)
        aor_sse_end_scan_feed(&s, text + at, n - at < step ? n - at : step);
    return aor_sse_end_scan_finish(&s);
}

static void test_scan(void **state) {
    (void)state;
    static const char chat[] = "data: {\"choices\":[{\"delta\":{\"content\":\"hi\"}}]}\n\n"
                               "data: [DONE]\n\n";
    static const char anth[] = "event: message_delta\ndata: {\"type\":\"message_delta\"}\n\n"
                               "event: message_stop\r\ndata: {\"type\":\"message_stop\"}\r\n\r\n"
                               "event: ping\ndata: {\"type\": \"ping\"}\n\n";
    for (size_t step = 0; step <= 7; step++) {
        assert_true(scan(AOR_SSE_END_CHAT, chat, step));
        assert_true(scan(AOR_SSE_END_MESSAGES, anth, step)); /* a ping after it is fine */
        assert_false(scan(AOR_SSE_END_MESSAGES, chat, step));
        assert_false(scan(AOR_SSE_END_CHAT, anth, step));
    }
    /* Lines that end with a bare CR (SSE allows CRLF, LF and CR; QA: a CR-only stream
     * was never seen to end) */
    for (size_t step = 0; step <= 7; step++) {
        assert_true(scan(AOR_SSE_END_CHAT, "data: {}\r\rdata: [DONE]\r\r", step));
        assert_true(scan(AOR_SSE_END_MESSAGES, "event: message_stop\rdata: {}\r\r", step));
        assert_false(scan(AOR_SSE_END_CHAT, "data: {}\r\rdata: {\"x\":1}\r\r", step));
    }
    /* The stream ends right after the line, without its line end. */
    assert_true(scan(AOR_SSE_END_CHAT, "data: {}\n\ndata: [DONE]", 3));
    /* A cut stream; the terminator's text inside data (JSON escapes line ends). */
    assert_false(scan(AOR_SSE_END_CHAT, "data: {\"x\":1}\n\n", 0));
    assert_false(scan(AOR_SSE_END_CHAT, "data: {\"content\":\"\\ndata: [DONE]\\n\"}\n\n", 0));
    assert_false(scan(AOR_SSE_END_CHAT, "data: {\"content\":\"data: [DONE]\"}\n\n", 0));
    /* A line that goes on past the longest terminator line is not looked at. */
    assert_false(scan(AOR_SSE_END_MESSAGES, "event: message_stop                        \n", 5));
    /* A long event (well over the 32 bytes kept of a line), then the terminator. */
    char big[8192];
    memset(big, 'x', sizeof big);
    memcpy(big, "data: ", 6);
    snprintf(big + 6000, sizeof big - 6000, "\n\nevent: response.completed\ndata: {}\n\n");
    assert_true(scan(AOR_SSE_END_RESPONSES, big, 1000));
    assert_true(scan(AOR_SSE_END_RESPONSES, big, 1));
    /* NONE never sees one. */
    assert_false(scan(AOR_SSE_END_NONE, chat, 0));
}

/* aor_sse_ends_check for a stream that started just now. */
static int now_check(aor_sse_ends *s, const char *base_url, aor_sse_end kind, const char *model,
                     int terminated) {
    return aor_sse_ends_check(s, base_url, kind, model, aor_sse_ends_epoch(s), terminated);
}

static void test_set(void **state) {
    (void)state;
    aor_sse_ends *s = aor_sse_ends_new();
    assert_non_null(s);
    const char *a = "https://api.openai.com", *b = "http://127.0.0.1:8000/v1";
    /* Not seen yet: a stream without the terminator is no failure. */
    assert_false(now_check(s, a, AOR_SSE_END_CHAT, "gpt", 0));
    assert_int_equal(aor_sse_ends_count(s), 0);
    assert_false(now_check(s, a, AOR_SSE_END_CHAT, "gpt", 1)); /* now noted */
    assert_int_equal(aor_sse_ends_count(s), 1);
    assert_true(now_check(s, a, AOR_SSE_END_CHAT, "gpt", 0)); /* cut short */
    /* Per upstream, per endpoint, per model. */
    assert_false(now_check(s, b, AOR_SSE_END_CHAT, "gpt", 0));
    assert_false(now_check(s, a, AOR_SSE_END_COMPLETIONS, "gpt", 0));
    assert_false(now_check(s, a, AOR_SSE_END_CHAT, "other", 0));
    assert_false(now_check(s, a, AOR_SSE_END_CHAT, NULL, 0));
    /* A terminated stream resets the misses: two more misses in a row to forget. */
    assert_false(now_check(s, a, AOR_SSE_END_CHAT, "gpt", 1));
    assert_true(now_check(s, a, AOR_SSE_END_CHAT, "gpt", 0));
    assert_true(now_check(s, a, AOR_SSE_END_CHAT, "gpt", 0)); /* 2nd: forgotten */
    assert_false(now_check(s, a, AOR_SSE_END_CHAT, "gpt", 0));
    assert_int_equal(aor_sse_ends_count(s), 0);
    /* A long model name (the key is built off the stack). */
    char model[600];
    memset(model, 'm', sizeof model - 1);
    model[sizeof model - 1] = '\0';
    assert_false(now_check(s, b, AOR_SSE_END_MESSAGES, model, 1));
    assert_true(now_check(s, b, AOR_SSE_END_MESSAGES, model, 0));
    /* NONE and NULLs. */
    assert_false(now_check(s, a, AOR_SSE_END_NONE, "gpt", 1));
    assert_false(now_check(s, NULL, AOR_SSE_END_CHAT, "gpt", 1));
    assert_false(now_check(NULL, a, AOR_SSE_END_CHAT, "gpt", 1));
    /* Bounded: model names come from clients. */
    char m[32];
    for (int i = 0; i < AOR_SSE_ENDS_MAX + 10; i++) {
        snprintf(m, sizeof m, "m%d", i);
        now_check(s, a, AOR_SSE_END_CHAT, m, 1);
    }
    assert_int_equal(aor_sse_ends_count(s), AOR_SSE_ENDS_MAX);
    aor_sse_ends_free(s);
    aor_sse_ends_free(NULL);
    assert_int_equal(aor_sse_ends_count(NULL), 0);
}

/* Review: six streams cut by one outage counted as six misses in a row, so after two
 * the upstream was forgotten and the other four passed as whole answers. Streams in
 * flight when a miss is counted are cut too, but count with it as one. */
static void test_burst_counts_once(void **state) {
    (void)state;
    aor_sse_ends *s = aor_sse_ends_new();
    assert_non_null(s);
    const char *a = "https://api.openai.com";
    assert_false(now_check(s, a, AOR_SSE_END_CHAT, "gpt", 1));
    unsigned long started = aor_sse_ends_epoch(s); /* six streams start together */
    for (int i = 0; i < 6; i++)
        assert_true(aor_sse_ends_check(s, a, AOR_SSE_END_CHAT, "gpt", started, 0));
    assert_int_equal(aor_sse_ends_count(s), 1); /* still expected: one miss */
    /* The next stream, started after that miss, is the second: forgotten after it. */
    assert_true(now_check(s, a, AOR_SSE_END_CHAT, "gpt", 0));
    assert_false(now_check(s, a, AOR_SSE_END_CHAT, "gpt", 0));
    assert_int_equal(aor_sse_ends_count(s), 0);
    /* An epoch from before a miss of another entry is not "before" for this one. */
    assert_false(now_check(s, a, AOR_SSE_END_CHAT, "gpt", 1));
    assert_false(now_check(s, a, AOR_SSE_END_COMPLETIONS, "gpt", 1));
    unsigned long old = aor_sse_ends_epoch(s);
    assert_true(now_check(s, a, AOR_SSE_END_COMPLETIONS, "gpt", 0));        /* epoch moves on */
    assert_true(aor_sse_ends_check(s, a, AOR_SSE_END_CHAT, "gpt", old, 0)); /* chat's 1st */
    assert_true(now_check(s, a, AOR_SSE_END_CHAT, "gpt", 0));               /* its 2nd */
    assert_false(now_check(s, a, AOR_SSE_END_CHAT, "gpt", 0));
    assert_int_equal(aor_sse_ends_epoch(NULL), 0);
    aor_sse_ends_free(s);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_end_of_path),
        cmocka_unit_test(test_lines),
        cmocka_unit_test(test_scan),
        cmocka_unit_test(test_set),
        cmocka_unit_test(test_burst_counts_once),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
