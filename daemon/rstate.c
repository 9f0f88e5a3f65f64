#include "rstate.h"

#include "hash.h"
#include "log.h"
#include "map.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* A key's name and the fingerprint of the last secret aord saw under it (sync_key_secrets). */
typedef struct {
    char *name;
    char fp[33];
} key_fp;

struct aor_rstate {
    const aor_config *cfg;
    aor_store *store;
    aor_backoff *backoff;
    aor_breaker *breaker;
    aor_sticky *sticky;
    aor_usage *usage;               /* in memory only: never written to the store (usage.h) */
    aor_map *failures;              /* (provider, key) -> failure_text, in memory only */
    unsigned long write_errors;     /* events the store could not write */
    unsigned long compacted_writes; /* aor_store_writes at the last compaction */
    unsigned long compact_every;    /* events between compactions (at least) */
    unsigned long unlogged;         /* of those, not logged yet (one line a minute) */
    time_t logged_at;               /* when the last such line was logged (real time) */
    char *path;                     /* the state file's path (db_path) */
    int (*relock)(const char *path, char *err, size_t errlen, void *arg); /* set_relock */
    void *relock_arg;
    time_t replaced_logged_at; /* when a failed reopen_store was last logged (real time) */
    unsigned long writes_base; /* events written into stores closed by reopen_store */
    int sticky_full_said;      /* the sticky table was full once: said in the log */
    int lost;                  /* an event could not be written: memory is ahead of the store */
    time_t lost_tried_at;      /* when memory was last written over it (real time) */
    key_fp *fps;               /* the last secret seen under each key name (fingerprints) */
    size_t nfps;
};

#define FAILURES_MAX 4096 /* pairs kept by aor_rstate_note_failure */

typedef struct {
    char *provider, *key;
    char text[160];
} failure_text;

static void failure_free(void *v) {
    failure_text *f = v;
    free(f->provider);
    free(f->key);
    free(f);
}

static aor_backoff_params backoff_params(const aor_config *cfg) {
    aor_backoff_params bp = {cfg->backoff_initial_s, cfg->backoff_max_s, cfg->quota_cooldown_s,
                             cfg->auth_cooldown_s};
    return bp;
}

static aor_breaker_params breaker_params(const aor_config *cfg) {
    aor_breaker_params kp = {cfg->breaker_failures, cfg->breaker_window_s, cfg->breaker_open_s};
    return kp;
}

/* "2027-01-15T08:00:30Z" for a log line (UTC); a time outside years 1970..9999 (a
 * damaged row: NaN, 1e300) as a number, never converted to time_t. */
static const char *fmt_time(double t, char *buf, size_t cap) {
    struct tm tm;
    if (!(t >= 0 && t < 253402300800.0)) {
        snprintf(buf, cap, "%g", t);
        return buf;
    }
    time_t tt = (time_t)t;
    if (!gmtime_r(&tt, &tm) || strftime(buf, cap, "%Y-%m-%dT%H:%M:%SZ", &tm) == 0)
        snprintf(buf, cap, "%.0f", t);
    return buf;
}

/* The rows the replay clamped (aor_store_limits), gathered for one log line. */
typedef struct {
    int backoff, circuits, clock_back;
    int listed;      /* rows named in text */
    int full;        /* text has no room for another row */
    char text[1024]; /* "key p/k until T, ...": names only, never a secret */
    size_t used;     /* bytes of text used (without its NUL) */
} clamp_note;

#define CLAMP_NAMED_MAX 16 /* rows named in the log line; the others are counted */

static void note_clamp(const aor_store_clamp *c, void *arg) {
    clamp_note *n = arg;
    int circuit = strcmp(c->what, "circuit") == 0;
    if (circuit)
        n->circuits++;
    else
        n->backoff++;
    n->clock_back += c->clock_back;
    if (n->listed >= CLAMP_NAMED_MAX || n->full)
        return;
    char was[40];
    int w = snprintf(n->text + n->used, sizeof n->text - n->used, "%s%s %s/%s until %s%s",
                     n->listed ? ", " : "", circuit ? "circuit" : "key", c->provider,
                     *c->name ? c->name : "(none)", fmt_time(c->until, was, sizeof was),
                     c->clock_back ? " (failed in the future)" : "");
    if (w < 0 || (size_t)w >= sizeof n->text - n->used) {
        n->text[n->used] = '\0'; /* no room: this row and the rest are counted only */
        n->full = 1;
        return;
    }
    n->used += (size_t)w;
    n->listed++;
}

/* The sanity limits of the state loaded at start (store.h aor_store_limits): no backoff
 * window longer than the longest the config allows, no circuit open longer than
 * breaker_open_s. */
