/* Usage snapshots per (provider, key): spec §6. See usage.h for the rules. */
#include "usage.h"

#include "map.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

struct aor_usage {
    aor_map *rows; /* (provider, key) -> usage_entry */
};

/* One row; the map's key pointers point into strs (provider NUL key NUL). */
typedef struct {
    aor_usage_window w[AOR_USAGE_NWINDOWS];
    const char *provider;
    const char *key;
    char strs[];
} usage_entry;

/* How a window's reset header is written. */
typedef enum {
    RESET_GO_DURATION, /* OpenAI: "6m0s", relative to the answer */
    RESET_RFC3339,     /* Anthropic: a timestamp */
    RESET_EPOCH,       /* OpenRouter: Unix ms (or s), or a Go duration (usage.h) */
} reset_format;

/* The headers of each window (indexed by aor_usage_window_id), with their lengths. */
static const struct {
    const char *remaining;
    size_t remaining_len;
    const char *reset;
    size_t reset_len;
    reset_format format;
} windows[AOR_USAGE_NWINDOWS] = {
#define WINDOW(rem, res, fmt)                                                                      \
    { rem, sizeof rem - 1, res, sizeof res - 1, fmt }
    [AOR_USAGE_REQUESTS] =
        WINDOW("x-ratelimit-remaining-requests", "x-ratelimit-reset-requests", RESET_GO_DURATION),
    [AOR_USAGE_TOKENS] =
        WINDOW("x-ratelimit-remaining-tokens", "x-ratelimit-reset-tokens", RESET_GO_DURATION),
    [AOR_USAGE_A_REQUESTS] = WINDOW("anthropic-ratelimit-requests-remaining",
                                    "anthropic-ratelimit-requests-reset", RESET_RFC3339),
    [AOR_USAGE_A_TOKENS] = WINDOW("anthropic-ratelimit-tokens-remaining",
                                  "anthropic-ratelimit-tokens-reset", RESET_RFC3339),
    [AOR_USAGE_A_INPUT_TOKENS] = WINDOW("anthropic-ratelimit-input-tokens-remaining",
                                        "anthropic-ratelimit-input-tokens-reset", RESET_RFC3339),
    [AOR_USAGE_A_OUTPUT_TOKENS] = WINDOW("anthropic-ratelimit-output-tokens-remaining",
                                         "anthropic-ratelimit-output-tokens-reset", RESET_RFC3339),
    [AOR_USAGE_PLAIN] = WINDOW("x-ratelimit-remaining", "x-ratelimit-reset", RESET_EPOCH),
#undef WINDOW
};

aor_usage *aor_usage_new(void) {
    aor_usage *u = calloc(1, sizeof *u);
    if (!u)
        goto fail;
    u->rows = aor_map_new();
    if (!u->rows)
        goto fail_table;
    return u;

fail_table:
    free(u);
fail:
    errno = ENOMEM;
    return NULL;
}

void aor_usage_free(aor_usage *u) {
    if (!u)
        return;
    aor_map_free(u->rows, free);
    free(u);
}

size_t aor_usage_count(const aor_usage *u) {
    return u ? aor_map_count(u->rows) : 0;
}

/* Copies value without leading/trailing spaces and tabs into buf (cap bytes). Returns
 * 0, or -1 when it is empty or does not fit. */
static int trimmed(const char *value, char *buf, size_t cap) {
    const char *s = value, *e;
    while (*s == ' ' || *s == '\t')
        s++;
    e = s + strnlen(s, cap);
    if (*e != '\0')
        return -1; /* too long */
    while (e > s && (e[-1] == ' ' || e[-1] == '\t'))
        e--;
    size_t len = (size_t)(e - s);
    if (len == 0 || len >= cap)
        return -1;
    memcpy(buf, s, len);
    buf[len] = '\0';
    return 0;
}

/* A remaining count: 1*DIGIT ["." 1*DIGIT]. Returns the value, or -1 when not one. */
static double parse_remaining(const char *value) {
    char buf[AOR_HINT_MAX_VALUE + 1];
    if (trimmed(value, buf, sizeof buf))
        return -1;
    double v = 0, scale = 0;
    const char *p = buf;
    int digits = 0;
    for (; *p; p++) {
        if (*p >= '0' && *p <= '9') {
            if (scale == 0) {
                v = v * 10 + (*p - '0');
            } else {
                v += (*p - '0') * scale;
                scale /= 10;
            }
            digits++;
        } else if (*p == '.' && scale == 0 && digits > 0 && p[1] != '\0') {
            scale = 0.1;
        } else {
            return -1;
        }
    }
    return digits > 0 ? v : -1;
}

/* The unsuffixed x-ratelimit-reset (usage.h): a plain number in [1e11, 1e14) is Unix
 * milliseconds, in [1e9, 1e11) Unix seconds (kept as they are, even when past: stale);
 * a value with units a Go duration from now. 0 when it is none of these: a bare number
 * below 1e9 (seconds from now, or a broken epoch? not clearly either) or from 1e14 on
 * (past the year 5000 in milliseconds). */
