#include "publish.h"

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

int aor_publish_host_intercepted(const aor_config *cfg, const char *host) {
    for (size_t i = 0; aor_builtin_hosts[i]; i++) {
        if (strcmp(aor_builtin_hosts[i], host) == 0)
            return 1;
    }
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

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t wake = PTHREAD_COND_INITIALIZER;
static pub_host *hosts;
static size_t nhosts;
static char *pub_dir;
static int started;
static atomic_int foreign_warned; /* warned once that the hosts file is not ours any more */

static int is_ip_literal(const char *h) {
    unsigned char buf[16];
    return inet_pton(AF_INET, h, buf) == 1 || inet_pton(AF_INET6, h, buf) == 1;
}

static int add_host(pub_host **list, size_t *n, const char *host, int port) {
    if (!host || !*host || is_ip_literal(host) || strcmp(host, "localhost") == 0)
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
        if (add_host(&list, &n, aor_builtin_hosts[i], 443) < 0)
            goto fail;
    }
    for (size_t i = 0; i < cfg->nproviders; i++) {
        const aor_provider_cfg *p = &cfg->providers[i];
        if (add_host(&list, &n, p->host, p->port) < 0)
            goto fail;
        for (size_t k = 0; k < p->nintercept; k++) {
            if (add_host(&list, &n, p->intercept[k], 443) < 0)
                goto fail;
            if (p->port != 443 && add_host(&list, &n, p->intercept[k], p->port) < 0)
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

#define PUB_MAGIC "aor-hosts "

/* What is at path: 0 nothing, 1 an address set aord wrote (a regular file, not a link,
 * that starts with PUB_MAGIC), -1 anything else (then errno: EEXIST, or the open/read
 * error). */
static int file_state(const char *path) {
    struct stat st;
    if (lstat(path, &st) < 0)
        return errno == ENOENT ? 0 : -1;
    if (!S_ISREG(st.st_mode)) {
        errno = EEXIST;
        return -1;
    }
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
    if (fd < 0)
        return errno == ENOENT ? 0 : -1;
    char head[sizeof PUB_MAGIC - 1];
    size_t got = 0;
    while (got < sizeof head) {
        ssize_t n = read(fd, head + got, sizeof head - got);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            break;
        got += (size_t)n;
    }
    close(fd);
    if (got == sizeof head && memcmp(head, PUB_MAGIC, sizeof head) == 0)
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

int aor_publish_remove(const char *dir) {
    char path[4096];
    if (snprintf(path, sizeof path, "%s/hosts", dir) >= (int)sizeof path) {
        errno = ENAMETOOLONG;
        return -1;
    }
    int st = file_state(path);
    if (st == 0 || (st < 0 && errno == EEXIST))
        return 0; /* nothing there, or not aord's: left alone */
    if (st < 0)
        return -1;
    if (unlink(path) < 0)
        return errno == ENOENT ? 0 : -1;
    return 1;
}

/* Writes the file from a snapshot of the list plus resolved addresses (may be empty). */
static int write_file(const char *dir, const pub_host *list, size_t n, const char *addrs) {
    char path[4096], tmp[4160];
    if (snprintf(path, sizeof path, "%s/hosts", dir) >= (int)sizeof path)
        return -1;
    if (file_state(path) < 0) {
        /* Someone put a file of their own there since aord started: leave it alone. */
        if (!atomic_exchange(&foreign_warned, 1))
            aor_warn("%s is not aord's address set any more; not overwriting it", path);
        return -1;
    }
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
    for (size_t i = 0; i < n; i++)
        fprintf(f, "h %s %d\n", list[i].host, list[i].port);
    if (addrs)
        fputs(addrs, f);
    if (fclose(f) != 0 || rename(tmp, path) < 0) {
        unlink(tmp);
        return -1;
    }
    return 0;
}

static char *resolve_all(const pub_host *list, size_t n) {
    char *buf = NULL;
    size_t len = 0;
    FILE *m = open_memstream(&buf, &len);
    if (!m)
        return NULL;
    for (size_t i = 0; i < n; i++) {
        struct addrinfo hints = {0}, *res = NULL;
        hints.ai_socktype = SOCK_STREAM;
        if (getaddrinfo(list[i].host, NULL, &hints, &res) != 0)
            continue;
        for (struct addrinfo *a = res; a; a = a->ai_next) {
            char ip[INET6_ADDRSTRLEN];
            const void *src = a->ai_family == AF_INET
                                  ? (const void *)&((struct sockaddr_in *)a->ai_addr)->sin_addr
                                  : (const void *)&((struct sockaddr_in6 *)a->ai_addr)->sin6_addr;
            if ((a->ai_family == AF_INET || a->ai_family == AF_INET6) &&
                inet_ntop(a->ai_family, src, ip, sizeof ip))
                fprintf(m, "a %s %d %s\n", ip, list[i].port, list[i].host);
        }
        freeaddrinfo(res);
    }
    fclose(m);
    return buf;
}

static void *resolver(void *arg) {
    for (;;) {
        pthread_mutex_lock(&lock);
        pub_host *snap = NULL;
        size_t n = 0;
        for (size_t i = 0; i < nhosts; i++)
            add_host(&snap, &n, hosts[i].host, hosts[i].port);
        char *dir = strdup(pub_dir);
        pthread_mutex_unlock(&lock);
        char *addrs = resolve_all(snap, n);
        if (dir)
            write_file(dir, snap, n, addrs);
        free(addrs);
        free(dir);
        free_hosts(snap, n);
        pthread_mutex_lock(&lock);
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        ts.tv_sec += AOR_PUBLISH_REFRESH_S;
        pthread_cond_timedwait(&wake, &lock, &ts);
        pthread_mutex_unlock(&lock);
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
    int r = pub_dir ? write_file(pub_dir, hosts, nhosts, NULL) : 0;
    pthread_cond_signal(&wake);
    pthread_mutex_unlock(&lock);
    return r;
}

int aor_publish_start(const char *dir, const aor_config *cfg) {
    pthread_mutex_lock(&lock);
    free(pub_dir);
    pub_dir = strdup(dir);
    pthread_mutex_unlock(&lock);
    if (!pub_dir)
        return -1;
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