static aor_store_limits start_limits(const aor_config *cfg, clamp_note *note) {
    double max_s = cfg->backoff_max_s;
    if (cfg->quota_cooldown_s > max_s)
        max_s = cfg->quota_cooldown_s;
    if (cfg->auth_cooldown_s > max_s)
        max_s = cfg->auth_cooldown_s;
    aor_store_limits lim = {max_s, cfg->breaker_open_s, note_clamp, note};
    return lim;
}

/* One line naming what the replay clamped (provider and key or model; no secret). */
static void log_clamps(const clamp_note *n, const aor_store_limits *lim) {
    int total = n->backoff + n->circuits;
    if (total == 0)
        return;
    aor_warn("state at start: %d backoff row%s and %d circuit%s ended later than this config "
             "allows (written while the clock was ahead, or the clock went back): %s%s; limited "
             "to end within %.0f s (backoff) and %.0f s (circuits) from now%s",
             n->backoff, n->backoff == 1 ? "" : "s", n->circuits, n->circuits == 1 ? "" : "s",
             n->text, total > n->listed ? ", ..." : "", lim->backoff_max_s, lim->circuit_max_s,
             n->clock_back ? "; a failure in the future is taken as a failure now" : "");
}

/* What sync_key_secrets does about a key whose secret changed. */
typedef enum {
    SYNC_START,  /* at start: a new credential, said "since aord last ran" */
    SYNC_RELOAD, /* at SIGHUP: a new credential, said "SIGHUP: ..." */
    SYNC_WRITE   /* only write the fingerprints (a new or recovered state file) */
} sync_mode;

static void sync_key_secrets(aor_rstate *rs, const aor_config *old, const aor_config *cfg,
                             double now, sync_mode mode);

aor_rstate *aor_rstate_open(const aor_config *cfg, const char *db_path, double now, char *err,
                            size_t errlen) {
    aor_rstate *rs = calloc(1, sizeof *rs);
    if (!rs) {
        snprintf(err, errlen, "out of memory");
        return NULL;
    }
    rs->cfg = cfg;
    rs->compact_every = AOR_RSTATE_COMPACT_EVERY;
    rs->path = strdup(db_path);
    if (!rs->path) {
        snprintf(err, errlen, "out of memory");
        goto fail;
    }
    aor_backoff_params bp = backoff_params(cfg);
    aor_breaker_params kp = breaker_params(cfg);
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
    clamp_note note = {0};
    aor_store_limits lim = start_limits(cfg, &note);
    if (aor_store_replay(rs->store, rs->backoff, rs->breaker, rs->sticky, now, &lim) < 0) {
        const char *m = aor_store_errmsg(rs->store);
        snprintf(err, errlen, "replaying state from %s: %s%s", db_path, m,
                 strstr(m, "malformed") || strstr(m, "not a database")
                     ? "; the file is damaged: move it aside (with its -wal and -shm files) and "
                       "aord starts with empty state, forgetting only backoff, open circuits "
                       "and sticky routes"
                     : "");
        goto fail;
    }
    log_clamps(&note, &lim);
    aor_store_set_busy_timeout(rs->store, AOR_RSTATE_BUSY_MS);
    sync_key_secrets(rs, NULL, cfg, now, SYNC_START);
    return rs;
fail:
    aor_rstate_close(rs);
    return NULL;
}

static void reopen_store(aor_rstate *rs, double now);
static void catch_up(aor_rstate *rs, double now);

void aor_rstate_sync(aor_rstate *rs, double now) {
    if (!rs)
        return;
    /* The file removed or replaced since the last change (rm aor.db, then SIGTERM: QA) */
    if (rs->store && aor_store_file_changed(rs->store))
        reopen_store(rs, now);
    if (rs->store && rs->lost) {
        rs->lost_tried_at = 0;
        catch_up(rs, now);
    }
}

void aor_rstate_close(aor_rstate *rs) {
    if (!rs)
        return;
    aor_store_close(rs->store);
    free(rs->path);
    aor_backoff_free(rs->backoff);
    aor_breaker_free(rs->breaker);
    aor_sticky_free(rs->sticky);
    aor_usage_free(rs->usage);
    aor_map_free(rs->failures, failure_free);
    for (size_t i = 0; i < rs->nfps; i++)
        free(rs->fps[i].name);
    free(rs->fps);
    free(rs);
}

