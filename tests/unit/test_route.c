/* Unit tests for common/route.c: select_sequence (spec §5.2), sticky thresholds (§5.4),
 * round-robin (§5.5). Configs are built by hand; the tables are the real ones. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "backoff.h"
#include "breaker.h"
#include "config.h"
#include "hash.h"
#include "route.h"
#include "sticky.h"
#include "usage.h"

#define NOW 1700000000.0

static const aor_backoff_params bo_params = {5, 86400, 120, 120};
static const aor_breaker_params br_params = {3, 60, 30};

/* --- building configs by hand ----------------------------------------------------- */

static char *xstrdup(const char *s) {
    char *d = strdup(s);
    assert_non_null(d);
    return d;
}

static void *xrealloc(void *p, size_t n) {
    void *q = realloc(p, n);
    assert_non_null(q);
    return q;
}

static aor_config *cfg_new(void) {
    aor_config *cfg = calloc(1, sizeof *cfg);
    assert_non_null(cfg);
    cfg->strategy = AOR_STRATEGY_PRIORITY;
    return cfg;
}

static size_t add_key(aor_config *cfg, const char *name, int priority) {
    cfg->keys = xrealloc(cfg->keys, (cfg->nkeys + 1) * sizeof *cfg->keys);
    aor_key_cfg *k = &cfg->keys[cfg->nkeys];
    memset(k, 0, sizeof *k);
    k->name = xstrdup(name);
    k->priority = priority;
    return cfg->nkeys++;
}

static size_t key_index(const aor_config *cfg, const char *name) {
    for (size_t i = 0; i < cfg->nkeys; i++) {
        if (strcmp(cfg->keys[i].name, name) == 0)
            return i;
    }
    fail_msg("no key %s", name);
    return 0;
}

/* models: comma list ("*" = models_any; "" = none); keys: comma list of declared keys
 * ("" = none); intercept: comma list or NULL. */
static size_t add_provider(aor_config *cfg, const char *name, aor_dialect dialect, const char *host,
                           int priority, const char *models, const char *keys,
                           const char *intercept) {
    char buf[8192], *save = NULL;
    cfg->providers = xrealloc(cfg->providers, (cfg->nproviders + 1) * sizeof *cfg->providers);
    aor_provider_cfg *p = &cfg->providers[cfg->nproviders];
    memset(p, 0, sizeof *p);
    p->name = xstrdup(name);
    p->dialect = dialect;
    p->host = xstrdup(host);
    snprintf(buf, sizeof buf, "https://%s", host);
    p->base_url = xstrdup(buf);
    p->port = 443;
    p->priority = priority;
    if (strcmp(models, "*") == 0) {
        p->models_any = 1;
    } else {
        snprintf(buf, sizeof buf, "%s", models);
        for (char *m = strtok_r(buf, ",", &save); m; m = strtok_r(NULL, ",", &save)) {
            p->models = xrealloc(p->models, (p->nmodels + 1) * sizeof *p->models);
            p->models[p->nmodels].canonical = xstrdup(m);
            p->models[p->nmodels].upstream = xstrdup(m);
            p->nmodels++;
        }
    }
    snprintf(buf, sizeof buf, "%s", keys);
    for (char *k = strtok_r(buf, ",", &save); k; k = strtok_r(NULL, ",", &save)) {
        p->key_idx = xrealloc(p->key_idx, (p->nkeys + 1) * sizeof *p->key_idx);
        p->key_idx[p->nkeys++] = key_index(cfg, k);
    }
    if (intercept != NULL) {
        snprintf(buf, sizeof buf, "%s", intercept);
        for (char *h = strtok_r(buf, ",", &save); h; h = strtok_r(NULL, ",", &save)) {
            p->intercept = xrealloc(p->intercept, (p->nintercept + 1) * sizeof *p->intercept);
            p->intercept[p->nintercept++] = xstrdup(h);
        }
    }
    p->passthrough = p->nkeys == 0;
    return cfg->nproviders++;
}

static void cfg_free(aor_config *cfg) {
    for (size_t i = 0; i < cfg->nkeys; i++)
        free(cfg->keys[i].name);
    for (size_t i = 0; i < cfg->nproviders; i++) {
        aor_provider_cfg *p = &cfg->providers[i];
        free(p->name);
        free(p->host);
        free(p->base_url);
        free(p->key_idx);
        for (size_t m = 0; m < p->nmodels; m++) {
            free(p->models[m].canonical);
            free(p->models[m].upstream);
        }
        free(p->models);
        for (size_t h = 0; h < p->nintercept; h++)
            free(p->intercept[h]);
        free(p->intercept);
    }
    free(cfg->keys);
    free(cfg->providers);
    free(cfg);
}

/* --- state + selection helpers ---------------------------------------------------- */

typedef struct {
    aor_config *cfg;
    aor_backoff *b;
    aor_breaker *br;
    aor_sticky *s;
    aor_usage *u;
    aor_route_ctx ctx;
    aor_sequence seq;
} world;

static int setup(void **state) {
    world *w = calloc(1, sizeof *w);
    if (w == NULL)
        return -1;
    w->cfg = cfg_new();
    w->b = aor_backoff_new(&bo_params);
    w->br = aor_breaker_new(&br_params);
    w->s = aor_sticky_new();
    w->u = aor_usage_new();
    if (!w->b || !w->br || !w->s || !w->u)
        return -1;
    w->ctx = (aor_route_ctx){w->cfg, w->b, w->br, w->s, w->u};
    *state = w;
    return 0;
}

static int teardown(void **state) {
    world *w = *state;
    aor_sequence_free(&w->seq);
    aor_backoff_free(w->b);
    aor_breaker_free(w->br);
    aor_sticky_free(w->s);
    aor_usage_free(w->u);
    cfg_free(w->cfg);
    free(w);
    return 0;
}

/* A client hash as the daemon computes it. */
static void client_id(const char *cred, char out[65]) {
    aor_hash_sha256_hex(cred, strlen(cred), out);
}

/* Runs a selection; the result's order as "provider/key provider/key ..." in w->order. */
static char order[16384];

static const char *select_order(world *w, const char *model, const char *client, const char *host,
                                aor_dialect dialect, double now) {
    size_t off = 0;
    aor_sequence_free(&w->seq);
    assert_int_equal(aor_route_select(&w->ctx, model, client, host, dialect, now, &w->seq), 0);
    order[0] = '\0';
    for (size_t i = 0; i < w->seq.n && off < sizeof order; i++) {
        const aor_candidate *c = &w->seq.items[i];
        int r = snprintf(order + off, sizeof order - off, "%s%s/%s", i ? " " : "",
                         w->cfg->providers[c->provider].name, c->key_name);
        assert_true(r > 0);
        off += (size_t)r;
    }
    return order;
}

static const char *first_key(world *w, const char *model, const char *client, double now) {
    select_order(w, model, client, NULL, AOR_DIALECT_OPENAI, now);
    assert_true(w->seq.n > 0);
    return w->seq.items[0].key_name;
}

static void fail_key(world *w, const char *p, const char *k, aor_kind kind, double hint,
                     double now) {
    assert_int_equal(aor_backoff_fail(w->b, p, k, kind, hint, now, NULL), 0);
}

static void open_circuit(world *w, const char *p, const char *m, double now) {
    for (int i = 0; i < br_params.failures; i++)
        aor_breaker_fail(w->br, p, m, now);
    assert_int_equal(aor_breaker_allow(w->br, p, m, now), 0);
}

static void set_sticky(world *w, const char *client, const char *model, const char *p,
                       const char *k, int streak) {
    aor_sticky_row row = {client, model, p, k, NOW - 10, streak};
    assert_int_equal(aor_sticky_restore(w->s, &row), 0);
}

/* --- reference: the selection before lazy tie hashing ------------------------------- */

/* common/route.c as of commit cfae9ea, kept unchanged but for the ref_ prefixes: every
 * candidate gets aor_hash_pair64(client, "provider/key") before one sort by (provider
 * priority, key priority, hash, provider, key). test_matches_reference checks that
 * aor_route_select, which hashes only candidates that tie on both priorities (and the
 * client only once), gives the same sequence for every input. */

#define REF_PASSTHROUGH_PREFIX "client-"
#define REF_PASSTHROUGH_HEX 12 /* hex digits of the client hash in a passthrough key name */

/* A candidate while the sequence is built. */
typedef struct {
    aor_candidate c;
    int pprio;    /* provider priority */
    int kprio;    /* key priority (0 for the passthrough candidate) */
    uint64_t tie; /* aor_hash_pair64(client, "provider/key") */
} ref_cand;

/* Breaker verdict per provider, computed at most once per selection. */
enum { REF_BR_UNKNOWN = 0, REF_BR_ALLOWED, REF_BR_BLOCKED };

static int ref_cand_cmp(const void *pa, const void *pb) {
    const ref_cand *a = pa, *b = pb;
    if (a->pprio != b->pprio)
        return a->pprio < b->pprio ? -1 : 1;
    if (a->kprio != b->kprio)
        return a->kprio < b->kprio ? -1 : 1;
    if (a->tie != b->tie)
        return a->tie < b->tie ? -1 : 1;
    if (a->c.provider != b->c.provider)
        return a->c.provider < b->c.provider ? -1 : 1;
    if (a->c.key != b->c.key)
        return a->c.key < b->c.key ? -1 : 1;
    return 0;
}

/* 1 when provider p serves the request's canonical model by its `models` list (or
 * models = *), for a request of `dialect` (no provider translates between dialects). */
