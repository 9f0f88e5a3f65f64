/* libaor.so: table of redirected fds (see fdtab.h). */
#include "fdtab.h"

#include <errno.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#define FDTAB_MIN 64
#define FDTAB_HARD_MAX (1u << 24) /* no fd above this is tracked */

struct fdslot {
    _Atomic unsigned long ino; /* 0: not redirected */
    aor_fdinfo info;           /* valid when ino != 0; written under g_mu */
};

struct fdtable {
    /* Atomic (relaxed) although the table is published with release/acquire: close()
     * also runs inside ThreadSanitizer's own reports (its symbolizer closes files), where
     * TSan ignores the acquire, and a plain read of a table published meanwhile looked
     * like a race and deadlocked the report (tests/tsan-stress, about 1 run in 40). */
    _Atomic size_t cap;
    struct fdtable *older; /* replaced tables, kept for lock-free readers */
    struct fdslot slots[];
};

static _Atomic(struct fdtable *) g_tab;

static size_t cap_of(const struct fdtable *t) {
    return atomic_load_explicit(&t->cap, memory_order_relaxed);
}

atomic_int aor_fdtab_any_flag; /* see aor_fdtab_any (fdtab.h) */
static pthread_mutex_t g_mu = PTHREAD_MUTEX_INITIALIZER;
static _Atomic pid_t g_owner; /* the process whose table this is (aor_fdtab_mine) */

int aor_fdtab_mine(void) {
    return getpid() == atomic_load_explicit(&g_owner, memory_order_relaxed);
}

void aor_fdtab_forked(void) {
    atomic_store_explicit(&g_owner, getpid(), memory_order_relaxed);
}

int aor_fdtab_marked(int fd) {
    struct fdtable *t = atomic_load_explicit(&g_tab, memory_order_acquire);
    if (fd < 0 || t == NULL || (size_t)fd >= cap_of(t))
        return 0;
    return atomic_load_explicit(&t->slots[fd].ino, memory_order_relaxed) != 0;
}

/* Grows the table so it holds fd. Caller holds g_mu. */
static int reserve_locked(int fd) {
    struct fdtable *t = atomic_load_explicit(&g_tab, memory_order_relaxed);
    if (fd < 0 || (unsigned)fd >= FDTAB_HARD_MAX) {
        errno = EBADF;
        return -1;
    }
    if (t != NULL && (size_t)fd < cap_of(t))
        return 0;
    struct rlimit rl;
    size_t limit = FDTAB_HARD_MAX;
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY && rl.rlim_cur < limit)
        limit = (size_t)rl.rlim_cur;
    if ((size_t)fd >= limit)
        limit = (size_t)fd + 1; /* the fd exists, so the limit was lowered after it */
    size_t cap = t != NULL ? cap_of(t) : FDTAB_MIN;
    while (cap <= (size_t)fd)
        cap *= 2;
    if (cap > limit)
        cap = limit;
    struct fdtable *nt = calloc(1, sizeof(*nt) + cap * sizeof(nt->slots[0]));
    if (nt == NULL) {
        errno = ENOMEM;
        return -1;
    }
    atomic_store_explicit(&nt->cap, cap, memory_order_relaxed);
    nt->older = t;
    if (t != NULL) {
        for (size_t i = 0; i < cap_of(t); i++) {
            unsigned long ino = atomic_load_explicit(&t->slots[i].ino, memory_order_relaxed);
            if (ino != 0) {
                nt->slots[i].info = t->slots[i].info;
                atomic_store_explicit(&nt->slots[i].ino, ino, memory_order_relaxed);
            }
        }
    }
    atomic_store_explicit(&g_tab, nt, memory_order_release);
    return 0;
}

int aor_fdtab_reserve(int fd) {
    pthread_mutex_lock(&g_mu);
    int rc = reserve_locked(fd);
    pthread_mutex_unlock(&g_mu);
    return rc;
}

int aor_fdtab_set(int fd, const aor_fdinfo *info) {
    if (info == NULL || info->ino == 0) {
        errno = EINVAL;
        return -1;
    }
    pthread_mutex_lock(&g_mu);
    if (reserve_locked(fd) != 0) {
        pthread_mutex_unlock(&g_mu);
        return -1;
    }
    struct fdtable *t = atomic_load_explicit(&g_tab, memory_order_relaxed);
    t->slots[fd].info = *info;
    atomic_store_explicit(&t->slots[fd].ino, info->ino, memory_order_release);
    if (!atomic_load_explicit(&aor_fdtab_any_flag, memory_order_relaxed))
        atomic_store_explicit(&g_owner, getpid(), memory_order_relaxed);
    atomic_store_explicit(&aor_fdtab_any_flag, 1, memory_order_relaxed);
    pthread_mutex_unlock(&g_mu);
    return 0;
}

