/* Backoff table per (provider, key): the curve of spec §4.2 with the hints of §4.3. */
#include "backoff.h"

#include "map.h"

#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

/* 2^1000 times any sane initial_s is far over any cap and still finite. */
#define BACKOFF_MAX_EXPONENT 1000

struct aor_backoff {
    aor_backoff_params p;
    aor_map *rows; /* (provider, key) -> backoff_entry */
};

/* One row; row.provider/row.key point into strs (provider NUL key NUL). */
typedef struct {
    aor_backoff_row row;
    char strs[];
} backoff_entry;

/* 1 when params are usable (see aor_backoff_new). */
static int backoff_params_ok(const aor_backoff_params *params) {
    return params && isfinite(params->initial_s) && isfinite(params->max_s) &&
           isfinite(params->quota_cooldown_s) && isfinite(params->auth_cooldown_s) &&
           params->initial_s > 0 && params->max_s >= params->initial_s &&
           params->quota_cooldown_s >= 0 && params->auth_cooldown_s >= 0;
}

aor_backoff *aor_backoff_new(const aor_backoff_params *params) {
    if (!backoff_params_ok(params)) {
        errno = EINVAL;
        return NULL;
    }
    aor_backoff *b = calloc(1, sizeof *b);
    if (!b)
        goto fail;
    b->p = *params;
    b->rows = aor_map_new();
    if (!b->rows)
        goto fail_table;
    return b;

fail_table:
    free(b);
fail:
    errno = ENOMEM;
    return NULL;
}

int aor_backoff_set_params(aor_backoff *b, const aor_backoff_params *params) {
    if (!b || !backoff_params_ok(params)) {
        errno = EINVAL;
        return -1;
    }
    b->p = *params;
    return 0;
}

void aor_backoff_free(aor_backoff *b) {
    if (!b)
        return;
    aor_map_free(b->rows, free);
    free(b);
}

/* Window of curve level `count` (>= 1): initial_s * 2^(count-1), capped at max_s. */
static double backoff_curve(const aor_backoff_params *p, int count) {
    int exp = count - 1;
    if (exp > BACKOFF_MAX_EXPONENT)
        exp = BACKOFF_MAX_EXPONENT;
    double w = ldexp(p->initial_s, exp);
    return w < p->max_s ? w : p->max_s;
}

int aor_backoff_preview(const aor_backoff *b, const char *provider, const char *key, aor_kind kind,
                        double hint_s, double now, aor_backoff_row *out) {
    if (!provider || !key || !out) {
        errno = EINVAL;
        return -1;
    }
    const backoff_entry *e = aor_map_get(b->rows, provider, key);
    int count = e ? e->row.failure_count : 0;
    if (count < 0)
        count = 0;
    if (count < INT_MAX)
        count++;

    double window;
    switch (kind) {
    case AOR_KIND_RATE:
    case AOR_KIND_TRANSIENT:
        /* A sane hint sets the window (over the cap: the cap); the failure still counts
         * as a level of the curve (§4.3). NaN fails `> 0` and means no hint. */
        if (hint_s > 0)
            window = hint_s < b->p.max_s ? hint_s : b->p.max_s;
        else
            window = backoff_curve(&b->p, count);
        break;
    case AOR_KIND_QUOTA:
        window = b->p.quota_cooldown_s;
        break;
    case AOR_KIND_AUTH:
        window = b->p.auth_cooldown_s;
        break;
    default:
        errno = EINVAL;
        return -1;
    }

    double until = now + window;
    if (e && e->row.until > until) { /* never shorten a running window */
        until = e->row.until;
        window = e->row.window_s; /* and report the window that is in force */
    }

    *out = (aor_backoff_row){
        .provider = provider,
        .key = key,
        .until = until,
        .window_s = window,
        .failure_count = count,
        .last_error_kind = kind,
        .last_failure = now,
    };
    return 0;
}

int aor_backoff_fail(aor_backoff *b, const char *provider, const char *key, aor_kind kind,
                     double hint_s, double now, aor_backoff_row *out) {
    aor_backoff_row row;
    if (aor_backoff_preview(b, provider, key, kind, hint_s, now, &row) != 0)
        return -1;
    if (aor_backoff_restore(b, &row) != 0)
        return -1;
    if (out)
        aor_backoff_get(b, provider, key, out);
    return 0;
}

