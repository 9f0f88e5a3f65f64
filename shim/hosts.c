/* libaor.so: intercepted names and addresses (see hosts.h). */
#include "hosts.h"

#include "addrmap.h"
#include "env.h"
#include "fallback.h"
#include "hostlist.h"
#include "preamble.h"
#include "pubfile.h"
#include "real.h"
#include "tick.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <stdint.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

static aor_hostlist *g_static; /* built-in or AOR_HOSTS; read-only after init */
/* 1 when AOR_HOSTS is set (even empty): g_static is then the whole list of intercepted
 * hosts, and a published entry counts only for a host on it (spec §2 "AOR_HOSTS
 * overrides"). 0: built-in list plus every published host. Read-only after init. */
static int g_env_hosts;
static aor_addrmap *g_map;                        /* addresses resolved in this process */
_Atomic unsigned char aor_hosts_ports[65536 / 8]; /* see aor_hosts_port_maybe */

/* The published set: pointer swapped under g_pub_mu; readers hold g_pub_mu. */
static pthread_mutex_t g_pub_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_mutex_t g_reload_mu = PTHREAD_MUTEX_INITIALIZER; /* one reloader */
static aor_pubset *g_pub;
static atomic_int g_pub_present;         /* g_pub != NULL, readable without the lock */
static atomic_long g_checked = LONG_MIN; /* second (time()) of the last check */

/* The name filter: two lock-free bit sets over the hosts of g_static and g_pub, so a
 * program's own lookups and connections are told apart without normalising, scanning
 * the lists or taking g_pub_mu (docs/performance.md, shim cost). A name passes when
 * both say maybe; only then do the lists decide.
 *  - g_lens: bit n set when a host of n bytes (normalised) is in the sets.
 *  - g_bloom: a Bloom filter (2 of 2048 bits per host) of each host's folded bytes,
 *    for the names whose length an intercepted host shares (api.github.com has
 *    api.openai.com's). Folding sets bit 5 of every byte: 'A'..'Z' become 'a'..'z',
 *    which is all aor_host_normalize changes in a name it accepts, so a name and its
 *    normalised form fold alike; a name it rejects may pass, and the lists say no.
 *    With the ~10 built-in hosts about 1 in 10,000 other names of their lengths passes;
 *    with hundreds of hosts a few %: only speed, the lists still decide. */
#define LEN_WORDS ((AOR_HOST_MAX + 64) / 64)
#define BLOOM_BITS 2048u
#define BLOOM_WORDS (BLOOM_BITS / 64)
#define FILTER_WORDS (LEN_WORDS + BLOOM_WORDS)
static _Atomic uint64_t g_filter[FILTER_WORDS]; /* g_lens, then g_bloom */
static uint64_t g_static_filter[FILTER_WORDS];  /* read-only after init */
#define g_lens (g_filter)
#define g_bloom (g_filter + LEN_WORDS)

/* Hash of the len bytes of name, folded (above); 8 bytes per step. */
static uint64_t name_hash(const char *name, size_t len) {
    const uint64_t fold = 0x2020202020202020ull, mul = 0x9e3779b97f4a7c15ull;
    uint64_t h = (uint64_t)len * mul, w;
    size_t i = 0;
    for (; i + 8 <= len; i += 8) {
        memcpy(&w, name + i, 8);
        h = (h ^ (w | fold)) * mul;
        h ^= h >> 29;
    }
    if (i < len) {
        w = 0;
        for (size_t k = 0; i + k < len; k++)
            w |= (uint64_t)((unsigned char)name[i + k] | 0x20) << (8 * k);
        h = (h ^ w) * mul;
        h ^= h >> 29;
    }
    return h * mul;
}

static unsigned bloom_bit(uint64_t h, int which) {
    return (unsigned)(which ? h >> 40 : h >> 52) & (BLOOM_BITS - 1);
}

static void filter_of(const aor_hostlist *l, uint64_t *bits) {
    for (size_t i = 0; l != NULL && i < aor_hostlist_count(l); i++) {
        const char *name = aor_hostlist_name(l, i);
        size_t n = strlen(name);
        if (n > AOR_HOST_MAX)
            continue;
        bits[n >> 6] |= (uint64_t)1 << (n & 63);
        uint64_t h = name_hash(name, n);
        for (int k = 0; k < 2; k++) {
            unsigned b = bloom_bit(h, k);
            bits[LEN_WORDS + (b >> 6)] |= (uint64_t)1 << (b & 63);
        }
    }
}

/* Makes the filter that of g_static and s. Caller holds g_pub_mu and swaps g_pub
 * between the two steps: readers see the old set's bits and the new one's meanwhile, so
 * a host in either is never skipped. */
