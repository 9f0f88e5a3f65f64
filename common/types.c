#include "types.h"

#include <string.h>

static const char *const kind_names[] = {"ok",   "rate",   "transient", "quota",
                                         "auth", "client", "config"};

const char *aor_kind_name(aor_kind kind) {
    if ((unsigned)kind >= sizeof kind_names / sizeof kind_names[0])
        return "unknown";
    return kind_names[kind];
}

int aor_kind_parse(const char *name, aor_kind *out) {
    for (size_t i = 0; i < sizeof kind_names / sizeof kind_names[0]; i++) {
        if (strcmp(name, kind_names[i]) == 0) {
            *out = (aor_kind)i;
            return 0;
        }
    }
    return -1;
}

int aor_kind_retryable(aor_kind kind) {
    return kind == AOR_KIND_RATE || kind == AOR_KIND_TRANSIENT || kind == AOR_KIND_QUOTA ||
           kind == AOR_KIND_AUTH;
}

static const char *const dialect_names[] = {"openai", "anthropic", "gemini"};

const char *aor_dialect_name(aor_dialect d) {
    if ((unsigned)d >= 3)
        return "unknown";
    return dialect_names[d];
}

int aor_dialect_parse(const char *name, aor_dialect *out) {
    for (size_t i = 0; i < 3; i++) {
        if (strcmp(name, dialect_names[i]) == 0) {
            *out = (aor_dialect)i;
            return 0;
        }
    }
    return -1;
}
