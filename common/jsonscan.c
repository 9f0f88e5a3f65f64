/* Strict RFC 8259 walk of a JSON text without building a tree. Contract: jsonscan.h. */
#include "jsonscan.h"

#include <stdint.h>
#include <string.h>
#ifdef __SSE2__
#include <emmintrin.h>
#endif

typedef struct {
    const unsigned char *s;
    size_t n, i;
} scan;

/* 1 for bytes that end the fast run inside a string: '"', '\\' and raw control
 * characters (which RFC 8259 does not allow there). */
static const unsigned char string_stop[256] = {
    [0x00] = 1, [0x01] = 1, [0x02] = 1, [0x03] = 1, [0x04] = 1, [0x05] = 1, [0x06] = 1,
    [0x07] = 1, [0x08] = 1, [0x09] = 1, [0x0a] = 1, [0x0b] = 1, [0x0c] = 1, [0x0d] = 1,
    [0x0e] = 1, [0x0f] = 1, [0x10] = 1, [0x11] = 1, [0x12] = 1, [0x13] = 1, [0x14] = 1,
    [0x15] = 1, [0x16] = 1, [0x17] = 1, [0x18] = 1, [0x19] = 1, [0x1a] = 1, [0x1b] = 1,
    [0x1c] = 1, [0x1d] = 1, [0x1e] = 1, [0x1f] = 1, ['"'] = 1,  ['\\'] = 1,
};

static void skip_ws(scan *sc) {
    while (sc->i < sc->n) {
        unsigned char c = sc->s[sc->i];
        if (c != ' ' && c != '\t' && c != '\n' && c != '\r')
            return;
        sc->i++;
    }
}

static int hexval(unsigned char c) {
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    if (c >= 'A' && c <= 'F')
        return c - 'A' + 10;
    return -1;
}

/* 1 when one of the 8 bytes in w is '"', '\\' or below 0x20 (exact for "any"; the
 * classic bit tricks of "Bit Twiddling Hacks": haszero(w ^ c), hasless(w, 0x20)). */
static int word_has_stop(uint64_t w) {
    const uint64_t ones = 0x0101010101010101ULL, highs = 0x8080808080808080ULL;
    uint64_t q = w ^ (ones * '"'), b = w ^ (ones * '\\');
    uint64_t hit = ((q - ones) & ~q) | ((b - ones) & ~b) | ((w - ones * 0x20) & ~w);
    return (hit & highs) != 0;
}

#ifdef __SSE2__
/* Bit k set when byte k of the 16 at p is '"', '\\' or below 0x20 (SSE2, which every
 * x86-64 CPU has): prompts of 64 KiB and more are scanned 16 bytes per step. */
static unsigned stop_mask16(const unsigned char *p) {
    __m128i v = _mm_loadu_si128((const __m128i *)(const void *)p);
    __m128i q = _mm_cmpeq_epi8(v, _mm_set1_epi8('"'));
    __m128i b = _mm_cmpeq_epi8(v, _mm_set1_epi8('\\'));
    /* unsigned v <= 0x1f exactly when max(v, 0x1f) == 0x1f */
    __m128i low = _mm_set1_epi8(0x1f);
    __m128i c = _mm_cmpeq_epi8(_mm_max_epu8(v, low), low);
    return (unsigned)_mm_movemask_epi8(_mm_or_si128(_mm_or_si128(q, b), c));
}
#endif

/* At the opening quote: moves past the closing one. *escaped = 1 when the string has an
 * escape. 0, or -1 (invalid, or an escaped surrogate: left to the full parser). */
static int scan_string(scan *sc, int *escaped) {
    size_t i = sc->i + 1;
    *escaped = 0;
    for (;;) {
#ifdef __SSE2__
        while (sc->n - i >= 16) {
            unsigned m = stop_mask16(sc->s + i);
            if (m) {
                i += (size_t)__builtin_ctz(m); /* the first stop byte */
                goto stop;
            }
            i += 16;
        }
#endif
        /* 8 bytes at a time through the plain text of long strings (prompts) */
        while (sc->n - i >= 8) {
            uint64_t w;
            memcpy(&w, sc->s + i, 8);
            if (word_has_stop(w))
                break;
            i += 8;
        }
        while (i < sc->n && !string_stop[sc->s[i]])
            i++;
        if (i >= sc->n)
            return -1;
#ifdef __SSE2__
    stop:;
#endif
        unsigned char c = sc->s[i];
        if (c == '"') {
            sc->i = i + 1;
            return 0;
        }
        if (c != '\\')
            return -1; /* raw control character */
        *escaped = 1;
        if (i + 1 >= sc->n)
            return -1;
        c = sc->s[i + 1];
        if (c == 'u') {
            if (i + 5 >= sc->n)
                return -1;
            unsigned v = 0;
            for (size_t k = 2; k < 6; k++) {
                int h = hexval(sc->s[i + k]);
                if (h < 0)
                    return -1;
                v = v << 4 | (unsigned)h;
            }
            if (v >= 0xd800 && v <= 0xdfff)
                return -1; /* pairing rules differ between parsers */
            i += 6;
        } else if (strchr("\"\\/bfnrt", c) && c != '\0') {
            i += 2;
        } else {
            return -1;
        }
    }
}

static int scan_digits(scan *sc) {
    size_t start = sc->i;
    while (sc->i < sc->n && sc->s[sc->i] >= '0' && sc->s[sc->i] <= '9')
        sc->i++;
    return sc->i > start ? 0 : -1;
}