int aor_rstate_note_failure(aor_rstate *rs, const char *provider, const char *key,
                            const char *reason) {
    if (!rs || !provider || !key || !reason)
        return 0;
    if (!rs->failures && !(rs->failures = aor_map_new()))
        return -1;
    failure_text *f = aor_map_get(rs->failures, provider, key);
    if (!f) {
        if (aor_map_count(rs->failures) >= FAILURES_MAX) {
            aor_map_free(rs->failures, failure_free);
            if (!(rs->failures = aor_map_new()))
                return -1;
        }
        f = calloc(1, sizeof *f);
        if (f) {
            f->provider = strdup(provider);
            f->key = strdup(key);
        }
        if (!f || !f->provider || !f->key ||
            aor_map_put(rs->failures, f->provider, f->key, f, NULL) != 0) {
            if (f)
                failure_free(f);
            errno = ENOMEM;
            return -1;
        }
    }
    snprintf(f->text, sizeof f->text, "%s", reason);
    return 0;
}

const char *aor_rstate_failure_text(const aor_rstate *rs, const char *provider, const char *key) {
    if (!rs || !rs->failures || !provider || !key)
        return NULL;
    const failure_text *f = aor_map_get(rs->failures, provider, key);
    return f && f->text[0] ? f->text : NULL;
}

/* path followed by a and b (malloc'd), or NULL on ENOMEM. */
static char *path_with(const char *path, const char *a, const char *b) {
    size_t n = strlen(path) + strlen(a) + strlen(b) + 1;
    char *s = malloc(n);
    if (s)
        snprintf(s, n, "%s%s%s", path, a, b);
    return s;
}

/* The state file at the store's path was removed or replaced while aord ran (QA: `rm
 * aor.db`; SQLite went on writing into the unlinked inode, so everything after it was
 * lost at the next start, with no error), or an earlier attempt to make a new one
 * failed (rs->store NULL). In this order:
 *  1. the single-instance lock is taken on the file at the path (relock, when the daemon
 *     set one); when another aord holds it, nothing is touched (its -wal and -shm are
 *     its own: review) and writes go on into the old store, lost at a restart;
 *  2. the old store is closed: SQLite checkpoints into the old inode and removes the
 *     -wal and -shm files by name, which belong to it; what is left of them is moved
 *     aside, since a new file must never be opened next to them (review: a backup
 *     renamed over aor.db was read with the old file's WAL pages and damaged);
 *  3. a new store is opened there and the state in memory (the truth) written into it
 *     (aor_store_compact); when that fails (another program's file, no room) the store
 *     stays closed: writes fail and are counted like a full disk's.
 * The next state change tries again; an error line (one a minute) says why. */
static void reopen_store(aor_rstate *rs, double now) {
    const char *path = rs->path;
    char err[600] = "";
    int was_open = rs->store != NULL;
    if (rs->relock && rs->relock(path, err, sizeof err, rs->relock_arg) != 0)
        goto fail;
    if (was_open) {
        rs->writes_base += aor_store_writes(rs->store);
        aor_store_close(rs->store);
        rs->store = NULL;
        static const char *const side[] = {"-wal", "-shm"};
        for (size_t i = 0; i < 2; i++) {
            char *f = path_with(path, side[i], ""), *aside = path_with(path, side[i], ".replaced");
            if (f && aside && access(f, F_OK) == 0)
                rename(f, aside);
            free(f);
            free(aside);
        }
    }
    aor_store *fresh = aor_store_open(path, err, sizeof err);
    if (!fresh)
        goto fail;
    aor_store_set_busy_timeout(fresh, AOR_RSTATE_BUSY_MS); /* the compaction too */
    if (aor_store_compact(fresh, rs->backoff, rs->breaker, rs->sticky, now) < 0) {
        snprintf(err, sizeof err, "%s", aor_store_errmsg(fresh));
        aor_store_close(fresh);
        goto fail;
    }
    aor_error("state store: %s; the state in memory was written to a new file there",
              was_open ? "the state file was removed or replaced while aord ran"
                       : "the state file can be written again");
    rs->store = fresh;
    rs->compacted_writes = aor_store_writes(fresh);
    rs->replaced_logged_at = 0;
    /* The keys' fingerprints too: memory does not hold them, the new file has none, and
     * a key rotated before the next start would go unnoticed (QA). */
    sync_key_secrets(rs, NULL, rs->cfg, now, SYNC_WRITE);
    return;
fail:;
    time_t t = time(NULL);
    if (rs->replaced_logged_at == 0 || t - rs->replaced_logged_at >= 60) {
        aor_error("state store: the state file %s was removed or replaced while aord ran, and "
                  "a new one could not be made there (%s): state changes are lost at a "
                  "restart until it can",
                  path, err);
        rs->replaced_logged_at = t;
    }
}

