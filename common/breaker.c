/* Circuit breakers per (provider, model): spec §4.4. */
#include "breaker.h"

#include "map.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

struct aor_breaker {
    aor_breaker_params p;
    aor_map *circuits; /* (provider, model) -> breaker_entry */
};

/* One circuit. times[] is a ring of the latest failure times (capacity cap: p.failures
 * when the circuit was created; only used while closed); the provider and model strings
 * follow the ring. */
typedef struct {
    aor_breaker_state state; /* stored state; see breaker_state() for the state at now */
    double until;            /* open until, when state is open / half-open */
    double probe_since;      /* when allow() let the probe in flight through */
    double probe_until;      /* its lease ends (memory only); 0: no probe let through */
    const char *provider;
    const char *model;
    int cap;  /* capacity of times[] */
    int n;    /* failure times stored */
    int head; /* next slot to write */
    double times[];
} breaker_entry;

/* 1 when params are usable (see aor_breaker_new). */
static int breaker_params_ok(const aor_breaker_params *params) {
    return params && params->failures >= 1 && params->failures <= AOR_BREAKER_FAILURES_MAX &&
           isfinite(params->window_s) && isfinite(params->open_s) && params->window_s >= 0 &&
           params->open_s >= 0;
}

aor_breaker *aor_breaker_new(const aor_breaker_params *params) {
    if (!breaker_params_ok(params)) {
        errno = EINVAL;
        return NULL;
    }
    aor_breaker *b = calloc(1, sizeof *b);
    if (!b)
        goto fail;
    b->p = *params;
    b->circuits = aor_map_new();
    if (!b->circuits)
        goto fail_table;
    return b;

fail_table:
    free(b);
fail:
    errno = ENOMEM;
    return NULL;
}

/* A closed circuit whose ring is too small for the new failures count: it could never
 * hold enough failure times to open. */
static int breaker_ring_too_small(const char *a, const char *bm, void *val, void *arg) {
    const breaker_entry *e = val;
    return e->state == AOR_BREAKER_CLOSED && e->cap < *(const int *)arg;
}

int aor_breaker_set_params(aor_breaker *b, const aor_breaker_params *params) {
    if (!b || !breaker_params_ok(params)) {
        errno = EINVAL;
        return -1;
    }
    int failures = params->failures;
    if (failures > b->p.failures)
        aor_map_remove_if(b->circuits, breaker_ring_too_small, &failures, free);
    b->p = *params;
    return 0;
}

void aor_breaker_free(aor_breaker *b) {
    if (!b)
        return;
    aor_map_free(b->circuits, free);
    free(b);
}

/* State as of now: an open circuit whose time passed is half-open. */
static aor_breaker_state breaker_state(const breaker_entry *e, double now) {
    if (!e)
        return AOR_BREAKER_CLOSED;
    if (e->state == AOR_BREAKER_OPEN && !(e->until > now))
        return AOR_BREAKER_HALF_OPEN;
    return e->state;
}

/* Failures stored with time t >= now - window_s: within the window, its ends included
 * (spec §4.4: failures exactly window_s apart are "within" it). */
static int breaker_recent(const aor_breaker *b, const breaker_entry *e, double now) {
    if (!e)
        return 0;
    int recent = 0;
    for (int i = 0; i < e->n; i++)
        if (e->times[i] >= now - b->p.window_s)
            recent++;
    return recent;
}

