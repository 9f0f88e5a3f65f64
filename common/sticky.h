/* Sticky routing table per (client hash, canonical model) (spec §5.4, §5.5).
 * In memory; the caller persists changes through the store first. Times: Unix seconds.
 * The table holds at most a maximum of rows (AOR_STICKY_MAX_DEFAULT unless set): a new
 * row beyond it drops the least recently used one (set or refreshed longest ago), so a
 * program that sends ever new model names cannot grow aord without bound
 * (docs/store.md "Sticky rows"). */
#ifndef AOR_STICKY_H
#define AOR_STICKY_H

#include <stddef.h>

typedef struct aor_sticky aor_sticky;

/* Rows a new table keeps at most: ~250 bytes each in memory and in the state file (so
 * ~25 MB at most), far more than a user's credentials times the models they use, and the
 * scale the routing benchmark measures (issue 5: 100,000 sticky rows). */
#define AOR_STICKY_MAX_DEFAULT 100000

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
 * strings owned by the table: client/model valid until the row is removed or dropped,
 * provider/key until aor_sticky_free, being interned and kept even after the sticky
 * moves), or 0 when there is none. O(1). Does not count as a use of the row. */
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
 * of its fields, and makes it the most recently used. A new row that takes the table
 * over its maximum drops the least recently used rows (never this one); callers that
 * persist a drop ask aor_sticky_victim first. Copies the strings (they may point into
 * this table). 0, or -1 with errno=ENOMEM (table unchanged) or errno=EINVAL (row or one
 * of its strings NULL). */
int aor_sticky_restore(aor_sticky *s, const aor_sticky_row *row);

/* The row that adding (client, model) would drop: returns 1 and fills *out (when not
 * NULL; strings owned by the table, valid until that row is removed) when the table is
 * at its maximum and has no row for (client, model); else 0 (also for NULL arguments).
 * O(1). The caller logs the drop (aor_store_log_sticky_drop), then aor_sticky_remove. */
int aor_sticky_victim(const aor_sticky *s, const char *client, const char *model,
                      aor_sticky_row *out);

/* Removes the row of (client, model) (client/model may point into that row). 1 when
 * there was one, 0 when not (or a NULL argument). O(1). */
int aor_sticky_remove(aor_sticky *s, const char *client, const char *model);

/* Sets the most rows the table keeps (values below 1 are taken as 1) and drops the
 * least recently used rows over it at once (not persisted: for tests and benchmarks;
 * aord keeps the default). */
void aor_sticky_set_max(aor_sticky *s, size_t max);

/* The most rows the table keeps (0 for NULL). */
size_t aor_sticky_max(const aor_sticky *s);

/* Calls fn for every row, in no particular order (row valid only during the call). fn
 * must not change the table. */
void aor_sticky_foreach(const aor_sticky *s, void (*fn)(const aor_sticky_row *row, void *arg),
                        void *arg);

/* Number of rows. Can't fail. */
size_t aor_sticky_count(const aor_sticky *s);

#endif