/* The store to write an event into: rs->store, after making sure its file is still the
 * one at its path (one stat; called only when a state change is about to be written).
 * NULL when no store could be made (the write then fails and is counted). */
static aor_store *wstore(aor_rstate *rs, double now) {
    if (!rs->store || aor_store_file_changed(rs->store))
        reopen_store(rs, now);
    return rs->store;
}

/* The store could not write an event (disk full, read-only file system, ...). Routing
 * goes on from memory: the caller applies the change anyway, so backoff, circuits and
 * sticky keep working and only the durability of this change is lost (a store that
 * fails must not switch aor's failure handling off; docs/routing.md §11). Counted
 * (aor_state_write_errors_total) and logged, at most one line a minute. */
static void store_failed(aor_rstate *rs, const char *what) {
    rs->write_errors++;
    rs->unlogged++;
    rs->lost = 1; /* written over from memory once the store takes writes again */
    time_t t = time(NULL);
    if (rs->logged_at != 0 && t - rs->logged_at < 60)
        return;
    aor_error("state store: could not write %s: %s; routing goes on from memory, but this "
              "change is lost at a restart%s",
              what, aor_store_errmsg(rs->store),
              rs->unlogged > 1 ? " (and earlier ones this minute)" : "");
    rs->logged_at = t;
    rs->unlogged = 0;
}

/* Number of the backoff rows of key (any provider). */
typedef struct {
    const char *key;
    int n;
} key_rows;

static void count_key_rows(const aor_backoff_row *row, void *arg) {
    key_rows *k = arg;
    k->n += strcmp(row->key, k->key) == 0;
}

/* Usage snapshots of (provider or any, key or any) exhausted at now. */
typedef struct {
    const char *provider, *key;
    const aor_usage *u;
    double now;
    int n;
} exhausted_rows;

static void count_exhausted(const char *provider, const char *key, const aor_usage_window *w,
                            void *arg) {
    exhausted_rows *x = arg;
    if ((!x->provider || strcmp(provider, x->provider) == 0) &&
        (!x->key || strcmp(key, x->key) == 0) &&
        aor_usage_exhausted(x->u, provider, key, x->now, NULL))
        x->n++;
}

/* Drops the usage snapshots of (provider or any, key or any); returns how many of them
 * were exhausted at now (holding their key back). */
static int forget_usage(aor_rstate *rs, const char *provider, const char *key, double now) {
    exhausted_rows x = {provider, key, rs->usage, now, 0};
    aor_usage_foreach(rs->usage, count_exhausted, &x);
    aor_usage_forget(rs->usage, provider, key);
    return x.n;
}

/* 1 when the secrets differ, or only one of them is set (no secret is ever logged). */
static int secret_changed(const char *a, const char *b) {
    return (a == NULL) != (b == NULL) || (a && strcmp(a, b) != 0);
}

/* Drops the backoff rows of key with every provider, written ahead as a key reset when
 * there are any (§4.5): a new credential (its secret changed). Returns how many. */
static int drop_key_rows(aor_rstate *rs, const char *key, double now) {
    key_rows kr = {key, 0};
    aor_backoff_foreach(rs->backoff, count_key_rows, &kr);
    if (kr.n > 0 && aor_store_log_reset_key(wstore(rs, now), NULL, key, now) < 0)
        store_failed(rs, "key reset");
    return aor_backoff_reset_key(rs->backoff, NULL, key);
}

/* The fingerprint of a secret kept in the store (store.h, docs/store.md): the first 32
 * hex digits of SHA-256 over a fixed label and the secret. -1 on ENOMEM. */
static int key_fingerprint(const char *secret, char out[33]) {
    static const char label[] = "aor key fingerprint 1\n";
    size_t sl = strlen(secret), n = sizeof label - 1 + sl;
    char *buf = malloc(n);
    if (!buf)
        return -1;
    memcpy(buf, label, sizeof label - 1);
    memcpy(buf + sizeof label - 1, secret, sl);
    char hex[65];
    aor_hash_sha256_hex(buf, n, hex);
    explicit_bzero(buf, n);
    free(buf);
    memcpy(out, hex, 32);
    out[32] = '\0';
    return 0;
}

/* The remembered fingerprint of key name, or NULL. */
static key_fp *fp_of(aor_rstate *rs, const char *name) {
    for (size_t i = 0; i < rs->nfps; i++)
        if (strcmp(rs->fps[i].name, name) == 0)
            return &rs->fps[i];
    return NULL;
}