static void filter_widen(const aor_pubset *s, uint64_t *out) {
    memcpy(out, g_static_filter, sizeof g_static_filter);
    if (s != NULL && !g_env_hosts) /* with AOR_HOSTS no published name is intercepted */
        filter_of(aor_pubset_hosts(s), out);
    for (size_t w = 0; w < FILTER_WORDS; w++)
        atomic_fetch_or_explicit(&g_filter[w], out[w], memory_order_release);
}

static void filter_settle(const uint64_t *bits) {
    for (size_t w = 0; w < FILTER_WORDS; w++)
        atomic_store_explicit(&g_filter[w], bits[w], memory_order_release);
}

static int filter_bit(const _Atomic uint64_t *words, unsigned n) {
    return (int)((atomic_load_explicit(&words[n >> 6], memory_order_acquire) >> (n & 63)) & 1);
}

/* 0 when name (len bytes) cannot be an intercepted host once normalised: no host has
 * its length, or the Bloom filter has not seen it. */
static int name_possible(const char *name, size_t len) {
    if (len > 0 && name[len - 1] == '.')
        len--; /* the normalised form drops one trailing dot */
    if (len > AOR_HOST_MAX || !filter_bit(g_lens, (unsigned)len))
        return 0;
    uint64_t h = name_hash(name, len);
    return filter_bit(g_bloom, bloom_bit(h, 0)) && filter_bit(g_bloom, bloom_bit(h, 1));
}
static struct {
    int present;
    dev_t dev;
    ino_t ino;
    off_t size;
    struct timespec mtim;
} g_pub_id; /* under g_reload_mu */

static void port_set(int port) {
    if (port > 0 && port < 65536)
        atomic_fetch_or_explicit(&aor_hosts_ports[port >> 3], (unsigned char)(1u << (port & 7)),
                                 memory_order_relaxed);
}

static int port_bit(int port) {
    if (port <= 0 || port >= 65536)
        return 0;
    return (atomic_load_explicit(&aor_hosts_ports[port >> 3], memory_order_relaxed) >> (port & 7)) &
           1;
}

void aor_hosts_init(void) {
    const char *spec = getenv("AOR_HOSTS");
    int nbad = 0;
    /* Called once, from init_once; a unit test that calls it again replaces the lists
     * (nothing else runs then). */
    aor_hostlist_free(g_static);
    g_static = NULL;
    aor_addrmap_free(g_map);
    g_map = NULL;
    memset(g_static_filter, 0, sizeof g_static_filter);
    g_env_hosts = spec != NULL;
    if (spec != NULL) {
        g_static = aor_hostlist_parse(spec, &nbad);
        if (nbad > 0)
            aor_debug("AOR_HOSTS: %d entr%s ignored: bad (want host or host:port, comma "
                      "separated), or past the %d the shim keeps",
                      nbad, nbad == 1 ? "y" : "ies", AOR_HOSTS_MAX);
    } else {
        g_static = aor_hostlist_builtin();
    }
    g_map = aor_addrmap_new(AOR_ADDRMAP_DEFAULT_CAP);
    filter_of(g_static, g_static_filter);
    uint64_t bits[FILTER_WORDS];
    pthread_mutex_lock(&g_pub_mu); /* a second call keeps the published hosts' bits */
    filter_widen(g_pub, bits);
    filter_settle(bits);
    pthread_mutex_unlock(&g_pub_mu);
    port_set(443);
    for (size_t i = 0; i < aor_hostlist_count(g_static); i++)
        port_set(aor_hostlist_port(g_static, i));
}

/* The current second, for the once-a-second look at the published file: time() is
 * the cheapest clock call (the vDSO reads one word, but of the kernel's time page, a
 * cache miss after system calls: tick.h gates it); a jump of the wall clock only moves
 * that look (any change of the second makes it due). */
static long now_s(void) {
    return (long)time(NULL);
}

static void close_quietly(int fd) {
    if (aor_real.close != NULL)
        aor_real.close(fd);
    else
        syscall(SYS_close, fd);
}

/* Reads the whole file (at most AOR_PUBFILE_MAX_BYTES). Returns a malloc'd buffer and
 * its length, or NULL. *st gets the identity of what was read. Only a regular file of
 * this user that nobody else may write: opened without blocking (a FIFO put there would
 * hang the hook) and without following a symbolic link; another user's file (the /tmp
 * fallback directory) is not trusted. */
