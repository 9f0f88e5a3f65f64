/* Hash map with string keys (one string, or a pair of strings such as (provider, key)),
 * open addressing with linear probing and backward-shift deletion: O(1) average lookups,
 * no tombstones, no allocation on lookup. Used by the state tables (backoff, breakers,
 * sticky; spec §4.2, §4.4, §5.4) and free for any module to reuse. See docs/map.md.
 *
 * Keys are BORROWED: the map stores the caller's key pointers, not copies. The strings
 * must stay valid and unchanged while the entry is in the map; the usual pattern is a
 * value that holds its own key strings (one allocation: struct + strings), freed after
 * it leaves the map. A key is the pair (a, b); b == NULL means a one-string key and is
 * the same key as (a, ""). Values are non-NULL pointers owned by the caller.
 *
 * Not thread-safe (aord is single-threaded). */
#ifndef AOR_MAP_H
#define AOR_MAP_H

#include <stddef.h>

typedef struct aor_map aor_map;

/* New empty map. Returns NULL with errno=ENOMEM. Free with aor_map_free. */
aor_map *aor_map_new(void);

/* Frees the map. When free_val is not NULL it is called once for every value still in
 * the map (after which neither the value nor its keys are touched). NULL m: no-op. */
void aor_map_free(aor_map *m, void (*free_val)(void *val));

/* Number of entries. Can't fail. */
size_t aor_map_count(const aor_map *m);

/* Value stored under (a, b), or NULL when there is none. a must not be NULL. */
void *aor_map_get(const aor_map *m, const char *a, const char *b);

/* Stores val under (a, b). a and b (b may be NULL) are borrowed, see above; val must
 * not be NULL. When the key is already present its value AND its key pointers are
 * replaced by the new ones (so the old value may own the old key strings and be freed
 * by the caller afterwards); *old, when old is not NULL, receives the previous value or
 * NULL. Returns 0, or -1 with errno=ENOMEM (growing failed; map unchanged) or
 * errno=EINVAL (a or val NULL). */
int aor_map_put(aor_map *m, const char *a, const char *b, void *val, void **old);

/* Removes (a, b). Returns the value that was stored (the caller frees it), or NULL
 * when there was none. Never shrinks, never fails. */
void *aor_map_remove(aor_map *m, const char *a, const char *b);

/* Calls fn for every entry, in no particular order. fn must not change the map. */
void aor_map_foreach(const aor_map *m,
                     void (*fn)(const char *a, const char *b, void *val, void *arg), void *arg);

/* Removes every entry for which pred returns nonzero; calls free_val (when not NULL) on
 * each removed value after it left the map. pred is called exactly once per entry and
 * must not change the map. Returns how many entries were removed. */
size_t aor_map_remove_if(aor_map *m,
                         int (*pred)(const char *a, const char *b, void *val, void *arg), void *arg,
                         void (*free_val)(void *val));

#endif
