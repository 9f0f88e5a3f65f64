/* The state store: SQLite file with the tables of spec §4.5 / issue 2 — `backoff`
 * (provider, key, until, window_s, failure_count, last_error_kind, last_failure),
 * `sticky` (client, model, provider, key, last_success, streak), `breakers` (provider,
 * model, until) and the write-ahead `state_events` log. WAL mode, prepared statements, one
 * writer (the daemon). Each event is committed before the caller changes memory.
 * Schema version in PRAGMA user_version (2). Details and the durability argument
 * (WAL + synchronous=NORMAL survives kill -9; only an OS crash can lose the newest
 * commits): docs/store.md.
 *
 * Only names are stored (provider, key name, model, client hash); no secret ever reaches
 * this API. Times are Unix seconds (double). */
#ifndef AOR_STORE_H
#define AOR_STORE_H

#include "backoff.h"
#include "breaker.h"
#include "sticky.h"

#include <stddef.h>

typedef struct aor_store aor_store;

/* Opens the store at path, creating missing parent directories (mode 0700), the file
 * (mode 0600) and the schema as needed; ":memory:" (or an SQLite "file:" URI) for tests.
 * On error returns NULL, sets errno (ENOMEM, EINVAL, EIO for SQLite errors, or the
 * mkdir/open errno) and writes a message naming the path and the cause (SQLite's error,
 * strerror) into err (errlen bytes). A file with a newer schema version is refused. */
aor_store *aor_store_open(const char *path, char *err, size_t errlen);

/* Closes the store (NULL: no-op). */
void aor_store_close(aor_store *st);

/* Appends one event and commits it (one autocommitted INSERT through a statement
 * prepared at open). Each returns 0, or -1 when SQLite failed or an argument was NULL
 * (errno=EINVAL); then the caller must not change memory; the error text is in
 * aor_store_errmsg for the caller to log. Strings are copied into the database; no
 * secret is ever passed.
 *   log_backoff: a failure; the row as it is after aor_backoff_fail (its last_failure is
 *     the event time).
 *   log_success: a success of (provider, key): replay removes its backoff row.
 *   log_breaker_open / _close: circuit (provider, model) opened until `until` / closed.
 *   log_sticky: the (client, model) sticky row after aor_sticky_success (its last_success
 *     is the event time; streak kept for round-robin, §5.5).
 *   log_sticky_drop: the sticky row of (client, model) dropped at now to keep the table
 *     at its maximum (aor_sticky_victim); replay removes it. Stored as `sticky_drop`.
 *   log_reset: admin reset of provider (NULL = all, §8): replay removes that provider's
 *     backoff rows AND its circuits (the daemon must do the same in memory: a reset
 *     provider is usable at once). Sticky rows are kept.
 *   log_reset_key: admin reset of one key, or a key whose secret changed: replay removes
 *     the backoff rows of (provider, key) (provider NULL: of key with every provider), as
 *     aor_backoff_reset_key does in memory; circuits and sticky rows are kept. Stored as a
 *     `reset` event with its key column set. */
int aor_store_log_backoff(aor_store *st, const aor_backoff_row *row); /* failure -> row */
int aor_store_log_success(aor_store *st, const char *provider, const char *key, double now);
int aor_store_log_breaker_open(aor_store *st, const char *provider, const char *model, double until,
                               double now);
int aor_store_log_breaker_close(aor_store *st, const char *provider, const char *model, double now);
int aor_store_log_sticky(aor_store *st, const aor_sticky_row *row);
int aor_store_log_sticky_drop(aor_store *st, const char *client, const char *model, double now);
int aor_store_log_reset(aor_store *st, const char *provider /* NULL = all */, double now);
int aor_store_log_reset_key(aor_store *st, const char *provider /* NULL = any */, const char *key,
                            double now);

/* Key fingerprints (docs/store.md "key_secrets"): a one-way digest of each configured
 * key's secret (aor_rstate computes it; never the secret), kept so that a key given a new
 * secret between two runs is known to be a new credential at start, as it is at a SIGHUP
 * (docs/routing.md §12). aor_store_key_fingerprint copies the stored fingerprint of key
 * into out (outlen bytes, cut to fit) and returns 1, 0 when none is stored, -1 on a
 * database error (aor_store_errmsg). aor_store_set_key_fingerprint stores (or replaces)
 * it: 0, or -1 on a database error. Both are for start and reload, not the request path;
 * a set counts as a write (aor_store_writes). */
int aor_store_key_fingerprint(aor_store *st, const char *key, char *out, size_t outlen);
int aor_store_set_key_fingerprint(aor_store *st, const char *key, const char *fingerprint);

