#include "sni.h"

#include <ctype.h>
#include <string.h>
#include <strings.h>

/* Copies the handshake bytes out of the records into hs (at most cap bytes).
 * Returns bytes copied, -2 need more, -1 malformed. */
static long gather(const unsigned char *buf, size_t len, unsigned char *hs, size_t cap,
                   size_t *need_total) {
    size_t off = 0, n = 0;
    *need_total = 0;
    while (off + 5 <= len) {
        if (buf[off] != 0x16 || buf[off + 1] != 0x03)
            return -1;
        size_t rl = ((size_t)buf[off + 3] << 8) | buf[off + 4];
        if (rl == 0 || rl > 16384 + 256)
            return -1;
        if (off + 5 + rl > len) {
            size_t part = len - off - 5;
            if (n + part > cap)
                return -1;
            memcpy(hs + n, buf + off + 5, part);
            n += part;
            break;
        }
        if (n + rl > cap)
            return -1;
        memcpy(hs + n, buf + off + 5, rl);
        n += rl;
        off += 5 + rl;
        if (n >= 4) {
            size_t hl = ((size_t)hs[1] << 16) | ((size_t)hs[2] << 8) | hs[3];
            *need_total = hl + 4;
            if (n >= hl + 4)
                return (long)n;
        }
    }
    if (n >= 4)
        *need_total = (((size_t)hs[1] << 16) | ((size_t)hs[2] << 8) | hs[3]) + 4;
    return -2;
}

int aor_sni_parse(const unsigned char *buf, size_t len, char *host, size_t hostlen) {
    unsigned char hs[AOR_SNI_MAX_HELLO];
    size_t need = 0;
    if (len >= 1 && buf[0] != 0x16)
        return -1;
    long n = gather(buf, len, hs, sizeof hs, &need);
    if (n == -2)
        return (need > sizeof hs || len >= AOR_SNI_MAX_HELLO) ? -1 : -2;
    if (n < 0)
        return -1;
    if (hs[0] != 0x01) /* ClientHello */
        return -1;
    size_t end = need, p = 4;
    if (end > (size_t)n)
        return -1;
    /* version(2) random(32) */
    p += 34;
    if (p + 1 > end)
        return -1;
    p += 1 + hs[p]; /* session id */
    if (p + 2 > end)
        return -1;
    p += 2 + (((size_t)hs[p] << 8) | hs[p + 1]); /* cipher suites */
    if (p + 1 > end)
        return -1;
    p += 1 + hs[p]; /* compression methods */
    if (p == end)
        return 0; /* no extensions */
    if (p + 2 > end)
        return -1;
    size_t ext_end = p + 2 + (((size_t)hs[p] << 8) | hs[p + 1]);
    p += 2;
    if (ext_end > end)
        return -1;
    while (p + 4 <= ext_end) {
        unsigned type = ((unsigned)hs[p] << 8) | hs[p + 1];
        size_t el = ((size_t)hs[p + 2] << 8) | hs[p + 3];
        p += 4;
        if (p + el > ext_end)
            return -1;
        if (type == 0) { /* server_name */
            size_t q = p, le;
            if (el < 2)
                return -1;
            le = q + 2 + (((size_t)hs[q] << 8) | hs[q + 1]);
            q += 2;
            if (le > p + el)
                return -1;
            while (q + 3 <= le) {
                unsigned nt = hs[q];
                size_t nl = ((size_t)hs[q + 1] << 8) | hs[q + 2];
                q += 3;
                if (q + nl > le)
                    return -1;
                if (nt == 0) {
                    if (nl == 0 || nl >= hostlen)
                        return -1;
                    for (size_t i = 0; i < nl; i++) {
                        unsigned char c = hs[q + i];
                        if (c <= 0x20 || c >= 0x7f)
                            return -1;
                        host[i] = (char)tolower(c);
                    }
                    host[nl] = '\0';
                    return 1;
                }
                q += nl;
            }
            return 0;
        }
        p += el;
    }
    return 0;
}

/* 1 when c may be part of an HTTP token (a method, a field name; RFC 9110 §5.6.2). */
static int is_tchar(unsigned char c) {
    if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9'))
        return 1;
    return c != '\0' && strchr("!#$%&'*+-.^_`|~", c) != NULL;
}

