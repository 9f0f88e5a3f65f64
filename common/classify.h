/* Classification of an upstream answer and parsing of retry hints (spec §4.1, §4.3).
 * Sources: OpenAI error codes (platform docs "Error codes", "Rate limits" headers),
 * Anthropic "Errors" and "Rate limits" pages, Gemini google.rpc QuotaFailure / RetryInfo /
 * ErrorInfo, OpenRouter "Limits" (error.metadata.limit_source, X-RateLimit-Reset) and
 * "Errors" (ModerationErrorMetadata: reasons, flagged_input);
 * RFC 9110 §10.2.3 (Retry-After) and §5.6.7 (HTTP-date, all three forms); RFC 3339.
 * Test table: tests/fixtures/provider-answers.json.
 *
 * Classification rules (aor_classify), in this order:
 *  1. status 0 (no answer: network, TLS, timeout) -> transient.
 *  2. 2xx -> ok, unless the answer is an HTML page (Content-Type text/html or
 *     application/xhtml+xml, or, without a JSON/SSE Content-Type, a body that starts with
 *     "<!doctype" / "<html") -> config. A 2xx body is never parsed as JSON.
 *  3. 3xx -> config (provider APIs do not redirect; a redirect means base_url is wrong,
 *     e.g. http:// to https:// or to a login page). 1xx and status >= 600 -> transient.
 *  4. Error statuses: the body is parsed (first AOR_CLASSIFY_MAX_BODY bytes) and its
 *     error object read in any dialect's shape (OpenAI/OpenRouter {"error":{...}},
 *     {"error":"text"}, Anthropic {"type":"error","error":{...}}, Gemini {"error":{...}}
 *     or [{"error":{...}}]).
 *     - 401 -> auth, whatever the body says.
 *     - 403 whose error.metadata has "reasons" (array) or "flagged_input" (OpenRouter's
 *       moderation flagged the input) -> client: the request is at fault, not the key.
 *     - Config: a 4xx other than 401/402/403/408/413/429 whose body is not in a dialect's
 *       shape (HTML page, plain text, empty, JSON without "error" such as FastAPI's
 *       {"detail":"Not Found"}) shows the base_url is wrong -> config. A body that is not
 *       parseable but starts with '{' or '[' is taken as a cut dialect answer, not config.
 *       5xx bodies never make config: a proxy's "502 Bad Gateway" page or Cloudflare 52x
 *       HTML is an outage in front of the right provider -> transient (or rate when it
 *       says "overloaded"). 401/402/403/429 with HTML still mean what their status says
 *       (e.g. a Cloudflare 429 page is a rate limit).
 *     - Structured codes first (error.code, error.type, error.details.error_code,
 *       metadata.reason/error_type, Gemini ErrorInfo reasons and status):
 *       OpenRouter in-flight budget (limit_source "openrouter_in_flight_budget" or reason
 *       "in_flight_budget_exhausted") -> transient;
 *       quota codes on a 4xx (insufficient_quota, credit_balance_exhausted, billing_error,
 *       billing_hard_limit_reached, billing_not_active, insufficient_balance,
 *       enforced_spend_limit_reached, BILLING_DISABLED, *_spend_limit_exceeded /
 *       *_spend_limit_reached, any other OpenRouter limit_source, a Gemini QuotaFailure
 *       quotaId PerDay/PerMonth) -> quota;
 *       429 whose message says "request too large" -> client;
 *       (413 -> client comes first of all these, before the OpenRouter and quota rules);
 *       overloaded (type overloaded_error, status 529, 503 saying "overload") -> rate;
 *       other 5xx -> transient;
 *       rate codes on a 4xx other than 400/404/422 (rate_limit_exceeded,
 *       rate_limit_error, OpenAI types "requests"/"tokens", RESOURCE_EXHAUSTED, a
 *       PerMinute/PerSecond/PerHour quotaId) -> rate;
 *       auth codes on a 4xx (Gemini's 400 with ErrorInfo reason API_KEY_INVALID,
 *       invalid_api_key, authentication_error, UNAUTHENTICATED) -> auth.
 *     - Then message text (or the body text when not JSON), case-insensitive, only when
 *       no rate code was found (OpenAI's rate-limit messages link to ".../billing"):
 *       "insufficient balance", "insufficient credit", "insufficient funds",
 *       "quota exceeded", "credit balance", "spend limit", "billing" on a 4xx -> quota.
 *     - Then status: 402 quota, 403 auth, 407 config (proxy), 408 transient, 429 rate,
 *       other 4xx client.
 *  Hints (hint_s) are reported only for rate and transient verdicts (quota and auth use
 *  flat cooldowns, §4.2). Reset headers count only for a 429 classified rate, because
 *  they describe when a usage window resets, not when a server will be back.
 *
 * Hint precedence (aor_hint_pick), most precise first: retry-after-ms, then Retry-After,
 * then the provider reset headers, then Gemini RetryInfo.retryDelay in the body. "The
 * latest hint wins, not the first" (§4.3) is read as: when the same header (or several
 * RetryInfo entries) appears more than once, the last valid occurrence wins. An invalid
 * value of a kind makes that kind absent, and the next kind is used. */
