/* libaor.so: intercepted host name lists (spec §2 built-in list, §9 AOR_HOSTS). */
#include "hostlist.h"

#include "preamble.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

struct hostent_entry {
    char *name; /* normalised, NUL-terminated */
    size_t len;
    int port; /* 0: only 443 */
};

struct aor_hostlist {
    size_t n, cap;
    struct hostent_entry *e;
};

int aor_host_normalize(const char *in, size_t inlen, char *out, size_t outlen) {
    if (in == NULL || out == NULL)
        return -1;
    if (inlen > 0 && in[inlen - 1] == '.')
        inlen--; /* fully qualified form */
    if (inlen == 0 || inlen > AOR_HOST_MAX || outlen < inlen + 1)
        return -1;
    int nondot = 0;
    for (size_t i = 0; i < inlen; i++) {
        unsigned char c = (unsigned char)in[i];
        if (c >= 'A' && c <= 'Z')
            c = (unsigned char)(c - 'A' + 'a');
        else if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' || c == '_' ||
                   c == '.'))
            return -1;
        if (c != '.')
            nondot = 1;
        out[i] = (char)c;
    }
    if (!nondot)
        return -1;
    out[inlen] = '\0';
    return (int)inlen;
}

static aor_hostlist *list_new(void) {
    return calloc(1, sizeof(aor_hostlist));
}

aor_hostlist *aor_hostlist_new(void) {
    return list_new();
}

void aor_hostlist_free(aor_hostlist *l) {
    if (l == NULL)
        return;
    for (size_t i = 0; i < l->n; i++)
        free(l->e[i].name);
    free(l->e);
    free(l);
}

/* Adds a normalised name; duplicates are ignored. 0 ok, -1 out of memory, -2 full. */
/* 1 when the (normalised) name is on the list with this port. */
static int has_pair(const aor_hostlist *l, const char *name, size_t len, int port) {
    for (size_t i = 0; i < l->n; i++) {
        if (l->e[i].port == port && l->e[i].len == len && memcmp(l->e[i].name, name, len) == 0)
            return 1;
    }
    return 0;
}

static int list_add(aor_hostlist *l, const char *name, size_t len, int port) {
    if (has_pair(l, name, len, port))
        return 0;
    if (l->n >= AOR_HOSTS_MAX)
        return -2;
    if (l->n == l->cap) {
        size_t ncap = l->cap == 0 ? 16 : l->cap * 2;
        struct hostent_entry *ne = realloc(l->e, ncap * sizeof(*ne));
        if (ne == NULL)
            return -1;
        l->e = ne;
        l->cap = ncap;
    }
    char *copy = malloc(len + 1);
    if (copy == NULL)
        return -1;
    memcpy(copy, name, len);
    copy[len] = '\0';
    l->e[l->n].name = copy;
    l->e[l->n].len = len;
    l->e[l->n].port = port;
    l->n++;
    return 0;
}

int aor_hostlist_add(aor_hostlist *l, const char *name, size_t namelen, int port) {
    char norm[AOR_HOST_MAX + 1];
    int n = aor_host_normalize(name, namelen, norm, sizeof(norm));
    if (l == NULL || n < 0 || port < 0 || port > 65535) {
        errno = EINVAL;
        return -1;
    }
    int rc = list_add(l, norm, (size_t)n, port);
    if (rc == -1) {
        errno = ENOMEM;
        return -1;
    }
    if (rc == -2) {
        errno = ENOSPC;
        return -1;
    }
    return 0;
}

aor_hostlist *aor_hostlist_builtin(void) {
    aor_hostlist *l = list_new();
    if (l == NULL)
        return NULL;
    for (size_t i = 0; aor_builtin_hosts[i]; i++) {
        if (list_add(l, aor_builtin_hosts[i], strlen(aor_builtin_hosts[i]), 0) != 0) {
            aor_hostlist_free(l);
            return NULL;
        }
    }
    return l;
}

static int is_space(char c) {
    return c == ' ' || c == '\t' || c == '\n' || c == '\r';
}

aor_hostlist *aor_hostlist_parse(const char *spec, int *nbad) {
    int bad = 0;
    aor_hostlist *l = list_new();
    if (l == NULL)
        return NULL;
    const char *p = spec != NULL ? spec : "";
    const char *q = p;
    while (is_space(*q))
        q++;
    if (*q == '\0')
        p = q; /* a blank spec is an empty list, not a bad entry */
    while (*p != '\0') {
        const char *comma = strchr(p, ',');
        const char *stop = comma != NULL ? comma : p + strlen(p);
        const char *a = p, *b = stop;
        while (a < b && is_space(*a))
            a++;
        while (b > a && is_space(b[-1]))
            b--;
        const char *colon = memchr(a, ':', (size_t)(b - a));
        size_t hlen = colon != NULL ? (size_t)(colon - a) : (size_t)(b - a);
        int port = 0;
        char norm[AOR_HOST_MAX + 1];
        int nlen = aor_host_normalize(a, hlen, norm, sizeof(norm));
        if (colon != NULL)
            port = aor_preamble_port_parse(colon + 1, (size_t)(b - colon - 1));
        if (nlen < 0 || port < 0) {
            bad++; /* also an empty entry ("a,,b", trailing comma) */
        } else {
            int rc = list_add(l, norm, (size_t)nlen, port);
            if (rc == -1) {
                aor_hostlist_free(l);
                return NULL;
            }
            if (rc == -2)
                bad++;
        }
        if (comma == NULL)
            break;
        p = comma + 1;
        if (*p == '\0')
            bad++; /* trailing comma */
    }
    if (nbad != NULL)
        *nbad = bad;
    return l;
}

size_t aor_hostlist_count(const aor_hostlist *l) {
    return l != NULL ? l->n : 0;
}

const char *aor_hostlist_name(const aor_hostlist *l, size_t i) {
    return l != NULL && i < l->n ? l->e[i].name : NULL;
}

int aor_hostlist_port(const aor_hostlist *l, size_t i) {
    return l != NULL && i < l->n ? l->e[i].port : 0;
}

int aor_hostlist_has_port(const aor_hostlist *l, const char *name, size_t namelen, int port) {
    char norm[AOR_HOST_MAX + 1];
    if (l == NULL || l->n == 0 || port <= 0)
        return 0;
    int n = aor_host_normalize(name, namelen, norm, sizeof(norm));
    return n >= 0 && has_pair(l, norm, (size_t)n, port);
}

int aor_hostlist_find(const aor_hostlist *l, const char *name, size_t namelen) {
    char norm[AOR_HOST_MAX + 1];
    if (l == NULL || l->n == 0)
        return -1;
    int n = aor_host_normalize(name, namelen, norm, sizeof(norm));
    if (n < 0)
        return -1;
    for (size_t i = 0; i < l->n; i++) {
        if (l->e[i].len == (size_t)n && memcmp(l->e[i].name, norm, (size_t)n) == 0)
            return (int)i;
    }
    return -1;
}
