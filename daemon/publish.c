#include "publish.h"
#include "paths.h"

#include "builtin_hosts.h"
#include "log.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* Threads: aord's event loop calls aor_publish_start / _update / _remove; the resolver
 * thread looks the host names up (DNS may be slow: never under the lock) and rewrites the
 * file. Every write of the file happens under `lock`, from the list and the address cache
 * below, so two writers never share the temporary file and a rewrite after a reload keeps
 * the addresses already resolved. */

int aor_publish_host_intercepted(const aor_config *cfg, const char *host) {
    /* The built-in hosts as the intercept names of a provider: compared as a provider's
     * hosts are (case-insensitive, one trailing dot ignored), by the same function.
     * aor_config_provider_owns_host only reads the names. */
    size_t nbuiltin = 0;
    while (aor_builtin_hosts[nbuiltin])
        nbuiltin++;
    aor_provider_cfg builtin = {0};
    builtin.intercept = (char **)aor_builtin_hosts;
    builtin.nintercept = nbuiltin;
    if (aor_config_provider_owns_host(&builtin, host))
        return 1;
    for (size_t i = 0; i < cfg->nproviders; i++) {
        if (aor_config_provider_owns_host(&cfg->providers[i], host))
            return 1;
    }
    return 0;
}

typedef struct {
    char *host;
    int port;
} pub_host;

/* One address the resolver found for a host name (published on each of its ports). */
typedef struct {
    char *host;
    char ip[INET6_ADDRSTRLEN];
} pub_addr;

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t wake = PTHREAD_COND_INITIALIZER;
/* Under lock: */
static pub_host *hosts; /* the published (host, port) list */
static size_t nhosts;
static pub_addr *addrs; /* the last addresses resolved for hosts on the list */
static size_t naddrs;
static char *pub_dir;
static int resolve_due; /* the list changed since the resolver took its names */
static int stopped;     /* aor_publish_stop ran: the file is not written any more */
static int started;
static atomic_int foreign_warned; /* warned once that the hosts file is not ours any more */

/* Adds (host, port) to the list unless there; named: an intercept name, which may be
 * localhost (spec §2: every name of an intercept list), else a base_url host, where
 * localhost is a local provider that needs no aor before it. IP literals never. */
static int add_host(pub_host **list, size_t *n, const char *host, int port, int named) {
    if (!aor_config_host_published(host, named))
        return 0;
    for (size_t i = 0; i < *n; i++) {
        if (strcmp((*list)[i].host, host) == 0 && (*list)[i].port == port)
            return 0;
    }
    pub_host *nl = realloc(*list, (*n + 1) * sizeof *nl);
    if (!nl)
        return -1;
    *list = nl;
    nl[*n].host = strdup(host);
    if (!nl[*n].host)
        return -1;
    nl[*n].port = port;
    (*n)++;
    return 0;
}

static void free_hosts(pub_host *list, size_t n) {
    for (size_t i = 0; i < n; i++)
        free(list[i].host);
    free(list);
}

static int build(const aor_config *cfg, pub_host **out, size_t *nout) {
    pub_host *list = NULL;
    size_t n = 0;
    for (size_t i = 0; aor_builtin_hosts[i]; i++) {
        if (add_host(&list, &n, aor_builtin_hosts[i], 443, 1) < 0)
            goto fail;
    }
    for (size_t i = 0; i < cfg->nproviders; i++) {
        const aor_provider_cfg *p = &cfg->providers[i];
        if (add_host(&list, &n, p->host, p->port, 0) < 0)
            goto fail;
        for (size_t k = 0; k < p->nintercept; k++) {
            if (add_host(&list, &n, p->intercept[k], 443, 1) < 0)
                goto fail;
            if (p->port != 443 && add_host(&list, &n, p->intercept[k], p->port, 1) < 0)
                goto fail;
        }
    }
    *out = list;
    *nout = n;
    return 0;
fail:
    free_hosts(list, n);
    return -1;
}

/* What is at path: 0 nothing, 1 an address set aord wrote (a regular file, not a link,
 * that starts with "aor-hosts ": aor_path_hosts_is_ours), -1 anything else (then errno:
 * EEXIST, or lstat's error). */
static int file_state(const char *path) {
    int r = aor_path_hosts_is_ours(path);
    if (r < 0)
        return errno == ENOENT ? 0 : -1;
    if (r == 1)
        return 1;
    errno = EEXIST;
    return -1;
}

