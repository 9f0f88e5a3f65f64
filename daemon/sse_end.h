/* The event that ends a provider's SSE stream when the stream ended well, and which
 * upstreams have been seen to send it (spec §4.1: "a stream that ends without its
 * terminator"; §5.3: an upstream failure after the first byte reaches the client as an
 * unfinished response, "never a clean end"). A stream whose HTTP framing ends cleanly
 * but whose terminator never came was cut short somewhere (a gateway that closes a
 * failed stream's chunked body cleanly): the proxy records it as a failure and cuts the
 * client's response, but only for an upstream (base_url) that has sent the terminator
 * before, so an OpenAI-compatible server that never sends `data: [DONE]` is not cut on
 * every stream (docs/routing.md §3).
 *
 * Sources: OpenAI API reference, Chat Completions and Completions streaming ("data:
 * [DONE]" ends the stream) and Responses streaming events (response.completed,
 * response.incomplete, response.failed); Anthropic Messages streaming (message_stop is
 * the final event). Gemini's streamGenerateContent has no terminator. */
#ifndef AOR_SSE_END_H
#define AOR_SSE_END_H

#include "types.h"

#include <stddef.h>

typedef enum {
    AOR_SSE_END_NONE = 0,     /* the endpoint's stream has no terminator (or unknown) */
    AOR_SSE_END_DONE,         /* OpenAI Chat Completions / Completions: data: [DONE] */
    AOR_SSE_END_RESPONSE,     /* OpenAI Responses: response.completed / .incomplete / .failed */
    AOR_SSE_END_MESSAGE_STOP, /* Anthropic Messages: event: message_stop */
} aor_sse_end;

/* The terminator of a stream answering a request of dialect to path (the request path
 * without its query; matched by suffix so that a base_url's prefix such as /openai/v1
 * or Azure's /openai/deployments/NAME does not matter): .../chat/completions and
 * .../completions -> DONE, .../responses -> RESPONSE (openai dialect), .../messages ->
 * MESSAGE_STOP (anthropic dialect); anything else NONE. path may be NULL (NONE). */
aor_sse_end aor_sse_end_of(aor_dialect dialect, const char *path);

/* 1 when the SSE event ev (len bytes: its lines, with or without the blank line that
 * ends it) is the terminator kind: DONE a `data: [DONE]` line; RESPONSE an `event:`
 * line response.completed, response.incomplete or response.failed, or data whose
 * "type" is one of them; MESSAGE_STOP an `event: message_stop` line, or data whose
 * "type" is message_stop. 0 otherwise, and always for NONE. */
int aor_sse_end_matches(aor_sse_end kind, const char *ev, size_t len);

/* How the terminator kind is written, for messages ("data: [DONE]", "message_stop",
 * "response.completed"); "" for NONE. Static storage. */
const char *aor_sse_end_name(aor_sse_end kind);

/* The upstreams (base_url, terminator kind) seen to end a stream with its terminator,
 * since aord started. Opaque; single-threaded like the rest of aord. */
typedef struct aor_sse_ends aor_sse_ends;

/* New empty set. Returns NULL with errno ENOMEM. Free with aor_sse_ends_free. */
aor_sse_ends *aor_sse_ends_new(void);

/* Frees the set. NULL: no-op. */
void aor_sse_ends_free(aor_sse_ends *s);

/* 1 when base_url has been seen to end a stream with the terminator kind (aor_sse_ends_note);
 * 0 otherwise, for NONE, and when s or base_url is NULL. */
int aor_sse_ends_seen(const aor_sse_ends *s, const char *base_url, aor_sse_end kind);

/* Notes that base_url ended a stream with the terminator kind (the strings are copied).
 * Returns 0 (also when it was noted before, or kind is NONE), or -1 with errno ENOMEM
 * (nothing noted: that upstream's streams are then not checked) or EINVAL (s or
 * base_url NULL). */
int aor_sse_ends_note(aor_sse_ends *s, const char *base_url, aor_sse_end kind);

#endif
