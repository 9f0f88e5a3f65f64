/* The first SSE event that is not only comments, one byte at a time (see sse_peek.h). */
#include "sse_peek.h"

#include <string.h>

void aor_sse_peek_init(aor_sse_peek *s) {
    memset(s, 0, sizeof *s);
}

/* A line ended at s->pos (its terminator included). Returns 1 when that ends the first
 * event with a field. */
static int line_end(aor_sse_peek *s) {
    int empty = s->line_len == 0;
    if (!empty && !s->comment)
        s->field = 1;
    s->line_len = 0;
    s->comment = 0;
    if (!empty)
        return 0;
    if (s->field)
        return 1;
    s->ev_start = s->pos; /* comments and blank lines only: skipped */
    return 0;
}

int aor_sse_peek_feed(aor_sse_peek *s, const char *data, size_t len, size_t *evoff, size_t *evlen) {
    for (size_t i = 0; i < len && !s->found; i++) {
        char c = data[i];
        int cr = s->after_cr;
        s->after_cr = 0;
        s->pos++;
        if (c == '\n' && cr) {
            /* The '\n' of a "\r\n" whose '\r' ended the line: part of that line. When the
             * line ended a skipped event, the next one starts after it. */
            if (s->ev_start == s->pos - 1)
                s->ev_start = s->pos;
            continue;
        }
        if (c == '\n' || c == '\r') {
            s->after_cr = c == '\r';
            if (line_end(s))
                s->found = 1;
            continue;
        }
        if (s->line_len++ == 0)
            s->comment = c == ':';
    }
    if (!s->found)
        return 0;
    *evoff = s->ev_start;
    *evlen = s->pos - s->ev_start;
    return 1;
}

void aor_sse_peek_next(aor_sse_peek *s) {
    s->found = 0;
    s->field = 0;
    s->ev_start = s->pos;
}

static const char *const prelude_anthropic[] = {"message_start", "ping", "content_block_start",
                                                NULL};
static const char *const prelude_openai[] = {"response.created",
                                             "response.queued",
                                             "response.in_progress",
                                             "response.output_item.added",
                                             "response.content_part.added",
                                             NULL};

int aor_sse_peek_prelude(aor_dialect d, const char *ev, size_t len) {
    const char *const *names = d == AOR_DIALECT_ANTHROPIC ? prelude_anthropic
                               : d == AOR_DIALECT_OPENAI  ? prelude_openai
                                                          : NULL;
    if (!names)
        return 0;
    const char *s = ev, *end = ev + len;
    int prelude = 0;
    while (s < end) {
        const char *e = s;
        while (e < end && *e != '\n' && *e != '\r')
            e++;
        size_t ll = (size_t)(e - s);
        if (ll >= 6 && memcmp(s, "event:", 6) == 0) {
            /* The last event: field is the event's type (WHATWG). */
            const char *v = s + 6;
            if (v < e && *v == ' ')
                v++; /* one space after the colon is not part of the value */
            size_t vl = (size_t)(e - v);
            prelude = 0;
            for (size_t i = 0; names[i]; i++)
                if (strlen(names[i]) == vl && memcmp(names[i], v, vl) == 0)
                    prelude = 1;
        }
        s = e < end && *e == '\r' && e + 1 < end && e[1] == '\n' ? e + 2 : e + 1;
    }
    return prelude;
}