/* New closed circuit with no failures, not yet in the map. NULL with errno=ENOMEM. */
static breaker_entry *breaker_entry_new(const aor_breaker *b, const char *provider,
                                        const char *model) {
    size_t lp = strlen(provider), lm = strlen(model), size;
    size_t ring = (size_t)b->p.failures * sizeof(double);
    if (__builtin_add_overflow(lp, lm, &size) ||
        __builtin_add_overflow(size, sizeof(breaker_entry) + ring + 2, &size)) {
        errno = ENOMEM;
        return NULL;
    }
    breaker_entry *e = calloc(1, size);
    if (!e) {
        errno = ENOMEM;
        return NULL;
    }
    char *strs = (char *)e + sizeof *e + ring;
    memcpy(strs, provider, lp + 1);
    memcpy(strs + lp + 1, model, lm + 1);
    e->state = AOR_BREAKER_CLOSED;
    e->cap = b->p.failures;
    e->provider = strs;
    e->model = strs + lp + 1;
    return e;
}

/* The circuit of (provider, model), created closed when missing. NULL with errno=ENOMEM
 * (table unchanged). */
static breaker_entry *breaker_get_or_add(aor_breaker *b, const char *provider, const char *model) {
    breaker_entry *e = aor_map_get(b->circuits, provider, model);
    if (e)
        return e;
    e = breaker_entry_new(b, provider, model);
    if (!e)
        return NULL;
    if (aor_map_put(b->circuits, e->provider, e->model, e, NULL) != 0) {
        free(e);
        return NULL;
    }
    return e;
}

static void breaker_open(breaker_entry *e, double until) {
    e->state = AOR_BREAKER_OPEN;
    e->until = until;
    e->probe_since = 0;
    e->probe_until = 0;
    e->n = 0;
    e->head = 0;
}

/* 1 when a probe let through is in flight at now (its lease has not ended). */
static int breaker_probing(const breaker_entry *e, double now) {
    return e->probe_until > now;
}

/* Lets the probe of a circuit whose time passed through: half-open, leased until
 * now + open_s (breaker.h). */
static void breaker_take_probe(const aor_breaker *b, breaker_entry *e, double now) {
    e->state = AOR_BREAKER_HALF_OPEN;
    e->probe_since = now;
    e->probe_until = now + b->p.open_s;
}

void aor_breaker_release_probe(aor_breaker *b, const char *provider, const char *model,
                               double probe_until) {
    breaker_entry *e = provider && model ? aor_map_get(b->circuits, provider, model) : NULL;
    if (e && e->state == AOR_BREAKER_HALF_OPEN && probe_until > 0 && e->probe_until == probe_until)
        e->probe_since = e->probe_until = 0;
}

int aor_breaker_allow(aor_breaker *b, const char *provider, const char *model, double now) {
    /* A caller that holds no probe: allow_walk with a sequence older than every probe. */
    return aor_breaker_allow_walk(b, provider, model, now, -INFINITY, NULL);
}

int aor_breaker_allow_walk(aor_breaker *b, const char *provider, const char *model, double now,
                           double chosen_at, double *until) {
    if (!provider || !model)
        return 1;
    breaker_entry *e = aor_map_get(b->circuits, provider, model);
    aor_breaker_state st = breaker_state(e, now);
    if (st == AOR_BREAKER_CLOSED)
        return 1;
    if (st == AOR_BREAKER_OPEN) {
        if (until)
            *until = e->until;
        return 0;
    }
    if (breaker_probing(e, now)) {
        if (chosen_at >= e->probe_since)
            return 1; /* the walk whose aor_route_select took the probe */
        if (until)
            *until = e->probe_until;
        return 0;
    }
    breaker_take_probe(b, e, now);
    return 1;
}

int aor_breaker_preview_fail(const aor_breaker *b, const char *provider, const char *model,
                             double now, double *until) {
    if (!provider || !model)
        return 0;
    const breaker_entry *e = aor_map_get(b->circuits, provider, model);
    int opens;
    switch (breaker_state(e, now)) {
    case AOR_BREAKER_OPEN:
        opens = 0;
        break;
    case AOR_BREAKER_HALF_OPEN:
        opens = 1;
        break;
    default:
        opens = breaker_recent(b, e, now) + 1 >= b->p.failures;
        break;
    }
    if (opens && until)
        *until = now + b->p.open_s;
    return opens;
}

