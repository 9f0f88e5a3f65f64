/* Candidate selection (spec §5.2 select_sequence, §5.4 sticky thresholds, §5.5
 * round-robin). Pure logic over config + in-memory state; no I/O. See docs/route.md. */
#ifndef AOR_ROUTE_H
#define AOR_ROUTE_H

#include "backoff.h"
#include "breaker.h"
#include "config.h"
#include "sticky.h"
#include "types.h"
#include "usage.h"

#include <stddef.h>

/* One (provider, key) to try. */
typedef struct {
    size_t provider;      /* index into cfg->providers */
    long key;             /* index into cfg->keys, or -1: the client's own credential */
    const char *key_name; /* cfg key name, or "client-<12 hex of client hash>" for -1
                             ("client-anonymous" when the client hash is ""); owned by
                             the config or the sequence. Backoff and sticky rows use it. */
    int half_open;        /* its provider's circuit is half-open with no probe in flight:
                             aor_route_select only looked; the walk takes the probe
                             (aor_breaker_allow) when it sends to this candidate */
} aor_candidate;

typedef struct {
    aor_candidate *items; /* usable candidates in the order to try */
    size_t n;
    size_t dropped;            /* candidates dropped for backoff / open circuit / exhausted
                                  usage window */
    double earliest_until;     /* earliest time (Unix s) a dropped candidate is usable again:
                                  the latest of its backoff until, its circuit until and its
                                  usage window reset (0 when none dropped); §5.6 Retry-After */
    aor_kind last_kind;        /* last_error_kind of the backoff row that failed most
                                  recently among the dropped candidates (also an expired row
                                  of a key behind an open circuit); AOR_KIND_RATE when no
                                  dropped candidate has a row (exhausted usage windows, or
                                  circuits without rows); AOR_KIND_OK when nothing was
                                  dropped */
    int usage_only;            /* 1 when the dropped candidates were held back by exhausted
                                  usage windows (§6) only: no backoff row, no circuit */
    const char *last_provider; /* the provider and key of the row last_kind is from, or */
    const char *last_key;      /* NULL (borrowed: the config's / scratch, as key_name) */
    char *scratch;             /* storage for passthrough key names; internal */
} aor_sequence;

typedef struct {
    const aor_config *cfg;
    const aor_backoff *backoff; /* NULL: nothing is backed off */
    aor_breaker *breaker;       /* allow() may move open -> half-open; NULL: all closed */
    const aor_sticky *sticky;   /* NULL: no sticky rows */
    const aor_usage *usage;     /* NULL: no usage data (nothing exhausted), spec §6 */
} aor_route_ctx;

/* Builds the candidate sequence for a request.
 * model: canonical model (NULL/"" when the request names none: every provider that
 *   owns `host` / serves `dialect` is a candidate).
 * client: hex SHA-256 of the client's credential ("" or NULL when none).
 * host: the host the client asked for (intercepted connection, lower case, no port), or
 *   NULL on the sidecar; then `dialect` (of the request path) picks the owning providers
 *   for unlisted models.
 * dialect: the dialect of the request. Providers of another dialect never serve it by
 *   their `models` list (no translation between dialects); only host ownership crosses.
 * now: Unix seconds.
 * Steps (docs/route.md):
 *   1. providers: those of `dialect` listing the model (or models = *); when none does
 *      (or no model): the owners of `host`, or on the sidecar the providers of `dialect`;
 *   2. one candidate per configured key of each (a key listed twice counts once); a
 *      passthrough provider gives one candidate with key = -1;
 *   3. order: provider priority, key priority, then aor_hash_pair64(client,
 *      "provider/key") so clients spread over equal keys (stable per client);
 *   4. drop those in backoff (aor_backoff_blocked), whose usage window is exhausted
 *      (aor_usage_exhausted, §6) or whose circuit for (provider, model or "") is open
 *      (aor_breaker_allow, called at most once per provider and only when one of its
 *      keys is neither backed off nor exhausted);
 *   5. priority strategy: the client's sticky for the model, when among the remaining
 *      candidates, goes first unless a candidate ahead of it beats it by more than the
 *      thresholds: another provider whose priority is better by more than
 *      provider_priority_cache_threshold, or a key of the same provider whose priority
 *      is better by more than key_priority_cache_threshold (gap == threshold: the sticky
 *      stays first);
 *   6. round-robin strategy with >= 2 remaining candidates: the sticky goes first while
 *      its streak is < 2; at streak >= 2 the order is rotated to start at the candidate
 *      after it (wrapping), the sticky last. Thresholds do not apply.
 * Fills *out (free with aor_sequence_free; *out is zeroed first, so freeing is safe even
 * after an error). out->n == 0 with out->dropped > 0 means "all backed off" (§5.6);
 * n == 0 with dropped == 0 means no provider serves the request.
 * Returns 0, or -1 with errno=ENOMEM, or errno=EINVAL (ctx, ctx->cfg or out NULL). */
int aor_route_select(const aor_route_ctx *ctx, const char *model, const char *client,
                     const char *host, aor_dialect dialect, double now, aor_sequence *out);

/* Frees what aor_route_select allocated in seq (not seq itself) and empties it. NULL is
 * a no-op. */
void aor_sequence_free(aor_sequence *seq);

#endif