int aor_backoff_restore(aor_backoff *b, const aor_backoff_row *row) {
    if (!row || !row->provider || !row->key) {
        errno = EINVAL;
        return -1;
    }
    backoff_entry *e = aor_map_get(b->rows, row->provider, row->key);
    if (e) {
        /* Keep the table's own strings (row's may even be these). */
        const char *provider = e->row.provider, *key = e->row.key;
        e->row = *row;
        e->row.provider = provider;
        e->row.key = key;
        return 0;
    }

    size_t lp = strlen(row->provider), lk = strlen(row->key), size;
    if (__builtin_add_overflow(lp, lk, &size) ||
        __builtin_add_overflow(size, sizeof *e + 2, &size)) {
        errno = ENOMEM;
        return -1;
    }
    e = malloc(size);
    if (!e) {
        errno = ENOMEM;
        return -1;
    }
    memcpy(e->strs, row->provider, lp + 1);
    memcpy(e->strs + lp + 1, row->key, lk + 1);
    e->row = *row;
    e->row.provider = e->strs;
    e->row.key = e->strs + lp + 1;
    if (aor_map_put(b->rows, e->row.provider, e->row.key, e, NULL) != 0) {
        free(e); /* errno=ENOMEM from the map */
        return -1;
    }
    return 0;
}

int aor_backoff_success(aor_backoff *b, const char *provider, const char *key) {
    if (!provider || !key)
        return 0;
    backoff_entry *e = aor_map_remove(b->rows, provider, key);
    free(e);
    return e != NULL;
}

static int backoff_match_provider(const char *a, const char *bkey, void *val, void *arg) {
    return arg == NULL || strcmp(a, (const char *)arg) == 0;
}

int aor_backoff_reset(aor_backoff *b, const char *provider) {
    size_t n = aor_map_remove_if(b->rows, backoff_match_provider, (void *)provider, free);
    return n > INT_MAX ? INT_MAX : (int)n;
}

typedef struct {
    const char *provider; /* NULL: any */
    const char *key;
} backoff_key_match;

static int backoff_match_key(const char *a, const char *bkey, void *val, void *arg) {
    const backoff_key_match *m = arg;
    return (m->provider == NULL || strcmp(a, m->provider) == 0) && strcmp(bkey, m->key) == 0;
}

int aor_backoff_reset_key(aor_backoff *b, const char *provider, const char *key) {
    if (!b || !key)
        return 0;
    backoff_key_match m = {provider, key};
    size_t n = aor_map_remove_if(b->rows, backoff_match_key, &m, free);
    return n > INT_MAX ? INT_MAX : (int)n;
}

int aor_backoff_blocked(const aor_backoff *b, const char *provider, const char *key, double now,
                        double *until) {
    if (!provider || !key)
        return 0;
    const backoff_entry *e = aor_map_get(b->rows, provider, key);
    if (!e || !(e->row.until > now))
        return 0;
    if (until)
        *until = e->row.until;
    return 1;
}

int aor_backoff_get(const aor_backoff *b, const char *provider, const char *key,
                    aor_backoff_row *out) {
    if (!provider || !key)
        return 0;
    const backoff_entry *e = aor_map_get(b->rows, provider, key);
    if (!e)
        return 0;
    if (out)
        *out = e->row;
    return 1;
}

typedef struct {
    void (*fn)(const aor_backoff_row *row, void *arg);
    void *arg;
} backoff_visit;

static void backoff_visit_one(const char *a, const char *bkey, void *val, void *arg) {
    const backoff_visit *v = arg;
    const backoff_entry *e = val;
    v->fn(&e->row, v->arg);
}

void aor_backoff_foreach(const aor_backoff *b, void (*fn)(const aor_backoff_row *row, void *arg),
                         void *arg) {
    backoff_visit v = {fn, arg};
    aor_map_foreach(b->rows, backoff_visit_one, &v);
}