static int ref_provider_lists(const aor_provider_cfg *p, const char *model, aor_dialect dialect) {
    int listed = 0;
    if (p->dialect != dialect)
        return 0;
    aor_config_upstream_model(p, model, &listed);
    return listed;
}

/* Fills sel with the indexes of the providers that serve the request (step 1 of
 * docs/route.md); returns how many. */
static size_t ref_select_providers(const aor_config *cfg, const char *model, const char *host,
                                   aor_dialect dialect, size_t *sel) {
    size_t n = 0;
    if (model[0] != '\0') {
        for (size_t i = 0; i < cfg->nproviders; i++) {
            if (ref_provider_lists(&cfg->providers[i], model, dialect))
                sel[n++] = i;
        }
        if (n > 0)
            return n;
    }
    /* §5.2: a model no provider lists (or no model) goes to the owners of the host the
     * client asked for; on the sidecar to the providers of the request's dialect. */
    for (size_t i = 0; i < cfg->nproviders; i++) {
        const aor_provider_cfg *p = &cfg->providers[i];
        int take;
        if (host != NULL)
            take = aor_config_provider_owns_host(p, host);
        else if (cfg->embedded)
            /* Embedded default on the sidecar: the dialect's own provider (openai,
             * anthropic, gemini), never another provider of the same dialect. */
            take = p->dialect == dialect && strcmp(p->name, aor_dialect_name(dialect)) == 0;
        else
            take = p->dialect == dialect;
        if (take)
            sel[n++] = i;
    }
    return n;
}

/* "client-" + the first 12 hex digits of the client hash (or "client-anonymous" when the
 * request carried no credential). Returns a malloc'd string or NULL (ENOMEM). */
static char *ref_passthrough_name(const char *client) {
    size_t clen = strnlen(client, REF_PASSTHROUGH_HEX);
    const char *id = clen > 0 ? client : "anonymous";
    size_t idlen = clen > 0 ? clen : strlen("anonymous");
    size_t plen = strlen(REF_PASSTHROUGH_PREFIX);
    char *s = malloc(plen + idlen + 1);
    if (s == NULL)
        return NULL;
    memcpy(s, REF_PASSTHROUGH_PREFIX, plen);
    memcpy(s + plen, id, idlen);
    s[plen + idlen] = '\0';
    return s;
}

/* Tie-break hash of (client, "provider/key"); buf/cap is a growable scratch buffer.
 * Returns 0, or -1 (ENOMEM). */
static int ref_tie_hash(const char *client, const char *provider, const char *key, char **buf,
                        size_t *cap, uint64_t *out) {
    size_t lp = strlen(provider), lk = strlen(key);
    size_t need = lp + lk + 2;
    if (need > *cap) {
        char *nb = realloc(*buf, need);
        if (nb == NULL)
            return -1;
        *buf = nb;
        *cap = need;
    }
    memcpy(*buf, provider, lp);
    (*buf)[lp] = '/';
    memcpy(*buf + lp + 1, key, lk);
    (*buf)[lp + 1 + lk] = '\0';
    *out = aor_hash_pair64(client, *buf);
    return 0;
}

/* Step 2 + 3: every (provider, key) of the selected providers, ordered. Returns the
 * number written to *out (malloc'd) or -1 (ENOMEM). */
static long ref_build_candidates(const aor_config *cfg, const size_t *sel, size_t nsel,
                                 const char *client, aor_sequence *seq, ref_cand **out) {
    size_t total = 0, n = 0;
    char *buf = NULL;
    size_t cap = 0;
    ref_cand *cs;

    for (size_t i = 0; i < nsel; i++) {
        const aor_provider_cfg *p = &cfg->providers[sel[i]];
        total += p->passthrough ? 1 : p->nkeys;
        if (p->passthrough && seq->scratch == NULL) {
            seq->scratch = ref_passthrough_name(client);
            if (seq->scratch == NULL)
                return -1;
        }
    }
    cs = malloc((total > 0 ? total : 1) * sizeof *cs);
    if (cs == NULL)
        return -1;
    for (size_t i = 0; i < nsel; i++) {
        const aor_provider_cfg *p = &cfg->providers[sel[i]];
        size_t nk = p->passthrough ? 1 : p->nkeys;
        for (size_t k = 0; k < nk; k++) {
            ref_cand *c = &cs[n];
            c->c.provider = sel[i];
            c->pprio = p->priority;
            if (p->passthrough) {
                c->c.key = -1;
                c->c.key_name = seq->scratch;
                c->kprio = 0;
            } else {
                size_t ki = p->key_idx[k];
                if (ki >= cfg->nkeys)
                    continue; /* not a declared key: config validation rejects this */
                c->c.key = (long)ki;
                c->c.key_name = cfg->keys[ki].name;
                c->kprio = cfg->keys[ki].priority;
            }
            if (ref_tie_hash(client, p->name, c->c.key_name, &buf, &cap, &c->tie) != 0)
                goto fail_cands;
            n++;
        }
    }
    free(buf);
    qsort(cs, n, sizeof *cs, ref_cand_cmp);
    /* A key written twice in one provider's list is one candidate (never tried twice);
     * the duplicates are adjacent after sorting. */
    size_t w = 0;
    for (size_t r = 0; r < n; r++) {
        if (w > 0 && cs[w - 1].c.provider == cs[r].c.provider && cs[w - 1].c.key == cs[r].c.key)
            continue;
        cs[w++] = cs[r];
    }
    *out = cs;
    return (long)w;

fail_cands:
    free(buf);
    free(cs);
    return -1;
}

/* Step 4: drops candidates in backoff, with an exhausted usage window (§6) or with an
 * open circuit, in place. Returns the number kept; fills seq->dropped, earliest_until,
 * last_kind. brstate has one slot per configured provider. */
static size_t ref_drop_unavailable(const aor_route_ctx *ctx, const char *model, double now,
                                   ref_cand *cs, size_t n, unsigned char *brstate,
                                   aor_sequence *seq) {
    const aor_config *cfg = ctx->cfg;
    size_t w = 0;
    double latest_failure = 0;
    int have_backoff_kind = 0, other_dropped = 0;

    for (size_t r = 0; r < n; r++) {
        const char *pname = cfg->providers[cs[r].c.provider].name;
        double bo_until = 0, br_until = 0, us_until = 0;
        int bo_blocked = ctx->backoff != NULL &&
                         aor_backoff_blocked(ctx->backoff, pname, cs[r].c.key_name, now, &bo_until);
        int us_blocked = ctx->usage != NULL &&
                         aor_usage_exhausted(ctx->usage, pname, cs[r].c.key_name, now, &us_until);
        int br_blocked = 0;
        aor_breaker_row brow;

        if (ctx->breaker != NULL) {
            if (bo_blocked || us_blocked) {
                /* Only look (allow() would spend the probe of an expired circuit on a
                 * provider we are not going to call for this key). */
                if (aor_breaker_get(ctx->breaker, pname, model, now, &brow) &&
                    brow.state == AOR_BREAKER_OPEN && brow.until > now) {
                    br_blocked = 1;
                    br_until = brow.until;
                }
            } else {
                /* Only look: an open circuit, or a half-open one with another request's
                 * probe in flight, is dropped; the walk takes a free probe when it sends. */
                (void)brstate;
                if (aor_breaker_get(ctx->breaker, pname, model, now, &brow)) {
                    if (brow.state == AOR_BREAKER_OPEN) {
                        br_blocked = 1;
                        br_until = brow.until;
                    } else if (brow.state == AOR_BREAKER_HALF_OPEN && brow.probe_until > now) {
                        br_blocked = 1;
                        br_until = brow.probe_until;
                    }
                }
            }
        }
        if (!bo_blocked && !us_blocked && !br_blocked) {
            cs[w++] = cs[r];
            continue;
        }
        /* Dropped: available again when every block on it has ended. */
        double avail = bo_until > br_until ? bo_until : br_until;
        if (us_until > avail)
            avail = us_until;
        if (seq->dropped == 0 || avail < seq->earliest_until)
            seq->earliest_until = avail;
        seq->dropped++;
        aor_backoff_row row;
        if ((bo_blocked || br_blocked) && ctx->backoff &&
            aor_backoff_get(ctx->backoff, pname, cs[r].c.key_name, &row) &&
            (!have_backoff_kind || row.last_failure >= latest_failure)) {
            latest_failure = row.last_failure;
            seq->last_kind = row.last_error_kind;
            have_backoff_kind = 1;
        } else if (!bo_blocked) {
            other_dropped = 1;
        }
    }
    if (!have_backoff_kind && other_dropped)
        seq->last_kind = AOR_KIND_RATE;
    return w;
}

/* Moves cs[j] to the front, keeping the order of the others. */
static void ref_move_first(ref_cand *cs, size_t j) {
    ref_cand t = cs[j];
    memmove(&cs[1], &cs[0], j * sizeof *cs);
    cs[0] = t;
}

/* Rotates cs so that cs[j] comes first (cyclic order kept). */
static int ref_rotate_to(ref_cand *cs, size_t n, size_t j) {
    ref_cand *tmp = malloc(j * sizeof *tmp + 1);
    if (tmp == NULL)
        return -1;
    memcpy(tmp, cs, j * sizeof *cs);
    memmove(cs, &cs[j], (n - j) * sizeof *cs);
    memcpy(&cs[n - j], tmp, j * sizeof *cs);
    free(tmp);
    return 0;
}