#ifndef AOR_CLASSIFY_H
#define AOR_CLASSIFY_H

#include "types.h"

#include <stddef.h>

/* Largest body prefix (bytes) the classifier and aor_hint_pick look at; the rest of a
 * longer body is ignored (error bodies are small). */
#define AOR_CLASSIFY_MAX_BODY (256 * 1024)

/* Largest header value (bytes) the hint parsers accept; longer values are junk. */
#define AOR_HINT_MAX_VALUE 256

/* Hints larger than this (seconds, ~31.7 million years) are returned as this value, so
 * callers never see inf. */
#define AOR_HINT_SATURATE_S 1e15

/* One response header as received (name case-insensitive; value without CRLF). */
typedef struct {
    const char *name;
    const char *value;
} aor_header;

/* Result of classifying one upstream attempt. */
typedef struct {
    aor_kind kind;
    double hint_s;    /* sane retry hint in seconds (> 0), or -1 for none. May exceed the
                         backoff cap: the backoff table caps it. */
    long status;      /* the HTTP status the attempt stands for: the answer's, or for an
                         error event inside a 200 stream the status its code maps to
                         (aor_classify_sse_error); 0 when there was no answer */
    char reason[160]; /* short human text for logs and terminal answers, e.g.
                         "429 rate_limit_exceeded"; printable ASCII only, never contains a
                         secret (no upstream message text, only codes); truncated */
} aor_verdict;

/* Classifies an upstream answer (rules in the comment at the top of this file).
 * d: dialect of the provider that answered (named in config reasons). status: HTTP
 *   status (0 = no answer: network, TLS or timeout error -> transient). hdrs/nhdrs:
 *   response headers (NULL/0 allowed). body/len: the (possibly partial, possibly not
 *   NUL-terminated) body, NULL/0 allowed; only the first AOR_CLASSIFY_MAX_BODY bytes are
 *   read.
 * now: Unix seconds, to turn dates into durations. ignore_hints: provider has
 *   retry_after = ignore (§4.3): hint_s is always -1.
 * A 2xx whose Content-Type is text/html (not the dialect's JSON/SSE) -> AOR_KIND_CONFIG.
 * Fills *out. Can't fail (out of memory while parsing the body = body not readable). */
void aor_classify(aor_dialect d, long status, const aor_header *hdrs, size_t nhdrs,
                  const char *body, size_t len, double now, int ignore_hints, aor_verdict *out);

/* Classifies an SSE error event that arrived inside a 200 stream (§5.3), e.g.
 * `event: error` + `data: {"type":"error","error":{"type":"overloaded_error",...}}`, an
 * OpenAI/OpenRouter `data: {"error":{...}}` chunk, an OpenAI Responses
 * `{"type":"error","code":...,"message":...}` or `{"type":"response.failed","response":
 * {"error":{...}}}` event. data/len: the event's data payload (JSON), NULL/0 allowed.
 * The error is classified like the same error as an HTTP answer: a numeric error.code
 * (OpenRouter, Gemini) is used as the status, else the status is derived from the code
 * (overloaded_error -> 529, rate_limit_* -> 429, insufficient_quota -> 429,
 * billing_error -> 402, authentication_error/invalid_api_key -> 401, permission_error ->
 * 403, invalid_request_error -> 400, not_found_error -> 404, Gemini status names as
 * google.rpc maps them, anything else -> 500). hint_s comes from a RetryInfo in the data
 * only. Returns 1 and fills *out when it is an error event, 0 (out untouched) when not. */
int aor_classify_sse_error(aor_dialect d, const char *data, size_t len, aor_verdict *out);