/* 1 when the store's path no longer names the file it opened: removed (rm), or replaced
 * by another file (a rename over it, a restore), so SQLite writes into an inode nobody
 * will read again; 0 when it still does, for ":memory:" and URI stores, and for NULL. One
 * stat(2) of the path: a caller about to write an event checks it first (daemon/rstate.c,
 * QA). Other stat errors (EACCES) are 0: not known to be replaced. */
int aor_store_file_changed(const aor_store *st);

/* The path the store was opened with (owned by st), or NULL for NULL. */
const char *aor_store_path(const aor_store *st);

/* Number of events appended (committed) since open; tests count disk writes with it.
 * NULL: 0. */
unsigned long aor_store_writes(const aor_store *st);

/* A row the replay changed because it lay too far in the future (see aor_store_limits). */
typedef struct {
    const char *what;     /* "backoff" or "circuit" */
    const char *provider; /* borrowed: valid during the callback only */
    const char *name;     /* the key name (backoff) or the model ("" for none) (circuit) */
    double until;         /* as stored (Unix seconds; may be NaN or inf in a damaged row) */
    double new_until;     /* as loaded (Unix seconds) */
    int clock_back;       /* backoff: its last failure lay after now (the clock went back) */
} aor_store_clamp;

/* Sanity limits for the state replay loads (docs/store.md "Rows from the future"). A row
 * written under a clock that was ahead (a VM restore, a machine without RTC, a test
 * clock) would otherwise block a key or a circuit for as long as the clock was wrong.
 *  backoff_max_s: the longest backoff window the config allows (the largest of
 *    backoff_max_s, quota_cooldown_s and auth_cooldown_s), seconds. A backoff row whose
 *    last failure lies after now is moved back to now (last_failure = now; until = now +
 *    what was left of its window at its failure, at most backoff_max_s); any other row
 *    ends at now + backoff_max_s at the latest. window_s is cut to backoff_max_s; the
 *    failure count (curve level) is kept. NaN or < 0: backoff rows are not checked.
 *  circuit_max_s: the longest a circuit stays open (breaker_open_s), seconds: an open
 *    circuit ends at now + circuit_max_s at the latest. NaN or < 0: not checked.
 *  clamped: when not NULL, called once for each row changed (c and its strings valid
 *    only during the call), with arg. */
typedef struct {
    double backoff_max_s;
    double circuit_max_s;
    void (*clamped)(const aor_store_clamp *c, void *arg);
    void *arg;
} aor_store_limits;

/* Rebuilds memory at start (§4.5): loads the compacted tables into b, br and s (which
 * should be empty), replays state_events in id order (newest wins), keeps expired backoff
 * rows (they carry the curve level, §4.2), applies lim (NULL: no check) to the backoff
 * rows and circuits, drops circuits whose until <= now; then compacts: rewrites the
 * three tables from memory (breakers: those open at now) and empties state_events, in
 * one transaction, so the rows lim changed are stored changed. Safe to run after a crash
 * at any point (an interrupted compaction rolls back; the events are still there). A file
 * then mostly free pages (over 1024 pages, more than half free) is rewritten with VACUUM.
 * now: Unix seconds.
 * Returns 0, or -1 (message in aor_store_errmsg; errno EINVAL for a NULL argument or a
 * malformed event row, ENOMEM). After a failure the tables may hold part of the state
 * and the database is unchanged: the caller should not start routing on them. */
int aor_store_replay(aor_store *st, aor_backoff *b, aor_breaker *br, aor_sticky *s, double now,
                     const aor_store_limits *lim);

/* Compacts while running (§4.5): rewrites the three tables from b, br and s (the state in
 * memory, which is the truth; breakers: those open at now) and empties state_events, in
 * one transaction, as the start's compaction does. For a long-running aord whose
 * event log would otherwise only grow (daemon/rstate.c calls it every so many events).
 * Disk I/O proportional to the rows. Returns 0, or -1 (aor_store_errmsg; the database is
 * unchanged, errno EINVAL for a NULL argument). now: Unix seconds. */
int aor_store_compact(aor_store *st, aor_backoff *b, aor_breaker *br, aor_sticky *s, double now);

/* Sets how long a write waits for a lock another process holds on the database
 * (sqlite3_busy_timeout), in milliseconds; 5,000 from aor_store_open, for the start.
 * daemon/rstate.c sets a short one once the daemon runs: its writes are made on the
 * event loop, and one held lock (an `sqlite3` shell in a write transaction) froze every
 * client for 5 s per state change (QA). Returns 0, or -1 (NULL st, SQLite error). */
int aor_store_set_busy_timeout(aor_store *st, int ms);

/* Last error text of this store ("" when none; valid until the next call on st). */
const char *aor_store_errmsg(const aor_store *st);

#endif