/* Longest number text accepted here: cJSON 1.7 copies at most 63 characters of a number
 * and fails on the rest, so longer ones are left to it. */
#define NUMBER_MAX 60

/* -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)? */
static int scan_number(scan *sc) {
    size_t start = sc->i;
    int r = 0;
    if (sc->s[sc->i] == '-')
        sc->i++;
    if (sc->i >= sc->n)
        return -1;
    if (sc->s[sc->i] == '0')
        sc->i++;
    else if (scan_digits(sc) < 0)
        return -1;
    if (sc->i < sc->n && sc->s[sc->i] == '.') {
        sc->i++;
        if (scan_digits(sc) < 0)
            return -1;
    }
    if (sc->i < sc->n && (sc->s[sc->i] == 'e' || sc->s[sc->i] == 'E')) {
        sc->i++;
        if (sc->i < sc->n && (sc->s[sc->i] == '+' || sc->s[sc->i] == '-'))
            sc->i++;
        r = scan_digits(sc);
    }
    return r == 0 && sc->i - start <= NUMBER_MAX ? 0 : -1;
}

static int scan_literal(scan *sc, const char *word) {
    size_t l = strlen(word);
    if (sc->n - sc->i < l || memcmp(sc->s + sc->i, word, l) != 0)
        return -1;
    sc->i += l;
    return 0;
}

static int scan_value(scan *sc, int depth);

/* At '{' or '[': moves past the matching close. */
static int scan_container(scan *sc, int depth) {
    if (depth > AOR_JSONSCAN_MAX_DEPTH)
        return -1;
    int object = sc->s[sc->i] == '{';
    unsigned char close = object ? '}' : ']';
    sc->i++;
    skip_ws(sc);
    if (sc->i < sc->n && sc->s[sc->i] == close) {
        sc->i++;
        return 0;
    }
    for (;;) {
        if (object) {
            int esc;
            if (sc->i >= sc->n || sc->s[sc->i] != '"' || scan_string(sc, &esc) < 0)
                return -1;
            skip_ws(sc);
            if (sc->i >= sc->n || sc->s[sc->i] != ':')
                return -1;
            sc->i++;
            skip_ws(sc);
        }
        if (scan_value(sc, depth + 1) < 0)
            return -1;
        skip_ws(sc);
        if (sc->i >= sc->n)
            return -1;
        if (sc->s[sc->i] == close) {
            sc->i++;
            return 0;
        }
        if (sc->s[sc->i] != ',')
            return -1;
        sc->i++;
        skip_ws(sc);
    }
}

/* At the first byte of a value (whitespace skipped): moves past it. */
static int scan_value(scan *sc, int depth) {
    if (sc->i >= sc->n)
        return -1;
    unsigned char c = sc->s[sc->i];
    int esc;
    switch (c) {
    case '"':
        return scan_string(sc, &esc);
    case '{':
    case '[':
        return scan_container(sc, depth);
    case 't':
        return scan_literal(sc, "true");
    case 'f':
        return scan_literal(sc, "false");
    case 'n':
        return scan_literal(sc, "null");
    default:
        if (c == '-' || (c >= '0' && c <= '9'))
            return scan_number(sc);
        return -1;
    }
}

int aor_json_top_string(const char *text, size_t len, const char *key, const char **val,
                        size_t *vlen) {
    if (!text || !key || !val || !vlen || strpbrk(key, "\"\\"))
        return -1;
    *val = NULL;
    *vlen = 0;
    size_t klen = strlen(key);
    scan sc = {(const unsigned char *)text, len, 0};
    if (len >= 3 && memcmp(text, "\xef\xbb\xbf", 3) == 0)
        sc.i = 3;
    skip_ws(&sc);
    if (sc.i >= sc.n || sc.s[sc.i] != '{')
        return -1;
    sc.i++;
    skip_ws(&sc);
    int found = 0; /* a member named key was seen */
    if (sc.i < sc.n && sc.s[sc.i] == '}') {
        sc.i++;
    } else {
        for (;;) {
            int esc;
            size_t kstart = sc.i + 1;
            if (sc.i >= sc.n || sc.s[sc.i] != '"' || scan_string(&sc, &esc) < 0 || esc)
                return -1;
            int is_key = sc.i - 1 - kstart == klen && memcmp(text + kstart, key, klen) == 0;
            if (is_key && found)
                return -1; /* named twice: parsers disagree on which counts (the caller's
                            * parser decides) */
            skip_ws(&sc);
            if (sc.i >= sc.n || sc.s[sc.i] != ':')
                return -1;
            sc.i++;
            skip_ws(&sc);
            size_t vstart = sc.i;
            if (is_key && sc.i < sc.n && sc.s[sc.i] == '"') {
                if (scan_string(&sc, &esc) < 0 || esc)
                    return -1;
                *val = text + vstart + 1;
                *vlen = sc.i - vstart - 2;
            } else if (scan_value(&sc, 2) < 0) {
                return -1;
            }
            if (is_key)
                found = 1;
            skip_ws(&sc);
            if (sc.i >= sc.n)
                return -1;
            if (sc.s[sc.i] == '}') {
                sc.i++;
                break;
            }
            if (sc.s[sc.i] != ',')
                return -1;
            sc.i++;
            skip_ws(&sc);
        }
    }
    skip_ws(&sc);
    if (sc.i != sc.n) {
        *val = NULL;
        *vlen = 0;
        return -1;
    }
    return *val ? 1 : 0;
}