static char *read_file(const char *path, size_t *len, struct stat *st) {
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK | O_NOFOLLOW);
    if (fd < 0)
        return NULL;
    char *buf = NULL;
    if (fstat(fd, st) != 0 || !S_ISREG(st->st_mode) || st->st_size > AOR_PUBFILE_MAX_BYTES ||
        st->st_uid != getuid() || (st->st_mode & 022) != 0)
        goto out_close;
    size_t cap = (size_t)st->st_size + 1, n = 0;
    buf = malloc(cap);
    if (buf == NULL)
        goto out_close;
    while (n < cap) {
        ssize_t r = read(fd, buf + n, cap - n);
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0)
            goto out_free;
        if (r == 0)
            break;
        n += (size_t)r;
    }
    if (n == cap) /* grew while reading: not what rename-publishing produces */
        goto out_free;
    *len = n;
    close_quietly(fd);
    return buf;

out_free:
    free(buf);
    buf = NULL;
out_close:
    close_quietly(fd);
    return buf;
}

static void swap_pub(aor_pubset *s) {
    uint64_t bits[FILTER_WORDS];
    pthread_mutex_lock(&g_pub_mu);
    filter_widen(s, bits);
    aor_pubset *old = g_pub;
    g_pub = s;
    atomic_store_explicit(&g_pub_present, s != NULL, memory_order_release);
    filter_settle(bits);
    pthread_mutex_unlock(&g_pub_mu);
    aor_pubset_free(old);
}

/* Caller holds g_reload_mu. */
static void reload_locked(const char *path) {
    struct stat st;
    if (stat(path, &st) != 0 || !S_ISREG(st.st_mode)) {
        if (g_pub_id.present) {
            aor_debug("published hosts file %s is gone", path);
            swap_pub(NULL);
        }
        g_pub_id.present = 0;
        return;
    }
    if (g_pub_id.present && g_pub_id.dev == st.st_dev && g_pub_id.ino == st.st_ino &&
        g_pub_id.size == st.st_size && g_pub_id.mtim.tv_sec == st.st_mtim.tv_sec &&
        g_pub_id.mtim.tv_nsec == st.st_mtim.tv_nsec)
        return;
    size_t len = 0;
    char *buf = read_file(path, &len, &st);
    if (buf == NULL) {
        swap_pub(NULL);
        g_pub_id.present = 0;
        return;
    }
    int nbad = 0;
    aor_pubset *s = aor_pubset_parse(buf, len, &nbad);
    free(buf);
    g_pub_id.present = 1;
    g_pub_id.dev = st.st_dev;
    g_pub_id.ino = st.st_ino;
    g_pub_id.size = st.st_size;
    g_pub_id.mtim = st.st_mtim;
    if (s == NULL) {
        aor_debug("published hosts file %s ignored: %s", path,
                  errno == ENOMEM ? "out of memory" : "first line is not \"aor-hosts 1\"");
        swap_pub(NULL);
        return;
    }
    /* Ports of the published hosts ("a" lines add their port to their host). With
     * AOR_HOSTS only its hosts' ports: the others are never redirected. */
    const aor_hostlist *hl = aor_pubset_hosts(s);
    for (size_t i = 0; i < aor_hostlist_count(hl); i++) {
        const char *name = aor_hostlist_name(hl, i);
        if (!g_env_hosts || aor_hostlist_find(g_static, name, strlen(name)) >= 0)
            port_set(aor_hostlist_port(hl, i));
    }
    if (!g_env_hosts) {
        for (size_t i = 0; i < aor_pubset_addr_count(s); i++)
            port_set(aor_pubset_addr_port(s, i));
    }
    aor_debug("published hosts file %s: %zu hosts, %zu addresses, %d lines ignored (bad, or "
              "past the %d hosts the shim keeps)%s",
              path, aor_hostlist_count(hl), aor_pubset_addr_count(s), nbad, AOR_HOSTS_MAX,
              g_env_hosts ? "; AOR_HOSTS is set: only entries of its hosts count" : "");
    swap_pub(s);
}

int aor_hosts_refresh_from(const char *path, long now_s) {
    int saved = errno;
    long last = atomic_load_explicit(&g_checked, memory_order_acquire);
    if (last != now_s) {
        /* The first check waits for a concurrent one; later ones skip when busy. */
        int locked = last == LONG_MIN ? pthread_mutex_lock(&g_reload_mu) == 0
                                      : pthread_mutex_trylock(&g_reload_mu) == 0;
        if (locked) {
            if (atomic_load_explicit(&g_checked, memory_order_acquire) != now_s) {
                reload_locked(path);
                atomic_store_explicit(&g_checked, now_s, memory_order_release);
            }
            pthread_mutex_unlock(&g_reload_mu);
        }
    }
    pthread_mutex_lock(&g_pub_mu);
    int loaded = g_pub != NULL;
    pthread_mutex_unlock(&g_pub_mu);
    errno = saved;
    return loaded;
}

