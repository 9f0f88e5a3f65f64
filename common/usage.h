/* Usage awareness (spec §6): a per-(provider, key) snapshot of the provider's rate-limit
 * windows, read from the rate-limit headers of its answers, so that a key whose window
 * is exhausted is skipped (§5.2 step 2) until that window resets.
 *
 * Sources: OpenAI "Rate limits" (x-ratelimit-remaining-requests/-tokens,
 * x-ratelimit-reset-requests/-tokens as Go durations "6m0s", "1.5s", "20ms"; Groq and
 * other OpenAI-compatible providers send the same), Anthropic "Rate limits"
 * (anthropic-ratelimit-{requests,tokens,input-tokens,output-tokens}-{remaining,reset},
 * reset as an RFC 3339 timestamp), OpenRouter "Limits" (unsuffixed x-ratelimit-limit,
 * x-ratelimit-remaining, x-ratelimit-reset, reset as Unix epoch milliseconds, e.g.
 * 1735689600000). Gemini sends no usage headers; its RetryInfo is a retry hint (§4.3,
 * common/classify.h), not a usage window.
 *
 * The unsuffixed x-ratelimit-reset (AOR_USAGE_PLAIN) is read by its form: a plain
 * decimal number in [1e11, 1e14) is Unix milliseconds (OpenRouter; 1e11 ms is 1973), a
 * number in [1e9, 1e11) Unix seconds (2001 to the year 5138; both kept as given, even
 * when past: the window is then stale), a value with units a Go duration from the
 * answer ("20s", as OpenAI-compatible providers write their suffixed resets); anything
 * else is "unknown": a bare number below 1e9 (seconds from now, or a broken epoch? not
 * clearly either), one from 1e14 on, junk. The *-limit headers are not read (only
 * remaining and reset decide exhaustion).
 *
 * Rules (§6):
 *  - A 429 means throttled, never exhausted: a 429 answer (and a 529 overloaded answer,
 *    a throttle as well) leaves the snapshot untouched — its remaining values are never
 *    written, so a 429 saying "remaining: 0" does not mark the key exhausted beyond the
 *    backoff window its retry hints already set (§4.3). Answers without a status
 *    (status 0) or with another 5xx are ignored too (an outage says nothing about usage).
 *  - Every other answer updates the windows it names: a window named by the answer (by
 *    its remaining or its reset header) is replaced by the answer's values; windows it
 *    does not name keep their earlier values. Of a header sent twice the last valid
 *    value counts.
 *  - A snapshot is trusted only until the earliest reset time of its limiting windows
 *    (those with remaining 0), unfiltered: the earliest of them all, a past one included
 *    (even a past time the provider sent), so one limiting window whose reset has passed
 *    makes the whole snapshot stale, and two exhausted windows hold the key until the
 *    first of them resets (then the provider's next answer says where it stands). A
 *    window with remaining 0 but no (valid) reset time limits nothing: without a reset
 *    time there is no way to know when to look again.
 *  - Scheduling the next check uses only future reset times (aor_usage_next_reset).
 *
 * In memory only: the table is not persisted (§4.5 covers backoff, breakers and sticky
 * rows). Usage snapshots are short-lived — they are stale at the next window reset,
 * seconds to minutes away — and the next answer of the provider refreshes them, so a
 * restarted daemon at worst sends one request that the provider itself would throttle.
 *
 * Not thread-safe (aord is single-threaded). */
#ifndef AOR_USAGE_H
#define AOR_USAGE_H

#include "classify.h"

#include <stddef.h>

/* Windows a snapshot tracks. OpenAI-style, OpenRouter and Anthropic windows are kept
 * apart (a provider sends one family; every family is read from every answer). */
typedef enum {
    AOR_USAGE_REQUESTS = 0,    /* x-ratelimit-*-requests */
    AOR_USAGE_TOKENS,          /* x-ratelimit-*-tokens */
    AOR_USAGE_A_REQUESTS,      /* anthropic-ratelimit-requests-* */
    AOR_USAGE_A_TOKENS,        /* anthropic-ratelimit-tokens-* */
    AOR_USAGE_A_INPUT_TOKENS,  /* anthropic-ratelimit-input-tokens-* */
    AOR_USAGE_A_OUTPUT_TOKENS, /* anthropic-ratelimit-output-tokens-* */
    AOR_USAGE_PLAIN,           /* x-ratelimit-remaining, x-ratelimit-reset (OpenRouter) */
    AOR_USAGE_NWINDOWS
} aor_usage_window_id;

/* One window of a snapshot. */
typedef struct {
    int known;          /* 1 when an answer named this window */
    double remaining;   /* requests / tokens left in the window, or -1 when unknown */
    double reset_at;    /* Unix seconds when the window resets, or 0 when unknown; may lie
                           in the past (stale) */
    double observed_at; /* Unix seconds of the answer that set it */
} aor_usage_window;

