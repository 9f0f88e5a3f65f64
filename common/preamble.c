/* The shim -> daemon preamble (spec §7): "AOR/1 <host|-> <ip> <port>\n".
 * libc only: linked into libaor.so (format) and aord (parse). */
#include "preamble.h"

#include <arpa/inet.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAGIC "AOR/1 "
#define MAGIC_LEN (sizeof(MAGIC) - 1)

/* A host is 1..AOR_HOST_MAX bytes of letters, digits, '-', '.', '_' and ':' (an IP
 * literal base_url). No spaces or control bytes, so the line stays four fields. */
static int host_char_ok(unsigned char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' ||
           c == '.' || c == '_' || c == ':';
}

static int host_ok(const char *h, size_t n) {
    if (n == 0 || n > AOR_HOST_MAX)
        return 0;
    for (size_t i = 0; i < n; i++) {
        if (!host_char_ok((unsigned char)h[i]))
            return 0;
    }
    return 1;
}

/* 1 when the n bytes at s (no NUL needed) are a textual IPv4 or IPv6 address. */
static int ip_ok(const char *s, size_t n, char out[46]) {
    unsigned char tmp[sizeof(struct in6_addr)];
    if (n == 0 || n > 45)
        return 0;
    memcpy(out, s, n);
    out[n] = '\0';
    return inet_pton(AF_INET, out, tmp) == 1 || inet_pton(AF_INET6, out, tmp) == 1;
}

int aor_preamble_port_parse(const char *s, size_t n) {
    char tmp[8];
    if (s == NULL || n == 0 || n > 5)
        return -1;
    for (size_t i = 0; i < n; i++) {
        if (s[i] < '0' || s[i] > '9')
            return -1;
    }
    memcpy(tmp, s, n);
    tmp[n] = '\0';
    long v = strtol(tmp, NULL, 10); /* at most 5 digits: no overflow */
    if (v < 1 || v > 65535)
        return -1;
    return (int)v;
}

static int fail(const char **err, const char *why) {
    if (err != NULL)
        *err = why;
    return -1;
}

int aor_preamble_parse(const char *buf, size_t len, aor_preamble *out, const char **err) {
    size_t cmp = len < MAGIC_LEN ? len : MAGIC_LEN;
    if (buf == NULL || out == NULL)
        return fail(err, "preamble: no buffer");
    if (memcmp(buf, MAGIC, cmp) != 0)
        return fail(err, "preamble: bad magic (expected \"AOR/1 \")");

    size_t scan = len < AOR_PREAMBLE_MAX ? len : AOR_PREAMBLE_MAX;
    const char *nl = memchr(buf, '\n', scan);
    if (nl == NULL) {
        if (len >= AOR_PREAMBLE_MAX)
            return fail(err, "preamble: too long (no newline within 320 bytes)");
        return 0;
    }
    size_t linelen = (size_t)(nl - buf);

    /* Split the fields after the magic at single spaces: host, ip, port. */
    const char *f[3];
    size_t fl[3];
    size_t nf = 0;
    const char *p = buf + MAGIC_LEN;
    const char *end = buf + linelen;
    while (p <= end) {
        const char *sp = memchr(p, ' ', (size_t)(end - p));
        const char *stop = sp != NULL ? sp : end;
        if (nf == 3)
            return fail(err, "preamble: too many fields (a host may not contain spaces)");
        f[nf] = p;
        fl[nf] = (size_t)(stop - p);
        nf++;
        if (sp == NULL)
            break;
        p = sp + 1;
    }
    if (nf != 3)
        return fail(err, "preamble: expected \"AOR/1 host ip port\"");

    aor_preamble tmp;
    memset(&tmp, 0, sizeof(tmp));
    if (fl[0] == 1 && f[0][0] == '-') {
        tmp.host[0] = '\0';
    } else if (host_ok(f[0], fl[0])) {
        memcpy(tmp.host, f[0], fl[0]);
        tmp.host[fl[0]] = '\0';
    } else {
        return fail(err, "preamble: bad host name");
    }
    if (!ip_ok(f[1], fl[1], tmp.ip))
        return fail(err, "preamble: ip is not an IPv4 or IPv6 address");
    tmp.port = aor_preamble_port_parse(f[2], fl[2]);
    if (tmp.port < 0)
        return fail(err, "preamble: port is not a number in 1..65535");
    *out = tmp;
    return (int)(linelen + 1);
}

int aor_preamble_format(char *buf, size_t buflen, const char *host, const char *ip, int port) {
    char ipbuf[46];
    if (buf == NULL || ip == NULL || port < 1 || port > 65535) {
        errno = EINVAL;
        return -1;
    }
    if (host == NULL || host[0] == '\0') {
        host = "-";
    } else if (!host_ok(host, strlen(host))) {
        errno = EINVAL;
        return -1;
    }
    if (!ip_ok(ip, strlen(ip), ipbuf)) {
        errno = EINVAL;
        return -1;
    }
    int n = snprintf(buf, buflen, "AOR/1 %s %s %d\n", host, ip, port);
    if (n < 0) {
        errno = EINVAL;
        return -1;
    }
    if ((size_t)n >= buflen) {
        errno = ENOSPC;
        return -1;
    }
    return n;
}