/* 1 when a candidate ahead of the sticky one (index j) beats it by more than the cache
 * thresholds (§5.4): a provider priority better by more than
 * provider_priority_cache_threshold, or, at equal provider priority (the same provider
 * or another), a key priority better by more than key_priority_cache_threshold. */
static int ref_preferred_beats_sticky(const aor_config *cfg, const ref_cand *cs, size_t j) {
    for (size_t i = 0; i < j; i++) {
        long long pgap = (long long)cs[j].pprio - cs[i].pprio;
        if (pgap > cfg->provider_priority_cache_threshold)
            return 1;
        long long kgap = (long long)cs[j].kprio - cs[i].kprio;
        if (pgap == 0 && kgap > cfg->key_priority_cache_threshold)
            return 1;
    }
    return 0;
}

/* The index in cs[0..n) of the candidate named (provider, key), or n. */
static size_t ref_find(const aor_config *cfg, const ref_cand *cs, size_t n, const char *provider,
                       const char *key) {
    size_t j;
    for (j = 0; j < n; j++)
        if (strcmp(cfg->providers[cs[j].c.provider].name, provider) == 0 &&
            strcmp(cs[j].c.key_name, key) == 0)
            break;
    return j;
}

/* Steps 5 + 6: sticky first (§5.4) or round-robin advance (§5.5). full[0..nfull): the
 * candidates before the drop, in order (round-robin goes on after a dropped sticky). */
static int ref_apply_sticky(const aor_route_ctx *ctx, const char *model, const char *client,
                            ref_cand *cs, size_t n, const ref_cand *full, size_t nfull) {
    const aor_config *cfg = ctx->cfg;
    aor_sticky_row row;
    size_t j;

    if (ctx->sticky == NULL || n == 0 || !aor_sticky_get(ctx->sticky, client, model, &row))
        return 0;
    for (j = 0; j < n; j++) {
        if (strcmp(cfg->providers[cs[j].c.provider].name, row.provider) == 0 &&
            strcmp(cs[j].c.key_name, row.key) == 0)
            break;
    }
    if (j == n && cfg->strategy == AOR_STRATEGY_ROUND_ROBIN && n >= 2) {
        size_t js = ref_find(cfg, full, nfull, row.provider, row.key);
        if (js == nfull)
            return 0;                                 /* no longer configured */
        for (size_t step = 1; step < nfull; step++) { /* the next kept one after it */
            const ref_cand *f = &full[(js + step) % nfull];
            size_t k = ref_find(cfg, cs, n, cfg->providers[f->c.provider].name, f->c.key_name);
            if (k < n)
                return k == 0 ? 0 : ref_rotate_to(cs, n, k);
        }
        return 0;
    }
    if (j == n)
        return 0; /* no longer configured, or dropped: the preferred order stands */
    if (cfg->strategy == AOR_STRATEGY_ROUND_ROBIN && n >= 2) {
        if (row.streak >= 2)
            return ref_rotate_to(cs, n, (j + 1) % n);
        return ref_rotate_to(cs, n, j);
    }
    if (j > 0 && !ref_preferred_beats_sticky(cfg, cs, j))
        ref_move_first(cs, j);
    return 0;
}

static int ref_route_select(const aor_route_ctx *ctx, const char *model, const char *client,
                            const char *host, aor_dialect dialect, double now, aor_sequence *out) {
    size_t *sel = NULL;
    unsigned char *brstate = NULL;
    ref_cand *cs = NULL, *full = NULL;
    long nc;
    size_t kept;

    if (out == NULL) {
        errno = EINVAL;
        return -1;
    }
    memset(out, 0, sizeof *out);
    out->last_kind = AOR_KIND_OK;
    if (ctx == NULL || ctx->cfg == NULL) {
        errno = EINVAL;
        return -1;
    }
    const aor_config *cfg = ctx->cfg;
    if (model == NULL)
        model = "";
    if (client == NULL)
        client = "";

    size_t np = cfg->nproviders > 0 ? cfg->nproviders : 1;
    sel = malloc(np * sizeof *sel);
    brstate = calloc(np, 1);
    if (sel == NULL || brstate == NULL)
        goto fail_oom;
    size_t nsel = ref_select_providers(cfg, model, host, dialect, sel);
    nc = ref_build_candidates(cfg, sel, nsel, client, out, &cs);
    if (nc < 0)
        goto fail_oom;
    full = malloc(((size_t)nc + 1) * sizeof *full);
    if (full == NULL)
        goto fail_oom;
    memcpy(full, cs, (size_t)nc * sizeof *full);
    kept = ref_drop_unavailable(ctx, model, now, cs, (size_t)nc, brstate, out);
    if (ref_apply_sticky(ctx, model, client, cs, kept, full, (size_t)nc) != 0)
        goto fail_oom;

    out->items = malloc((kept > 0 ? kept : 1) * sizeof *out->items);
    if (out->items == NULL)
        goto fail_oom;
    for (size_t i = 0; i < kept; i++)
        out->items[i] = cs[i].c;
    out->n = kept;
    free(full);
    free(cs);
    free(brstate);
    free(sel);
    return 0;

fail_oom:
    free(full);
    free(cs);
    free(brstate);
    free(sel);
    aor_sequence_free(out);
    errno = ENOMEM;
    return -1;
}

/* --- tests -------------------------------------------------------------------------- */

/* Provider priority first, then key priority (lower is preferred). */
static void test_order_by_priorities(void **state) {
    world *w = *state;
    add_key(w->cfg, "a1", 0);
    add_key(w->cfg, "a2", 1);
    add_key(w->cfg, "b1", 2);
    add_key(w->cfg, "b2", 0);
    add_provider(w->cfg, "A", AOR_DIALECT_OPENAI, "a.example", 1, "gpt-4o", "a2,a1", NULL);
    add_provider(w->cfg, "B", AOR_DIALECT_OPENAI, "b.example", 0, "gpt-4o", "b1,b2", NULL);
    assert_string_equal(select_order(w, "gpt-4o", "c1", NULL, AOR_DIALECT_OPENAI, NOW),
                        "B/b2 B/b1 A/a1 A/a2");
    assert_int_equal(w->seq.dropped, 0);
    assert_true(w->seq.earliest_until == 0);
    assert_int_equal(w->seq.items[0].key, (long)key_index(w->cfg, "b2"));
    assert_int_equal(w->seq.items[0].provider, 1);
}

/* Equal keys: each client gets a stable order, and clients spread over the keys. */
static void test_tie_spreading(void **state) {
    world *w = *state;
    const char *names[] = {"k0", "k1", "k2", "k3"};
    for (int i = 0; i < 4; i++)
        add_key(w->cfg, names[i], 0);
    add_provider(w->cfg, "P", AOR_DIALECT_OPENAI, "p.example", 0, "m", "k0,k1,k2,k3", NULL);

    int seen[4] = {0};
    for (int c = 0; c < 20; c++) {
        char cred[32], id[65], first[64];
        snprintf(cred, sizeof cred, "sk-client-%d", c);
        client_id(cred, id);
        snprintf(first, sizeof first, "%s", first_key(w, "m", id, NOW));
        for (int again = 0; again < 3; again++)
            assert_string_equal(first_key(w, "m", id, NOW), first);
        /* The order is the one of the documented hash. */
        char pk[16];
        uint64_t prev = 0;
        for (size_t i = 0; i < w->seq.n; i++) {
            snprintf(pk, sizeof pk, "P/%s", w->seq.items[i].key_name);
            uint64_t h = aor_hash_pair64(id, pk);
            if (i > 0)
                assert_true(h >= prev);
            prev = h;
        }
        seen[first[1] - '0']++;
    }
    int distinct = 0;
    for (int i = 0; i < 4; i++)
        distinct += seen[i] > 0;
    assert_true(distinct >= 2);
}

/* Backed-off keys and open circuits are dropped; earliest_until and last_kind say when
 * and why (§5.6). */
static void test_drop_backoff_and_breaker(void **state) {
    world *w = *state;
    add_key(w->cfg, "a1", 0);
    add_key(w->cfg, "a2", 1);
    add_key(w->cfg, "b1", 0);
    add_provider(w->cfg, "A", AOR_DIALECT_OPENAI, "a.example", 0, "gpt-4o", "a1,a2", NULL);
    add_provider(w->cfg, "B", AOR_DIALECT_OPENAI, "b.example", 1, "gpt-4o", "b1", NULL);

    fail_key(w, "A", "a1", AOR_KIND_RATE, 40, NOW - 5);  /* until NOW + 35 */
    fail_key(w, "A", "a2", AOR_KIND_QUOTA, -1, NOW - 1); /* until NOW + 119, newer */
    assert_string_equal(select_order(w, "gpt-4o", "c", NULL, AOR_DIALECT_OPENAI, NOW), "B/b1");
    assert_int_equal(w->seq.dropped, 2);
    assert_true(w->seq.earliest_until == NOW + 35);
    assert_int_equal(w->seq.last_kind, AOR_KIND_QUOTA);

    /* Breaker open on B for this model: everything dropped (the 429 case of §5.6). */
    open_circuit(w, "B", "gpt-4o", NOW);
    select_order(w, "gpt-4o", "c", NULL, AOR_DIALECT_OPENAI, NOW + 1);
    assert_int_equal(w->seq.n, 0);
    assert_int_equal(w->seq.dropped, 3);
    assert_true(w->seq.earliest_until == NOW + 30); /* the circuit ends first */
    assert_int_equal(w->seq.last_kind, AOR_KIND_QUOTA);

    /* Another model of B is not affected by gpt-4o's circuit. */
    add_provider(w->cfg, "C", AOR_DIALECT_OPENAI, "c.example", 0, "other", "b1", NULL);
    assert_string_equal(select_order(w, "other", "c", NULL, AOR_DIALECT_OPENAI, NOW + 1), "C/b1");

    /* The window ended: the key is back although its row (curve level) stays. */
    assert_string_equal(select_order(w, "gpt-4o", "c", NULL, AOR_DIALECT_OPENAI, NOW + 35),
                        "A/a1 B/b1");
    assert_int_equal(w->seq.dropped, 1);
    assert_true(w->seq.earliest_until == NOW + 119);
}

