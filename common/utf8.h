/* UTF-8 validity, for text that leaves aord as JSON (RFC 8259 §8.1: JSON exchanged
 * between systems is UTF-8) or is shown on a terminal. Source: RFC 3629 §3/§4 (no
 * overlong forms, no surrogates U+D800..U+DFFF, nothing above U+10FFFF). */
#ifndef AOR_UTF8_H
#define AOR_UTF8_H

#include <stddef.h>

/* Length in bytes of the valid UTF-8 sequence at s (at most n bytes available): 1..4,
 * or 0 when s[0] does not start one (a stray continuation byte, an overlong form, a
 * surrogate, above U+10FFFF, or cut off by n). If cp is not NULL it receives the code
 * point. n == 0 returns 0. */
size_t aor_utf8_seq(const char *s, size_t n, unsigned *cp);

/* 1 when the n bytes at s are valid UTF-8 in their whole, else 0. */
int aor_utf8_valid(const char *s, size_t n);

/* A copy of the NUL-terminated s in which every byte that does not start a valid
 * sequence is replaced by U+FFFD (EF BF BD). Returns a malloc'd string (caller frees),
 * or NULL with errno=ENOMEM (or EINVAL when s is NULL). */
char *aor_utf8_sanitize(const char *s);

#endif
