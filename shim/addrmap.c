/* libaor.so: address -> host record of name resolution (see addrmap.h). */
#include "addrmap.h"

#include "preamble.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

struct map_entry {
    aor_ip ip;
    unsigned char used, synthetic, ambiguous;
    char host[AOR_HOST_MAX + 1];
};

struct aor_addrmap {
    pthread_mutex_t mu;
    size_t cap, n, next; /* next: slot replaced when full (oldest first) */
    struct map_entry *e; /* NULL until the first record */
    atomic_int any;      /* 1 after the first record: lookups skip the lock before */
};

aor_addrmap *aor_addrmap_new(size_t cap) {
    if (cap == 0)
        return NULL;
    aor_addrmap *m = calloc(1, sizeof(*m));
    if (m == NULL)
        return NULL;
    pthread_mutex_init(&m->mu, NULL);
    m->cap = cap;
    return m;
}

void aor_addrmap_free(aor_addrmap *m) {
    if (m == NULL)
        return;
    pthread_mutex_destroy(&m->mu);
    free(m->e);
    free(m);
}

static struct map_entry *find(aor_addrmap *m, const aor_ip *ip) {
    for (size_t i = 0; i < m->n; i++) {
        if (aor_ip_cmp(&m->e[i].ip, ip) == 0)
            return &m->e[i];
    }
    return NULL;
}

int aor_addrmap_record(aor_addrmap *m, const aor_ip *ip, const char *host, int synthetic) {
    size_t hl = host != NULL ? strlen(host) : 0;
    if (m == NULL || ip == NULL || hl == 0 || hl > AOR_HOST_MAX) {
        errno = EINVAL;
        return -1;
    }
    pthread_mutex_lock(&m->mu);
    if (m->e == NULL) {
        m->e = calloc(m->cap, sizeof(*m->e));
        if (m->e == NULL) {
            pthread_mutex_unlock(&m->mu);
            errno = ENOMEM;
            return -1;
        }
    }
    struct map_entry *e = find(m, ip);
    if (e != NULL) {
        if (strcmp(e->host, host) != 0)
            e->ambiguous = 1;
        e->synthetic = (unsigned char)(e->synthetic && synthetic);
        pthread_mutex_unlock(&m->mu);
        return 0;
    }
    if (m->n < m->cap) {
        e = &m->e[m->n++];
    } else {
        e = &m->e[m->next];
        m->next = (m->next + 1) % m->cap;
    }
    memset(e, 0, sizeof(*e));
    e->ip = *ip;
    e->used = 1;
    e->synthetic = synthetic ? 1 : 0;
    memcpy(e->host, host, hl + 1);
    atomic_store_explicit(&m->any, 1, memory_order_release);
    pthread_mutex_unlock(&m->mu);
    return 0;
}

int aor_addrmap_lookup(aor_addrmap *m, const aor_ip *ip, char *host, size_t hostlen,
                       int *synthetic) {
    int rc = 0;
    if (m == NULL || ip == NULL || !atomic_load_explicit(&m->any, memory_order_acquire))
        return 0;
    pthread_mutex_lock(&m->mu);
    struct map_entry *e = m->e != NULL ? find(m, ip) : NULL;
    if (e != NULL) {
        rc = e->ambiguous ? 2 : 1;
        if (synthetic != NULL)
            *synthetic = e->synthetic;
        if (hostlen > 0) {
            const char *name = e->ambiguous ? "" : e->host;
            size_t nl = strlen(name);
            if (nl >= hostlen)
                nl = hostlen - 1;
            memcpy(host, name, nl);
            host[nl] = '\0';
        }
    }
    pthread_mutex_unlock(&m->mu);
    return rc;
}

size_t aor_addrmap_count(aor_addrmap *m) {
    if (m == NULL)
        return 0;
    pthread_mutex_lock(&m->mu);
    size_t n = m->n;
    pthread_mutex_unlock(&m->mu);
    return n;
}

void aor_addrmap_lock(aor_addrmap *m) {
    if (m != NULL)
        pthread_mutex_lock(&m->mu);
}

void aor_addrmap_unlock(aor_addrmap *m) {
    if (m != NULL)
        pthread_mutex_unlock(&m->mu);
}
