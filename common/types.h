/* Shared vocabulary of aor: failure kinds and dialects.
 * Source: spec §4.1 (kinds), §3 (dialects). */
#ifndef AOR_TYPES_H
#define AOR_TYPES_H

#include <stddef.h>

/* Classification of one upstream attempt (spec §4.1). */
typedef enum {
    AOR_KIND_OK = 0,    /* 2xx that is a real answer of the dialect */
    AOR_KIND_RATE,      /* 429 rate limit, 529 / overloaded: exponential backoff */
    AOR_KIND_TRANSIENT, /* other 5xx, network, TLS, timeout: exponential backoff */
    AOR_KIND_QUOTA,     /* 402, insufficient_quota, spend limits: flat cooldown */
    AOR_KIND_AUTH,      /* 401, 403 not quota: flat cooldown */
    AOR_KIND_CLIENT,    /* other 4xx: the request is at fault, no walk */
    AOR_KIND_CONFIG     /* not a dialect answer (HTML from a wrong base_url): 502, no walk */
} aor_kind;

/* Provider API dialects (spec §3 `dialect`). */
typedef enum { AOR_DIALECT_OPENAI = 0, AOR_DIALECT_ANTHROPIC, AOR_DIALECT_GEMINI } aor_dialect;

/* Name of a kind as written in state and JSON ("rate", "transient", "quota", "auth",
 * "client", "config", "ok"). Returns a static string; can't fail. */
const char *aor_kind_name(aor_kind kind);

/* Parses a kind name written by aor_kind_name. Returns 0 and sets *out, or -1 if unknown. */
int aor_kind_parse(const char *name, aor_kind *out);

/* 1 when an attempt of this kind lets the walk move on (rate, transient, quota, auth). */
int aor_kind_retryable(aor_kind kind);

/* Dialect name ("openai", "anthropic", "gemini"); static string, can't fail. */
const char *aor_dialect_name(aor_dialect d);

/* Parses a dialect name. Returns 0 and sets *out, or -1 if unknown. */
int aor_dialect_parse(const char *name, aor_dialect *out);

#endif