int aor_breaker_fail(aor_breaker *b, const char *provider, const char *model, double now) {
    if (!provider || !model) {
        errno = EINVAL;
        return -1;
    }
    double until = 0;
    int opens = aor_breaker_preview_fail(b, provider, model, now, &until);
    breaker_entry *e = aor_map_get(b->circuits, provider, model);
    if (!opens && breaker_state(e, now) == AOR_BREAKER_OPEN)
        return 0;
    e = breaker_get_or_add(b, provider, model);
    if (!e)
        return -1;
    if (opens) {
        breaker_open(e, until);
        return 1;
    }
    e->times[e->head] = now;
    e->head = (e->head + 1) % e->cap;
    if (e->n < e->cap)
        e->n++;
    return 0;
}

int aor_breaker_success(aor_breaker *b, const char *provider, const char *model) {
    if (!provider || !model)
        return 0;
    breaker_entry *e = aor_map_remove(b->circuits, provider, model);
    if (!e)
        return 0;
    int changed = e->state != AOR_BREAKER_CLOSED;
    free(e);
    return changed;
}

int aor_breaker_restore(aor_breaker *b, const char *provider, const char *model, double until) {
    if (!provider || !model) {
        errno = EINVAL;
        return -1;
    }
    breaker_entry *e = breaker_get_or_add(b, provider, model);
    if (!e)
        return -1;
    breaker_open(e, until);
    return 0;
}

typedef struct {
    const char *provider;
    int opened; /* removed circuits that were open / half-open */
} breaker_reset_ctx;

static int breaker_reset_match(const char *a, const char *bm, void *val, void *arg) {
    breaker_reset_ctx *ctx = arg;
    const breaker_entry *e = val;
    if (ctx->provider && strcmp(a, ctx->provider) != 0)
        return 0;
    if (e->state != AOR_BREAKER_CLOSED)
        ctx->opened++;
    return 1;
}

int aor_breaker_reset(aor_breaker *b, const char *provider) {
    breaker_reset_ctx ctx = {provider, 0};
    aor_map_remove_if(b->circuits, breaker_reset_match, &ctx, free);
    return ctx.opened;
}

static void breaker_fill(const aor_breaker *b, const breaker_entry *e, double now,
                         aor_breaker_row *out) {
    aor_breaker_state st = breaker_state(e, now);
    *out = (aor_breaker_row){
        .provider = e->provider,
        .model = e->model,
        .state = st,
        .until = st == AOR_BREAKER_CLOSED ? 0 : e->until,
        .recent_failures = breaker_recent(b, e, now),
        .probe_until = st == AOR_BREAKER_HALF_OPEN && breaker_probing(e, now) ? e->probe_until : 0,
    };
}

int aor_breaker_get(const aor_breaker *b, const char *provider, const char *model, double now,
                    aor_breaker_row *out) {
    if (!provider || !model)
        return 0;
    const breaker_entry *e = aor_map_get(b->circuits, provider, model);
    if (!e)
        return 0;
    if (out)
        breaker_fill(b, e, now, out);
    return 1;
}

typedef struct {
    const aor_breaker *b;
    double now;
    void (*fn)(const aor_breaker_row *row, void *arg);
    void *arg;
} breaker_visit;

static void breaker_visit_one(const char *a, const char *bm, void *val, void *arg) {
    const breaker_visit *v = arg;
    const breaker_entry *e = val;
    if (breaker_state(e, v->now) == AOR_BREAKER_CLOSED)
        return;
    aor_breaker_row row;
    breaker_fill(v->b, e, v->now, &row);
    v->fn(&row, v->arg);
}

void aor_breaker_foreach(const aor_breaker *b, double now,
                         void (*fn)(const aor_breaker_row *row, void *arg), void *arg) {
    breaker_visit v = {b, now, fn, arg};
    aor_map_foreach(b->circuits, breaker_visit_one, &v);
}
