/* Byte-string search for answers forwarded as they come (see textfind.h). */
#include "textfind.h"

#include <string.h>
#ifdef __SSE2__
#include <emmintrin.h>
#endif

const char *aor_text_find(const char *text, size_t len, const char *needle, size_t nlen) {
    if (nlen == 0 || len < nlen)
        return NULL;
    if (nlen == 1)
        return memchr(text, needle[0], len);
    size_t i = 0, places = len - nlen + 1; /* starts that leave room for the needle */
#ifdef __SSE2__
    const __m128i first = _mm_set1_epi8(needle[0]), last = _mm_set1_epi8(needle[nlen - 1]);
    for (; places - i >= 16; i += 16) {
        __m128i a = _mm_loadu_si128((const __m128i *)(const void *)(text + i));
        __m128i b = _mm_loadu_si128((const __m128i *)(const void *)(text + i + nlen - 1));
        unsigned m = (unsigned)_mm_movemask_epi8(
            _mm_and_si128(_mm_cmpeq_epi8(a, first), _mm_cmpeq_epi8(b, last)));
        while (m) {
            size_t at = i + (size_t)__builtin_ctz(m);
            if (memcmp(text + at + 1, needle + 1, nlen - 2) == 0)
                return text + at;
            m &= m - 1;
        }
    }
#endif
    while (i < places) {
        const char *at = memchr(text + i, needle[0], places - i);
        if (!at)
            return NULL;
        if (memcmp(at + 1, needle + 1, nlen - 1) == 0)
            return at;
        i = (size_t)(at - text) + 1;
    }
    return NULL;
}