/* A key whose usage window is exhausted (§6) is dropped like a backed-off one, until
 * its window resets; a 429's "0 remaining" does not exhaust it. */
static void test_drop_exhausted_usage(void **state) {
    world *w = *state;
    add_key(w->cfg, "k1", 0);
    add_key(w->cfg, "k2", 1);
    add_key(w->cfg, "k3", 2);
    add_provider(w->cfg, "P", AOR_DIALECT_OPENAI, "p.example", 0, "m", "k1,k2,k3", NULL);
    const aor_header h[] = {
        {"x-ratelimit-remaining-requests", "0"},
        {"x-ratelimit-reset-requests", "30s"},
    };
    assert_int_equal(aor_usage_observe(w->u, "P", "k1", 200, h, 2, NOW, 0), 1);
    assert_string_equal(select_order(w, "m", "c", NULL, AOR_DIALECT_OPENAI, NOW + 1), "P/k2 P/k3");
    assert_int_equal(w->seq.dropped, 1);
    assert_true(w->seq.earliest_until == NOW + 30);
    assert_int_equal(w->seq.last_kind, AOR_KIND_RATE);

    /* A 429 answer with remaining 0 on k2: throttled, not exhausted. */
    assert_int_equal(aor_usage_observe(w->u, "P", "k2", 429, h, 2, NOW, 0), 0);
    assert_string_equal(select_order(w, "m", "c", NULL, AOR_DIALECT_OPENAI, NOW + 1), "P/k2 P/k3");

    /* Backoff and exhaustion together: available when both ended; the backoff row's kind
     * is reported. */
    fail_key(w, "P", "k2", AOR_KIND_QUOTA, -1, NOW); /* until NOW + 120 */
    assert_int_equal(aor_usage_observe(w->u, "P", "k3", 200, h, 2, NOW + 5, 0), 1); /* NOW+35 */
    select_order(w, "m", "c", NULL, AOR_DIALECT_OPENAI, NOW + 6);
    assert_int_equal(w->seq.n, 0);
    assert_int_equal(w->seq.dropped, 3);
    assert_true(w->seq.earliest_until == NOW + 30);
    assert_int_equal(w->seq.last_kind, AOR_KIND_QUOTA);

    /* The window reset: k1 is back (its snapshot is stale now). */
    assert_string_equal(select_order(w, "m", "c", NULL, AOR_DIALECT_OPENAI, NOW + 30), "P/k1");
    assert_true(w->seq.earliest_until == NOW + 35);
    /* Without usage data nothing is exhausted. */
    w->ctx.usage = NULL;
    assert_string_equal(select_order(w, "m", "c", NULL, AOR_DIALECT_OPENAI, NOW + 6), "P/k1 P/k3");
}

/* Only circuits: last_kind is rate; a key both backed off and behind an open circuit is
 * available only when both ended. */
static void test_breaker_only_and_combined(void **state) {
    world *w = *state;
    add_key(w->cfg, "a1", 0);
    add_key(w->cfg, "a2", 0);
    add_provider(w->cfg, "A", AOR_DIALECT_OPENAI, "a.example", 0, "", "a1,a2", NULL);

    /* No model in the request: the circuit is the one of model "". */
    open_circuit(w, "A", "", NOW);
    select_order(w, NULL, "c", NULL, AOR_DIALECT_OPENAI, NOW + 1);
    assert_int_equal(w->seq.n, 0);
    assert_int_equal(w->seq.dropped, 2);
    assert_true(w->seq.earliest_until == NOW + 30);
    assert_int_equal(w->seq.last_kind, AOR_KIND_RATE);
    assert_int_equal(w->seq.usage_only, 0); /* a circuit, not usage (review) */

    fail_key(w, "A", "a1", AOR_KIND_RATE, 100, NOW); /* a1: until NOW + 100 */
    fail_key(w, "A", "a2", AOR_KIND_RATE, 10, NOW);  /* a2: until NOW + 10 < circuit */
    select_order(w, "", "c", NULL, AOR_DIALECT_OPENAI, NOW + 1);
    assert_int_equal(w->seq.dropped, 2);
    assert_true(w->seq.earliest_until == NOW + 30);

    /* Behind the open circuit, a2's window (now until NOW + 7) has ended: its row (kept
     * for the curve) still says what failed last (§5.6: the last failure reason). */
    fail_key(w, "A", "a2", AOR_KIND_TRANSIENT, 5, NOW + 2); /* a2: until NOW + 7 */
    select_order(w, "", "c", NULL, AOR_DIALECT_OPENAI, NOW + 20);
    assert_int_equal(w->seq.dropped, 2);
    assert_int_equal(w->seq.last_kind, AOR_KIND_TRANSIENT);

    /* Without a backoff table (route.h: nothing backed off) the circuit still drops
     * both, and there is no row to tell the kind. */
    aor_route_ctx nobo = w->ctx;
    nobo.backoff = NULL;
    aor_sequence seq;
    assert_int_equal(aor_route_select(&nobo, "", "c", NULL, AOR_DIALECT_OPENAI, NOW + 20, &seq), 0);
    assert_int_equal(seq.dropped, 2);
    assert_int_equal(seq.last_kind, AOR_KIND_RATE);
    aor_sequence_free(&seq);

    /* After the circuit's time: a1 is still backed off, a2 is the probe. */
    assert_string_equal(select_order(w, "", "c", NULL, AOR_DIALECT_OPENAI, NOW + 31), "A/a2");
    assert_true(w->seq.earliest_until == NOW + 100);
}

/* A half-open circuit is only looked at: a fallback listed but never tried takes no probe
 * (review: routing took the probe of every half-open provider in the sequence, so a walk
 * that succeeded on its first candidate held the fallback's circuit for open_s). The walk
 * takes it (aor_breaker_allow) when it sends; then others drop the provider until the
 * probe's lease ends, and earliest_until is that lease end. */
static void test_half_open_is_only_looked_at(void **state) {
    world *w = *state;
    add_key(w->cfg, "b1", 0);
    add_key(w->cfg, "a1", 0);
    add_provider(w->cfg, "B", AOR_DIALECT_OPENAI, "b.example", 0, "", "b1", NULL);
    add_provider(w->cfg, "A", AOR_DIALECT_OPENAI, "a.example", 1, "", "a1", NULL);
    open_circuit(w, "A", "m", NOW);
    for (int i = 0; i < 2; i++) {
        assert_string_equal(select_order(w, "m", "c", NULL, AOR_DIALECT_OPENAI, NOW + 31),
                            "B/b1 A/a1");
        assert_int_equal(w->seq.items[0].half_open, 0);
        assert_int_equal(w->seq.items[1].half_open, 1);
    }
    aor_breaker_row row;
    assert_true(aor_breaker_get(w->br, "A", "m", NOW + 31, &row));
    assert_true(row.probe_until == 0);                                 /* nobody holds the probe */
    assert_int_equal(aor_breaker_allow(w->br, "A", "m", NOW + 32), 1); /* a walk sends */
    assert_string_equal(select_order(w, "m", "c", NULL, AOR_DIALECT_OPENAI, NOW + 33), "B/b1");
    assert_int_equal(w->seq.dropped, 1);
    assert_true(w->seq.earliest_until == NOW + 32 + 30); /* the lease end, not the past */
}

/* The sticky (provider, key) goes first when nothing beats it (§5.2 step 3). */
static void test_sticky_first(void **state) {
    world *w = *state;
    add_key(w->cfg, "k0", 0);
    add_key(w->cfg, "k1", 0);
    add_key(w->cfg, "k2", 0);
    add_provider(w->cfg, "P", AOR_DIALECT_OPENAI, "p.example", 0, "m", "k0,k1,k2", NULL);
    select_order(w, "m", "client", NULL, AOR_DIALECT_OPENAI, NOW);
    char last[16];
    snprintf(last, sizeof last, "%s", w->seq.items[2].key_name);
    set_sticky(w, "client", "m", "P", last, 1);
    assert_string_equal(first_key(w, "m", "client", NOW), last);
    assert_int_equal(w->seq.n, 3);
    /* Another client and another model are not affected. */
    assert_string_not_equal(first_key(w, "other-model", "client", NOW), last);
    /* Sticky in backoff: dropped, not first. */
    fail_key(w, "P", last, AOR_KIND_RATE, -1, NOW);
    select_order(w, "m", "client", NULL, AOR_DIALECT_OPENAI, NOW);
    assert_int_equal(w->seq.n, 2);
    assert_string_not_equal(w->seq.items[0].key_name, last);
}

/* Provider threshold: gap == threshold keeps the sticky; gap == threshold + 1 re-probes
 * the preferred provider. */
