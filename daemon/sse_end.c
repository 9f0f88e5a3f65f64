#include "sse_end.h"

#include "map.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

/* 1 when s (n bytes) ends with suffix. */
static int ends_with(const char *s, size_t n, const char *suffix) {
    size_t k = strlen(suffix);
    return n >= k && memcmp(s + n - k, suffix, k) == 0;
}

aor_sse_end aor_sse_end_of(aor_dialect dialect, const char *path) {
    if (!path)
        return AOR_SSE_END_NONE;
    size_t n = strlen(path);
    while (n > 1 && path[n - 1] == '/')
        n--;
    if (dialect == AOR_DIALECT_OPENAI) {
        if (ends_with(path, n, "/chat/completions"))
            return AOR_SSE_END_CHAT;
        if (ends_with(path, n, "/completions"))
            return AOR_SSE_END_COMPLETIONS;
        if (ends_with(path, n, "/responses"))
            return AOR_SSE_END_RESPONSES;
    } else if (dialect == AOR_DIALECT_ANTHROPIC) {
        if (ends_with(path, n, "/messages"))
            return AOR_SSE_END_MESSAGES;
    }
    return AOR_SSE_END_NONE;
}

const char *aor_sse_end_name(aor_sse_end kind) {
    switch (kind) {
    case AOR_SSE_END_CHAT:
    case AOR_SSE_END_COMPLETIONS:
        return "data: [DONE]";
    case AOR_SSE_END_RESPONSES:
        return "response.completed";
    case AOR_SSE_END_MESSAGES:
        return "message_stop";
    case AOR_SSE_END_NONE:
        break;
    }
    return "";
}

/* The endpoint's part of a set key. */
static const char *endpoint_name(aor_sse_end kind) {
    static const char *const names[] = {"", "chat/completions", "completions", "responses",
                                        "messages"};
    return (size_t)kind < sizeof names / sizeof names[0] ? names[kind] : "";
}

/* 1 when the field value v (n bytes, after "name:") is want (prefix: starts with it),
 * one leading space and any trailing blanks allowed. */
static int field_is(const char *v, size_t n, const char *want, int prefix) {
    if (n && *v == ' ') {
        v++;
        n--;
    }
    while (n && (v[n - 1] == ' ' || v[n - 1] == '\t'))
        n--;
    size_t k = strlen(want);
    return (prefix ? n >= k : n == k) && memcmp(v, want, k) == 0;
}

int aor_sse_end_line(aor_sse_end kind, const char *line, size_t len) {
    if (len > AOR_SSE_END_LINE_MAX)
        return 0;
    static const char *const response_ends[] = {"response.completed", "response.incomplete",
                                                "response.failed"};
    if (!line)
        return 0;
    switch (kind) {
    case AOR_SSE_END_CHAT:
    case AOR_SSE_END_COMPLETIONS:
        return len >= 5 && memcmp(line, "data:", 5) == 0 &&
               field_is(line + 5, len - 5, "[DONE]", 1);
    case AOR_SSE_END_MESSAGES:
        return len >= 6 && memcmp(line, "event:", 6) == 0 &&
               field_is(line + 6, len - 6, "message_stop", 0);
    case AOR_SSE_END_RESPONSES:
        if (len < 6 || memcmp(line, "event:", 6) != 0)
            return 0;
        for (size_t i = 0; i < sizeof response_ends / sizeof response_ends[0]; i++)
            if (field_is(line + 6, len - 6, response_ends[i], 0))
                return 1;
        return 0;
    case AOR_SSE_END_NONE:
        break;
    }
    return 0;
}

void aor_sse_end_scan_init(aor_sse_end_scan *s, aor_sse_end kind) {
    s->kind = kind;
    s->epoch = 0;
    s->seen = 0;
    s->ok = 0;
    s->len = 0;
}

/* A complete line of l bytes at line (its line end not included): the terminator? */
static void scan_line(aor_sse_end_scan *s, const char *line, size_t l) {
    if (l > AOR_SSE_END_LINE_MAX + 1)
        return; /* longer than any terminator line, with its CR */
    if (l && line[l - 1] == '\r')
        l--;
    if (aor_sse_end_line(s->kind, line, l)) {
        s->seen = 1;
        s->ok =
            s->kind != AOR_SSE_END_RESPONSES || field_is(line + 6, l - 6, "response.completed", 0);
    }
}

/* The line kept in s is complete. */
static void scan_line_end(aor_sse_end_scan *s) {
    size_t l = s->len;
    s->len = 0;
    if (l <= AOR_SSE_END_LINE_MAX + 1) /* else more came than any terminator line has */
        scan_line(s, s->line, l);
}

/* The first line end in [p, end): a LF or a CR (an SSE line ends with CRLF, LF or a bare
 * CR; QA: a stream of CR-only lines was never seen to end, and was taken for a cut one).
 * A CRLF is then a CR that ends the line and an empty line: harmless here. */
