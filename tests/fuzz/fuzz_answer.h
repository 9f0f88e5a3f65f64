/* Splits a fuzz input into upstream response headers and a body, for the targets that
 * feed common/classify.h (fuzz_hints.c, fuzz_classify.c).
 * Format: "name: value" lines separated by '\n', then an empty line, then the body. An
 * input without an empty line ("\n\n") is all body, without headers. */
#ifndef AOR_FUZZ_ANSWER_H
#define AOR_FUZZ_ANSWER_H

#include "classify.h"
#include "fuzz_util.h"

#define FUZZ_MAX_HEADERS 32

typedef struct {
    aor_header h[FUZZ_MAX_HEADERS];
    size_t n;
    char *text;       /* NUL-terminated copy of the header part, split in place */
    const char *body; /* points into the caller's input (not NUL-terminated) */
    size_t body_len;
} fuzz_answer;

/* Fills *a from data/size; free with fuzz_answer_free. */
static inline void fuzz_answer_split(fuzz_answer *a, const uint8_t *data, size_t size) {
    memset(a, 0, sizeof *a);
    const uint8_t *blank = size >= 2 ? memmem(data, size, "\n\n", 2) : NULL;
    size_t hlen = blank ? (size_t)(blank - data) : 0;
    a->text = fuzz_strndup(data, hlen);
    a->body = blank ? (const char *)blank + 2 : (const char *)data;
    a->body_len = blank ? size - hlen - 2 : size;
    char *p = a->text, *end = a->text + hlen;
    while (blank && p < end && a->n < FUZZ_MAX_HEADERS) {
        char *nl = memchr(p, '\n', (size_t)(end - p));
        char *e = nl ? nl : end;
        *e = '\0';
        char *colon = strchr(p, ':');
        if (colon) {
            *colon = '\0';
            char *v = colon + 1;
            while (*v == ' ' || *v == '\t')
                v++;
            a->h[a->n].name = p;
            a->h[a->n].value = v;
            a->n++;
        }
        p = e + 1;
    }
}

static inline void fuzz_answer_free(fuzz_answer *a) {
    free(a->text);
}

#endif
