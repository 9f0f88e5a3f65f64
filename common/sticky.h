/* Sticky routing table per (client hash, canonical model) (spec §5.4, §5.5).
 * In memory; the caller persists changes through the store first. Times: Unix seconds. */
#ifndef AOR_STICKY_H
#define AOR_STICKY_H

#include <stddef.h>

typedef struct aor_sticky aor_sticky;

typedef struct {
    const char *client; /* hex SHA-256 of the client's credential; owned by the table */
    const char *model;  /* canonical model */
    const char *provider;
    const char *key;
    double last_success; /* Unix seconds */
    int streak;          /* consecutive successes on this (provider, key) (round-robin) */
} aor_sticky_row;

/* New empty table. NULL with errno=ENOMEM. Free with aor_sticky_free. */
aor_sticky *aor_sticky_new(void);

/* Frees the table and every row (NULL: no-op). */
void aor_sticky_free(aor_sticky *s);

/* Looks up the sticky of (client, model). Returns 1 and fills *out (when not NULL;
 * strings owned by the table and valid until aor_sticky_free: rows are never removed,
 * and provider/key strings are interned and kept even after the sticky moves), or 0
 * when there is none. O(1). */
int aor_sticky_get(const aor_sticky *s, const char *client, const char *model, aor_sticky_row *out);

/* Records a success of (provider, key) for (client, model) at now: the sticky moves
 * there (or stays), streak counts consecutive successes on the same pair (§5.4, §5.5):
 * same pair: streak + 1 (saturating), last_success = now; another pair or no row: the
 * sticky is (provider, key), streak = 1, last_success = now. A failure never moves it
 * (there is no failure call).
 * Returns 1 when the sticky's (provider, key) changed or was created (persist it: log
 * the row from aor_sticky_preview_success first), 0 when it only refreshed
 * last_success/streak (not persisted), -1 with errno=ENOMEM (table unchanged) or
 * errno=EINVAL (a NULL argument). Exactly aor_sticky_preview_success + restore. */
int aor_sticky_success(aor_sticky *s, const char *client, const char *model, const char *provider,
                       const char *key, double now);

/* The common case of aor_sticky_success in one lookup (the request hot path; spec §5.4,
 * docs/performance.md): when (client, model) already sticks to (provider, key), refreshes
 * last_success = now and streak + 1 (saturating) and returns 1; otherwise changes nothing
 * and returns 0 (the sticky moves or is new: the caller persists it and calls
 * aor_sticky_success). NULL arguments: 0. Cannot fail. */
int aor_sticky_touch(aor_sticky *s, const char *client, const char *model, const char *provider,
                     const char *key, double now);

/* Computes the row aor_sticky_success(s, client, model, provider, key, now) would leave,
 * without changing the table (write-ahead, §4.5). *out (required) gets the row; its
 * strings point to the caller's arguments. Returns what aor_sticky_success would return
 * (1: moved/created, 0: refresh only), or -1 with errno=EINVAL (a NULL argument). */
int aor_sticky_preview_success(const aor_sticky *s, const char *client, const char *model,
                               const char *provider, const char *key, double now,
                               aor_sticky_row *out);

/* Puts a row as it was (replay; applying a preview): creates the row or overwrites all
 * of its fields. Copies the strings (they may point into this table). 0, or -1 with
 * errno=ENOMEM (table unchanged) or errno=EINVAL (row or one of its strings NULL). */
int aor_sticky_restore(aor_sticky *s, const aor_sticky_row *row);

/* Calls fn for every row, in no particular order (row valid only during the call). fn
 * must not change the table. */
void aor_sticky_foreach(const aor_sticky *s, void (*fn)(const aor_sticky_row *row, void *arg),
                        void *arg);

/* Number of rows. Can't fail. */
size_t aor_sticky_count(const aor_sticky *s);

#endif
