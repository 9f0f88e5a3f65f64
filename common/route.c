/* Candidate selection: spec §5.2 select_sequence, §5.4 sticky thresholds, §5.5
 * round-robin. Pure logic over the config and the in-memory tables. See docs/route.md. */
#include "route.h"

#include "hash.h"

#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define PASSTHROUGH_PREFIX "client-"
#define PASSTHROUGH_HEX 12 /* hex digits of the client hash in a passthrough key name */
#define ROOM_PROVIDERS 16  /* providers handled without a malloc (more: malloc) */
#define ROOM_CANDIDATES 32 /* candidates handled without a malloc (more: malloc) */

/* A candidate while the sequence is built. */
typedef struct {
    aor_candidate c;
    int pprio;    /* provider priority */
    int kprio;    /* key priority (0 for the passthrough candidate) */
    uint64_t tie; /* aor_hash_pair64(client, "provider/key"); only computed (else 0) for
                     candidates that tie on both priorities */
    size_t orig;  /* its place in the order before drop_unavailable */
} cand;

/* Breaker verdict per provider, computed at most once per selection. */
enum { BR_UNKNOWN = 0, BR_ALLOWED, BR_BLOCKED, BR_HALF_OPEN };

/* What a provider's circuit says for a new sequence, without changing it: a probe is
 * taken only when a walk sends to the provider (daemon/proxy.c), not for a fallback it may
 * never try (§4.4: the first request after the open time is the probe). BR_BLOCKED sets
 * *until: the open-until, or the lease end of another request's probe in flight. */
static unsigned char breaker_look(aor_breaker *b, const char *provider, const char *model,
                                  double now, double *until) {
    aor_breaker_row row;
    if (!aor_breaker_get(b, provider, model, now, &row) || row.state == AOR_BREAKER_CLOSED)
        return BR_ALLOWED;
    if (row.state == AOR_BREAKER_OPEN) {
        *until = row.until;
        return BR_BLOCKED;
    }
    if (row.probe_until > now) {
        *until = row.probe_until;
        return BR_BLOCKED;
    }
    return BR_HALF_OPEN;
}

