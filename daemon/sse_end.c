#include "sse_end.h"

#include "jsonscan.h"
#include "map.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

struct aor_sse_ends {
    aor_map *seen; /* (base_url, kind name) -> the entry holding both strings */
};

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
        if (ends_with(path, n, "/chat/completions") || ends_with(path, n, "/completions"))
            return AOR_SSE_END_DONE;
        if (ends_with(path, n, "/responses"))
            return AOR_SSE_END_RESPONSE;
    } else if (dialect == AOR_DIALECT_ANTHROPIC) {
        if (ends_with(path, n, "/messages"))
            return AOR_SSE_END_MESSAGE_STOP;
    }
    return AOR_SSE_END_NONE;
}

const char *aor_sse_end_name(aor_sse_end kind) {
    switch (kind) {
    case AOR_SSE_END_DONE:
        return "data: [DONE]";
    case AOR_SSE_END_RESPONSE:
        return "response.completed";
    case AOR_SSE_END_MESSAGE_STOP:
        return "message_stop";
    case AOR_SSE_END_NONE:
        break;
    }
    return "";
}

/* 1 when the name v (n bytes) is one that ends a stream of kind (RESPONSE or
 * MESSAGE_STOP), as an `event:` line's value or a data object's "type". */
static int end_name(aor_sse_end kind, const char *v, size_t n) {
    static const char *const response[] = {"response.completed", "response.incomplete",
                                           "response.failed"};
    if (kind == AOR_SSE_END_MESSAGE_STOP)
        return n == 12 && memcmp(v, "message_stop", 12) == 0;
    if (kind == AOR_SSE_END_RESPONSE)
        for (size_t i = 0; i < sizeof response / sizeof response[0]; i++)
            if (n == strlen(response[i]) && memcmp(v, response[i], n) == 0)
                return 1;
    return 0;
}

int aor_sse_end_matches(aor_sse_end kind, const char *ev, size_t len) {
    if (kind == AOR_SSE_END_NONE || !ev)
        return 0;
    const char *s = ev, *end = ev + len;
    while (s < end) {
        const char *nl = memchr(s, '\n', (size_t)(end - s));
        size_t l = nl ? (size_t)(nl - s) : (size_t)(end - s);
        if (l && s[l - 1] == '\r')
            l--;
        const char *v = NULL;
        size_t vl = 0;
        int is_data = 0;
        if (l >= 5 && memcmp(s, "data:", 5) == 0) {
            v = s + 5;
            vl = l - 5;
            is_data = 1;
        } else if (l >= 6 && memcmp(s, "event:", 6) == 0) {
            v = s + 6;
            vl = l - 6;
        }
        if (v && vl && *v == ' ') { /* one space after the colon is not the value's */
            v++;
            vl--;
        }
        if (v && kind == AOR_SSE_END_DONE) {
            if (is_data && vl == 6 && memcmp(v, "[DONE]", 6) == 0)
                return 1;
        } else if (v && !is_data) {
            while (vl && (v[vl - 1] == ' ' || v[vl - 1] == '\t'))
                vl--;
            if (end_name(kind, v, vl))
                return 1;
        } else if (v) {
            const char *t;
            size_t tl;
            if (aor_json_top_string(v, vl, "type", &t, &tl) == 1 && end_name(kind, t, tl))
                return 1;
        }
        s = nl ? nl + 1 : end;
    }
    return 0;
}

/* One noted upstream: the map's key strings live here. */
typedef struct {
    const char *kind; /* static: aor_sse_end_name */
    char base_url[];
} seen_entry;

aor_sse_ends *aor_sse_ends_new(void) {
    aor_sse_ends *s = calloc(1, sizeof *s);
    if (!s)
        goto fail;
    s->seen = aor_map_new();
    if (!s->seen)
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
    aor_map_free(s->seen, free);
    free(s);
}

int aor_sse_ends_seen(const aor_sse_ends *s, const char *base_url, aor_sse_end kind) {
    if (!s || !base_url || kind == AOR_SSE_END_NONE)
        return 0;
    return aor_map_get(s->seen, base_url, aor_sse_end_name(kind)) != NULL;
}

int aor_sse_ends_note(aor_sse_ends *s, const char *base_url, aor_sse_end kind) {
    if (!s || !base_url) {
        errno = EINVAL;
        return -1;
    }
    if (kind == AOR_SSE_END_NONE || aor_sse_ends_seen(s, base_url, kind))
        return 0;
    size_t n = strlen(base_url);
    seen_entry *e = malloc(sizeof *e + n + 1);
    if (!e) {
        errno = ENOMEM;
        return -1;
    }
    e->kind = aor_sse_end_name(kind);
    memcpy(e->base_url, base_url, n + 1);
    if (aor_map_put(s->seen, e->base_url, e->kind, e, NULL) != 0) {
        free(e);
        errno = ENOMEM;
        return -1;
    }
    return 0;
}
