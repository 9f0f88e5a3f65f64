/* UTF-8 validity (see utf8.h; RFC 3629). */
#include "utf8.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

size_t aor_utf8_seq(const char *s, size_t n, unsigned *cp) {
    if (s == NULL || n == 0)
        return 0;
    const unsigned char *u = (const unsigned char *)s;
    unsigned c = u[0];
    size_t len;
    unsigned min;
    if (c < 0x80) {
        if (cp)
            *cp = c;
        return 1;
    } else if (c >= 0xc2 && c <= 0xdf) {
        len = 2, min = 0x80, c &= 0x1f;
    } else if (c >= 0xe0 && c <= 0xef) {
        len = 3, min = 0x800, c &= 0x0f;
    } else if (c >= 0xf0 && c <= 0xf4) {
        len = 4, min = 0x10000, c &= 0x07;
    } else {
        return 0; /* continuation byte, C0/C1 lead of an overlong form, F5..FF */
    }
    if (n < len)
        return 0;
    for (size_t i = 1; i < len; i++) {
        if ((u[i] & 0xc0) != 0x80)
            return 0;
        c = (c << 6) | (u[i] & 0x3f);
    }
    if (c < min || c > 0x10ffff || (c >= 0xd800 && c <= 0xdfff))
        return 0;
    if (cp)
        *cp = c;
    return len;
}

int aor_utf8_valid(const char *s, size_t n) {
    size_t i = 0;
    while (i < n) {
        size_t l = aor_utf8_seq(s + i, n - i, NULL);
        if (l == 0)
            return 0;
        i += l;
    }
    return 1;
}

char *aor_utf8_sanitize(const char *s) {
    if (s == NULL) {
        errno = EINVAL;
        return NULL;
    }
    size_t n = strlen(s);
    if (n > (size_t)-1 / 3 - 1) {
        errno = ENOMEM;
        return NULL;
    }
    char *out = malloc(3 * n + 1); /* each bad byte becomes 3 bytes at the most */
    if (out == NULL) {
        errno = ENOMEM;
        return NULL;
    }
    size_t i = 0, o = 0;
    while (i < n) {
        size_t l = aor_utf8_seq(s + i, n - i, NULL);
        if (l == 0) {
            memcpy(out + o, "\xef\xbf\xbd", 3);
            o += 3;
            i++;
        } else {
            memcpy(out + o, s + i, l);
            o += l;
            i += l;
        }
    }
    out[o] = '\0';
    return out;
}
