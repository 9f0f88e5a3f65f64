/* Unit tests for daemon/sse_end.c: which endpoint's streams end with which event, the
 * events that are (and only look like) a terminator, and the set of upstreams seen to
 * send one. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "sse_end.h"

#include <errno.h>
#include <string.h>

static int matches(aor_sse_end kind, const char *ev) {
    return aor_sse_end_matches(kind, ev, strlen(ev));
}

static void test_end_of_path(void **state) {
    (void)state;
    assert_int_equal(aor_sse_end_of(AOR_DIALECT_OPENAI, "/v1/chat/completions"), AOR_SSE_END_DONE);
    assert_int_equal(aor_sse_end_of(AOR_DIALECT_OPENAI, "/openai/v1/chat/completions/"),
                     AOR_SSE_END_DONE);
    assert_int_equal(aor_sse_end_of(AOR_DIALECT_OPENAI, "/openai/deployments/gpt/chat/completions"),
                     AOR_SSE_END_DONE);
    assert_int_equal(aor_sse_end_of(AOR_DIALECT_OPENAI, "/v1/completions"), AOR_SSE_END_DONE);
    assert_int_equal(aor_sse_end_of(AOR_DIALECT_OPENAI, "/v1/responses"), AOR_SSE_END_RESPONSE);
    assert_int_equal(aor_sse_end_of(AOR_DIALECT_ANTHROPIC, "/v1/messages"),
                     AOR_SSE_END_MESSAGE_STOP);
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

static void test_done(void **state) {
    (void)state;
    assert_true(matches(AOR_SSE_END_DONE, "data: [DONE]\n\n"));
    assert_true(matches(AOR_SSE_END_DONE, "data:[DONE]"));
    assert_true(matches(AOR_SSE_END_DONE, "data: [DONE]\r\n\r\n"));
    assert_true(matches(AOR_SSE_END_DONE, "id: 7\ndata: [DONE]\n\n"));
    assert_false(matches(AOR_SSE_END_DONE, "data: {\"choices\":[]}\n\n"));
    assert_false(matches(AOR_SSE_END_DONE, "data: [DONE]x\n\n"));
    assert_false(matches(AOR_SSE_END_DONE, "data:  [DONE]\n\n")); /* the value is " [DONE]" */
    assert_false(matches(AOR_SSE_END_DONE, "event: [DONE]\n\n"));
    assert_false(matches(AOR_SSE_END_DONE, ": [DONE]\n\n"));
    assert_false(matches(AOR_SSE_END_DONE, "data: [DON"));
    assert_false(matches(AOR_SSE_END_DONE, ""));
    assert_false(aor_sse_end_matches(AOR_SSE_END_DONE, NULL, 5));
    assert_false(matches(AOR_SSE_END_NONE, "data: [DONE]\n\n"));
}

static void test_message_stop(void **state) {
    (void)state;
    assert_true(matches(AOR_SSE_END_MESSAGE_STOP,
                        "event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n"));
    assert_true(matches(AOR_SSE_END_MESSAGE_STOP, "event:message_stop\r\n\r\n"));
    assert_true(matches(AOR_SSE_END_MESSAGE_STOP, "data: {\"type\": \"message_stop\"}\n\n"));
    assert_false(matches(AOR_SSE_END_MESSAGE_STOP,
                         "event: message_delta\ndata: {\"type\":\"message_delta\"}\n\n"));
    assert_false(matches(AOR_SSE_END_MESSAGE_STOP, "event: message_stopped\n\n"));
    /* "type" nested, not the event's own */
    assert_false(matches(AOR_SSE_END_MESSAGE_STOP,
                         "data: {\"delta\":{\"type\":\"message_stop\"},\"type\":\"x\"}\n\n"));
    assert_false(matches(AOR_SSE_END_MESSAGE_STOP, "data: message_stop\n\n"));
    assert_false(matches(AOR_SSE_END_MESSAGE_STOP, "data: [DONE]\n\n"));
}

static void test_response(void **state) {
    (void)state;
    assert_true(matches(AOR_SSE_END_RESPONSE,
                        "event: response.completed\ndata: {\"type\":\"response.completed\"}\n\n"));
    assert_true(matches(AOR_SSE_END_RESPONSE, "event: response.incomplete\n\n"));
    assert_true(matches(AOR_SSE_END_RESPONSE, "data: {\"type\":\"response.failed\"}\n\n"));
    assert_false(matches(AOR_SSE_END_RESPONSE, "event: response.output_text.delta\n\n"));
    assert_false(matches(AOR_SSE_END_RESPONSE, "event: response.created\n\n"));
    assert_false(matches(AOR_SSE_END_RESPONSE, "event: message_stop\n\n"));
}

static void test_names(void **state) {
    (void)state;
    assert_string_equal(aor_sse_end_name(AOR_SSE_END_DONE), "data: [DONE]");
    assert_string_equal(aor_sse_end_name(AOR_SSE_END_MESSAGE_STOP), "message_stop");
    assert_string_equal(aor_sse_end_name(AOR_SSE_END_RESPONSE), "response.completed");
    assert_string_equal(aor_sse_end_name(AOR_SSE_END_NONE), "");
}

static void test_seen_set(void **state) {
    (void)state;
    aor_sse_ends *s = aor_sse_ends_new();
    assert_non_null(s);
    const char *a = "https://api.openai.com/v1", *b = "http://127.0.0.1:8000/v1";
    assert_false(aor_sse_ends_seen(s, a, AOR_SSE_END_DONE));
    assert_int_equal(aor_sse_ends_note(s, a, AOR_SSE_END_DONE), 0);
    assert_int_equal(aor_sse_ends_note(s, a, AOR_SSE_END_DONE), 0); /* again: no change */
    assert_true(aor_sse_ends_seen(s, a, AOR_SSE_END_DONE));
    assert_false(aor_sse_ends_seen(s, a, AOR_SSE_END_RESPONSE)); /* per kind */
    assert_false(aor_sse_ends_seen(s, b, AOR_SSE_END_DONE));     /* per upstream */
    /* The set copies the string: a buffer reused after the note does not change it. */
    char url[64];
    strcpy(url, b);
    assert_int_equal(aor_sse_ends_note(s, url, AOR_SSE_END_RESPONSE), 0);
    memset(url, 'x', sizeof url - 1);
    url[sizeof url - 1] = '\0';
    assert_true(aor_sse_ends_seen(s, b, AOR_SSE_END_RESPONSE));
    assert_false(aor_sse_ends_seen(s, url, AOR_SSE_END_RESPONSE));
    /* NONE is never noted nor seen; NULLs. */
    assert_int_equal(aor_sse_ends_note(s, a, AOR_SSE_END_NONE), 0);
    assert_false(aor_sse_ends_seen(s, a, AOR_SSE_END_NONE));
    assert_false(aor_sse_ends_seen(s, NULL, AOR_SSE_END_DONE));
    assert_false(aor_sse_ends_seen(NULL, a, AOR_SSE_END_DONE));
    errno = 0;
    assert_int_equal(aor_sse_ends_note(s, NULL, AOR_SSE_END_DONE), -1);
    assert_int_equal(errno, EINVAL);
    assert_int_equal(aor_sse_ends_note(NULL, a, AOR_SSE_END_DONE), -1);
    aor_sse_ends_free(s);
    aor_sse_ends_free(NULL);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_end_of_path),  cmocka_unit_test(test_done),
        cmocka_unit_test(test_message_stop), cmocka_unit_test(test_response),
        cmocka_unit_test(test_names),        cmocka_unit_test(test_seen_set),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