typedef struct aor_usage aor_usage;

/* New empty table. Returns NULL with errno=ENOMEM. Free with aor_usage_free. */
aor_usage *aor_usage_new(void);

/* Frees the table. NULL: no-op. */
void aor_usage_free(aor_usage *u);

/* Reads the rate-limit headers of one upstream answer of (provider, key) into its
 * snapshot (rules at the top of this file).
 * status: HTTP status of the answer (0 = no answer). hdrs/n: its headers (names
 * case-insensitive, values without CRLF; NULL/0 allowed). now: Unix seconds of the
 * answer (Go-duration resets are relative to it). max_s: the longest a key is skipped
 * for, in seconds (backoff_max_s): a reset further ahead is taken as now + max_s, as a
 * retry hint over the cap is (§4.3; QA: a reset of "9999999h" or the year 9999 held the
 * key for centuries); <= 0: no cap. provider and key are copied.
 * An answer without any usage header creates no row. Remaining values must be plain
 * non-negative decimal numbers and resets valid Go durations (OpenAI; "0s" is a reset
 * now), RFC 3339
 * timestamps (Anthropic) or, for the unsuffixed x-ratelimit-reset, the forms at the top
 * of this file (OpenRouter epoch milliseconds), each at most AOR_HINT_MAX_VALUE bytes;
 * anything else counts as "unknown" for that field. When the table holds more than
 * AOR_USAGE_PRUNE_AT rows, rows with no future reset time are dropped first. Returns 1 when the
 * snapshot changed, 0 when the answer was ignored or named no window, -1 with errno=EINVAL (u,
 * provider or key NULL) or errno=ENOMEM (table unchanged). */
int aor_usage_observe(aor_usage *u, const char *provider, const char *key, long status,
                      const aor_header *hdrs, size_t n, double now, double max_s);

/* Rows kept before aor_usage_observe prunes stale ones. */
#define AOR_USAGE_PRUNE_AT 4096

/* 1 when (provider, key)'s snapshot is exhausted and trusted at now: it has windows with
 * remaining 0 (and a reset time), and the earliest of their reset times, past ones
 * included, is after now. *until (when until is not NULL) receives that time (Unix s):
 * the key is skipped until then. 0 (until untouched) otherwise — no row, no window with
 * 0 remaining, or the snapshot is stale. NULL u: 0. */
int aor_usage_exhausted(const aor_usage *u, const char *provider, const char *key, double now,
                        double *until);

/* The same rule for one key's windows w[AOR_USAGE_NWINDOWS] (as aor_usage_get or
 * aor_usage_foreach give them): 1 and *until (when not NULL) when they make the key
 * exhausted at now, else 0. */
int aor_usage_windows_exhausted(const aor_usage_window *w, double now, double *until);

/* Earliest reset time (Unix s) of (provider, key)'s windows that lies after now — when
 * to look at the key again; past reset times are ignored. 0 when there is none (no row,
 * or no future reset). NULL u: 0. */
double aor_usage_next_reset(const aor_usage *u, const char *provider, const char *key, double now);

/* Copies the windows of (provider, key) into out[AOR_USAGE_NWINDOWS]. Returns 1, or 0
 * when there is no row (out untouched). For tests and diagnostics. */
int aor_usage_get(const aor_usage *u, const char *provider, const char *key,
                  aor_usage_window out[AOR_USAGE_NWINDOWS]);

/* Drops the snapshots of (provider, key): provider NULL: of every provider, key NULL: of
 * every key (both NULL: all). For admin backoff reset / clear and a key whose secret
 * changed: the key is tried again at once, and its next answer makes a new snapshot.
 * Returns how many rows were dropped (NULL u: 0). Can't fail. */
size_t aor_usage_forget(aor_usage *u, const char *provider, const char *key);

/* Calls fn for every (provider, key) row with its windows w[AOR_USAGE_NWINDOWS] (stale
 * ones included: test each with aor_usage_exhausted's rule, remaining == 0 and
 * reset_at > now), in no particular order. fn must not change the table; the strings and
 * w are valid only during the call. NULL u or fn: no call. For /admin/api/state. */
void aor_usage_foreach(const aor_usage *u,
                       void (*fn)(const char *provider, const char *key, const aor_usage_window *w,
                                  void *arg),
                       void *arg);

/* Short name of a window for humans and /admin/api/state: "requests", "tokens" (OpenAI
 * style), "anthropic-requests", "anthropic-tokens", "anthropic-input-tokens",
 * "anthropic-output-tokens", "plain" (OpenRouter's unsuffixed headers); "?" out of range.
 * Static string. */
const char *aor_usage_window_name(aor_usage_window_id id);

/* Number of (provider, key) rows. NULL u: 0. */
size_t aor_usage_count(const aor_usage *u);

#endif