static double parse_reset_epoch(const char *buf, double now) {
    double v = parse_remaining(buf);
    if (v >= 1e11 && v < 1e14)
        return v / 1000.0;
    if (v >= 1e9 && v < 1e11)
        return v;
    if (v >= 0)
        return 0;
    double s = aor_hint_go_duration_reset(buf); /* "0s": resets now (§6, QA) */
    return s >= 0 ? now + s : 0;
}

/* A reset header of window i: Unix seconds, or 0 when not valid. A past RFC 3339 or
 * epoch time is kept as it is (the window is stale). */
static double parse_reset(size_t i, const char *value, double now) {
    char buf[AOR_HINT_MAX_VALUE + 1];
    if (trimmed(value, buf, sizeof buf))
        return 0;
    switch (windows[i].format) {
    case RESET_RFC3339: {
        double t;
        return aor_rfc3339_parse(buf, &t) == 0 && t > 0 ? t : 0;
    }
    case RESET_EPOCH:
        return parse_reset_epoch(buf, now);
    case RESET_GO_DURATION:
        break;
    }
    double s = aor_hint_go_duration_reset(buf); /* "0s": resets now (§6, QA) */
    return s >= 0 ? now + s : 0;
}

/* Reads every window from the headers: fresh[i] gets window i, named[i] is 1 when the
 * answer names it. One pass over the headers; a name is compared only with the window
 * names of its length (docs/performance.md). */
static void read_windows(const aor_header *hdrs, size_t n, double now, double max_s,
                         aor_usage_window *fresh, int *named) {
    for (size_t i = 0; i < AOR_USAGE_NWINDOWS; i++) {
        fresh[i].known = 1;
        fresh[i].remaining = -1;
        fresh[i].reset_at = 0;
        fresh[i].observed_at = now;
        named[i] = 0;
    }
    for (size_t h = 0; h < n; h++) {
        size_t len = strlen(hdrs[h].name);
        for (size_t i = 0; i < AOR_USAGE_NWINDOWS; i++) {
            if (len == windows[i].remaining_len &&
                strcasecmp(hdrs[h].name, windows[i].remaining) == 0) {
                double r = parse_remaining(hdrs[h].value);
                named[i] = 1;
                if (r >= 0)
                    fresh[i].remaining = r; /* the last valid one wins */
                break;
            }
            if (len == windows[i].reset_len && strcasecmp(hdrs[h].name, windows[i].reset) == 0) {
                double t = parse_reset(i, hdrs[h].value, now);
                named[i] = 1;
                if (max_s > 0 && t > now + max_s)
                    t = now + max_s; /* not slept on: tried again at the cap (§4.3) */
                if (t > 0)
                    fresh[i].reset_at = t;
                break;
            }
        }
    }
}

static int stale_pred(const char *a, const char *b, void *val, void *arg) {
    const usage_entry *e = val;
    double now = *(const double *)arg;
    for (size_t i = 0; i < AOR_USAGE_NWINDOWS; i++)
        if (e->w[i].known && e->w[i].reset_at > now)
            return 0;
    return 1;
}

/* A new row for (provider, key) with no window known. NULL on ENOMEM. */
static usage_entry *entry_new(const char *provider, const char *key) {
    size_t lp = strlen(provider), lk = strlen(key);
    usage_entry *e = calloc(1, sizeof *e + lp + lk + 2);
    if (!e)
        return NULL;
    memcpy(e->strs, provider, lp + 1);
    memcpy(e->strs + lp + 1, key, lk + 1);
    e->provider = e->strs;
    e->key = e->strs + lp + 1;
    return e;
}

int aor_usage_observe(aor_usage *u, const char *provider, const char *key, long status,
                      const aor_header *hdrs, size_t n, double now, double max_s) {
    if (!u || !provider || !key) {
        errno = EINVAL;
        return -1;
    }
    /* §6: a 429 (or 529) is a throttle, never exhaustion; no answer or an outage says
     * nothing about usage. */
    if (status < 200 || status == 429 || status >= 500 || !hdrs)
        return 0;
    /* Only rate-limit headers can name a window: pick them out once, so the windows do
     * not compare every header of every answer (docs/performance.md). */
    aor_header few[16];
    aor_header *rl = few;
    size_t nrl = 0;
    for (size_t h = 0; h < n; h++) {
        const char *nm = hdrs[h].name;
        char f = nm ? (char)(nm[0] | 0x20) : 0;
        if ((f != 'x' && f != 'a') || !hdrs[h].value)
            continue;
        if (strncasecmp(nm, "x-ratelimit-", 12) != 0 &&
            strncasecmp(nm, "anthropic-ratelimit-", 20) != 0)
            continue;
        if (nrl == sizeof few / sizeof few[0] && rl == few) {
            /* n >= nrl + 1 here; the max says so to the compiler too (gcc's LTO warned of
             * a 256-byte copy into 32 bytes for a caller with 2 headers). */
            size_t room = n > nrl ? n : nrl + 1;
            rl = malloc(room * sizeof *rl);
            if (!rl)
                goto fail_oom;
            memcpy(rl, few, sizeof few);
        }
        rl[nrl++] = hdrs[h];
    }
    if (!nrl)
        return 0;
    aor_usage_window fresh[AOR_USAGE_NWINDOWS];
    int named[AOR_USAGE_NWINDOWS], any = 0;
    read_windows(rl, nrl, now, max_s, fresh, named);
    for (size_t i = 0; i < AOR_USAGE_NWINDOWS; i++)
        any |= named[i];
    if (rl != few)
        free(rl);
    if (!any)
        return 0;
    usage_entry *e = aor_map_get(u->rows, provider, key);
    if (!e) {
        if (aor_map_count(u->rows) >= AOR_USAGE_PRUNE_AT)
            aor_map_remove_if(u->rows, stale_pred, &now, free);
        e = entry_new(provider, key);
        if (!e)
            goto fail_oom;
        if (aor_map_put(u->rows, e->provider, e->key, e, NULL) != 0) {
            free(e);
            goto fail_oom;
        }
    }
    for (size_t i = 0; i < AOR_USAGE_NWINDOWS; i++)
        if (named[i])
            e->w[i] = fresh[i];
    return 1;

fail_oom:
    errno = ENOMEM;
    return -1;
}

