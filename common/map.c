/* Open-addressing hash map with borrowed string-pair keys (see map.h). */
#include "map.h"

#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define XXH_INLINE_ALL /* header-only: no library to map at run time */
#include <xxhash.h>

#define MAP_MIN_CAP 16

typedef struct {
    uint64_t hash;
    const char *a;
    const char *b; /* never NULL inside the table: NULL is stored as "" */
    void *val;     /* NULL: empty slot */
} map_slot;

struct aor_map {
    map_slot *slots;
    size_t cap; /* 0 or a power of two */
    size_t count;
};

/* XXH3 (libxxhash, inlined) of b, seeded with XXH3 of a: distinct pairs such as
 * (a="x", b="y") and (a="xy", b="") hash apart. Keys are ids up to ~100 bytes, hashed
 * several times per request; byte-at-a-time FNV was ~3,000 instructions of each
 * request (docs/performance.md). */
static uint64_t map_hash(const char *a, const char *b) {
    return XXH3_64bits_withSeed(b, strlen(b), XXH3_64bits(a, strlen(a)));
}

aor_map *aor_map_new(void) {
    aor_map *m = calloc(1, sizeof *m);
    if (!m)
        errno = ENOMEM;
    return m;
}

void aor_map_free(aor_map *m, void (*free_val)(void *val)) {
    if (!m)
        return;
    if (free_val) {
        for (size_t i = 0; i < m->cap; i++)
            if (m->slots[i].val)
                free_val(m->slots[i].val);
    }
    free(m->slots);
    free(m);
}

size_t aor_map_count(const aor_map *m) {
    return m->count;
}

/* Slot holding (a, b), or the empty slot where it would go. Needs cap > 0. */
static size_t map_find(const aor_map *m, uint64_t h, const char *a, const char *b) {
    size_t mask = m->cap - 1;
    size_t i = (size_t)h & mask;
    while (m->slots[i].val) {
        const map_slot *s = &m->slots[i];
        if (s->hash == h && strcmp(s->a, a) == 0 && strcmp(s->b, b) == 0)
            return i;
        i = (i + 1) & mask;
    }
    return i;
}

/* Rehashes into ncap slots. 0, or -1 with errno=ENOMEM (map unchanged). */
static int map_grow(aor_map *m, size_t ncap) {
    if (ncap > SIZE_MAX / sizeof(map_slot)) {
        errno = ENOMEM;
        return -1;
    }
    map_slot *ns = calloc(ncap, sizeof *ns);
    if (!ns) {
        errno = ENOMEM;
        return -1;
    }
    size_t mask = ncap - 1;
    for (size_t i = 0; i < m->cap; i++) {
        if (!m->slots[i].val)
            continue;
        size_t j = (size_t)m->slots[i].hash & mask;
        while (ns[j].val)
            j = (j + 1) & mask;
        ns[j] = m->slots[i];
    }
    free(m->slots);
    m->slots = ns;
    m->cap = ncap;
    return 0;
}

void *aor_map_get(const aor_map *m, const char *a, const char *b) {
    if (!m->cap || !a)
        return NULL;
    if (!b)
        b = "";
    size_t i = map_find(m, map_hash(a, b), a, b);
    return m->slots[i].val;
}

int aor_map_put(aor_map *m, const char *a, const char *b, void *val, void **old) {
    if (!a || !val) {
        errno = EINVAL;
        return -1;
    }
    if (!b)
        b = "";
    uint64_t h = map_hash(a, b);
    if (m->cap) {
        size_t i = map_find(m, h, a, b);
        if (m->slots[i].val) {
            if (old)
                *old = m->slots[i].val;
            m->slots[i].a = a;
            m->slots[i].b = b;
            m->slots[i].val = val;
            return 0;
        }
    }
    /* Keep the load factor at or under 3/4 so probes stay short and an empty slot
     * always ends a probe sequence. */
    if ((m->count + 1) > m->cap / 4 * 3) {
        if (m->cap > SIZE_MAX / 2) {
            errno = ENOMEM;
            return -1;
        }
        if (map_grow(m, m->cap ? m->cap * 2 : MAP_MIN_CAP) != 0)
            return -1;
    }
    size_t i = map_find(m, h, a, b);
    m->slots[i] = (map_slot){.hash = h, .a = a, .b = b, .val = val};
    m->count++;
    if (old)
        *old = NULL;
    return 0;
}

/* Empties slot i and shifts the following entries of its cluster back so every entry
 * stays reachable from its home slot (no tombstones). Entries only move from later
 * positions of the same cluster to earlier ones. */
static void map_delete_at(aor_map *m, size_t i) {
    size_t mask = m->cap - 1;
    size_t j = i;
    for (;;) {
        j = (j + 1) & mask;
        if (!m->slots[j].val)
            break;
        size_t k = (size_t)m->slots[j].hash & mask;
        /* Entry j stays when its home k lies cyclically in (i, j]. */
        int stays = i <= j ? (i < k && k <= j) : (i < k || k <= j);
        if (!stays) {
            m->slots[i] = m->slots[j];
            i = j;
        }
    }
    m->slots[i] = (map_slot){0};
    m->count--;
}

void *aor_map_remove(aor_map *m, const char *a, const char *b) {
    if (!m->cap || !a)
        return NULL;
    if (!b)
        b = "";
    size_t i = map_find(m, map_hash(a, b), a, b);
    void *val = m->slots[i].val;
    if (val)
        map_delete_at(m, i);
    return val;
}

void aor_map_foreach(const aor_map *m,
                     void (*fn)(const char *a, const char *b, void *val, void *arg), void *arg) {
    for (size_t i = 0; i < m->cap; i++)
        if (m->slots[i].val)
            fn(m->slots[i].a, m->slots[i].b, m->slots[i].val, arg);
}

size_t aor_map_remove_if(aor_map *m,
                         int (*pred)(const char *a, const char *b, void *val, void *arg), void *arg,
                         void (*free_val)(void *val)) {
    if (!m->count)
        return 0;
    size_t mask = m->cap - 1;
    /* Start the scan just after an empty slot (one exists: load <= 3/4). No cluster
     * crosses that slot, and a deletion only moves entries from later scan positions to
     * the current one, so re-checking the current slot visits every entry once. */
    size_t start = 0;
    while (m->slots[start].val)
        start++;
    size_t removed = 0;
    for (size_t n = 1; n <= m->cap; n++) {
        size_t i = (start + n) & mask;
        while (m->slots[i].val && pred(m->slots[i].a, m->slots[i].b, m->slots[i].val, arg)) {
            void *val = m->slots[i].val;
            map_delete_at(m, i);
            if (free_val)
                free_val(val);
            removed++;
        }
    }
    return removed;
}
