/* Sticky routing table per (client, model): spec §5.4, §5.5. */
#include "sticky.h"

#include "map.h"

#include <errno.h>
#include <limits.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

/* One row; row.client/row.model point into strs, row.provider/row.key into a pair.
 * prev/next: the recency list (most recently set or refreshed first). */
typedef struct sticky_entry {
    aor_sticky_row row;
    struct sticky_entry *prev, *next;
    char strs[];
} sticky_entry;

struct aor_sticky {
    aor_map *rows;  /* (client, model) -> sticky_entry */
    aor_map *pairs; /* (provider, key) -> sticky_pair: interned, freed with the table */
    sticky_entry *newest, *oldest;
    size_t max; /* rows kept at most (>= 1) */
};

/* An interned (provider, key): many rows share few pairs, and moving a sticky
 * allocates nothing once its pair has been seen. */
typedef struct {
    const char *provider;
    const char *key;
    char strs[];
} sticky_pair;

aor_sticky *aor_sticky_new(void) {
    aor_sticky *s = calloc(1, sizeof *s);
    if (!s)
        goto fail;
    s->rows = aor_map_new();
    if (!s->rows)
        goto fail_table;
    s->pairs = aor_map_new();
    if (!s->pairs)
        goto fail_rows;
    s->max = AOR_STICKY_MAX_DEFAULT;
    return s;

fail_rows:
    aor_map_free(s->rows, NULL);
fail_table:
    free(s);
fail:
    errno = ENOMEM;
    return NULL;
}

void aor_sticky_free(aor_sticky *s) {
    if (!s)
        return;
    aor_map_free(s->rows, free);
    aor_map_free(s->pairs, free);
    free(s);
}

/* Allocates a struct of `head` bytes followed by a NUL b NUL; *sa and *sb point to the copies.
 * NULL with errno=ENOMEM. */
static void *sticky_alloc2(size_t head, const char *a, const char *b, char **sa, char **sb) {
    size_t la = strlen(a), lb = strlen(b), size;
    if (__builtin_add_overflow(la, lb, &size) || __builtin_add_overflow(size, head + 2, &size)) {
        errno = ENOMEM;
        return NULL;
    }
    char *p = malloc(size);
    if (!p) {
        errno = ENOMEM;
        return NULL;
    }
    *sa = p + head;
    *sb = p + head + la + 1;
    memcpy(*sa, a, la + 1);
    memcpy(*sb, b, lb + 1);
    return p;
}

/* The interned copy of (provider, key), added when missing. NULL with errno=ENOMEM
 * (nothing added). */
static const sticky_pair *sticky_intern(aor_sticky *s, const char *provider, const char *key) {
    sticky_pair *p = aor_map_get(s->pairs, provider, key);
    if (p)
        return p;
    char *sp, *sk;
    p = sticky_alloc2(offsetof(sticky_pair, strs), provider, key, &sp, &sk);
    if (!p)
        return NULL;
    p->provider = sp;
    p->key = sk;
    if (aor_map_put(s->pairs, p->provider, p->key, p, NULL) != 0) {
        free(p);
        return NULL;
    }
    return p;
}

static void lru_unlink(aor_sticky *s, sticky_entry *e) {
    if (e->prev)
        e->prev->next = e->next;
    else
        s->newest = e->next;
    if (e->next)
        e->next->prev = e->prev;
    else
        s->oldest = e->prev;
    e->prev = e->next = NULL;
}

static void lru_push_newest(aor_sticky *s, sticky_entry *e) {
    e->prev = NULL;
    e->next = s->newest;
    if (s->newest)
        s->newest->prev = e;
    else
        s->oldest = e;
    s->newest = e;
}

/* Moves e to the newest end of the recency list. */
static void lru_refresh(aor_sticky *s, sticky_entry *e) {
    if (s->newest == e)
        return;
    lru_unlink(s, e);
    lru_push_newest(s, e);
}

/* Removes and frees e. */
static void sticky_drop(aor_sticky *s, sticky_entry *e) {
    lru_unlink(s, e);
    aor_map_remove(s->rows, e->row.client, e->row.model);
    free(e);
}

/* Drops the least recently used rows until at most s->max remain. */
static void sticky_trim(aor_sticky *s) {
    while (s->oldest && aor_map_count(s->rows) > s->max)
        sticky_drop(s, s->oldest);
}

int aor_sticky_get(const aor_sticky *s, const char *client, const char *model,
                   aor_sticky_row *out) {
    if (!client || !model)
        return 0;
    const sticky_entry *e = aor_map_get(s->rows, client, model);
    if (!e)
        return 0;
    if (out)
        *out = e->row;
    return 1;
}