int aor_usage_windows_exhausted(const aor_usage_window *w, double now, double *until) {
    /* §6: the snapshot is trusted only until the earliest reset time of its limiting
     * windows (remaining 0), unfiltered: a past one among them makes it stale now. A
     * window without a (valid) reset time (reset_at 0) limits nothing. */
    double earliest = 0;
    for (size_t i = 0; i < AOR_USAGE_NWINDOWS; i++) {
        if (w[i].known && w[i].remaining == 0 && w[i].reset_at > 0 &&
            (earliest == 0 || w[i].reset_at < earliest))
            earliest = w[i].reset_at;
    }
    if (!(earliest > now))
        return 0;
    if (until)
        *until = earliest;
    return 1;
}

int aor_usage_exhausted(const aor_usage *u, const char *provider, const char *key, double now,
                        double *until) {
    if (!u || !provider || !key)
        return 0;
    const usage_entry *e = aor_map_get(u->rows, provider, key);
    return e ? aor_usage_windows_exhausted(e->w, now, until) : 0;
}

double aor_usage_next_reset(const aor_usage *u, const char *provider, const char *key, double now) {
    if (!u || !provider || !key)
        return 0;
    const usage_entry *e = aor_map_get(u->rows, provider, key);
    if (!e)
        return 0;
    double best = 0;
    for (size_t i = 0; i < AOR_USAGE_NWINDOWS; i++) {
        double t = e->w[i].known ? e->w[i].reset_at : 0;
        if (t > now && (best == 0 || t < best))
            best = t;
    }
    return best;
}

int aor_usage_get(const aor_usage *u, const char *provider, const char *key,
                  aor_usage_window out[AOR_USAGE_NWINDOWS]) {
    if (!u || !provider || !key || !out)
        return 0;
    const usage_entry *e = aor_map_get(u->rows, provider, key);
    if (!e)
        return 0;
    memcpy(out, e->w, sizeof e->w);
    return 1;
}

static const char *const window_names[AOR_USAGE_NWINDOWS] = {
    [AOR_USAGE_REQUESTS] = "requests",
    [AOR_USAGE_TOKENS] = "tokens",
    [AOR_USAGE_A_REQUESTS] = "anthropic-requests",
    [AOR_USAGE_A_TOKENS] = "anthropic-tokens",
    [AOR_USAGE_A_INPUT_TOKENS] = "anthropic-input-tokens",
    [AOR_USAGE_A_OUTPUT_TOKENS] = "anthropic-output-tokens",
    [AOR_USAGE_PLAIN] = "plain",
};

const char *aor_usage_window_name(aor_usage_window_id id) {
    return (unsigned)id < AOR_USAGE_NWINDOWS ? window_names[id] : "?";
}

typedef struct {
    const char *provider; /* NULL: any */
    const char *key;      /* NULL: any */
} forget_match;

static int forget_pred(const char *a, const char *b, void *val, void *arg) {
    const forget_match *m = arg;
    return (m->provider == NULL || strcmp(a, m->provider) == 0) &&
           (m->key == NULL || strcmp(b, m->key) == 0);
}

size_t aor_usage_forget(aor_usage *u, const char *provider, const char *key) {
    if (!u)
        return 0;
    forget_match m = {provider, key};
    return aor_map_remove_if(u->rows, forget_pred, &m, free);
}

typedef struct {
    void (*fn)(const char *provider, const char *key, const aor_usage_window *w, void *arg);
    void *arg;
} usage_visit;

static void usage_visit_one(const char *a, const char *b, void *val, void *arg) {
    const usage_visit *v = arg;
    const usage_entry *e = val;
    v->fn(e->provider, e->key, e->w, v->arg);
}

void aor_usage_foreach(const aor_usage *u,
                       void (*fn)(const char *provider, const char *key, const aor_usage_window *w,
                                  void *arg),
                       void *arg) {
    if (!u || !fn)
        return;
    usage_visit v = {fn, arg};
    aor_map_foreach(u->rows, usage_visit_one, &v);
}