int aor_fdtab_copy(int from, int newfd) {
    aor_fdinfo info;
    if (!aor_fdtab_get(from, &info)) {
        aor_fdtab_clear(newfd);
        return 0;
    }
    if (aor_fdtab_set(newfd, &info) != 0) {
        int saved = errno;
        aor_fdtab_clear(newfd);
        errno = saved;
        return -1;
    }
    return 0;
}

void aor_fdtab_clear(int fd) {
    struct fdtable *t = atomic_load_explicit(&g_tab, memory_order_acquire);
    if (fd < 0 || t == NULL || (size_t)fd >= cap_of(t))
        return;
    atomic_store_explicit(&t->slots[fd].ino, 0, memory_order_release);
}

void aor_fdtab_clear_range(unsigned int lo, unsigned int hi) {
    struct fdtable *t = atomic_load_explicit(&g_tab, memory_order_acquire);
    if (t == NULL || lo > hi || lo >= cap_of(t))
        return;
    size_t end = hi < cap_of(t) ? (size_t)hi + 1 : cap_of(t);
    for (size_t i = lo; i < end; i++)
        atomic_store_explicit(&t->slots[i].ino, 0, memory_order_release);
}

int aor_fdtab_get(int fd, aor_fdinfo *out) {
    int rc = 0;
    pthread_mutex_lock(&g_mu);
    struct fdtable *t = atomic_load_explicit(&g_tab, memory_order_relaxed);
    if (fd >= 0 && t != NULL && (size_t)fd < cap_of(t)) {
        unsigned long ino = atomic_load_explicit(&t->slots[fd].ino, memory_order_acquire);
        if (ino != 0) {
            if (out != NULL) {
                *out = t->slots[fd].info;
                out->ino = ino;
            }
            rc = 1;
        }
    }
    pthread_mutex_unlock(&g_mu);
    return rc;
}

int aor_fdtab_get_checked(int fd, aor_fdinfo *out) {
    aor_fdinfo info;
    if (!aor_fdtab_get(fd, &info))
        return 0;
    int saved = errno;
    struct stat st;
    int ok = fstat(fd, &st) == 0 && S_ISSOCK(st.st_mode) && (unsigned long)st.st_ino == info.ino;
    errno = saved;
    if (!ok) {
        aor_fdtab_clear(fd);
        return 0;
    }
    if (out != NULL)
        *out = info;
    return 1;
}

void aor_fdtab_set_tcpopt(int fd, int which, int value) {
    pthread_mutex_lock(&g_mu);
    struct fdtable *t = atomic_load_explicit(&g_tab, memory_order_relaxed);
    if (fd >= 0 && t != NULL && (size_t)fd < cap_of(t) &&
        atomic_load_explicit(&t->slots[fd].ino, memory_order_relaxed) != 0) {
        aor_fdinfo *i = &t->slots[fd].info;
        switch (which) {
        case TCP_NODELAY:
            i->nodelay = value != 0;
            break;
        case TCP_KEEPIDLE:
            i->keepidle = value;
            break;
        case TCP_KEEPINTVL:
            i->keepintvl = value;
            break;
        case TCP_KEEPCNT:
            i->keepcnt = value;
            break;
        default:
            break;
        }
    }
    pthread_mutex_unlock(&g_mu);
}

void aor_fdtab_reset(void) {
    pthread_mutex_lock(&g_mu);
    struct fdtable *t = atomic_exchange(&g_tab, NULL);
    while (t != NULL) {
        struct fdtable *older = t->older;
        free(t);
        t = older;
    }
    atomic_store(&aor_fdtab_any_flag, 0);
    pthread_mutex_unlock(&g_mu);
}

void aor_fdtab_lock(void) {
    pthread_mutex_lock(&g_mu);
}

void aor_fdtab_unlock(void) {
    pthread_mutex_unlock(&g_mu);
}

void aor_fdinfo_set_ino(aor_fdinfo *info, unsigned long ino) {
    info->ino = ino;
    info->local_port = 32768 + (int)(ino % 28232u);
}
