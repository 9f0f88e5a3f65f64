/* The first event of an SSE answer that is not only comments, found as the bytes
 * arrive (spec §5.3: "an error event inside a 200 SSE stream that arrives before any byte
 * went to the client is a failed attempt"; the proxy holds the answer until this event is
 * whole and looks at it). Each byte is looked at once: rescanning what was held on every
 * read made an upstream that sent many comment events (":\n\n", each in its own chunk)
 * cost the square of their count, 98 s of aord's loop for 80,000 (QA).
 *
 * Lines end with "\r\n", "\n" or a bare "\r"; an empty line ends an event; a line that
 * starts with ':' is a comment (WHATWG HTML, "Server-sent events"). An event of comment
 * and blank lines only is skipped (OpenRouter sends ": OPENROUTER PROCESSING" first). */
#ifndef AOR_SSE_PEEK_H
#define AOR_SSE_PEEK_H

#include "types.h"

#include <stddef.h>

/* Scanner state; set up with aor_sse_peek_init, fed with aor_sse_peek_feed. */
typedef struct {
    size_t pos;      /* bytes fed so far */
    size_t ev_start; /* where the event being read began */
    size_t line_len; /* bytes of the line being read so far */
    int comment;     /* the line being read starts with ':' */
    int field;       /* the event being read has a line that is not a comment */
    int after_cr;    /* the last byte was a '\r': a '\n' next belongs to it */
    int found;       /* 1 once the event was found (then feeding does nothing) */
} aor_sse_peek;

/* Starts a scan at the first byte of an answer's body. */
void aor_sse_peek_init(aor_sse_peek *s);

/* Reads the next len bytes of the body (data may be NULL when len is 0). Returns 1 when
 * the first event that is not only comments ended within them (or did before), with
 * *off and *len set to where it starts in the body and its length, up to and with the
 * terminator of its empty line: the comments before it come first. 0 while it has not
 * ended. Can't fail. */
int aor_sse_peek_feed(aor_sse_peek *s, const char *data, size_t len, size_t *evoff, size_t *evlen);

/* After aor_sse_peek_feed found an event: looks for the next one that is not only
 * comments, from the byte after it. Feed on with the bytes the last call did not read
 * (it stops at the event's end: s->pos counts what it read). */
void aor_sse_peek_next(aor_sse_peek *s);

/* 1 when the whole SSE event at ev (len bytes) is one a provider sends before the model's
 * first output, which tells the client nothing yet: Anthropic's message_start, ping and
 * content_block_start (a block's empty start); the OpenAI Responses API's
 * response.created, response.queued, response.in_progress, response.output_item.added
 * and response.content_part.added. Told by the event's "event:" field (both send one
 * with each event; Anthropic "Streaming Messages", OpenAI "Streaming events" of the
 * Responses API). 0 for any other event, and for other dialects. The proxy holds such
 * events with the first one that counts, so that an error event right after them is
 * still a failed attempt the walk goes past (spec §5.3). */
int aor_sse_peek_prelude(aor_dialect d, const char *ev, size_t len);

#endif
