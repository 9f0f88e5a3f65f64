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
    assert_int_equal(aor_usage_observe(w->u, "P", "k1", 200, h, 2, NOW), 1);
    assert_string_equal(select_order(w, "m", "c", NULL, AOR_DIALECT_OPENAI, NOW + 1), "P/k2 P/k3");
    assert_int_equal(w->seq.dropped, 1);
    assert_true(w->seq.earliest_until == NOW + 30);
    assert_int_equal(w->seq.last_kind, AOR_KIND_RATE);

    /* A 429 answer with remaining 0 on k2: throttled, not exhausted. */
    assert_int_equal(aor_usage_observe(w->u, "P", "k2", 429, h, 2, NOW), 0);
    assert_string_equal(select_order(w, "m", "c", NULL, AOR_DIALECT_OPENAI, NOW + 1), "P/k2 P/k3");

    /* Backoff and exhaustion together: available when both ended; the backoff row's kind
     * is reported. */
    fail_key(w, "P", "k2", AOR_KIND_QUOTA, -1, NOW); /* until NOW + 120 */
    assert_int_equal(aor_usage_observe(w->u, "P", "k3", 200, h, 2, NOW + 5), 1); /* NOW+35 */
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

    fail_key(w, "A", "a1", AOR_KIND_RATE, 100, NOW); /* a1: until NOW + 100 */
    fail_key(w, "A", "a2", AOR_KIND_RATE, 10, NOW);  /* a2: until NOW + 10 < circuit */
    select_order(w, "", "c", NULL, AOR_DIALECT_OPENAI, NOW + 1);
    assert_int_equal(w->seq.dropped, 2);
    assert_true(w->seq.earliest_until == NOW + 30);

    /* After the circuit's time: a1 is still backed off, a2 is the probe. */
    assert_string_equal(select_order(w, "", "c", NULL, AOR_DIALECT_OPENAI, NOW + 31), "A/a2");
    assert_true(w->seq.earliest_until == NOW + 100);
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

/* round-robin: 2 successes per key, then the next key in the client's order. */
static void test_round_robin(void **state) {
    world *w = *state;
    add_key(w->cfg, "k0", 0);
    add_key(w->cfg, "k1", 0);
    add_key(w->cfg, "k2", 0);
    add_provider(w->cfg, "P", AOR_DIALECT_OPENAI, "p.example", 0, "m", "k0,k1,k2", NULL);
    w->cfg->strategy = AOR_STRATEGY_ROUND_ROBIN;

    select_order(w, "m", "cl", NULL, AOR_DIALECT_OPENAI, NOW);
    char base[3][8];
    for (int i = 0; i < 3; i++)
        snprintf(base[i], sizeof base[i], "%s", w->seq.items[i].key_name);

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

#define T(f) cmocka_unit_test_setup_teardown(f, setup, teardown)

int main(void) {
    const struct CMUnitTest tests[] = {
        T(test_order_by_priorities),
        T(test_tie_spreading),
        T(test_drop_backoff_and_breaker),
        T(test_breaker_only_and_combined),
        T(test_drop_exhausted_usage),
        T(test_sticky_first),
        T(test_provider_threshold_boundary),
        T(test_key_threshold_boundary),
        T(test_sticky_unconfigured_ignored),
        T(test_passthrough_candidate),
        T(test_unlisted_model),
        T(test_listed_model),
        T(test_duplicate_key_once),
        T(test_round_robin),
        T(test_round_robin_priorities),
        T(test_many_keys_and_stickies),
        T(test_errors),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