/* Remembers fp as name's (mem: its entry, or NULL for a new one). 1, or 0 on ENOMEM. */
static int fp_remember(aor_rstate *rs, key_fp *mem, const char *name, const char *fp) {
    if (!mem) {
        key_fp *n = realloc(rs->fps, (rs->nfps + 1) * sizeof *n);
        if (!n)
            return 0;
        rs->fps = n;
        mem = &rs->fps[rs->nfps];
        if (!(mem->name = strdup(name)))
            return 0;
        rs->nfps++;
    }
    memcpy(mem->fp, fp, sizeof mem->fp);
    return 1;
}

/* The secret of key name in cfg (NULL: none there, or cfg NULL). */
static const char *secret_of(const aor_config *cfg, const char *name, int *found) {
    *found = 0;
    for (size_t j = 0; cfg && j < cfg->nkeys; j++)
        if (strcmp(cfg->keys[j].name, name) == 0) {
            *found = 1;
            return cfg->keys[j].secret;
        }
    return NULL;
}

/* Brings the store's key fingerprints up to cfg's secrets. With mode SYNC_START or
 * SYNC_RELOAD, a key whose secret changed is first treated as a new credential: its
 * backoff rows with every provider (written ahead as a key reset, §4.5) and its usage
 * snapshots are dropped, and the log names the key (never the secret). Changed: the
 * fingerprint of the last secret aord saw under that name (at a start or a reload, also
 * before the key left the config for a while) differs: the one it remembers (rs->fps;
 * QA: with the store write-locked, a stale stored one made every reload a rotation),
 * else the stored one; or, when neither is known, old (the config a reload replaces;
 * NULL at start) had another secret under that name. QA: a key rotated by a restart, or removed by
 * one reload and back with a new secret at the next, stayed backed off for the old secret's 401.
 * SYNC_WRITE only writes (a new state file, a store that works again: the rows in memory are the
 * current credential's). Writes only what is new or changed; a store error is logged and changes
 * nothing else. */
static void sync_key_secrets(aor_rstate *rs, const aor_config *old, const aor_config *cfg,
                             double now, sync_mode mode) {
    int store_ok = rs->store != NULL;
    for (size_t i = 0; i < cfg->nkeys; i++) {
        const aor_key_cfg *k = &cfg->keys[i];
        char fp[33], stored[65];
        int have_fp = k->secret && *k->secret && key_fingerprint(k->secret, fp) == 0;
        int r = store_ok && have_fp
                    ? aor_store_key_fingerprint(rs->store, k->name, stored, sizeof stored)
                    : 0;
        if (r < 0) {
            aor_warn("state store: %s", aor_store_errmsg(rs->store));
            store_ok = 0;
            r = 0;
        }
        int was, changed = 0;
        const char *before = secret_of(old, k->name, &was);
        key_fp *mem = have_fp ? fp_of(rs, k->name) : NULL;
        if (mem) /* memory first: a store that could not take the last one is behind */
            changed = strcmp(mem->fp, fp) != 0;
        else if (r == 1)
            changed = strcmp(stored, fp) != 0;
        else if (was)
            changed = secret_changed(before, k->secret);
        if (have_fp && !fp_remember(rs, mem, k->name, fp))
            aor_warn("out of memory keeping key '%s''s fingerprint", k->name);
        if (changed && mode != SYNC_WRITE) {
            int n = drop_key_rows(rs, k->name, now);
            int u = forget_usage(rs, NULL, k->name, now);
            if (mode == SYNC_RELOAD)
                aor_info("SIGHUP: key '%s' has a new secret: a new credential, %d backoff row%s "
                         "cleared%s",
                         k->name, n, n == 1 ? "" : "s", u ? " and its exhausted usage window" : "");
            else
                aor_info("key '%s' has a new secret since aord last ran: a new credential, %d "
                         "backoff row%s cleared",
                         k->name, n, n == 1 ? "" : "s");
        }
        if (!store_ok || !have_fp || (r == 1 && strcmp(stored, fp) == 0))
            continue;
        if (aor_store_set_key_fingerprint(wstore(rs, now), k->name, fp) < 0)
            store_failed(rs, "key fingerprint");
    }
}

int aor_rstate_set_config(aor_rstate *rs, const aor_config *cfg, double now) {
    const aor_config *old = rs->cfg;
    int rc = 0;
    aor_backoff_params bp = backoff_params(cfg);
    aor_breaker_params kp = breaker_params(cfg);
    /* The loader validated these; a refusal would be an aor bug: keep the old ones. */
    if (aor_backoff_set_params(rs->backoff, &bp) < 0) {
        aor_error("SIGHUP: backoff parameters refused; the old ones stay in use");
        rc = -1;
    }
    if (aor_breaker_set_params(rs->breaker, &kp) < 0) {
        aor_error("SIGHUP: circuit breaker parameters refused; the old ones stay in use");
        rc = -1;
    }
    rs->cfg = cfg;
    if (old != cfg)
        sync_key_secrets(rs, old, cfg, now, SYNC_RELOAD);
    return rc;
}

