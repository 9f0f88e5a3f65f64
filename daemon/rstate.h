/* The daemon's routing state: backoff, circuit breakers and sticky tables in memory,
 * written ahead to the SQLite store (spec §4.5: the event is committed before memory
 * changes; nothing is written when nothing changed), and the usage snapshots of §6,
 * which live in memory only (short-lived, see common/usage.h). */
#ifndef AOR_RSTATE_H
#define AOR_RSTATE_H

#include "backoff.h"
#include "breaker.h"
#include "classify.h"
#include "config.h"
#include "route.h"
#include "sticky.h"
#include "store.h"
#include "usage.h"

typedef struct aor_rstate aor_rstate;

/* Opens the store at db_path, replays it (§4.5) and builds the tables with the
 * parameters of cfg; a key whose secret changed since the store last saw it (its
 * fingerprint, docs/store.md) has its backoff rows dropped, as at a SIGHUP. Rows from the future
 * are limited (aor_store_limits, docs/store.md "Rows from the future"): no backoff window ends
 * after now + the largest of backoff_max_s, quota_cooldown_s and auth_cooldown_s, no circuit after
 * now + breaker_open_s, a failure dated after now is taken as a failure now; one warning names the
 * rows changed (provider, key or model). now: Unix seconds. On error returns NULL with a message in
 * err (errlen bytes). */
aor_rstate *aor_rstate_open(const aor_config *cfg, const char *db_path, double now, char *err,
                            size_t errlen);
void aor_rstate_close(aor_rstate *rs);

/* Before a clean stop (SIGTERM): when the state file was removed or replaced since the
 * last state change, the state in memory is written to a new file at its path (as at the
 * next change, docs/routing.md §11), and when writes had failed (disk full) and memory is
 * ahead of the store, it is written over the store. now: Unix seconds. Errors are
 * logged; nothing is returned. */
void aor_rstate_sync(aor_rstate *rs, double now);

/* Points the state at a new config (SIGHUP reload; cfg must outlive the state or the next
 * call). The backoff and breaker parameters of cfg apply from now on (see
 * aor_backoff_set_params / aor_breaker_set_params: running windows and open circuits keep
 * their until; the next failure uses the new values). Tables keep their rows, except for
 * a key whose secret differs from the previous config's key of the same name: it is a
 * new credential, so its backoff rows (every provider it serves; written ahead as a key
 * reset, §4.5) and its usage snapshots are dropped, and an info line names the key (never
 * the secret). now: Unix seconds. Returns 0, or -1 when something could not be applied
 * (logged; the config pointer is switched anyway). */
int aor_rstate_set_config(aor_rstate *rs, const aor_config *cfg, double now);

/* Closes the circuit of (provider, model) if it is not closed (written ahead to the event
 * log, §4.5; logged naming key, the key that answered). For the probe of a half-open
 * circuit whose answer has started well (a stream): the circuit closes then, while the
 * success of the attempt (backoff row, sticky) waits for the answer's clean end.
 * Returns 0. When the store cannot write, the circuit closes in memory anyway (see
 * aor_rstate_write_errors). */
int aor_rstate_close_circuit(aor_rstate *rs, const char *provider, const char *key,
                             const char *model, double now);

/* Records the outcome of one upstream attempt on (provider, key) for (client, model).
 * OK: success (backoff row cleared, circuit closed, sticky moved); retryable kinds
 * (rate, transient, quota, auth): backoff and a breaker failure (spec §4.4), except,
 * when own_credential has AOR_RSTATE_OWN (the key is the client's own credential passed
 * through, §3.3), a failure of that client's account: quota, auth, and a rate failure
 * that came as a 429 (own_credential also has AOR_RSTATE_429) — its account says nothing
 * of the provider's health, and one client's limits or bad token must not open the
 * circuit for the others (QA); an overload (529, 503, an error event) still counts.
 * client/config kinds: nothing.
 * hint_s: the verdict's retry hint or -1. started: when the attempt was sent (Unix s).
 * A failure of an attempt sent no later than the row's latest failure was in flight
 * when that failure set the window: it is the same episode, not new evidence, so it
 * does not escalate the curve (it may only lengthen the window: a longer hint, the
 * quota/auth cooldown, or the row's own window again from now when it has run out; the
 * row then shows that window; its last failure stays the episode's) — otherwise N parallel
 * requests failing in one outage would double the window N times. It still counts for the circuit
 * breaker (§4.4 counts retryable failures, not episodes: a burst of 503s on a provider with
 * one key opens its circuit), except a 429 (own_credential has AOR_RSTATE_429): the key's
 * own throttle, counted once per episode, so parallel requests on one throttled key do not
 * open the model's circuit and shut out the provider's healthy keys (QA: 8 parallel clients,
 * key A throttled, half of them got 429 aor_all_backed_off with key B fine). A half-open
 * circuit is reopened only by the probe's failure (started at or after its open-until),
 * not by a late failure of a request sent before.
 * Returns 0, or -1 when memory ran out. When the store cannot write an event, the change
 * is still applied in memory, so routing keeps its backoff, circuits and sticky; only
 * that change's durability is lost (counted, logged: aor_rstate_write_errors). */