static void maybe_refresh(void) {
    if (aor_tick_quiet())
        return; /* looked less than ~100 ms ago: the second cannot have changed twice */
    const aor_shim_env *env = aor_env();
    if (!env->sock_ok)
        return;
    long now = now_s();
    aor_tick_mark();
    if (atomic_load_explicit(&g_checked, memory_order_relaxed) == now)
        return;
    aor_hosts_refresh_from(env->hosts_path, now);
}

/* aor_hosts_maybe, with the name's length in *len when it says 1. */
static int maybe_len(const char *name, size_t *len) {
    if (name == NULL)
        return 0;
    /* By hand, not strnlen: that is a call through the PLT into libc on every lookup
     * (docs/performance.md, change 53). */
    size_t n = 0;
    while (n < AOR_HOST_MAX + 2 && name[n] != '\0')
        n++;
    *len = n;
    if (*len == 0 || *len > AOR_HOST_MAX + 1)
        return 0;
    maybe_refresh(); /* before the filter: a newly published host may add its bits */
    return name_possible(name, *len);
}

int aor_hosts_maybe(const char *name) {
    size_t len;
    return maybe_len(name, &len);
}

int aor_hosts_intercepted(const char *name, char *norm, size_t normlen) {
    size_t len;
    if (!maybe_len(name, &len))
        return 0;
    int hit = aor_hostlist_find(g_static, name, len) >= 0;
    if (!hit && !g_env_hosts) {
        if (!atomic_load_explicit(&g_pub_present, memory_order_acquire))
            return 0;
        pthread_mutex_lock(&g_pub_mu);
        hit = g_pub != NULL && aor_hostlist_find(aor_pubset_hosts(g_pub), name, len) >= 0;
        pthread_mutex_unlock(&g_pub_mu);
    }
    if (hit && norm != NULL && aor_host_normalize(name, len, norm, normlen) < 0)
        hit = 0;
    return hit;
}

int aor_hosts_port_candidate(int port) {
    if (port_bit(port))
        return 1;
    maybe_refresh();
    return port_bit(port);
}

/* 1 when port is a redirect port for host: 443, or its AOR_HOSTS / published port. */
static int host_port_ok(const char *host, int port) {
    if (port == 443)
        return 1;
    size_t len = strlen(host);
    if (aor_hostlist_has_port(g_static, host, len, port))
        return 1;
    if (!atomic_load_explicit(&g_pub_present, memory_order_acquire))
        return 0;
    pthread_mutex_lock(&g_pub_mu);
    int ok = g_pub != NULL && aor_hostlist_has_port(aor_pubset_hosts(g_pub), host, len, port);
    pthread_mutex_unlock(&g_pub_mu);
    return ok;
}

int aor_hosts_recognise(const aor_ip *ip, int port, char *host, size_t hostlen, int *synthetic) {
    int syn = 0;
    if (synthetic != NULL)
        *synthetic = 0;
    int rc = aor_addrmap_lookup(g_map, ip, host, hostlen, &syn);
    if (rc == 1 && host_port_ok(host, port)) {
        if (synthetic != NULL)
            *synthetic = syn;
        return 1;
    }
    if (rc == 2 && (port == 443 || port_bit(port))) {
        if (synthetic != NULL)
            *synthetic = syn;
        return 2;
    }
    maybe_refresh();
    if (!atomic_load_explicit(&g_pub_present, memory_order_acquire))
        return 0;
    if (g_env_hosts && g_static == NULL)
        return 0; /* AOR_HOSTS set but its list could not be built: nothing counts */
    pthread_mutex_lock(&g_pub_mu);
    rc = aor_pubset_match_only(g_pub, ip, port, g_env_hosts ? g_static : NULL, host, hostlen);
    pthread_mutex_unlock(&g_pub_mu);
    return rc == 1 ? 3 : rc;
}

void aor_hosts_record(const aor_ip *ip, const char *host, int synthetic) {
    if (aor_addrmap_record(g_map, ip, host, synthetic) != 0)
        aor_debug("could not record an address of %s (out of memory)", host);
}

void aor_hosts_fallback(const char *host, aor_ip *out) {
    char other[AOR_HOST_MAX + 1];
    for (unsigned attempt = 0; attempt < 16; attempt++) {
        aor_fallback_ip(host, attempt, out);
        int rc = aor_addrmap_lookup(g_map, out, other, sizeof(other), NULL);
        if (rc == 0 || (rc == 1 && strcmp(other, host) == 0))
            break;
    }
    aor_hosts_record(out, host, 1);
}

void aor_hosts_lock_all(void) {
    pthread_mutex_lock(&g_reload_mu);
    pthread_mutex_lock(&g_pub_mu);
    aor_addrmap_lock(g_map);
}

void aor_hosts_unlock_all(void) {
    aor_addrmap_unlock(g_map);
    pthread_mutex_unlock(&g_pub_mu);
    pthread_mutex_unlock(&g_reload_mu);
}