static const char *line_end(const char *p, const char *end) {
    const char *lf = memchr(p, '\n', (size_t)(end - p));
    const char *cr = memchr(p, '\r', (size_t)((lf ? lf : end) - p));
    return cr ? cr : lf;
}

int aor_sse_end_scan_feed(aor_sse_end_scan *s, const char *data, size_t len) {
    if (s->kind == AOR_SSE_END_NONE || s->seen)
        return s->seen;
    const char *p = data, *end = data + len;
    while (p < end) {
        const char *nl = line_end(p, end);
        size_t n = nl ? (size_t)(nl - p) : (size_t)(end - p);
        if (nl && s->len == 0) { /* a whole line in this piece: looked at where it is */
            scan_line(s, p, n);
            if (s->seen)
                break;
            p = nl + 1;
            continue;
        }
        if (s->len <= AOR_SSE_END_LINE_MAX + 1) { /* up to a CR, and one more: "too long" */
            size_t room = sizeof s->line - s->len, take = n < room ? n : room;
            memcpy(s->line + s->len, p, take);
            s->len += take;
        }
        if (!nl)
            break;
        scan_line_end(s);
        if (s->seen)
            break;
        p = nl + 1;
    }
    return s->seen;
}

int aor_sse_end_scan_finish(aor_sse_end_scan *s) {
    if (s->kind != AOR_SSE_END_NONE && !s->seen && s->len)
        scan_line_end(s);
    return s->seen;
}

struct aor_sse_ends {
    aor_map *map;        /* (base_url, "endpoint\nmodel") -> entry */
    unsigned long epoch; /* misses counted so far, of every entry */
};

/* One (base_url, endpoint, model): the map's key strings live here. */
typedef struct {
    int misses;               /* streams in a row without the terminator since it was last seen */
    unsigned long miss_epoch; /* the set's epoch after the last counted miss */
    char *second;             /* "endpoint\nmodel", in text after base_url */
    char text[];              /* base_url NUL endpoint \n model NUL */
} seen_entry;

aor_sse_ends *aor_sse_ends_new(void) {
    aor_sse_ends *s = calloc(1, sizeof *s);
    if (!s)
        goto fail;
    s->map = aor_map_new();
    if (!s->map)
        goto fail;
    return s;
fail:
    free(s);
    errno = ENOMEM;
    return NULL;
}

void aor_sse_ends_free(aor_sse_ends *s) {
    if (!s)
        return;
    aor_map_free(s->map, free);
    free(s);
}

unsigned long aor_sse_ends_epoch(const aor_sse_ends *s) {
    return s ? s->epoch : 0;
}

size_t aor_sse_ends_count(const aor_sse_ends *s) {
    return s ? aor_map_count(s->map) : 0;
}

/* Notes (base_url, second) as an upstream that ends its streams well. */
static void note(aor_sse_ends *s, const char *base_url, const char *second) {
    if (aor_map_count(s->map) >= AOR_SSE_ENDS_MAX)
        return;
    size_t bl = strlen(base_url), sl = strlen(second);
    seen_entry *e = malloc(sizeof *e + bl + 1 + sl + 1);
    if (!e)
        return;
    e->misses = 0;
    e->miss_epoch = 0;
    memcpy(e->text, base_url, bl + 1);
    e->second = e->text + bl + 1;
    memcpy(e->second, second, sl + 1);
    if (aor_map_put(s->map, e->text, e->second, e, NULL) != 0)
        free(e);
}

int aor_sse_ends_check(aor_sse_ends *s, const char *base_url, aor_sse_end kind, const char *model,
                       unsigned long epoch, int terminated) {
    if (!s || !base_url || kind == AOR_SSE_END_NONE)
        return 0;
    /* The second half of the key: endpoint and model, on the stack when short. */
    const char *ep = endpoint_name(kind), *m = model ? model : "";
    size_t el = strlen(ep), ml = strlen(m);
    char small[160], *second = el + 1 + ml < sizeof small ? small : malloc(el + 1 + ml + 1);
    if (!second)
        return 0;
    memcpy(second, ep, el);
    second[el] = '\n';
    memcpy(second + el + 1, m, ml + 1);
    seen_entry *e = aor_map_get(s->map, base_url, second);
    int cut = 0;
    if (terminated) {
        if (e)
            e->misses = 0;
        else
            note(s, base_url, second);
    } else if (e) {
        cut = 1;
        /* Streams in flight when the last miss was counted were cut with it: one event. */
        if (e->misses == 0 || epoch >= e->miss_epoch) {
            e->miss_epoch = ++s->epoch;
            if (++e->misses >= AOR_SSE_ENDS_MISSES_MAX)
                free(aor_map_remove(s->map, base_url, second));
        }
    }
    if (second != small)
        free(second);
    return cut;
}