/* Parses a Retry-After value (§4.3): 1*DIGIT seconds, or an HTTP-date in IMF-fixdate,
 * RFC 850 or asctime form, relative to now (Unix seconds). Leading/trailing spaces and
 * tabs are ignored; anything else after the value makes it junk.
 * Returns seconds > 0, or -1 for "no hint" (NULL, 0, past date, negative, fraction, junk,
 * empty, longer than AOR_HINT_MAX_VALUE). Large values are returned as they are (the
 * caller caps), saturated at AOR_HINT_SATURATE_S. */
double aor_hint_retry_after(const char *value, double now);

/* Parses retry-after-ms ("1500" -> 1.5; a decimal fraction of ms is allowed).
 * Returns seconds > 0 or -1 (NULL, empty, 0, negative, junk). */
double aor_hint_retry_after_ms(const char *value);

/* Parses a Google duration ("19s", "3.700s") as in RetryInfo.retryDelay. Seconds > 0
 * or -1. */
double aor_hint_duration(const char *value);

/* Parses a Go duration as in OpenAI's x-ratelimit-reset-requests/-tokens: one or more
 * decimal+unit pairs, units h, m, s, ms, us/µs/μs, ns ("6m0s", "1.5s", "20ms",
 * "1h2m3.5s"). Seconds > 0 or -1 (sign, missing unit, junk, zero). */
double aor_hint_go_duration(const char *value);

/* As aor_hint_go_duration, for a usage window's reset time (spec §6): a zero duration
 * ("0s": the window resets now) is valid. Seconds >= 0, or -1 (sign, missing unit,
 * junk). */
double aor_hint_go_duration_reset(const char *value);

/* Parses an RFC 3339 timestamp ("2027-01-15T08:00:12Z", "...12.5+01:00"; T/t/space,
 * Z/z or a numeric offset) into Unix seconds in *out. Returns 0, or -1 (out untouched)
 * when the value is not exactly such a timestamp or a field is out of range. */
int aor_rfc3339_parse(const char *value, double *out);

/* Parses an HTTP-date (RFC 9110 §5.6.7) in any of its three forms into Unix seconds in
 * *out: IMF-fixdate "Fri, 15 Jan 2027 08:00:30 GMT", RFC 850 "Friday, 15-Jan-27
 * 08:00:30 GMT" (two-digit year taken within [year(now)-49, year(now)+50]), asctime
 * "Fri Jan 15 08:00:30 2027". Names are matched case-insensitively; the weekday is not
 * cross-checked against the date. Returns 0, or -1 (out untouched) on anything else. */
int aor_http_date_parse(const char *value, double now, double *out);

/* 1 when header `name` is a provider window-reset header: OpenAI/Groq
 * x-ratelimit-reset-*, OpenRouter x-ratelimit-reset, Anthropic anthropic-ratelimit-*-reset. */
int aor_hint_is_reset_header(const char *name);

/* Parses a reset header value into seconds from now: Go duration ("6m0s", OpenAI),
 * RFC 3339 timestamp (Anthropic), or a number: >= 1e11 epoch milliseconds (OpenRouter),
 * >= 1e9 epoch seconds, else a delta in seconds. Seconds > 0 or -1. */
double aor_hint_reset(const char *value, double now);

/* Sources aor_hint_pick looks at. */
enum {
    AOR_HINT_HEADERS = 1, /* retry-after-ms, Retry-After */
    AOR_HINT_RESETS = 2,  /* provider reset headers */
    AOR_HINT_BODY = 4,    /* Gemini RetryInfo.retryDelay in a JSON error body */
    AOR_HINT_ALL = 7
};

/* Picks the hint from the answer, looking only at the sources in `flags`, with the
 * precedence and "last occurrence wins" rule in the comment at the top of this file.
 * Reset headers: when a matching *-remaining header says 0, only those windows count and
 * the latest reset of them is used (all of them must reset; none of them with a usable
 * reset: no hint from resets); when none says 0, the earliest reset is used. Returns
 * seconds > 0 or -1. */
double aor_hint_pick(const aor_header *hdrs, size_t nhdrs, const char *body, size_t len, double now,
                     unsigned flags);

/* aor_hint_pick(hdrs, nhdrs, body, len, now, AOR_HINT_ALL); d is not needed (every
 * dialect's hints are recognised by name) and kept for callers. Seconds or -1. */
double aor_hint_from_answer(aor_dialect d, const aor_header *hdrs, size_t nhdrs, const char *body,
                            size_t len, double now);

#endif