int aor_publish_check_dir(const char *dir, char *err, size_t errlen) {
    char path[4096];
    if (snprintf(path, sizeof path, "%s/hosts", dir) >= (int)sizeof path) {
        snprintf(err, errlen, "socket directory path too long: %s", dir);
        return -1;
    }
    if (file_state(path) >= 0)
        return 0;
    if (errno == EEXIST)
        snprintf(err, errlen,
                 "%s exists and is not aord's published address set (no \"aor-hosts\" "
                 "header); refusing to overwrite it: choose a socket in a directory of its own",
                 path);
    else
        snprintf(err, errlen, "%s: cannot read it: %s", path, strerror(errno));
    return -1;
}

static void free_addrs(pub_addr *list, size_t n);
static int write_locked(void);

int aor_publish_stop(const char *dir) {
    char path[4096];
    if (snprintf(path, sizeof path, "%s/hosts", dir) >= (int)sizeof path) {
        errno = ENAMETOOLONG;
        return -1;
    }
    /* Under the lock, and no write after it: the resolver thread must not put the
     * addresses back after aord's shutdown took them out. */
    pthread_mutex_lock(&lock);
    int ours = pub_dir && strcmp(pub_dir, dir) == 0;
    int r = 1;
    /* Not published by this aord (one that failed to start, say): the file there may be
     * another running aord's, so it is left alone. */
    int st = ours ? file_state(path) : 0;
    if (st == 0 || (st < 0 && errno == EEXIST)) {
        r = 0; /* nothing there, or not aord's: left alone */
    } else if (st < 0) {
        r = -1;
    } else {
        /* The host names stay (QA): with aord down, the shim still knows the configured
         * hosts by name, so their connections fail open with the warning, or fail with
         * AOR_STRICT=1 (spec §2), instead of going direct unnoticed. The addresses go:
         * another service may hold a stale one later. */
        free_addrs(addrs, naddrs);
        addrs = NULL;
        naddrs = 0;
        if (write_locked() != 0 && unlink(path) < 0 && errno != ENOENT)
            r = -1;
    }
    if (ours)
        stopped = 1;
    int saved = errno;
    pthread_mutex_unlock(&lock);
    errno = saved;
    return r;
}

/* 1 when host is on the published list (under lock). */
static int published_locked(const char *host) {
    for (size_t i = 0; i < nhosts; i++) {
        if (strcmp(hosts[i].host, host) == 0)
            return 1;
    }
    return 0;
}

int aor_publish_has_addr(const char *host, const char *ip) {
    int found = 0;
    pthread_mutex_lock(&lock);
    for (size_t i = 0; i < naddrs && !found; i++)
        found = strcmp(addrs[i].ip, ip) == 0 && aor_config_host_eq(addrs[i].host, host);
    pthread_mutex_unlock(&lock);
    return found;
}

static void free_addrs(pub_addr *list, size_t n) {
    for (size_t i = 0; i < n; i++)
        free(list[i].host);
    free(list);
}

/* Writes the file from the list and the cached addresses (under lock): each host's
 * addresses on each of its ports. Returns 0, or -1 (the file is left as it was). */
static int write_locked(void) {
    if (!pub_dir || stopped)
        return 0;
    char path[4096], tmp[4160];
    if (snprintf(path, sizeof path, "%s/hosts", pub_dir) >= (int)sizeof path)
        return -1;
    if (file_state(path) < 0) {
        /* Someone put a file of their own there since aord started: leave it alone. */
        if (!atomic_exchange(&foreign_warned, 1))
            aor_warn("%s is not aord's address set any more; not overwriting it", path);
        return -1;
    }
    /* One writer at a time (the lock): the name only has to differ from another aord's. */
    snprintf(tmp, sizeof tmp, "%s.tmp.%d", path, (int)getpid());
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0644);
    if (fd < 0)
        return -1;
    FILE *f = fdopen(fd, "w");
    if (!f) {
        close(fd);
        unlink(tmp);
        return -1;
    }
    fprintf(f, "aor-hosts 1\n");
    for (size_t i = 0; i < nhosts; i++)
        fprintf(f, "h %s %d\n", hosts[i].host, hosts[i].port);
    for (size_t i = 0; i < nhosts; i++) {
        for (size_t k = 0; k < naddrs; k++) {
            if (strcmp(addrs[k].host, hosts[i].host) == 0)
                fprintf(f, "a %s %d %s\n", addrs[k].ip, hosts[i].port, hosts[i].host);
        }
    }
    int bad = ferror(f);
    if (fclose(f) != 0 || bad || rename(tmp, path) < 0) {
        unlink(tmp);
        return -1;
    }
    return 0;
}