static int cand_cmp(const void *pa, const void *pb) {
    const cand *a = pa, *b = pb;
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
static int provider_lists(const aor_provider_cfg *p, const char *model, aor_dialect dialect) {
    int listed = 0;
    if (p->dialect != dialect)
        return 0;
    aor_config_upstream_model(p, model, &listed);
    return listed;
}

/* Fills sel with the indexes of the providers that serve the request (step 1 of
 * docs/route.md); returns how many. */
static size_t select_providers(const aor_config *cfg, const char *model, const char *host,
                               aor_dialect dialect, size_t *sel) {
    size_t n = 0;
    if (model[0] != '\0') {
        for (size_t i = 0; i < cfg->nproviders; i++) {
            if (provider_lists(&cfg->providers[i], model, dialect))
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
            take = p->dialect == dialect && !p->implicit;
        if (take)
            sel[n++] = i;
    }
    if (n == 0 && host == NULL) {
        /* No [provider] section speaks the dialect: its known provider, keyless, as the
         * embedded default would (a client's credential never goes to a section's
         * provider's host this way, nor a section's key to the known one). */
        for (size_t i = 0; i < cfg->nproviders; i++) {
            const aor_provider_cfg *p = &cfg->providers[i];
            if (p->implicit && p->dialect == dialect &&
                strcmp(p->name, aor_dialect_name(dialect)) == 0)
                sel[n++] = i;
        }
    }
    return n;
}

/* "client-" + the first 12 hex digits of the client hash (or "client-anonymous" when the
 * request carried no credential). Returns a malloc'd string or NULL (ENOMEM). */
static char *passthrough_name(const char *client) {
    size_t clen = strnlen(client, PASSTHROUGH_HEX);
    const char *id = clen > 0 ? client : "anonymous";
    size_t idlen = clen > 0 ? clen : strlen("anonymous");
    size_t plen = strlen(PASSTHROUGH_PREFIX);
    char *s = malloc(plen + idlen + 1);
    if (s == NULL)
        return NULL;
    memcpy(s, PASSTHROUGH_PREFIX, plen);
    memcpy(s + plen, id, idlen);
    s[plen + idlen] = '\0';
    return s;
}

/* Order without the tie-break hash: provider priority, key priority, then provider and
 * key index. Equal only for the same (provider, key), i.e. a key listed twice. */
static int cand_cmp_untied(const void *pa, const void *pb) {
    const cand *a = pa, *b = pb;
    if (a->pprio != b->pprio)
        return a->pprio < b->pprio ? -1 : 1;
    if (a->kprio != b->kprio)
        return a->kprio < b->kprio ? -1 : 1;
    if (a->c.provider != b->c.provider)
        return a->c.provider < b->c.provider ? -1 : 1;
    if (a->c.key != b->c.key)
        return a->c.key < b->c.key ? -1 : 1;
    return 0;
}

/* 1 when cs[0..n) is already in cand_cmp_untied order. */
static int sorted_untied(const cand *cs, size_t n) {
    for (size_t i = 1; i < n; i++) {
        if (cand_cmp_untied(&cs[i - 1], &cs[i]) > 0)
            return 0;
    }
    return 1;
}

/* End (exclusive) of the run of candidates from cs[start] on with the same provider
 * priority and key priority (cs sorted by cand_cmp_untied). */
static size_t run_end(const cand *cs, size_t n, size_t start) {
    size_t end = start + 1;
    while (end < n && cs[end].pprio == cs[start].pprio && cs[end].kprio == cs[start].kprio)
        end++;
    return end;
}

/* Sets the tie field of every candidate in a run of 2 or more (cs sorted by
 * cand_cmp_untied) to aor_hash_pair64(client, "provider/key"), hashing the client once
 * (aor_hash_pair64_many). Returns 0, or -1 (ENOMEM). */
static int hash_ties(const aor_config *cfg, const char *client, cand *cs, size_t n) {
    size_t ntied = 0, bytes = 0, k = 0;

    for (size_t start = 0, end; start < n; start = end) {
        end = run_end(cs, n, start);
        if (end - start < 2)
            continue;
        for (size_t i = start; i < end; i++)
            bytes += strlen(cfg->providers[cs[i].c.provider].name) + strlen(cs[i].c.key_name) + 2;
        ntied += end - start;
    }
    if (ntied == 0)
        return 0;
    /* One block: ntied hashes, ntied name pointers, then the "provider/key" strings. */
    unsigned char *block = malloc(ntied * (sizeof(uint64_t) + sizeof(char *)) + bytes);
    if (block == NULL)
        return -1;
    uint64_t *ties = (uint64_t *)block;
    const char **names = (const char **)(block + ntied * sizeof(uint64_t));
    char *w = (char *)(block + ntied * (sizeof(uint64_t) + sizeof(char *)));
    for (size_t start = 0, end; start < n; start = end) {
        end = run_end(cs, n, start);
        if (end - start < 2)
            continue;
        for (size_t i = start; i < end; i++) {
            const char *pname = cfg->providers[cs[i].c.provider].name;
            size_t lp = strlen(pname), lk = strlen(cs[i].c.key_name);
            names[k++] = w;
            memcpy(w, pname, lp);
            w[lp] = '/';
            memcpy(w + lp + 1, cs[i].c.key_name, lk);
            w[lp + 1 + lk] = '\0';
            w += lp + lk + 2;
        }
    }
    aor_hash_pair64_many(client, names, ntied, ties);
    k = 0;
    for (size_t start = 0, end; start < n; start = end) {
        end = run_end(cs, n, start);
        if (end - start < 2)
            continue;
        for (size_t i = start; i < end; i++)
            cs[i].tie = ties[k++];
    }
    free(block);
    return 0;
}

/* Orders cs[0..n) by cand_cmp and drops repeated (provider, key) pairs, hashing only the
 * candidates that tie on both priorities: sorted by cand_cmp_untied first, each run of
 * equal (provider priority, key priority) is then hashed and sorted by cand_cmp (which
 * inside a run compares the hash, then the indexes). Same order as hashing every
 * candidate and sorting by cand_cmp once: across runs both comparators agree, and a lone
 * candidate has nothing to tie with. Returns the number kept, or -1 (ENOMEM). */
static long order_candidates(const aor_config *cfg, const char *client, cand *cs, size_t n) {
    size_t w = 0;

    /* Configurations often list providers and keys in priority order already; checking
     * costs one comparison per candidate, a sort of 1,000 of them some 20 us. */
    if (!sorted_untied(cs, n))
        qsort(cs, n, sizeof *cs, cand_cmp_untied);
    /* A key written twice in one provider's list is one candidate (never tried twice).
     * Both copies are equal in every field, so they are adjacent now and every later
     * order would keep them adjacent: drop them before hashing. */
    for (size_t r = 0; r < n; r++) {
        if (w > 0 && cs[w - 1].c.provider == cs[r].c.provider && cs[w - 1].c.key == cs[r].c.key)
            continue;
        cs[w++] = cs[r];
    }
    if (hash_ties(cfg, client, cs, w) != 0)
        return -1;
    for (size_t start = 0, end; start < w; start = end) {
        end = run_end(cs, w, start);
        if (end - start >= 2)
            qsort(&cs[start], end - start, sizeof *cs, cand_cmp);
    }
    return (long)w;
}

/* Step 2 + 3: every (provider, key) of the selected providers, ordered. Returns the
 * number written to *out or -1 (ENOMEM). *out is room (room_n entries, the caller's) when
 * they fit, else malloc'd. */
static long build_candidates(const aor_config *cfg, const size_t *sel, size_t nsel,
                             const char *client, aor_sequence *seq, cand *room, size_t room_n,
                             cand **out) {
    size_t total = 0, n = 0;
    cand *cs;

    for (size_t i = 0; i < nsel; i++) {
        const aor_provider_cfg *p = &cfg->providers[sel[i]];
        total += p->passthrough ? 1 : p->nkeys;
        if (p->passthrough && seq->scratch == NULL) {
            seq->scratch = passthrough_name(client);
            if (seq->scratch == NULL)
                return -1;
        }
    }
    cs = total <= room_n ? room : malloc(total * sizeof *cs);
    if (cs == NULL)
        return -1;
    for (size_t i = 0; i < nsel; i++) {
        const aor_provider_cfg *p = &cfg->providers[sel[i]];
        size_t nk = p->passthrough ? 1 : p->nkeys;
        for (size_t k = 0; k < nk; k++) {
            cand *c = &cs[n];
            c->c.provider = sel[i];
            c->c.half_open = 0;
            c->pprio = p->priority;
            c->tie = 0; /* set by order_candidates when the candidate ties */
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
            n++;
        }
    }
    long kept = order_candidates(cfg, client, cs, n);
    if (kept < 0) {
        if (cs != room)
            free(cs);
        return -1;
    }
    *out = cs;
    return kept;
}

/* Step 4: drops candidates in backoff, with an exhausted usage window (§6) or with an
 * open circuit, in place. Returns the number kept; fills seq->dropped, earliest_until,
 * last_kind. brstate has one slot per configured provider. */
static size_t drop_unavailable(const aor_route_ctx *ctx, const char *model, double now, cand *cs,
                               size_t n, unsigned char *brstate, aor_sequence *seq) {
    const aor_config *cfg = ctx->cfg;
    size_t w = 0;
    double latest_failure = 0;
    int have_backoff_kind = 0, other_dropped = 0, usage_dropped = 0, circuit_dropped = 0;

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
                unsigned char *st = &brstate[cs[r].c.provider];
                if (*st == BR_UNKNOWN || *st == BR_BLOCKED)
                    *st = breaker_look(ctx->breaker, pname, model, now, &br_until);
                br_blocked = *st == BR_BLOCKED;
                cs[r].c.half_open = *st == BR_HALF_OPEN;
            }
        }
        if (!bo_blocked && !us_blocked && !br_blocked) {
            cs[r].orig = r;
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
        usage_dropped |= us_blocked;
        circuit_dropped |= br_blocked;
        /* The last failure reason (§5.6): the newest failure of a dropped key's backoff
         * row, also of an expired row kept for its curve level when the key is held back
         * by an open circuit (the failures that opened it). Equal times (one walk under
         * the test clock) go to the later candidate: a walk tries them in this order. */
        aor_backoff_row row;
        if ((bo_blocked || br_blocked) && ctx->backoff &&
            aor_backoff_get(ctx->backoff, pname, cs[r].c.key_name, &row) &&
            (!have_backoff_kind || row.last_failure >= latest_failure)) {
            latest_failure = row.last_failure;
            seq->last_kind = row.last_error_kind;
            seq->last_provider = pname;
            seq->last_key = cs[r].c.key_name;
            have_backoff_kind = 1;
        } else if (!bo_blocked) {
            other_dropped = 1;
        }
    }
    /* No row to tell: an exhausted usage window is a rate limit. */
    if (!have_backoff_kind && other_dropped)
        seq->last_kind = AOR_KIND_RATE;
    seq->usage_only = !have_backoff_kind && usage_dropped && !circuit_dropped;
    return w;
}