/* 1 when a failure of kind on (own_credential as for aor_rstate_record) counts for the
 * circuit breaker (§4.4): every retryable kind, except a client's own account's failure
 * (quota, auth, a 429) on its passed-through credential. 0 for other kinds. */
int aor_rstate_breaker_counts(aor_kind kind, int own_credential);

#define AOR_RSTATE_OWN 1 /* own_credential: the client's own credential, passed through */
#define AOR_RSTATE_429 2 /* own_credential: the failure was a 429 answer (any key) */
int aor_rstate_record(aor_rstate *rs, const char *provider, const char *key, const char *model,
                      const char *client, aor_kind kind, double hint_s, double started, double now,
                      int own_credential);

/* Admin reset / clear (spec §8), written ahead (§4.5) and logged:
 *  key NULL: clears the backoff rows and circuits of provider (NULL: all);
 *  key set: clears only the backoff rows of (provider, key) (provider NULL: of key with
 *    every provider); circuits (per provider and model) are kept.
 * Either way the usage snapshots of the keys covered are dropped too (an exhausted usage
 * window holds a key back like backoff, §6; in memory only, nothing written), and
 * *usage_cleared (when not NULL) receives how many of them were exhausted at now (keys
 * that were held back by their usage and are now free).
 * now: Unix seconds. Returns the number of backoff rows and circuits removed (also when
 * the store could not write the reset: memory is cleared anyway, see
 * aor_rstate_write_errors). */
int aor_rstate_reset(aor_rstate *rs, const char *provider, const char *key, double now,
                     int *usage_cleared);

/* Route context over the current tables, usage snapshots included (valid until the
 * next state change). */
aor_route_ctx aor_rstate_route_ctx(aor_rstate *rs);

aor_backoff *aor_rstate_backoff(aor_rstate *rs);
aor_breaker *aor_rstate_breaker(aor_rstate *rs);
aor_sticky *aor_rstate_sticky(aor_rstate *rs);

/* The usage snapshot table (spec §6; in memory only, not persisted: no store write).
 * The proxy feeds it with aor_usage_observe; aor_rstate_route_ctx passes it to routing. */
aor_usage *aor_rstate_usage(aor_rstate *rs);

/* Keeps reason (a verdict's reason: short text, no secret; copied, cut at 159 bytes) as
 * the text of the latest failure of (provider, key), for the "last failure" of an
 * all-backed-off answer (spec §5.6). In memory only; at most 4,096 pairs are kept (then
 * the table starts over). Returns 0, or -1 (ENOMEM: nothing kept). */
int aor_rstate_note_failure(aor_rstate *rs, const char *provider, const char *key,
                            const char *reason);

/* The text aor_rstate_note_failure kept for (provider, key), or NULL (borrowed: valid
 * until the next note or aor_rstate_close). */
const char *aor_rstate_failure_text(const aor_rstate *rs, const char *provider, const char *key);

/* Number of event writes since start (tests and /metrics). */
unsigned long aor_rstate_writes(const aor_rstate *rs);

/* How long a state write waits for a lock another process holds on the database once
 * aord runs (milliseconds; aor_store_set_busy_timeout): the write is on the event loop.
 * Past it the write fails like a full disk (the change is applied in memory, counted in
 * aor_state_write_errors_total and logged). */
#define AOR_RSTATE_BUSY_MS 50

/* Events appended between two compactions of the store while aord runs, at least
 * (rstate.c maybe_compact; also at least twice the rows of the tables). */
#define AOR_RSTATE_COMPACT_EVERY 10000

/* Sets the function that takes the single-instance lock on the state file at path
 * (daemon/main.c), called when the state file was removed or replaced while aord ran (or
 * a new one could not be made before) and the state is about to be written into a new
 * one there, before it is opened. It returns 0 when the lock is held on the file at path
 * (taken now, the old one let go, or held already), -1 with a message in err (errlen
 * bytes, not logged: the caller logs it) when not: then the state is not moved there.
 * NULL (the default): no lock is moved. */
void aor_rstate_set_relock(aor_rstate *rs,
                           int (*relock)(const char *path, char *err, size_t errlen, void *arg),
                           void *arg);

/* Tests: compact after this many events instead of AOR_RSTATE_COMPACT_EVERY. */
void aor_rstate_set_compact_every(aor_rstate *rs, unsigned long events);

/* Number of state events the store could not write since start (disk full, read-only
 * file system): their changes were applied in memory only (/metrics
 * aor_state_write_errors_total; docs/routing.md §11). */
unsigned long aor_rstate_write_errors(const aor_rstate *rs);

#endif