/* Replaces the cache (under lock): the addresses of names[i] with ok[i] set become those
 * in got; the other names keep their last ones (a failed look-up is often a passing DNS
 * problem); hosts no longer on the list lose theirs. Takes got (may be NULL); on ENOMEM
 * the cache stays as it was. With nnames 0 it only drops unlisted hosts. */
static void merge_locked(char *const *names, const unsigned char *ok, size_t nnames, pub_addr *got,
                         size_t ngot) {
    pub_addr *next = naddrs + ngot ? malloc((naddrs + ngot) * sizeof *next) : NULL;
    if (naddrs + ngot && !next) {
        free_addrs(got, ngot);
        return;
    }
    size_t n = 0;
    for (size_t i = 0; i < naddrs; i++) {
        int renewed = 0;
        for (size_t k = 0; k < nnames && !renewed; k++)
            renewed = ok[k] && strcmp(names[k], addrs[i].host) == 0;
        if (!renewed && published_locked(addrs[i].host))
            next[n++] = addrs[i];
        else
            free(addrs[i].host);
    }
    for (size_t i = 0; i < ngot; i++) {
        if (published_locked(got[i].host))
            next[n++] = got[i];
        else
            free(got[i].host);
    }
    free(got);
    free(addrs);
    addrs = next;
    naddrs = n;
}

/* The distinct host names of the list (under lock), malloc'd. Returns 0, or -1 (ENOMEM). */
static int names_locked(char ***out, size_t *nout) {
    char **names = nhosts ? calloc(nhosts, sizeof *names) : NULL;
    size_t n = 0;
    if (nhosts && !names)
        return -1;
    for (size_t i = 0; i < nhosts; i++) {
        int seen = 0;
        for (size_t k = 0; k < n && !seen; k++)
            seen = strcmp(names[k], hosts[i].host) == 0;
        if (seen)
            continue;
        names[n] = strdup(hosts[i].host);
        if (!names[n]) {
            for (size_t k = 0; k < n; k++)
                free(names[k]);
            free(names);
            return -1;
        }
        n++;
    }
    *out = names;
    *nout = n;
    return 0;
}

/* Adds (host, ip) to list (one host's addresses) unless ip is there already (the same
 * address for another socket type). Returns 0, or -1 (ENOMEM). */
static int add_addr(pub_addr **list, size_t *n, const char *host, const char *ip) {
    for (size_t i = 0; i < *n; i++) {
        if (strcmp((*list)[i].ip, ip) == 0)
            return 0;
    }
    pub_addr *nl = realloc(*list, (*n + 1) * sizeof *nl);
    if (!nl)
        return -1;
    *list = nl;
    nl[*n].host = strdup(host);
    if (!nl[*n].host)
        return -1;
    snprintf(nl[*n].ip, sizeof nl[*n].ip, "%s", ip);
    (*n)++;
    return 0;
}

/* Looks name up (no lock held: DNS may take long); *out gets its addresses (malloc'd,
 * *nout of them; none when the lookup failed). Returns 0, or -1 (ENOMEM: nothing
 * allocated). */
static int resolve_name(const char *name, pub_addr **out, size_t *nout) {
    pub_addr *list = NULL;
    size_t len = 0;
    struct addrinfo hints = {0}, *res = NULL;
    hints.ai_socktype = SOCK_STREAM;
    if (getaddrinfo(name, NULL, &hints, &res) == 0) {
        for (struct addrinfo *a = res; a; a = a->ai_next) {
            char ip[INET6_ADDRSTRLEN];
            const void *src = a->ai_family == AF_INET
                                  ? (const void *)&((struct sockaddr_in *)a->ai_addr)->sin_addr
                                  : (const void *)&((struct sockaddr_in6 *)a->ai_addr)->sin6_addr;
            if ((a->ai_family != AF_INET && a->ai_family != AF_INET6) ||
                !inet_ntop(a->ai_family, src, ip, sizeof ip))
                continue;
            if (add_addr(&list, &len, name, ip) < 0) {
                freeaddrinfo(res);
                free_addrs(list, len);
                return -1;
            }
        }
        freeaddrinfo(res);
    }
    *out = list;
    *nout = len;
    return 0;
}