/* Moves cs[j] to the front, keeping the order of the others. */
static void move_first(cand *cs, size_t j) {
    cand t = cs[j];
    memmove(&cs[1], &cs[0], j * sizeof *cs);
    cs[0] = t;
}

/* Rotates cs so that cs[j] comes first (cyclic order kept). */
static int rotate_to(cand *cs, size_t n, size_t j) {
    cand *tmp = malloc(j * sizeof *tmp + 1);
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
static int preferred_beats_sticky(const aor_config *cfg, const cand *cs, size_t j) {
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

/* Where the client's sticky (provider, key) for model is in cs[0..n) (the order before
 * drop_unavailable): its index, or n when it has none there (none stored, or no longer
 * configured). *row gets the sticky row when there is one. */
static size_t find_sticky(const aor_route_ctx *ctx, const char *model, const char *client,
                          const cand *cs, size_t n, aor_sticky_row *row) {
    const aor_config *cfg = ctx->cfg;
    if (ctx->sticky == NULL || n == 0 || !aor_sticky_get(ctx->sticky, client, model, row))
        return n;
    size_t j;
    for (j = 0; j < n; j++) {
        if (strcmp(cfg->providers[cs[j].c.provider].name, row->provider) == 0 &&
            strcmp(cs[j].c.key_name, row->key) == 0)
            break;
    }
    return j;
}

/* Steps 5 + 6: sticky first (§5.4) or round-robin advance (§5.5). cs[0..n) are the
 * candidates kept; js is the sticky's place in the order before the drop (find_sticky;
 * `all` when the client has none there), row its sticky row. */
static int apply_sticky(const aor_config *cfg, const aor_sticky_row *row, size_t js, size_t all,
                        cand *cs, size_t n) {
    size_t j;
    if (js >= all || n == 0)
        return 0;
    for (j = 0; j < n && cs[j].orig != js; j++)
        ;
    if (cfg->strategy == AOR_STRATEGY_ROUND_ROBIN && n >= 2) {
        if (j == n) {
            /* The sticky one was dropped (backed off, open, exhausted): the rotation goes
             * on at the candidate after it, not at the top of the order (QA: with A, B, C
             * and the client on C, A backed off sent it back to C, and B waited). */
            for (j = 0; j < n && cs[j].orig < js; j++)
                ;
            return j == n || j == 0 ? 0 : rotate_to(cs, n, j);
        }
        /* The rotation's own order after the first too: when the current key fails in
         * this request, the walk goes on at the key after it (QA: its 429 sent the
         * retry to the top of the client's order, back to a key it had just left). */
        if (row->streak >= 2)
            return rotate_to(cs, n, (j + 1) % n);
        return j == 0 ? 0 : rotate_to(cs, n, j);
    }
    if (j == n)
        return 0; /* dropped: the preferred order stands */
    if (j > 0 && !preferred_beats_sticky(cfg, cs, j))
        move_first(cs, j);
    return 0;
}

int aor_route_select(const aor_route_ctx *ctx, const char *model, const char *client,
                     const char *host, aor_dialect dialect, double now, aor_sequence *out) {
    size_t *sel = NULL;
    unsigned char *brstate = NULL;
    cand *cs = NULL;
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

    /* Working arrays on the stack for the usual sizes, else malloc'd: no allocation per
     * request but the sequence's own (docs/performance.md). */
    size_t sel_room[ROOM_PROVIDERS];
    unsigned char br_room[ROOM_PROVIDERS];
    cand cand_room[ROOM_CANDIDATES];
    size_t np = cfg->nproviders > 0 ? cfg->nproviders : 1;
    if (np <= ROOM_PROVIDERS) {
        sel = sel_room;
        brstate = br_room;
    } else {
        sel = malloc(np * sizeof *sel);
        brstate = malloc(np);
        if (sel == NULL || brstate == NULL)
            goto fail_oom;
    }
    memset(brstate, 0, np);
    size_t nsel = select_providers(cfg, model, host, dialect, sel);
    nc = build_candidates(cfg, sel, nsel, client, out, cand_room, ROOM_CANDIDATES, &cs);
    if (nc < 0)
        goto fail_oom;
    aor_sticky_row srow = {0}; /* read only when find_sticky found one */
    size_t js = find_sticky(ctx, model, client, cs, (size_t)nc, &srow);
    kept = drop_unavailable(ctx, model, now, cs, (size_t)nc, brstate, out);
    if (apply_sticky(cfg, &srow, js, (size_t)nc, cs, kept) != 0)
        goto fail_oom;

    out->items = malloc((kept > 0 ? kept : 1) * sizeof *out->items);
    if (out->items == NULL)
        goto fail_oom;
    for (size_t i = 0; i < kept; i++)
        out->items[i] = cs[i].c;
    out->n = kept;
    if (cs != cand_room)
        free(cs);
    if (sel != sel_room) {
        free(brstate);
        free(sel);
    }
    return 0;

fail_oom:
    if (cs != cand_room)
        free(cs);
    if (sel != sel_room) {
        free(brstate);
        free(sel);
    }
    aor_sequence_free(out);
    errno = ENOMEM;
    return -1;
}

void aor_sequence_free(aor_sequence *seq) {
    if (seq == NULL)
        return;
    free(seq->items);
    free(seq->scratch);
    seq->items = NULL;
    seq->scratch = NULL;
    seq->n = 0;
}
