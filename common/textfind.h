/* Finding a short byte string (a configured key) in answer bytes that aord forwards as
 * they come, without memmem's per-call set-up. Source: spec §3.2 (no secret reaches the
 * client); docs/performance.md (change 59). */
#ifndef AOR_TEXTFIND_H
#define AOR_TEXTFIND_H

#include <stddef.h>

/* The first place in text (len bytes) where needle (nlen bytes) starts, or NULL (also
 * when nlen is 0 or longer than len). Same answer as memmem for nlen >= 1. With SSE2,
 * 16 places at a time whose first and last bytes are the needle's are picked out and
 * only those compared whole; elsewhere the needle's first byte is found with memchr.
 * O(len) on ordinary text; O(len * nlen) at worst (text that repeats most of the needle
 * over and over). No allocation; reads no byte outside text and needle. */
const char *aor_text_find(const char *text, size_t len, const char *needle, size_t nlen);

#endif