/* How a circuit's model is named in a log line. */
static const char *model_label(const char *model) {
    return *model ? model : "(none)";
}

int aor_rstate_close_circuit(aor_rstate *rs, const char *provider, const char *key,
                             const char *model, double now) {
    aor_breaker_row br;
    int closes =
        aor_breaker_get(rs->breaker, provider, model, now, &br) && br.state != AOR_BREAKER_CLOSED;
    if (closes && aor_store_log_breaker_close(wstore(rs, now), provider, model, now) < 0)
        store_failed(rs, "circuit close");
    aor_breaker_success(rs->breaker, provider, model);
    if (closes)
        aor_info("circuit closed: provider %s, model %s (key %s answered)", provider,
                 model_label(model), key);
    return 0;
}

static int record_success(aor_rstate *rs, const char *provider, const char *key, const char *model,
                          const char *client, double now) {
    if (aor_backoff_get(rs->backoff, provider, key, &(aor_backoff_row){0})) {
        if (aor_store_log_success(wstore(rs, now), provider, key, now) < 0)
            store_failed(rs, "success");
        aor_backoff_success(rs->backoff, provider, key);
    }
    if (aor_rstate_close_circuit(rs, provider, key, model, now) < 0)
        return -1;
    if (!*model)
        return 0; /* no model (GET /v1/models ...): no prompt cache to keep warm, no sticky */
    /* Round-robin (§5.5) advances on the streak: a streak that still matters (below 2)
     * is a routing state change, written ahead like a move, so a restart does not give
     * the key a third success in a row. */
    aor_sticky_row cur;
    if (rs->cfg->strategy == AOR_STRATEGY_ROUND_ROBIN &&
        aor_sticky_get(rs->sticky, client, model, &cur) && cur.streak < 2 &&
        strcmp(cur.provider, provider) == 0 && strcmp(cur.key, key) == 0) {
        aor_sticky_row next = {client, model, provider, key, now, cur.streak + 1};
        if (aor_store_log_sticky(wstore(rs, now), &next) < 0)
            store_failed(rs, "sticky");
    }
    /* The sticky stays where it is (the usual case): refreshed in memory, not persisted. */
    if (aor_sticky_touch(rs->sticky, client, model, provider, key, now))
        return 0;
    /* A new row in a full table drops the least recently used one: written ahead too. */
    aor_sticky_row victim;
    if (aor_sticky_victim(rs->sticky, client, model, &victim)) {
        if (!rs->sticky_full_said) {
            aor_warn("sticky: %zu (client, model) rows, the most kept; from now on each new "
                     "one drops the least recently used (docs/store.md)",
                     aor_sticky_count(rs->sticky));
            rs->sticky_full_said = 1;
        }
        if (aor_store_log_sticky_drop(wstore(rs, now), victim.client, victim.model, now) < 0)
            store_failed(rs, "sticky");
        aor_sticky_remove(rs->sticky, victim.client, victim.model);
    }
    aor_sticky_row row = {client, model, provider, key, now, 1};
    if (aor_store_log_sticky(wstore(rs, now), &row) < 0)
        store_failed(rs, "sticky");
    if (aor_sticky_success(rs->sticky, client, model, provider, key, now) < 0) {
        aor_error("sticky: out of memory");
        return -1;
    }
    return 0;
}

/* A failure of an attempt that was in flight when the row's window was set: no new
 * curve level. Only a longer window lengthens the row: a rate/transient hint, the flat
 * cooldown of quota/auth (an account state, whatever the episode), or, once the row's
 * window has run out, the same level's window again from now (QA: a slow request that
 * failed after the window ended left the key open to the next request, the row still
 * at its level); the row then shows that window (window_s, from now). Its last_failure
 * stays the episode's: it is what tells a later attempt's failure from one of this
 * episode, and an attempt sent after the episode must escalate (QA: a stale failure that
 * moved it made the next real failure look in flight). 0, or -1 when the store could not
 * write (row unchanged). */