static void test_provider_threshold_boundary(void **state) {
    world *w = *state;
    add_key(w->cfg, "a", 0);
    add_key(w->cfg, "b", 0);
    add_provider(w->cfg, "A", AOR_DIALECT_OPENAI, "a.example", 0, "m", "a", NULL);
    add_provider(w->cfg, "B", AOR_DIALECT_OPENAI, "b.example", 3, "m", "b", NULL);
    set_sticky(w, "cl", "m", "B", "b", 5);

    w->cfg->provider_priority_cache_threshold = 3; /* gap 3 == threshold */
    assert_string_equal(select_order(w, "m", "cl", NULL, AOR_DIALECT_OPENAI, NOW), "B/b A/a");
    w->cfg->provider_priority_cache_threshold = 2; /* gap 3 == threshold + 1 */
    assert_string_equal(select_order(w, "m", "cl", NULL, AOR_DIALECT_OPENAI, NOW), "A/a B/b");
    w->cfg->provider_priority_cache_threshold = 0; /* default: always re-probe */
    assert_string_equal(select_order(w, "m", "cl", NULL, AOR_DIALECT_OPENAI, NOW), "A/a B/b");
    /* The key threshold does not matter across providers. */
    w->cfg->key_priority_cache_threshold = 100;
    assert_string_equal(select_order(w, "m", "cl", NULL, AOR_DIALECT_OPENAI, NOW), "A/a B/b");
}

/* Key threshold inside one provider. */
static void test_key_threshold_boundary(void **state) {
    world *w = *state;
    add_key(w->cfg, "k1", 0);
    add_key(w->cfg, "k2", 4);
    add_provider(w->cfg, "P", AOR_DIALECT_OPENAI, "p.example", 0, "m", "k1,k2", NULL);
    set_sticky(w, "cl", "m", "P", "k2", 1);

    w->cfg->key_priority_cache_threshold = 4;
    assert_string_equal(select_order(w, "m", "cl", NULL, AOR_DIALECT_OPENAI, NOW), "P/k2 P/k1");
    w->cfg->key_priority_cache_threshold = 3;
    assert_string_equal(select_order(w, "m", "cl", NULL, AOR_DIALECT_OPENAI, NOW), "P/k1 P/k2");
    /* The provider threshold does not matter inside one provider. */
    w->cfg->provider_priority_cache_threshold = 100;
    assert_string_equal(select_order(w, "m", "cl", NULL, AOR_DIALECT_OPENAI, NOW), "P/k1 P/k2");
    /* The preferred key backed off: the sticky is the best remaining one anyway. */
    fail_key(w, "P", "k1", AOR_KIND_AUTH, -1, NOW);
    assert_string_equal(select_order(w, "m", "cl", NULL, AOR_DIALECT_OPENAI, NOW), "P/k2");
}

/* Key threshold across providers of equal priority: the key gap counts there too; with
 * both thresholds 0 (the default) a sticky holds only against equal priorities
 * (review: a sticky on B's worse key beat A's better key). */
static void test_key_threshold_across_equal_providers(void **state) {
    world *w = *state;
    add_key(w->cfg, "a", 0);
    add_key(w->cfg, "b", 5);
    add_provider(w->cfg, "A", AOR_DIALECT_OPENAI, "a.example", 0, "m", "a", NULL);
    add_provider(w->cfg, "B", AOR_DIALECT_OPENAI, "b.example", 0, "m", "b", NULL);
    assert_string_equal(select_order(w, "m", "cl", NULL, AOR_DIALECT_OPENAI, NOW), "A/a B/b");
    set_sticky(w, "cl", "m", "B", "b", 1);
    assert_string_equal(select_order(w, "m", "cl", NULL, AOR_DIALECT_OPENAI, NOW), "A/a B/b");
    w->cfg->key_priority_cache_threshold = 5; /* gap 5 == threshold: the sticky holds */
    assert_string_equal(select_order(w, "m", "cl", NULL, AOR_DIALECT_OPENAI, NOW), "B/b A/a");
    w->cfg->key_priority_cache_threshold = 4;
    assert_string_equal(select_order(w, "m", "cl", NULL, AOR_DIALECT_OPENAI, NOW), "A/a B/b");
}

/* A sticky whose key (or provider) is no longer configured is ignored. */
static void test_sticky_unconfigured_ignored(void **state) {
    world *w = *state;
    add_key(w->cfg, "k1", 0);
    add_key(w->cfg, "k2", 1);
    add_key(w->cfg, "gone", 0);
    add_provider(w->cfg, "P", AOR_DIALECT_OPENAI, "p.example", 0, "m", "k1,k2", NULL);
    w->cfg->key_priority_cache_threshold = 10;

    set_sticky(w, "cl", "m", "P", "gone", 1); /* declared but not a key of P */
    assert_string_equal(select_order(w, "m", "cl", NULL, AOR_DIALECT_OPENAI, NOW), "P/k1 P/k2");
    set_sticky(w, "cl", "m", "Q", "k2", 1); /* provider no longer configured */
    assert_string_equal(select_order(w, "m", "cl", NULL, AOR_DIALECT_OPENAI, NOW), "P/k1 P/k2");
    set_sticky(w, "cl", "m", "P", "k2", 1); /* control: a configured sticky moves first */
    assert_string_equal(select_order(w, "m", "cl", NULL, AOR_DIALECT_OPENAI, NOW), "P/k2 P/k1");
}

/* A passthrough provider (no configured key, §3.3) gives one candidate named after the
 * client hash; its backoff is keyed by that name. */
static void test_passthrough_candidate(void **state) {
    world *w = *state;
    char id[65];
    add_provider(w->cfg, "openai", AOR_DIALECT_OPENAI, "api.openai.com", 0, "*", "", NULL);
    add_provider(w->cfg, "openai2", AOR_DIALECT_OPENAI, "api2.openai.com", 1, "*", "", NULL);
    client_id("sk-users-own", id);

    char want[64];
    snprintf(want, sizeof want, "client-%.12s", id);
    select_order(w, "gpt-4o", id, "api.openai.com", AOR_DIALECT_OPENAI, NOW);
    assert_int_equal(w->seq.n, 2);
    assert_int_equal(w->seq.items[0].key, -1);
    assert_int_equal(w->seq.items[0].provider, 0);
    assert_string_equal(w->seq.items[0].key_name, want);
    assert_string_equal(w->seq.items[1].key_name, want);
    assert_int_equal(strlen(w->seq.items[0].key_name), strlen("client-") + 12);

    fail_key(w, "openai", want, AOR_KIND_RATE, -1, NOW);
    select_order(w, "gpt-4o", id, "api.openai.com", AOR_DIALECT_OPENAI, NOW);
    assert_int_equal(w->seq.n, 1);
    assert_int_equal(w->seq.items[0].provider, 1);
    assert_int_equal(w->seq.dropped, 1);

    /* Another client's own key is not backed off. */
    char id2[65];
    client_id("sk-someone-else", id2);
    select_order(w, "gpt-4o", id2, "api.openai.com", AOR_DIALECT_OPENAI, NOW);
    assert_int_equal(w->seq.n, 2);

    select_order(w, "gpt-4o", "", "api.openai.com", AOR_DIALECT_OPENAI, NOW);
    assert_string_equal(w->seq.items[0].key_name, "client-anonymous");
}

/* A model no provider lists goes to the providers owning the host (intercepted) or, on
 * the sidecar, to the providers of the request's dialect (§5.2). */
static void test_unlisted_model(void **state) {
    world *w = *state;
    add_key(w->cfg, "oa", 0);
    add_key(w->cfg, "or", 0);
    add_key(w->cfg, "an", 0);
    add_key(w->cfg, "an2", 0);
    add_provider(w->cfg, "openai", AOR_DIALECT_OPENAI, "api.openai.com", 0, "gpt-4o", "oa", NULL);
    add_provider(w->cfg, "openrouter", AOR_DIALECT_OPENAI, "openrouter.ai", 1, "x/y", "or",
                 "router.example");
    add_provider(w->cfg, "anthropic", AOR_DIALECT_ANTHROPIC, "api.anthropic.com", 0, "claude-a",
                 "an", NULL);
    add_provider(w->cfg, "anthropic2", AOR_DIALECT_ANTHROPIC, "proxy.example", 1, "claude-b", "an2",
                 NULL);

    assert_string_equal(select_order(w, "brand-new", "c", "openrouter.ai", AOR_DIALECT_OPENAI, NOW),
                        "openrouter/or");
    assert_string_equal(
        select_order(w, "brand-new", "c", "router.example", AOR_DIALECT_OPENAI, NOW),
        "openrouter/or");
    assert_string_equal(
        select_order(w, "brand-new", "c", "api.openai.com", AOR_DIALECT_OPENAI, NOW), "openai/oa");
    /* Sidecar: the providers of the dialect. */
    assert_string_equal(select_order(w, "brand-new", "c", NULL, AOR_DIALECT_ANTHROPIC, NOW),
                        "anthropic/an anthropic2/an2");
    assert_string_equal(select_order(w, "brand-new", "c", NULL, AOR_DIALECT_OPENAI, NOW),
                        "openai/oa openrouter/or");
    /* No model at all (GET /v1/models). */
    assert_string_equal(select_order(w, NULL, "c", "api.anthropic.com", AOR_DIALECT_ANTHROPIC, NOW),
                        "anthropic/an");
    assert_string_equal(select_order(w, "", "c", NULL, AOR_DIALECT_GEMINI, NOW), "");
    assert_int_equal(w->seq.n, 0);
    assert_int_equal(w->seq.dropped, 0);
    /* A host nobody owns. */
    select_order(w, "brand-new", "c", "api.mistral.ai", AOR_DIALECT_OPENAI, NOW);
    assert_int_equal(w->seq.n, 0);
}

/* A listed model goes only to the providers listing it (of the request's dialect), even
 * through another provider's host; models = * lists every model of its dialect. */
