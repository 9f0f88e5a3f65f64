/* Helpers shared by the libFuzzer targets in tests/fuzz (docs/fuzzing.md).
 * Each target is one fuzz_<name>.c with LLVMFuzzerTestOneInput; scripts/fuzz builds and
 * runs them. A broken invariant aborts with a message, so libFuzzer reports it as a
 * crash and saves the input. */
#ifndef AOR_FUZZ_UTIL_H
#define AOR_FUZZ_UTIL_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerInitialize(int *argc, char ***argv);

/* Aborts (a libFuzzer crash) when cond is false, naming the broken invariant. */
#define FUZZ_CHECK(cond, what)                                                                     \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            fprintf(stderr, "fuzz invariant broken: %s (%s) at %s:%d\n", (what), #cond, __FILE__,  \
                    __LINE__);                                                                     \
            abort();                                                                               \
        }                                                                                          \
    } while (0)

/* A malloc'd NUL-terminated copy of n bytes (which may hold NULs: C-string parsers then
 * see the prefix up to the first one). Aborts on ENOMEM: a fuzz run can't go on. */
static inline char *fuzz_strndup(const uint8_t *data, size_t n) {
    char *s = malloc(n + 1);
    FUZZ_CHECK(s != NULL, "out of memory in the harness");
    if (n)
        memcpy(s, data, n);
    s[n] = '\0';
    return s;
}

/* Takes one byte from the front of the input (*data, *size); 0 when empty. */
static inline unsigned fuzz_take_byte(const uint8_t **data, size_t *size) {
    if (*size == 0)
        return 0;
    unsigned b = **data;
    (*data)++;
    (*size)--;
    return b;
}

/* Takes a 16-bit little-endian number from the front of the input (*data, *size); missing bytes are
 * 0. */
static inline unsigned fuzz_take_u16(const uint8_t **data, size_t *size) {
    unsigned lo = fuzz_take_byte(data, size);
    return lo | (fuzz_take_byte(data, size) << 8);
}

/* 1 when s is NUL-terminated within cap bytes and holds printable ASCII only. */
static inline int fuzz_printable(const char *s, size_t cap) {
    for (size_t i = 0; i < cap; i++) {
        if (s[i] == '\0')
            return 1;
        if ((unsigned char)s[i] < 0x20 || (unsigned char)s[i] > 0x7e)
            return 0;
    }
    return 0;
}

#endif
