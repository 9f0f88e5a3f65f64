#include "rstate.h"

#include "log.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct aor_rstate {
    const aor_config *cfg;
    aor_store *store;
    aor_backoff *backoff;
    aor_breaker *breaker;
    aor_sticky *sticky;
    aor_usage *usage; /* in memory only: never written to the store (usage.h) */
};

aor_rstate *aor_rstate_open(const aor_config *cfg, const char *db_path, double now, char *err,
                            size_t errlen) {
    aor_rstate *rs = calloc(1, sizeof *rs);
    if (!rs) {
        snprintf(err, errlen, "out of memory");
        return NULL;
    }
    rs->cfg = cfg;
    aor_backoff_params bp = {cfg->backoff_initial_s, cfg->backoff_max_s, cfg->quota_cooldown_s,
                             cfg->auth_cooldown_s};
    aor_breaker_params kp = {cfg->breaker_failures, cfg->breaker_window_s, cfg->breaker_open_s};
    rs->backoff = aor_backoff_new(&bp);
    rs->breaker = aor_breaker_new(&kp);
    rs->sticky = aor_sticky_new();
    rs->usage = aor_usage_new();
    if (!rs->backoff || !rs->breaker || !rs->sticky || !rs->usage) {
        snprintf(err, errlen, "out of memory");
        goto fail;
    }
    rs->store = aor_store_open(db_path, err, errlen);
    if (!rs->store)
        goto fail;
    if (aor_store_replay(rs->store, rs->backoff, rs->breaker, rs->sticky, now) < 0) {
        snprintf(err, errlen, "replaying state from %s: %s", db_path, aor_store_errmsg(rs->store));
        goto fail;
    }
    return rs;
fail:
    aor_rstate_close(rs);
    return NULL;
}

void aor_rstate_close(aor_rstate *rs) {
    if (!rs)
        return;
    aor_store_close(rs->store);
    aor_backoff_free(rs->backoff);
    aor_breaker_free(rs->breaker);
    aor_sticky_free(rs->sticky);
    aor_usage_free(rs->usage);
    free(rs);
}

void aor_rstate_set_config(aor_rstate *rs, const aor_config *cfg) {
    rs->cfg = cfg;
}

static int store_failed(aor_rstate *rs, const char *what) {
    aor_error("state store: could not write %s: %s", what, aor_store_errmsg(rs->store));
    return -1;
}

static int record_success(aor_rstate *rs, const char *provider, const char *key, const char *model,
                          const char *client, double now) {
    if (aor_backoff_get(rs->backoff, provider, key, &(aor_backoff_row){0})) {
        if (aor_store_log_success(rs->store, provider, key, now) < 0)
            return store_failed(rs, "success");
        aor_backoff_success(rs->backoff, provider, key);
    }
    aor_breaker_row br;
    if (aor_breaker_get(rs->breaker, provider, model, now, &br) && br.state != AOR_BREAKER_CLOSED) {
        if (aor_store_log_breaker_close(rs->store, provider, model, now) < 0)
            return store_failed(rs, "circuit close");
    }
    aor_breaker_success(rs->breaker, provider, model);
    if (!*model)
        return 0; /* no model (GET /v1/models ...): no prompt cache to keep warm, no sticky */
    /* The sticky stays where it is (the usual case): refreshed in memory, not persisted. */
    if (aor_sticky_touch(rs->sticky, client, model, provider, key, now))
        return 0;
    aor_sticky_row row = {client, model, provider, key, now, 1};
    if (aor_store_log_sticky(rs->store, &row) < 0)
        return store_failed(rs, "sticky");
    if (aor_sticky_success(rs->sticky, client, model, provider, key, now) < 0) {
        aor_error("sticky: out of memory");
        return -1;
    }
    return 0;
}

int aor_rstate_record(aor_rstate *rs, const char *provider, const char *key, const char *model,
                      const char *client, aor_kind kind, double hint_s, double started, double now,
                      int own_credential) {
    if (!model)
        model = "";
    if (!client)
        client = "";
    if (kind == AOR_KIND_OK)
        return record_success(rs, provider, key, model, client, now);
    if (!aor_kind_retryable(kind))
        return 0;
    aor_backoff_row row, cur;
    if (aor_backoff_get(rs->backoff, provider, key, &cur) && started <= cur.last_failure) {
        /* In flight when the current window was set: same episode (see rstate.h). */
        if (!(hint_s > 0) || kind == AOR_KIND_QUOTA || kind == AOR_KIND_AUTH)
            return 0;
        double until = now + (hint_s < rs->cfg->backoff_max_s ? hint_s : rs->cfg->backoff_max_s);
        if (until <= cur.until)
            return 0;
        row = cur;
        row.until = until;
        if (aor_store_log_backoff(rs->store, &row) < 0)
            return store_failed(rs, "backoff");
        return aor_backoff_restore(rs->backoff, &row) < 0 ? -1 : 0;
    }
    if (aor_backoff_preview(rs->backoff, provider, key, kind, hint_s, now, &row) < 0)
        return -1;
    if (aor_store_log_backoff(rs->store, &row) < 0)
        return store_failed(rs, "backoff");
    if (aor_backoff_restore(rs->backoff, &row) < 0) {
        aor_error("backoff: out of memory");
        return -1;
    }
    /* Spec §4.4: retryable failures (§4.1: rate, transient, quota and auth) count; a
     * client's own passed-through credential only for rate and transient (rstate.h). */
    if (kind == AOR_KIND_RATE || kind == AOR_KIND_TRANSIENT ||
        ((kind == AOR_KIND_QUOTA || kind == AOR_KIND_AUTH) && !own_credential)) {
        double until = 0;
        if (aor_breaker_preview_fail(rs->breaker, provider, model, now, &until) == 1) {
            if (aor_store_log_breaker_open(rs->store, provider, model, until, now) < 0)
                return store_failed(rs, "circuit open");
        }
        if (aor_breaker_fail(rs->breaker, provider, model, now) < 0)
            return -1;
    }
    return 0;
}

int aor_rstate_reset(aor_rstate *rs, const char *provider, double now) {
    if (aor_store_log_reset(rs->store, provider, now) < 0)
        return store_failed(rs, "reset");
    int n = aor_backoff_reset(rs->backoff, provider);
    n += aor_breaker_reset(rs->breaker, provider);
    return n;
}

aor_route_ctx aor_rstate_route_ctx(aor_rstate *rs) {
    aor_route_ctx ctx = {rs->cfg, rs->backoff, rs->breaker, rs->sticky, rs->usage};
    return ctx;
}

aor_backoff *aor_rstate_backoff(aor_rstate *rs) {
    return rs->backoff;
}
aor_breaker *aor_rstate_breaker(aor_rstate *rs) {
    return rs->breaker;
}
aor_sticky *aor_rstate_sticky(aor_rstate *rs) {
    return rs->sticky;
}
aor_usage *aor_rstate_usage(aor_rstate *rs) {
    return rs->usage;
}

unsigned long aor_rstate_writes(const aor_rstate *rs) {
    return aor_store_writes(rs->store);
}
