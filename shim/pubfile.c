/* libaor.so: parser for the daemon-published address set (see pubfile.h). */
#include "pubfile.h"
#include "preamble.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

struct pub_addr {
    aor_ip ip;
    int port;
    size_t host; /* index into hosts */
};

struct aor_pubset {
    aor_hostlist *hosts;
    struct pub_addr *a; /* sorted by ip */
    size_t n, cap;
};

#define MAX_FIELDS 5

/* Splits line (len bytes) at spaces/tabs into at most MAX_FIELDS fields.
 * Returns the number of fields, or MAX_FIELDS + 1 when there are more. */
static size_t split(const char *line, size_t len, const char *f[], size_t fl[]) {
    size_t n = 0, i = 0;
    while (i < len) {
        while (i < len && (line[i] == ' ' || line[i] == '\t'))
            i++;
        if (i == len)
            break;
        size_t start = i;
        while (i < len && line[i] != ' ' && line[i] != '\t')
            i++;
        if (n == MAX_FIELDS)
            return MAX_FIELDS + 1;
        f[n] = line + start;
        fl[n] = i - start;
        n++;
    }
    return n;
}

static int field_is(const char *f, size_t fl, const char *word) {
    return fl == strlen(word) && memcmp(f, word, fl) == 0;
}

static int cmp_addr(const void *x, const void *y) {
    const struct pub_addr *a = x, *b = y;
    return aor_ip_cmp(&a->ip, &b->ip);
}

void aor_pubset_free(aor_pubset *s) {
    if (s == NULL)
        return;
    aor_hostlist_free(s->hosts);
    free(s->a);
    free(s);
}

/* Handles one "a" line. 0 ok, 1 bad line, -1 out of memory. */
static int add_addr(aor_pubset *s, const char *f[], const size_t fl[]) {
    aor_ip ip;
    int port = aor_preamble_port_parse(f[2], fl[2]);
    if (aor_ip_parse(f[1], fl[1], &ip) != 0 || port < 0)
        return 1;
    if (s->n >= AOR_PUBFILE_MAX_ADDRS)
        return 1;
    /* The host of an "a" line is intercepted on that port too. */
    if (aor_hostlist_add(s->hosts, f[3], fl[3], port) != 0)
        return errno == ENOMEM ? -1 : 1;
    int h = aor_hostlist_find(s->hosts, f[3], fl[3]);
    if (h < 0)
        return 1;
    if (s->n == s->cap) {
        size_t ncap = s->cap == 0 ? 32 : s->cap * 2;
        struct pub_addr *na = realloc(s->a, ncap * sizeof(*na));
        if (na == NULL)
            return -1;
        s->a = na;
        s->cap = ncap;
    }
    s->a[s->n].ip = ip;
    s->a[s->n].port = port;
    s->a[s->n].host = (size_t)h;
    s->n++;
    return 0;
}

aor_pubset *aor_pubset_parse(const char *buf, size_t len, int *nbad) {
    int bad = 0;
    if (nbad != NULL)
        *nbad = 0;
    if (buf == NULL || len > AOR_PUBFILE_MAX_BYTES) {
        errno = EINVAL;
        return NULL;
    }
    aor_pubset *s = calloc(1, sizeof(*s));
    if (s == NULL)
        goto fail_nomem;
    s->hosts = aor_hostlist_new();
    if (s->hosts == NULL)
        goto fail_nomem;

    int header = 0;
    size_t pos = 0;
    while (pos < len) {
        const char *line = buf + pos;
        const char *nl = memchr(line, '\n', len - pos);
        size_t ll = nl != NULL ? (size_t)(nl - line) : len - pos;
        pos += ll + (nl != NULL ? 1 : 0);
        if (ll > 0 && line[ll - 1] == '\r')
            ll--;
        const char *f[MAX_FIELDS];
        size_t fl[MAX_FIELDS];
        size_t n = split(line, ll, f, fl);
        if (n == 0 || f[0][0] == '#')
            continue;
        if (!header) {
            if (n != 2 || !field_is(f[0], fl[0], "aor-hosts") || !field_is(f[1], fl[1], "1")) {
                errno = EINVAL;
                goto fail;
            }
            header = 1;
            continue;
        }
        if (n == 3 && field_is(f[0], fl[0], "h")) {
            int port = aor_preamble_port_parse(f[2], fl[2]);
            if (port < 0 || aor_hostlist_add(s->hosts, f[1], fl[1], port) != 0) {
                if (port >= 0 && errno == ENOMEM)
                    goto fail_nomem;
                bad++;
            }
        } else if (n == 4 && field_is(f[0], fl[0], "a")) {
            int rc = add_addr(s, f, fl);
            if (rc < 0)
                goto fail_nomem;
            bad += rc;
        } else {
            bad++;
        }
    }
    if (!header) {
        errno = EINVAL;
        goto fail;
    }
    if (s->n > 1)
        qsort(s->a, s->n, sizeof(s->a[0]), cmp_addr);
    if (nbad != NULL)
        *nbad = bad;
    return s;

fail_nomem:
    errno = ENOMEM;
fail:
    aor_pubset_free(s);
    return NULL;
}

const aor_hostlist *aor_pubset_hosts(const aor_pubset *s) {
    return s != NULL ? s->hosts : NULL;
}

size_t aor_pubset_addr_count(const aor_pubset *s) {
    return s != NULL ? s->n : 0;
}

int aor_pubset_addr_port(const aor_pubset *s, size_t i) {
    return s != NULL && i < s->n ? s->a[i].port : 0;
}

int aor_pubset_match(const aor_pubset *s, const aor_ip *ip, int port, char *host, size_t hostlen) {
    return aor_pubset_match_only(s, ip, port, NULL, host, hostlen);
}

int aor_pubset_match_only(const aor_pubset *s, const aor_ip *ip, int port, const aor_hostlist *only,
                          char *host, size_t hostlen) {
    if (s == NULL || s->n == 0)
        return 0;
    /* Lower bound of ip in the sorted array, then walk the equal run. */
    size_t lo = 0, hi = s->n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (aor_ip_cmp(&s->a[mid].ip, ip) < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    int found = 0;
    size_t first_host = 0;
    for (size_t i = lo; i < s->n && aor_ip_cmp(&s->a[i].ip, ip) == 0; i++) {
        const struct pub_addr *e = &s->a[i];
        const char *name = aor_hostlist_name(s->hosts, e->host);
        size_t nlen = strlen(name);
        if (port != 443 && port != e->port && !aor_hostlist_has_port(s->hosts, name, nlen, port))
            continue;
        if (only != NULL && aor_hostlist_find(only, name, nlen) < 0)
            continue;
        if (found == 0) {
            found = 1;
            first_host = e->host;
        } else if (e->host != first_host) {
            found = 2;
        }
    }
    if (found == 0)
        return 0;
    const char *name = found == 1 ? aor_hostlist_name(s->hosts, first_host) : "";
    size_t nl = strlen(name);
    if (hostlen == 0)
        return found;
    if (nl >= hostlen)
        nl = hostlen - 1;
    memcpy(host, name, nl);
    host[nl] = '\0';
    return found;
}