int aor_sticky_preview_success(const aor_sticky *s, const char *client, const char *model,
                               const char *provider, const char *key, double now,
                               aor_sticky_row *out) {
    if (!client || !model || !provider || !key || !out) {
        errno = EINVAL;
        return -1;
    }
    const sticky_entry *e = aor_map_get(s->rows, client, model);
    int same = e && strcmp(e->row.provider, provider) == 0 && strcmp(e->row.key, key) == 0;
    int streak = 1;
    if (same)
        streak = e->row.streak < 1 ? 1 : e->row.streak < INT_MAX ? e->row.streak + 1 : INT_MAX;
    *out = (aor_sticky_row){
        .client = client,
        .model = model,
        .provider = provider,
        .key = key,
        .last_success = now,
        .streak = streak,
    };
    return !same;
}

int aor_sticky_touch(aor_sticky *s, const char *client, const char *model, const char *provider,
                     const char *key, double now) {
    if (!s || !client || !model || !provider || !key)
        return 0;
    sticky_entry *e = aor_map_get(s->rows, client, model);
    if (!e || strcmp(e->row.provider, provider) != 0 || strcmp(e->row.key, key) != 0)
        return 0;
    e->row.streak = e->row.streak < 1 ? 1 : e->row.streak < INT_MAX ? e->row.streak + 1 : INT_MAX;
    e->row.last_success = now;
    lru_refresh(s, e);
    return 1;
}

int aor_sticky_success(aor_sticky *s, const char *client, const char *model, const char *provider,
                       const char *key, double now) {
    aor_sticky_row row;
    int moved = aor_sticky_preview_success(s, client, model, provider, key, now, &row);
    if (moved < 0)
        return -1;
    if (aor_sticky_restore(s, &row) != 0)
        return -1;
    return moved;
}

int aor_sticky_restore(aor_sticky *s, const aor_sticky_row *row) {
    if (!row || !row->client || !row->model || !row->provider || !row->key) {
        errno = EINVAL;
        return -1;
    }
    const sticky_pair *p = sticky_intern(s, row->provider, row->key);
    if (!p)
        return -1;
    sticky_entry *e = aor_map_get(s->rows, row->client, row->model);
    if (!e) {
        char *sc, *sm;
        e = sticky_alloc2(offsetof(sticky_entry, strs), row->client, row->model, &sc, &sm);
        if (!e)
            return -1; /* the interned pair stays: harmless, reused later */
        e->row.client = sc;
        e->row.model = sm;
        if (aor_map_put(s->rows, e->row.client, e->row.model, e, NULL) != 0) {
            free(e);
            return -1;
        }
        e->prev = e->next = NULL;
        lru_push_newest(s, e);
    } else {
        lru_refresh(s, e);
    }
    e->row.provider = p->provider;
    e->row.key = p->key;
    e->row.last_success = row->last_success;
    e->row.streak = row->streak;
    sticky_trim(s); /* e is the newest: never the one dropped */
    return 0;
}

int aor_sticky_victim(const aor_sticky *s, const char *client, const char *model,
                      aor_sticky_row *out) {
    if (!s || !client || !model || !s->oldest || aor_map_count(s->rows) < s->max ||
        aor_map_get(s->rows, client, model))
        return 0;
    if (out)
        *out = s->oldest->row;
    return 1;
}

int aor_sticky_remove(aor_sticky *s, const char *client, const char *model) {
    if (!s || !client || !model)
        return 0;
    sticky_entry *e = aor_map_get(s->rows, client, model);
    if (!e)
        return 0;
    sticky_drop(s, e);
    return 1;
}

void aor_sticky_set_max(aor_sticky *s, size_t max) {
    if (!s)
        return;
    s->max = max < 1 ? 1 : max;
    sticky_trim(s);
}

size_t aor_sticky_max(const aor_sticky *s) {
    return s ? s->max : 0;
}

typedef struct {
    void (*fn)(const aor_sticky_row *row, void *arg);
    void *arg;
} sticky_visit;

static void sticky_visit_one(const char *a, const char *b, void *val, void *arg) {
    const sticky_visit *v = arg;
    const sticky_entry *e = val;
    v->fn(&e->row, v->arg);
}

void aor_sticky_foreach(const aor_sticky *s, void (*fn)(const aor_sticky_row *row, void *arg),
                        void *arg) {
    sticky_visit v = {fn, arg};
    aor_map_foreach(s->rows, sticky_visit_one, &v);
}

size_t aor_sticky_count(const aor_sticky *s) {
    return aor_map_count(s->rows);
}