/* 1 when the cache (under lock) holds exactly the addresses got[0..ngot) for host. */
static int same_addrs_locked(const char *host, const pub_addr *got, size_t ngot) {
    size_t have = 0;
    for (size_t i = 0; i < naddrs; i++) {
        if (strcmp(addrs[i].host, host) != 0)
            continue;
        int found = 0;
        for (size_t k = 0; k < ngot && !found; k++)
            found = strcmp(got[k].ip, addrs[i].ip) == 0;
        if (!found)
            return 0;
        have++;
    }
    return have == ngot;
}

#define LOOKUP_STACK (256 * 1024) /* a lookup thread's stack: getaddrinfo and NSS modules */

/* Looks one name up (no lock held) and publishes its addresses when they changed. */
static void *lookup_one(void *arg) {
    char *name = arg;
    pub_addr *got = NULL;
    size_t ngot = 0;
    if (resolve_name(name, &got, &ngot) < 0)
        return NULL; /* out of memory: the cache keeps its last addresses */
    unsigned char ok = ngot > 0;
    pthread_mutex_lock(&lock);
    if (!ok || same_addrs_locked(name, got, ngot)) {
        free_addrs(got, ngot);
    } else {
        merge_locked(&name, &ok, 1, got, ngot);
        write_locked();
    }
    pthread_mutex_unlock(&lock);
    return NULL;
}

static void *resolver(void *arg) {
    pthread_mutex_lock(&lock);
    for (;;) {
        resolve_due = 0;
        char **names = NULL;
        size_t nnames = 0;
        int r = names_locked(&names, &nnames);
        pthread_mutex_unlock(&lock);
        /* Every name looked up at once, each in a thread of its own, and published as
         * soon as its own lookup is back: one after the other, a name whose DNS is slow
         * (split DNS, the offline case) held back every later one, a local base_url host
         * too, for 18-90 s (QA). */
        pthread_t *tids = r == 0 && nnames ? calloc(nnames, sizeof *tids) : NULL;
        unsigned char *running = r == 0 && nnames ? calloc(nnames, 1) : NULL;
        pthread_attr_t attr;
        int attr_ok = pthread_attr_init(&attr) == 0;
        if (attr_ok)
            pthread_attr_setstacksize(&attr, LOOKUP_STACK);
        for (size_t i = 0; r == 0 && i < nnames; i++) {
            if (tids && running && attr_ok &&
                pthread_create(&tids[i], &attr, lookup_one, names[i]) == 0)
                running[i] = 1;
            else
                lookup_one(names[i]); /* no thread: here, in turn */
        }
        for (size_t i = 0; running && i < nnames; i++)
            if (running[i])
                pthread_join(tids[i], NULL);
        if (attr_ok)
            pthread_attr_destroy(&attr);
        free(tids);
        free(running);
        pthread_mutex_lock(&lock);
        merge_locked(NULL, NULL, 0, NULL, 0); /* hosts gone from the list meanwhile */
        write_locked();
        for (size_t i = 0; i < nnames; i++)
            free(names[i]);
        free(names);
        /* Until the refresh, or at once when the list changed meanwhile (also while the
         * names were being looked up: the flag, unlike the signal, is not lost). */
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        ts.tv_sec += AOR_PUBLISH_REFRESH_S;
        while (!resolve_due) {
            if (pthread_cond_timedwait(&wake, &lock, &ts) == ETIMEDOUT)
                break;
        }
    }
    return NULL;
}

int aor_publish_update(const aor_config *cfg) {
    pub_host *list;
    size_t n;
    if (build(cfg, &list, &n) < 0)
        return -1;
    pthread_mutex_lock(&lock);
    free_hosts(hosts, nhosts);
    hosts = list;
    nhosts = n;
    merge_locked(NULL, NULL, 0, NULL, 0); /* forget the addresses of hosts gone */
    int r = write_locked();
    resolve_due = 1;
    pthread_cond_signal(&wake);
    pthread_mutex_unlock(&lock);
    return r;
}

int aor_publish_start(const char *dir, const aor_config *cfg) {
    char *d = strdup(dir);
    if (!d)
        return -1;
    pthread_mutex_lock(&lock);
    free(pub_dir);
    pub_dir = d;
    stopped = 0;
    pthread_mutex_unlock(&lock);
    if (aor_publish_update(cfg) < 0)
        return -1;
    if (started)
        return 0;
    pthread_t t;
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    int r = pthread_create(&t, &attr, resolver, NULL);
    pthread_attr_destroy(&attr);
    if (r != 0) {
        errno = r;
        return -1;
    }
    started = 1;
    return 0;
}