static void test_listed_model(void **state) {
    world *w = *state;
    add_key(w->cfg, "oa", 1);
    add_key(w->cfg, "or", 0);
    add_key(w->cfg, "any", 0);
    add_key(w->cfg, "an", 0);
    add_provider(w->cfg, "openai", AOR_DIALECT_OPENAI, "api.openai.com", 0, "gpt-4o,gpt-4o-mini",
                 "oa", NULL);
    add_provider(w->cfg, "openrouter", AOR_DIALECT_OPENAI, "openrouter.ai", 0, "claude-x", "or",
                 NULL);
    add_provider(w->cfg, "anthropic", AOR_DIALECT_ANTHROPIC, "api.anthropic.com", 0, "claude-x",
                 "an", NULL);
    assert_string_equal(
        select_order(w, "gpt-4o-mini", "c", "openrouter.ai", AOR_DIALECT_OPENAI, NOW), "openai/oa");
    assert_string_equal(select_order(w, "claude-x", "c", NULL, AOR_DIALECT_ANTHROPIC, NOW),
                        "anthropic/an");
    assert_string_equal(select_order(w, "claude-x", "c", NULL, AOR_DIALECT_OPENAI, NOW),
                        "openrouter/or");

    add_provider(w->cfg, "wild", AOR_DIALECT_OPENAI, "wild.example", 2, "*", "any", NULL);
    assert_string_equal(select_order(w, "gpt-4o", "c", NULL, AOR_DIALECT_OPENAI, NOW),
                        "openai/oa wild/any");
    assert_string_equal(
        select_order(w, "unheard-of", "c", "api.openai.com", AOR_DIALECT_OPENAI, NOW), "wild/any");
    assert_string_equal(select_order(w, "claude-x", "c", NULL, AOR_DIALECT_ANTHROPIC, NOW),
                        "anthropic/an");
}

/* A key written twice in a provider's list is one candidate. */
static void test_duplicate_key_once(void **state) {
    world *w = *state;
    add_key(w->cfg, "k", 0);
    add_key(w->cfg, "j", 0);
    add_provider(w->cfg, "P", AOR_DIALECT_OPENAI, "p.example", 0, "m", "k,j,k", NULL);
    select_order(w, "m", "c", NULL, AOR_DIALECT_OPENAI, NOW);
    assert_int_equal(w->seq.n, 2);
    assert_string_not_equal(w->seq.items[0].key_name, w->seq.items[1].key_name);
}

/* Provider P with equal keys k0, k1, k2 serving "m", strategy round-robin; base gets the
 * keys in client "cl"'s own order (the consistent hash of §5.2). */
static void three_equal_keys_rr(world *w, char base[3][8]) {
    add_key(w->cfg, "k0", 0);
    add_key(w->cfg, "k1", 0);
    add_key(w->cfg, "k2", 0);
    add_provider(w->cfg, "P", AOR_DIALECT_OPENAI, "p.example", 0, "m", "k0,k1,k2", NULL);
    w->cfg->strategy = AOR_STRATEGY_ROUND_ROBIN;
    select_order(w, "m", "cl", NULL, AOR_DIALECT_OPENAI, NOW);
    for (int i = 0; i < 3; i++)
        snprintf(base[i], 8, "%s", w->seq.items[i].key_name);
}

/* round-robin: 2 successes per key, then the next key in the client's order. */
static void test_round_robin(void **state) {
    world *w = *state;
    char base[3][8];
    three_equal_keys_rr(w, base);

    const int expect[] = {0, 0, 1, 1, 2, 2, 0, 0, 1};
    for (size_t r = 0; r < sizeof expect / sizeof expect[0]; r++) {
        double now = NOW + (double)r;
        const char *first = first_key(w, "m", "cl", now);
        if (strcmp(first, base[expect[r]]) != 0)
            fail_msg("request %zu went to %s, expected %s", r, first, base[expect[r]]);
        assert_int_equal(w->seq.n, 3);
        assert_true(aor_sticky_success(w->s, "cl", "m", "P", first, now) >= 0);
    }

    /* A failure does not move the sticky; the failing key is dropped and the next one
     * is served. */
    fail_key(w, "P", base[1], AOR_KIND_RATE, -1, NOW + 20);
    const char *first = first_key(w, "m", "cl", NOW + 20);
    assert_string_not_equal(first, base[1]);

    /* One healthy key only: it stays there. */
    fail_key(w, "P", base[0], AOR_KIND_RATE, 1000, NOW + 20);
    fail_key(w, "P", base[1], AOR_KIND_RATE, 1000, NOW + 20);
    for (int r = 0; r < 4; r++) {
        assert_string_equal(first_key(w, "m", "cl", NOW + 21 + r), base[2]);
        assert_int_equal(w->seq.n, 1);
        assert_true(aor_sticky_success(w->s, "cl", "m", "P", base[2], NOW + 21 + r) >= 0);
    }
}

/* round-robin: when the client's current key is dropped (backed off), the rotation goes
 * on at the key after it, not at the top of the client's order (QA: with the client on
 * the last key, the first one backed off sent it back to the last, and the middle one
 * waited). */
static void test_round_robin_after_a_dropped_key(void **state) {
    world *w = *state;
    char base[3][8];
    three_equal_keys_rr(w, base);
    /* On base[1] with one success: it first, then the keys after it in the rotation,
     * so that when it fails in this request the walk goes on at base[2], not back at
     * base[0] (QA). */
    set_sticky(w, "cl", "m", "P", base[1], 1);
    char all[64];
    snprintf(all, sizeof all, "P/%s P/%s P/%s", base[1], base[2], base[0]);
    assert_string_equal(select_order(w, "m", "cl", NULL, AOR_DIALECT_OPENAI, NOW), all);
    /* base[1] backed off: base[2] next, then base[0]. */
    fail_key(w, "P", base[1], AOR_KIND_RATE, 100, NOW);
    char want[64];
    snprintf(want, sizeof want, "P/%s P/%s", base[2], base[0]);
    assert_string_equal(select_order(w, "m", "cl", NULL, AOR_DIALECT_OPENAI, NOW + 1), want);
    /* On base[2] (the last), it and base[0] backed off, base[1] free again: base[1]
     * only; with base[0] free too: after base[2] comes base[0] (the cycle wraps), then
     * base[1]. */
    set_sticky(w, "cl", "m", "P", base[2], 1);
    aor_backoff_success(w->b, "P", base[1]);
    fail_key(w, "P", base[2], AOR_KIND_RATE, 100, NOW);
    fail_key(w, "P", base[0], AOR_KIND_RATE, 100, NOW);
    snprintf(want, sizeof want, "P/%s", base[1]);
    assert_string_equal(select_order(w, "m", "cl", NULL, AOR_DIALECT_OPENAI, NOW + 1), want);
    aor_backoff_success(w->b, "P", base[0]);
    snprintf(want, sizeof want, "P/%s P/%s", base[0], base[1]);
    assert_string_equal(select_order(w, "m", "cl", NULL, AOR_DIALECT_OPENAI, NOW + 1), want);
    /* On base[0], dropped: base[1] then base[2]. */
    aor_backoff_success(w->b, "P", base[2]);
    set_sticky(w, "cl", "m", "P", base[0], 2);
    fail_key(w, "P", base[0], AOR_KIND_RATE, 100, NOW);
    snprintf(want, sizeof want, "P/%s P/%s", base[1], base[2]);
    assert_string_equal(select_order(w, "m", "cl", NULL, AOR_DIALECT_OPENAI, NOW + 1), want);
}

/* round-robin ignores the priority thresholds: a sticky on a worse key stays there for
 * its two successes. */
static void test_round_robin_priorities(void **state) {
    world *w = *state;
    add_key(w->cfg, "good", 0);
    add_key(w->cfg, "bad", 5);
    add_provider(w->cfg, "P", AOR_DIALECT_OPENAI, "p.example", 0, "m", "good,bad", NULL);
    w->cfg->strategy = AOR_STRATEGY_ROUND_ROBIN;
    set_sticky(w, "cl", "m", "P", "bad", 1);
    assert_string_equal(select_order(w, "m", "cl", NULL, AOR_DIALECT_OPENAI, NOW), "P/bad P/good");
    set_sticky(w, "cl", "m", "P", "bad", 2);
    assert_string_equal(select_order(w, "m", "cl", NULL, AOR_DIALECT_OPENAI, NOW), "P/good P/bad");
}

/* More providers and candidates than route.c handles in its stack arrays (16 providers,
 * 32 candidates): the same order, the same drops, as with few. */
static void test_many_providers(void **state) {
    world *w = *state;
    char name[32], keys[64], want[4096];
    size_t off = 0;
    for (int i = 0; i < 20; i++) {
        char a[16], b[16];
        snprintf(a, sizeof a, "k%02da", i);
        snprintf(b, sizeof b, "k%02db", i);
        add_key(w->cfg, b, 1);
        add_key(w->cfg, a, 0);
        snprintf(keys, sizeof keys, "%s,%s", b, a);
        snprintf(name, sizeof name, "P%02d", i);
        add_provider(w->cfg, name, AOR_DIALECT_OPENAI, "p.example", 20 - i, "m", keys, NULL);
    }
    fail_key(w, "P19", "k19a", AOR_KIND_RATE, 100, NOW);
    open_circuit(w, "P00", "m", NOW);
    want[0] = '\0';
    for (int i = 19; i >= 1; i--) {
        if (off)
            off += (size_t)snprintf(want + off, sizeof want - off, " ");
        if (i != 19)
            off += (size_t)snprintf(want + off, sizeof want - off, "P%02d/k%02da ", i, i);
        off += (size_t)snprintf(want + off, sizeof want - off, "P%02d/k%02db", i, i);
    }
    assert_string_equal(select_order(w, "m", "c1", NULL, AOR_DIALECT_OPENAI, NOW), want);
    assert_int_equal(w->seq.n, 37);
    assert_int_equal(w->seq.dropped, 3);
}

