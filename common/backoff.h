/* Backoff table: per (provider, key) failure windows (spec §4.2, §4.3 hint use).
 *
 * The table is in memory; durability (§4.5) is the caller's job: it writes the event
 * to the store before calling a mutating function here, then calls it. All times are
 * Unix seconds as double (fractions allowed); `now` always comes from the caller so
 * tests inject their clock. */
#ifndef AOR_BACKOFF_H
#define AOR_BACKOFF_H

#include "types.h"

typedef struct aor_backoff aor_backoff;

typedef struct {
    double initial_s;        /* backoff_initial_s, first window (5) */
    double max_s;            /* backoff_max_s, cap (86400) */
    double quota_cooldown_s; /* flat window for AOR_KIND_QUOTA (120) */
    double auth_cooldown_s;  /* flat window for AOR_KIND_AUTH (120) */
} aor_backoff_params;

/* One row, as stored in the `backoff` table and shown by /admin/api/state. */
typedef struct {
    const char *provider; /* owned by the table; valid until the row is removed */
    const char *key;
    double until;      /* Unix seconds when the window ends */
    double window_s;   /* length of the window set by the latest failure */
    int failure_count; /* failures since the last success (the curve level) */
    aor_kind last_error_kind;
    double last_failure; /* Unix seconds of the latest failure */
} aor_backoff_row;

/* New empty table; params are copied. Returns NULL with errno=ENOMEM, or errno=EINVAL
 * when a parameter is not finite, initial_s <= 0, max_s < initial_s or a cooldown < 0.
 * Free with aor_backoff_free. */
aor_backoff *aor_backoff_new(const aor_backoff_params *params);

/* Replaces the parameters (SIGHUP reload): the checks of aor_backoff_new. Existing rows
 * keep their until, window_s and failure_count (a running window is not shortened or
 * lengthened); the next failure computes its window with the new parameters, at the
 * row's curve level. Returns 0, or -1 with errno=EINVAL (b NULL or a bad parameter;
 * table unchanged). */
int aor_backoff_set_params(aor_backoff *b, const aor_backoff_params *params);

/* Frees the table and every row (NULL: no-op). */
void aor_backoff_free(aor_backoff *b);

/* Computes the row aor_backoff_fail(b, provider, key, kind, hint_s, now, ...) would
 * produce, WITHOUT changing the table (rules: see aor_backoff_fail). For the write-ahead
 * of §4.5: the daemon calls preview, logs *out to the store, then applies it with
 * aor_backoff_restore(b, out); aor_backoff_fail is exactly preview + restore.
 * out: required; out->provider and out->key point to the caller's provider/key
 *   arguments (not to the table), so they live as long as those do.
 * Returns 0, or -1 with errno=EINVAL (kind not rate/transient/quota/auth, or a NULL
 * argument); *out is then unspecified. */
int aor_backoff_preview(const aor_backoff *b, const char *provider, const char *key, aor_kind kind,
                        double hint_s, double now, aor_backoff_row *out);

/* Records a failure of kind `kind` at `now`.
 * hint_s: a sane retry hint in seconds (> 0), or <= 0 / NaN for none; a hint over max_s is
 *   treated as max_s. Ignored for quota/auth (flat cooldowns).
 * Curve (§4.2): rate/transient: failure_count += 1; window = hint when given, else
 *   initial_s * 2^(failure_count-1) capped at max_s — escalation keys on the row
 *   existing, not on the previous window still running. quota/auth: window = the flat
 *   cooldown, never escalates. A new failure never shortens a running window:
 *   until = max(old until, now + window).
 * failure_count saturates at INT_MAX; the curve exponent is capped so huge counts stay
 * at max_s. A quota/auth failure also adds 1 to failure_count, so a later rate failure
 * continues the curve above it. window_s is the length of the window in force: the one
 * this failure computed (curve level, hint or cooldown), or, when a running window ends
 * later (until kept), that window's window_s, so until - window_s is when it started.
 * last_error_kind is this failure's kind either way.
 * out: if not NULL, receives the row after the change (pointers owned by the table).
 * Returns 0, or -1 with errno=ENOMEM (table unchanged). kind OK/CLIENT/CONFIG or a NULL
 * provider/key: errno=EINVAL (table unchanged). */
int aor_backoff_fail(aor_backoff *b, const char *provider, const char *key, aor_kind kind,
                     double hint_s, double now, aor_backoff_row *out);

/* Records a success: removes the row (the next failure starts the curve again at
 * initial_s, §4.2). Returns 1 if a row existed (state changed: log it first), 0 if not.
 * Can't fail. */
int aor_backoff_success(aor_backoff *b, const char *provider, const char *key);

/* Removes every row of `provider` (NULL: every row) (admin reset, §8). Returns how many
 * were removed. Can't fail. */
int aor_backoff_reset(aor_backoff *b, const char *provider);

/* Removes the row of (provider, key); provider NULL: key's rows of every provider (a key
 * may serve several). For the per-key admin reset and a key whose secret changed
 * (docs/routing.md). Returns how many were removed (0 for a NULL b or key). Can't fail. */
int aor_backoff_reset_key(aor_backoff *b, const char *provider, const char *key);

/* 1 when (provider, key) is in a running window at `now` (until > now), and sets
 * *until when not NULL; 0 otherwise. Expired rows stay (they keep the curve level). */
int aor_backoff_blocked(const aor_backoff *b, const char *provider, const char *key, double now,
                        double *until);

/* Looks a row up. Returns 1 and fills *out (when not NULL; strings owned by the table,
 * valid until the row is removed), or 0 when there is none. */
int aor_backoff_get(const aor_backoff *b, const char *provider, const char *key,
                    aor_backoff_row *out);

/* Puts a row as it was (replay at start, §4.5; applying a preview). Creates the row or
 * overwrites every field of the existing one; copies the strings (row->provider/key may
 * point anywhere, including into this table). Returns 0, or -1 with errno=ENOMEM (table
 * unchanged) or errno=EINVAL (row, provider or key NULL). Overwriting an existing row
 * can't fail. */
int aor_backoff_restore(aor_backoff *b, const aor_backoff_row *row);

/* Calls fn for every row (active or expired), in no particular order. fn must not
 * change the table; row and its strings are valid only during the call. */
void aor_backoff_foreach(const aor_backoff *b, void (*fn)(const aor_backoff_row *row, void *arg),
                         void *arg);

#endif