static int lengthen_window(aor_rstate *rs, const aor_backoff_row *cur, aor_kind kind, double hint_s,
                           double now) {
    double window;
    if (kind == AOR_KIND_QUOTA)
        window = rs->cfg->quota_cooldown_s;
    else if (kind == AOR_KIND_AUTH)
        window = rs->cfg->auth_cooldown_s;
    else if (hint_s > 0)
        window = hint_s < rs->cfg->backoff_max_s ? hint_s : rs->cfg->backoff_max_s;
    else if (now >= cur->until)
        window = cur->window_s;
    else
        return 0;
    if (!(window > 0) || now + window <= cur->until)
        return 0;
    aor_backoff_row row = *cur;
    row.until = now + window;
    row.window_s = window;
    row.last_error_kind = kind;
    if (aor_store_log_backoff(wstore(rs, now), &row) < 0)
        store_failed(rs, "backoff");
    return aor_backoff_restore(rs->backoff, &row) < 0 ? -1 : 0;
}

static void count_row(const aor_backoff_row *row, void *arg) {
    (void)row;
    (*(size_t *)arg)++;
}

/* The event log only grows while aord runs (compaction was at start only): once
 * compact_every events were appended since the last compaction, and at least twice as
 * many as the tables have rows (so the work stays proportional to the events), the
 * tables are rewritten from memory and the log emptied (aor_store_compact). Called
 * after a state change only: it wrote already, so the request path stays free of disk
 * I/O when nothing changed. */
/* After writes failed (store_failed: disk full, ...), memory holds changes the store
 * lacks; once the store takes an event again, the whole state in memory is written over
 * it, as a compaction does, so those changes are not lost at the next restart (QA: they
 * were, though the disk had room again). Tried at most once a minute while it fails. */
static void catch_up(aor_rstate *rs, double now) {
    time_t t = time(NULL);
    if (rs->lost_tried_at != 0 && t - rs->lost_tried_at < 60)
        return;
    rs->lost_tried_at = t;
    if (aor_store_compact(rs->store, rs->backoff, rs->breaker, rs->sticky, now) < 0)
        return; /* still failing: said by store_failed */
    rs->lost = 0;
    sync_key_secrets(rs, NULL, rs->cfg, now, SYNC_WRITE); /* one may have failed too */
    rs->compacted_writes = aor_store_writes(rs->store);
    aor_info("state store: writes work again; the state in memory was written to it (the "
             "changes it could not take meanwhile are kept)");
}

static void maybe_compact(aor_rstate *rs, double now) {
    if (!rs->store)
        return; /* none could be made (reopen_store): writes fail, nothing to fold */
    if (rs->lost) {
        catch_up(rs, now);
        return;
    }
    unsigned long w = aor_store_writes(rs->store);
    unsigned long since = w - rs->compacted_writes;
    if (since < rs->compact_every)
        return;
    size_t rows = aor_sticky_count(rs->sticky);
    if (since < 2 * rows)
        return; /* O(1): the walk over the backoff rows below only when it can matter */
    aor_backoff_foreach(rs->backoff, count_row, &rows);
    if (since < 2 * rows)
        return;
    rs->compacted_writes = w; /* a failure is not retried at every event */
    if (aor_store_compact(rs->store, rs->backoff, rs->breaker, rs->sticky, now) < 0)
        aor_warn("state store: compaction failed (the event log keeps growing): %s",
                 aor_store_errmsg(rs->store));
    else
        aor_info("state store compacted: %lu events folded into %zu rows", since, rows);
}

void aor_rstate_set_relock(aor_rstate *rs,
                           int (*relock)(const char *path, char *err, size_t errlen, void *arg),
                           void *arg) {
    rs->relock = relock;
    rs->relock_arg = arg;
}

void aor_rstate_set_compact_every(aor_rstate *rs, unsigned long events) {
    rs->compact_every = events;
}

static int record(aor_rstate *rs, const char *provider, const char *key, const char *model,
                  const char *client, aor_kind kind, double hint_s, double started, double now,
                  int own_credential);

int aor_rstate_record(aor_rstate *rs, const char *provider, const char *key, const char *model,
                      const char *client, aor_kind kind, double hint_s, double started, double now,
                      int own_credential) {
    int rc = record(rs, provider, key, model, client, kind, hint_s, started, now, own_credential);
    maybe_compact(rs, now);
    return rc;
}

int aor_rstate_breaker_counts(aor_kind kind, int own_credential) {
    if (!aor_kind_retryable(kind))
        return 0;
    int account = kind == AOR_KIND_QUOTA || kind == AOR_KIND_AUTH ||
                  (kind == AOR_KIND_RATE && (own_credential & AOR_RSTATE_429));
    return !((own_credential & AOR_RSTATE_OWN) && account);
}

