#include "sni.h"

#include <ctype.h>
#include <string.h>

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