/* The Host field value v/vl (spaces around it already trimmed) into host. 1, or -1. */
static int host_value(const char *v, size_t vl, char *host, size_t hostlen) {
    size_t i = 0, start, end;
    if (vl == 0)
        return -1;
    if (v[0] == '[') { /* IP-literal: [v6 address] */
        start = end = 1;
        while (end < vl && v[end] != ']') {
            unsigned char c = (unsigned char)v[end];
            if (!isxdigit(c) && c != ':' && c != '.')
                return -1;
            end++;
        }
        if (end == vl || end == start)
            return -1;
        i = end + 1;
    } else { /* reg-name or IPv4 address */
        start = end = 0;
        while (end < vl && v[end] != ':') {
            unsigned char c = (unsigned char)v[end];
            if (!isalnum(c) && c != '-' && c != '.' && c != '_')
                return -1;
            end++;
        }
        if (end == start)
            return -1;
        i = end;
    }
    if (i < vl) { /* ":" port, port = *DIGIT */
        if (v[i] != ':' || vl - i - 1 > 5)
            return -1;
        for (size_t k = i + 1; k < vl; k++) {
            if (!isdigit((unsigned char)v[k]))
                return -1;
        }
    }
    if (end - start >= hostlen)
        return -1;
    for (size_t k = start; k < end; k++)
        host[k - start] = (char)tolower((unsigned char)v[k]);
    host[end - start] = '\0';
    return 1;
}

/* 1 when line/ll (no line end) is an HTTP/1.x request line: method SP target SP
 * HTTP/1.d (RFC 9112 §3). */
static int request_line(const char *line, size_t ll) {
    size_t p = 0;
    while (p < ll && is_tchar((unsigned char)line[p]))
        p++;
    if (p == 0 || p >= ll || line[p] != ' ')
        return 0;
    size_t t = ++p;
    while (p < ll && (unsigned char)line[p] > 0x20 && (unsigned char)line[p] < 0x7f)
        p++;
    if (p == t || p >= ll || line[p] != ' ')
        return 0;
    p++;
    return ll - p == 8 && memcmp(line + p, "HTTP/1.", 7) == 0 &&
           isdigit((unsigned char)line[p + 7]);
}

int aor_sni_http_host(const char *buf, size_t len, char *host, size_t hostlen) {
    /* need more, unless the limit is reached: then no decision is possible */
    int more = len >= AOR_SNI_MAX_HTTP_HEAD ? -1 : -2;
    if (len > AOR_SNI_MAX_HTTP_HEAD)
        len = AOR_SNI_MAX_HTTP_HEAD;
    /* The method's first bytes tell a request from other bytes before a line ends. */
    size_t m = 0;
    while (m < len && is_tchar((unsigned char)buf[m]))
        m++;
    if (m < len && (m == 0 || buf[m] != ' '))
        return -1;
    size_t p = 0;
    for (int first = 1;; first = 0) {
        const char *nl = memchr(buf + p, '\n', len - p);
        if (!nl)
            return more;
        const char *line = buf + p;
        size_t ll = (size_t)(nl - line);
        p += ll + 1;
        if (ll > 0 && line[ll - 1] == '\r')
            ll--;
        if (first) {
            if (!request_line(line, ll))
                return -1;
            continue;
        }
        if (ll == 0)
            return 0; /* the end of the head: no Host */
        if (line[0] == ' ' || line[0] == '\t')
            return -1; /* obsolete line folding */
        size_t c = 0;
        while (c < ll && is_tchar((unsigned char)line[c]))
            c++;
        if (c == 0 || c >= ll || line[c] != ':')
            return -1;
        if (c != 4 || strncasecmp(line, "host", 4) != 0)
            continue;
        size_t vs = c + 1, ve = ll;
        while (vs < ve && (line[vs] == ' ' || line[vs] == '\t'))
            vs++;
        while (ve > vs && (line[ve - 1] == ' ' || line[ve - 1] == '\t'))
            ve--;
        return host_value(line + vs, ve - vs, host, hostlen);
    }
}