/* 1,000 keys and 100,000 sticky rows: selection works (and is timed for information). */
static void test_many_keys_and_stickies(void **state) {
    world *w = *state;
    char name[32], keys[8192];
    size_t off = 0;
    for (int i = 0; i < 1000; i++) {
        snprintf(name, sizeof name, "key%04d", i);
        add_key(w->cfg, name, i % 3);
    }
    /* 10 providers x 100 keys. */
    for (int p = 0; p < 10; p++) {
        off = 0;
        for (int i = 0; i < 100; i++) {
            int r = snprintf(keys + off, sizeof keys - off, "%skey%04d", i ? "," : "", p * 100 + i);
            assert_true(r > 0 && (size_t)r < sizeof keys - off);
            off += (size_t)r;
        }
        snprintf(name, sizeof name, "prov%d", p);
        add_provider(w->cfg, name, AOR_DIALECT_OPENAI, "p.example", p % 2, "m", keys, NULL);
    }
    for (int c = 0; c < 100000; c++) {
        char client[32], key[16];
        snprintf(client, sizeof client, "client%06d", c);
        snprintf(key, sizeof key, "key%04d", (c * 7) % 1000);
        snprintf(name, sizeof name, "prov%d", ((c * 7) % 1000) / 100);
        set_sticky(w, client, "m", name, key, 1);
    }
    assert_int_equal(aor_sticky_count(w->s), 100000);
    w->cfg->provider_priority_cache_threshold = 10;
    w->cfg->key_priority_cache_threshold = 10;

    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    const int rounds = 100;
    for (int r = 0; r < rounds; r++) {
        char client[32];
        snprintf(client, sizeof client, "client%06d", r * 997);
        char want[16];
        snprintf(want, sizeof want, "key%04d", (r * 997 * 7) % 1000);
        select_order(w, "m", client, NULL, AOR_DIALECT_OPENAI, NOW);
        assert_int_equal(w->seq.n, 1000);
        assert_string_equal(w->seq.items[0].key_name, want);
    }
    clock_gettime(CLOCK_MONOTONIC, &t1);
    double us =
        ((double)(t1.tv_sec - t0.tv_sec) * 1e6 + (double)(t1.tv_nsec - t0.tv_nsec) / 1e3) / rounds;
    print_message("select over 1000 keys / 100000 stickies: %.0f us per call\n", us);
}

/* --- random configurations against the reference ------------------------------------ */

static uint64_t rnd_state = UINT64_C(0x2545f4914f6cdd1d);

/* Uniform enough in [0, n) for picking test shapes (xorshift64). */
static unsigned rnd(unsigned n) {
    rnd_state ^= rnd_state << 13;
    rnd_state ^= rnd_state >> 7;
    rnd_state ^= rnd_state << 17;
    return (unsigned)(rnd_state % n);
}

/* "provider/key ..." of a sequence, for failure messages. */
static void describe(const aor_config *cfg, const aor_sequence *seq, char *buf, size_t cap) {
    size_t off = 0;
    buf[0] = '\0';
    for (size_t i = 0; i < seq->n && off < cap; i++) {
        int r = snprintf(buf + off, cap - off, "%s%s/%s", i ? " " : "",
                         cfg->providers[seq->items[i].provider].name, seq->items[i].key_name);
        if (r < 0)
            break;
        off += (size_t)r;
    }
}

/* Fails (naming the case) unless both sequences are the same in every field. */
static void assert_same_sequence(const aor_config *cfg, const aor_sequence *got,
                                 const aor_sequence *want, int iter, int req) {
    int same = got->n == want->n && got->dropped == want->dropped &&
               got->earliest_until == want->earliest_until && got->last_kind == want->last_kind;
    for (size_t i = 0; same && i < got->n; i++) {
        same = got->items[i].provider == want->items[i].provider &&
               got->items[i].key == want->items[i].key &&
               strcmp(got->items[i].key_name, want->items[i].key_name) == 0;
    }
    if (!same) {
        static char g[16384], w[16384];
        describe(cfg, got, g, sizeof g);
        describe(cfg, want, w, sizeof w);
        fail_msg("config %d request %d:\n got  %s (dropped %zu until %.0f kind %d)\n want %s "
                 "(dropped %zu until %.0f kind %d)",
                 iter, req, g, got->dropped, got->earliest_until, (int)got->last_kind, w,
                 want->dropped, want->earliest_until, (int)want->last_kind);
    }
}

/* Comma list of key names for a provider: ascending distinct keys when ordered, else a
 * random pick that may repeat a key. Empty (passthrough provider) one time in five. */
static void random_key_list(int nk, int maxk, int ordered, char *buf, size_t cap) {
    size_t off = 0;
    int count = rnd(5) == 0 ? 0 : 1 + (int)rnd((unsigned)maxk);
    int next = (int)rnd(2);
    buf[0] = '\0';
    for (int i = 0; i < count; i++) {
        int k = ordered ? next : (int)rnd((unsigned)nk);
        if (k >= nk)
            break;
        next = k + 1 + (int)rnd(2);
        int r = snprintf(buf + off, cap - off, "%sk%d", off ? "," : "", k);
        assert_true(r > 0 && (size_t)r < cap - off);
        off += (size_t)r;
    }
}

/* The same state change on both breakers (the new code and the reference each ask theirs:
 * allow() may move an expired circuit to half-open). */
static void fail_both(aor_breaker *a, aor_breaker *b, const char *p, const char *m, double t) {
    for (int i = 0; i < br_params.failures; i++) {
        assert_true(aor_breaker_fail(a, p, m, t) >= 0);
        assert_true(aor_breaker_fail(b, p, m, t) >= 0);
    }
}

/* aor_route_select gives exactly the sequence of the old algorithm (every candidate
 * hashed, one sort) over many random configurations: several providers and keys, few
 * priority values (many ties), keys listed twice, passthrough providers, backoff rows
 * with equal failure times, exhausted usage, open and expired circuits, stickies, both
 * strategies, listed / unlisted / no model, with and without client and host. */
