/* The event that ends a provider's SSE stream when the stream ended well, and which
 * upstreams have been seen to send it (spec §4.1: "a stream that ends without its
 * terminator"; §5.3: an upstream failure after the first byte reaches the client as an
 * unfinished response, "never a clean end"). A stream whose HTTP framing ends cleanly
 * but whose terminator never came was cut short on the way (a gateway that closes a
 * failed stream's chunked body cleanly): the proxy records it as a failure and leaves
 * the client's response unfinished, but only where the same upstream, endpoint and model
 * have ended a stream with the terminator before, so an OpenAI-compatible server that
 * never sends `data: [DONE]` is not cut on every stream (docs/routing.md §8, "The walk").
 *
 * Sources: OpenAI API reference, Chat Completions and Completions streaming ("data:
 * [DONE]" ends the stream) and Responses streaming events (response.completed,
 * response.incomplete, response.failed); Anthropic Messages streaming (message_stop is
 * the final event, `event: message_stop`). Gemini's streamGenerateContent has none. */
#ifndef AOR_SSE_END_H
#define AOR_SSE_END_H

#include "types.h"

#include <stddef.h>

/* A streaming endpoint with a terminator, by the path its requests go to. */
typedef enum {
    AOR_SSE_END_NONE = 0,    /* the endpoint's stream has no terminator (or unknown) */
    AOR_SSE_END_CHAT,        /* OpenAI .../chat/completions: data: [DONE] */
    AOR_SSE_END_COMPLETIONS, /* OpenAI .../completions: data: [DONE] */
    AOR_SSE_END_RESPONSES,   /* OpenAI .../responses: event: response.completed (.incomplete,
                                .failed) */
    AOR_SSE_END_MESSAGES,    /* Anthropic .../messages: event: message_stop */
} aor_sse_end;

/* The endpoint of a request of dialect to path (the request path without its query;
 * matched by suffix, so that a base_url's prefix such as /openai/v1 or Azure's
 * /openai/deployments/NAME does not matter; trailing slashes ignored). NONE for any
 * other path, and for a NULL path. */
aor_sse_end aor_sse_end_of(aor_dialect dialect, const char *path);

/* How the terminator of kind's streams is written, for messages ("data: [DONE]",
 * "message_stop", "response.completed"); "" for NONE. Static storage. */
const char *aor_sse_end_name(aor_sse_end kind);

/* 1 when the SSE line (len bytes, without its line end) is kind's terminator: a data
 * line that starts with "[DONE]" (CHAT, COMPLETIONS; the SDKs' own test, so "[DONE] "
 * counts), an event line message_stop (MESSAGES), an event line response.completed,
 * response.incomplete or response.failed (RESPONSES; event names with trailing blanks
 * too); one space after the colon, as SSE allows. 0 otherwise, and always for NONE. A
 * line, not a substring: the text of an event's data is JSON, in which a line end is
 * escaped, so a model that writes "data: [DONE]" cannot end its own stream. A line over
 * AOR_SSE_END_LINE_MAX bytes never is. */
int aor_sse_end_line(aor_sse_end kind, const char *line, size_t len);

/* Longest line (without its CR LF) that can be a terminator line: a longer one never is
 * (the longest written by a provider is 26 bytes). */
#define AOR_SSE_END_LINE_MAX 32

/* Looks for kind's terminator in a stream's bytes as they go by, in pieces of any size
 * (a line may be split across them). Zero-initialised with aor_sse_end_scan_init. */
typedef struct {
    aor_sse_end kind;
    unsigned long epoch; /* the set's epoch when the stream started (aor_sse_ends_epoch) */
    int seen;            /* the terminator line went by */
    int ok;              /* ... and it ends a successful stream ([DONE], message_stop,
                            response.completed; not response.failed/incomplete) */
    size_t len;          /* bytes of the current line so far, up to AOR_SSE_END_LINE_MAX + 2 */
    char line[AOR_SSE_END_LINE_MAX + 2];
} aor_sse_end_scan;

/* Starts a scan for kind's terminator (NONE: never seen); epoch 0. */
void aor_sse_end_scan_init(aor_sse_end_scan *s, aor_sse_end kind);

/* Feeds the next len bytes of the stream. Cost: a memchr per line, a compare per line
 * start. Returns s->seen. */
int aor_sse_end_scan_feed(aor_sse_end_scan *s, const char *data, size_t len);

/* At the stream's end: a last line without its line end counts too. Returns s->seen. */
int aor_sse_end_scan_finish(aor_sse_end_scan *s);

/* The (upstream base_url, endpoint, model) seen to end a stream with its terminator since
 * aord started. Opaque; single-threaded like the rest of aord. At most
 * AOR_SSE_ENDS_MAX entries (clients choose model names); beyond, nothing more is noted. */
typedef struct aor_sse_ends aor_sse_ends;

#define AOR_SSE_ENDS_MAX 4096
/* Streams in a row that ended without the terminator after which an upstream is no
 * longer expected to send it (a server replaced behind the same base_url). Streams cut
 * together count once: only one that started after the last counted miss counts (an
 * outage that cuts ten streams at once must not make the upstream's cuts go unseen). */
#define AOR_SSE_ENDS_MISSES_MAX 2

/* New empty set. Returns NULL with errno ENOMEM. Free with aor_sse_ends_free. */
aor_sse_ends *aor_sse_ends_new(void);

/* Frees the set. NULL: no-op. */
void aor_sse_ends_free(aor_sse_ends *s);

/* The set's epoch: a count of the misses counted so far. A stream notes it when it
 * starts (aor_sse_end_scan.epoch). 0 for NULL. */
unsigned long aor_sse_ends_epoch(const aor_sse_ends *s);

/* A stream of kind from base_url for model (NULL: none), started at epoch (as
 * aor_sse_ends_epoch said then), ended cleanly; terminated: its terminator went by.
 * Terminated, the upstream is noted as one that sends it (copies the strings; ENOMEM or
 * a full set: not noted, so its streams are not checked). Not terminated, returns 1 when
 * such a stream was expected to end with its terminator (then it was cut short: a
 * failure); after AOR_SSE_ENDS_MISSES_MAX such streams in a row, each started after the
 * miss before it, the upstream is no longer expected to send one. Returns 0 otherwise,
 * and for NONE, a NULL s or base_url. */
int aor_sse_ends_check(aor_sse_ends *s, const char *base_url, aor_sse_end kind, const char *model,
                       unsigned long epoch, int terminated);

/* Number of (base_url, endpoint, model) noted. 0 for NULL. */
size_t aor_sse_ends_count(const aor_sse_ends *s);

#endif