static int record(aor_rstate *rs, const char *provider, const char *key, const char *model,
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
    aor_backoff_row cur;
    int same_episode = 0;
    if (aor_backoff_get(rs->backoff, provider, key, &cur) && started <= cur.last_failure) {
        same_episode = 1;
        /* In flight when the current window was set: same episode (see rstate.h). */
        if (lengthen_window(rs, &cur, kind, hint_s, now) < 0)
            return -1;
    } else {
        aor_backoff_row row;
        if (aor_backoff_preview(rs->backoff, provider, key, kind, hint_s, now, &row) < 0)
            return -1;
        if (aor_store_log_backoff(wstore(rs, now), &row) < 0)
            store_failed(rs, "backoff");
        if (aor_backoff_restore(rs->backoff, &row) < 0) {
            aor_error("backoff: out of memory");
            return -1;
        }
    }
    /* Spec §4.4: retryable failures (§4.1: rate, transient, quota and auth) count; a
     * client's own passed-through credential not for its account's own limits: quota,
     * auth, a 429 (rstate.h). */
    if (aor_rstate_breaker_counts(kind, own_credential)) {
        double until = 0;
        aor_breaker_row before;
        int reopen = aor_breaker_get(rs->breaker, provider, model, now, &before) &&
                     before.state != AOR_BREAKER_CLOSED;
        /* Half-open: only the probe, sent after the circuit's time ran out, reopens it. A
         * late failure of a request sent before (a long answer) does not extend it
         * (docs/routing.md §4). */
        if (reopen && before.state == AOR_BREAKER_HALF_OPEN && started < before.until)
            return 0;
        /* A 429 of the same episode was counted with its first failure (rstate.h), unless
         * it is the probe's answer, which must reopen the circuit: its lease would
         * otherwise hold the circuit half-open for open_s (review). */
        if (same_episode && (own_credential & AOR_RSTATE_429) &&
            !(reopen && before.state == AOR_BREAKER_HALF_OPEN))
            return 0;
        if (aor_breaker_preview_fail(rs->breaker, provider, model, now, &until) == 1) {
            if (aor_store_log_breaker_open(wstore(rs, now), provider, model, until, now) < 0)
                store_failed(rs, "circuit open");
        }
        int opened = aor_breaker_fail(rs->breaker, provider, model, now);
        if (opened < 0)
            return -1;
        if (opened == 1) {
            char ts[40];
            if (reopen)
                aor_info("circuit opened: provider %s, model %s, until %s (%.0f s; the probe "
                         "failed: %s on key %s)",
                         provider, model_label(model), fmt_time(until, ts, sizeof ts), until - now,
                         aor_kind_name(kind), key);
            else
                aor_info("circuit opened: provider %s, model %s, until %s (%.0f s; %d failure%s "
                         "within %.0f s, the last: %s on key %s)",
                         provider, model_label(model), fmt_time(until, ts, sizeof ts), until - now,
                         rs->cfg->breaker_failures, rs->cfg->breaker_failures == 1 ? "" : "s",
                         rs->cfg->breaker_window_s, aor_kind_name(kind), key);
        }
    }
    return 0;
}

int aor_rstate_reset(aor_rstate *rs, const char *provider, const char *key, double now,
                     int *usage_cleared) {
    int n;
    if (key) {
        if (aor_store_log_reset_key(wstore(rs, now), provider, key, now) < 0)
            store_failed(rs, "reset");
        n = aor_backoff_reset_key(rs->backoff, provider, key);
    } else {
        if (aor_store_log_reset(wstore(rs, now), provider, now) < 0)
            store_failed(rs, "reset");
        n = aor_backoff_reset(rs->backoff, provider);
        int c = aor_breaker_reset(rs->breaker, provider);
        if (c > 0)
            aor_info("circuit closed: %d circuit%s of %s (admin reset)", c, c == 1 ? "" : "s",
                     provider ? provider : "every provider");
        n += c;
    }
    int u = forget_usage(rs, provider, key, now);
    if (usage_cleared)
        *usage_cleared = u;
    if (key)
        aor_info("admin reset of %s key %s: %d backoff row%s removed, exhausted usage cleared "
                 "for %d key%s",
                 provider ? provider : "every provider's", key, n, n == 1 ? "" : "s", u,
                 u == 1 ? "" : "s");
    else
        aor_info("admin reset of %s: %d backoff/circuit entr%s removed, exhausted usage cleared "
                 "for %d key%s",
                 provider ? provider : "every provider", n, n == 1 ? "y" : "ies", u,
                 u == 1 ? "" : "s");
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
    return rs->writes_base + aor_store_writes(rs->store);
}

unsigned long aor_rstate_write_errors(const aor_rstate *rs) {
    return rs->write_errors;
}