static void test_matches_reference(void **state) {
    static const char *const models[] = {"m1", "m2", "zzz", "", NULL};
    static const aor_kind kinds[] = {AOR_KIND_RATE, AOR_KIND_TRANSIENT, AOR_KIND_QUOTA,
                                     AOR_KIND_AUTH};
    static const double later[] = {0, 1, 10, 40};
    const aor_header exhausted[] = {
        {"x-ratelimit-remaining-requests", "0"},
        {"x-ratelimit-reset-requests", "20s"},
    };
    long selections = 0, with_ties = 0, large = 0, with_drops = 0, sticky_moved = 0;

    for (int iter = 0; iter < 1500; iter++) {
        aor_config *cfg = cfg_new();
        aor_backoff *b = aor_backoff_new(&bo_params);
        aor_breaker *br_new = aor_breaker_new(&br_params), *br_ref = aor_breaker_new(&br_params);
        aor_sticky *s = aor_sticky_new();
        aor_usage *u = aor_usage_new();
        assert_true(b && br_new && br_ref && s && u);
        int big = rnd(8) == 0, ordered = rnd(4) == 0;
        int nk = 1 + (int)rnd(big ? 80 : 10), np = 1 + (int)rnd(big ? 8 : 5);
        unsigned kspread = ordered ? 1 : 1 + rnd(4), pspread = 1 + rnd(3);
        char name[32], list[1024], clients[2][65];

        for (int k = 0; k < nk; k++) {
            snprintf(name, sizeof name, "k%d", k);
            add_key(cfg, name, (int)rnd(kspread));
        }
        for (int p = 0; p < np; p++) {
            static const char *const mlists[] = {"*", "m1", "m1,m2", "m2"};
            char host[32];
            snprintf(name, sizeof name, "p%d", p);
            snprintf(host, sizeof host, "h%d.example", p % 3);
            random_key_list(nk, big ? 60 : 6, ordered, list, sizeof list);
            add_provider(cfg, name, rnd(5) == 0 ? AOR_DIALECT_ANTHROPIC : AOR_DIALECT_OPENAI, host,
                         ordered ? p : (int)rnd(pspread), mlists[rnd(4)], list,
                         rnd(3) == 0 ? "x.example" : NULL);
        }
        if (ordered) {
            /* Priorities in list order: the candidates come out of the config sorted. */
            for (int k = 0; k < nk; k++)
                cfg->keys[k].priority = k / 4;
        }
        cfg->provider_priority_cache_threshold = (int)rnd(3);
        cfg->key_priority_cache_threshold = (int)rnd(3);
        cfg->strategy = rnd(3) == 0 ? AOR_STRATEGY_ROUND_ROBIN : AOR_STRATEGY_PRIORITY;
        for (int c = 0; c < 2; c++) {
            char cred[48];
            snprintf(cred, sizeof cred, "sk-random-%d-%d", iter, c);
            client_id(cred, clients[c]);
        }

        /* State: failures at only three distinct times, so last_kind often has to pick
         * between rows that failed at the same moment (the first in order wins). */
        for (size_t p = 0; p < cfg->nproviders; p++) {
            const aor_provider_cfg *pc = &cfg->providers[p];
            for (size_t k = 0; k < pc->nkeys; k++) {
                const char *kn = cfg->keys[pc->key_idx[k]].name;
                if (rnd(4) == 0) {
                    double hint = rnd(2) ? -1.0 : 1.0 + rnd(60);
                    assert_int_equal(
                        aor_backoff_fail(b, pc->name, kn, kinds[rnd(4)], hint, NOW - rnd(3), NULL),
                        0);
                }
                if (rnd(10) == 0)
                    assert_true(aor_usage_observe(u, pc->name, kn, 200, exhausted, 2, NOW - rnd(30),
                                                  0) >= 0);
            }
            if (pc->passthrough && rnd(3) == 0) {
                /* The client's own credential backed off ("client-" + 12 hex digits). */
                char pt[32];
                snprintf(pt, sizeof pt, "client-%.12s", clients[0]);
                assert_int_equal(
                    aor_backoff_fail(b, pc->name, pt, AOR_KIND_AUTH, -1, NOW - 1, NULL), 0);
            }
            if (rnd(4) == 0) /* open until NOW + 29, or expired at NOW - 5 */
                fail_both(br_new, br_ref, pc->name, models[rnd(3)], rnd(2) ? NOW - 1 : NOW - 35);
            if (rnd(8) == 0)
                fail_both(br_new, br_ref, pc->name, "", NOW - 1);
        }
        for (int c = 0; c < 2; c++) {
            for (int m = 0; m < 2; m++) {
                if (rnd(3) == 0 || cfg->nproviders == 0)
                    continue;
                const aor_provider_cfg *pc = &cfg->providers[rnd((unsigned)cfg->nproviders)];
                char pt[32];
                const char *kn;
                if (pc->nkeys > 0) {
                    kn = cfg->keys[pc->key_idx[rnd((unsigned)pc->nkeys)]].name;
                } else {
                    snprintf(pt, sizeof pt, "client-%.12s", clients[c]);
                    kn = pt;
                }
                aor_sticky_row row = {clients[c], models[m],
                                      pc->name,   rnd(8) == 0 ? "gone" : kn,
                                      NOW - 10,   1 + (int)rnd(3)};
                assert_int_equal(aor_sticky_restore(s, &row), 0);
            }
        }

        for (int req = 0; req < 6; req++) {
            const char *model = models[rnd(5)];
            const char *client = rnd(6) == 0 ? (rnd(2) ? "" : NULL) : clients[rnd(2)];
            const char *host = rnd(3) == 0 ? (rnd(2) ? "h0.example" : "x.example") : NULL;
            aor_dialect dialect = rnd(5) == 0 ? AOR_DIALECT_ANTHROPIC : AOR_DIALECT_OPENAI;
            double now = NOW + later[rnd(4)];
            int bare = rnd(10) == 0; /* no state tables at all */
            aor_route_ctx cn = {cfg, bare ? NULL : b, bare ? NULL : br_new, bare ? NULL : s,
                                bare ? NULL : u};
            aor_route_ctx cr = {cfg, bare ? NULL : b, bare ? NULL : br_ref, bare ? NULL : s,
                                bare ? NULL : u};
            aor_sequence got, want;

            assert_int_equal(aor_route_select(&cn, model, client, host, dialect, now, &got), 0);
            assert_int_equal(ref_route_select(&cr, model, client, host, dialect, now, &want), 0);
            assert_same_sequence(cfg, &got, &want, iter, req);

            selections++;
            large += got.n >= 40;
            with_drops += got.dropped > 0;
            for (size_t i = 1; i < got.n; i++) {
                size_t pa = got.items[i - 1].provider, pb = got.items[i].provider;
                int ka = got.items[i - 1].key < 0 ? 0 : cfg->keys[got.items[i - 1].key].priority;
                int kb = got.items[i].key < 0 ? 0 : cfg->keys[got.items[i].key].priority;
                if (cfg->providers[pa].priority == cfg->providers[pb].priority && ka == kb) {
                    with_ties++;
                    break;
                }
            }
            for (size_t i = 1; i < got.n; i++) {
                int pa = cfg->providers[got.items[i - 1].provider].priority;
                int pb = cfg->providers[got.items[i].provider].priority;
                if (pb < pa) { /* out of priority order: a sticky or a rotation moved it */
                    sticky_moved++;
                    break;
                }
            }
            aor_sequence_free(&got);
            aor_sequence_free(&want);
        }
        aor_usage_free(u);
        aor_sticky_free(s);
        aor_breaker_free(br_ref);
        aor_breaker_free(br_new);
        aor_backoff_free(b);
        cfg_free(cfg);
    }
    /* The cases that matter were exercised, not just empty sequences. */
    print_message("%ld selections: %ld with ties, %ld with >= 40 candidates, %ld with drops, "
                  "%ld reordered by a sticky\n",
                  selections, with_ties, large, with_drops, sticky_moved);
    assert_true(with_ties > selections / 4);
    assert_true(large > 50);
    assert_true(with_drops > selections / 4);
    assert_true(sticky_moved > 50);
}

/* Bad arguments. */
static void test_errors(void **state) {
    world *w = *state;
    aor_sequence seq;
    memset(&seq, 0xff, sizeof seq);
    errno = 0;
    assert_int_equal(aor_route_select(NULL, "m", "c", NULL, AOR_DIALECT_OPENAI, NOW, &seq), -1);
    assert_int_equal(errno, EINVAL);
    assert_null(seq.items);
    aor_sequence_free(&seq);
    assert_int_equal(aor_route_select(&w->ctx, "m", "c", NULL, AOR_DIALECT_OPENAI, NOW, NULL), -1);
    aor_sequence_free(NULL);
    /* No state tables at all: plain priority order. */
    add_key(w->cfg, "k", 0);
    add_provider(w->cfg, "P", AOR_DIALECT_OPENAI, "p.example", 0, "m", "k", NULL);
    aor_route_ctx bare = {w->cfg, NULL, NULL, NULL, NULL};
    assert_int_equal(aor_route_select(&bare, "m", NULL, NULL, AOR_DIALECT_OPENAI, NOW, &seq), 0);
    assert_int_equal(seq.n, 1);
    aor_sequence_free(&seq);
}

/* Known providers that no [provider] section covers are added keyless (implicit,
 * docs/config.md): they take requests to their own host only, and on the sidecar a
 * dialect only when no section speaks it; never a section's model or a section's
 * requests, so a client's own credential never goes to another provider's host. */
static void test_implicit_known_providers(void **state) {
    world *w = *state;
    add_key(w->cfg, "k1", 0);
    add_provider(w->cfg, "mine", AOR_DIALECT_OPENAI, "gw.example", 0, "gpt-4o", "k1", NULL);
    size_t o =
        add_provider(w->cfg, "openai", AOR_DIALECT_OPENAI, "api.openai.com", 0, "", "", NULL);
    size_t a = add_provider(w->cfg, "anthropic", AOR_DIALECT_ANTHROPIC, "api.anthropic.com", 1, "",
                            "", NULL);
    w->cfg->providers[o].implicit = w->cfg->providers[a].implicit = 1;
    char client[65];
    client_id("own-cred", client);
    /* Shim, the implicit provider's host: an unlisted model goes there, keyless. */
    select_order(w, "gpt-x", client, "api.openai.com", AOR_DIALECT_OPENAI, NOW);
    assert_int_equal(w->seq.n, 1);
    assert_string_equal(w->cfg->providers[w->seq.items[0].provider].name, "openai");
    assert_non_null(strstr(w->seq.items[0].key_name, "client-"));
    /* A model a section lists goes to that section, also on the known host. */
    assert_string_equal(
        select_order(w, "gpt-4o", client, "api.openai.com", AOR_DIALECT_OPENAI, NOW), "mine/k1");
    /* Sidecar, a dialect a section speaks: the sections only. */
    assert_string_equal(select_order(w, "gpt-x", client, NULL, AOR_DIALECT_OPENAI, NOW), "mine/k1");
    /* Sidecar, a dialect no section speaks: its known provider. */
    select_order(w, "claude-x", client, NULL, AOR_DIALECT_ANTHROPIC, NOW);
    assert_int_equal(w->seq.n, 1);
    assert_string_equal(w->cfg->providers[w->seq.items[0].provider].name, "anthropic");
    /* Gemini: neither a section nor a known provider here. */
    select_order(w, "gemini-x", client, NULL, AOR_DIALECT_GEMINI, NOW);
    assert_int_equal(w->seq.n, 0);
}

#define T(f) cmocka_unit_test_setup_teardown(f, setup, teardown)

int main(void) {
    const struct CMUnitTest tests[] = {
        T(test_order_by_priorities),
        T(test_implicit_known_providers),
        T(test_tie_spreading),
        T(test_drop_backoff_and_breaker),
        T(test_breaker_only_and_combined),
        T(test_half_open_is_only_looked_at),
        T(test_drop_exhausted_usage),
        T(test_sticky_first),
        T(test_provider_threshold_boundary),
        T(test_key_threshold_boundary),
        T(test_key_threshold_across_equal_providers),
        T(test_sticky_unconfigured_ignored),
        T(test_passthrough_candidate),
        T(test_unlisted_model),
        T(test_listed_model),
        T(test_duplicate_key_once),
        T(test_round_robin),
        T(test_round_robin_priorities),
        T(test_round_robin_after_a_dropped_key),
        T(test_many_providers),
        T(test_many_keys_and_stickies),
        cmocka_unit_test(test_matches_reference),
        T(test_errors),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
