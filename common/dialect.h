/* What differs between provider API dialects (spec §5.1, §5.6, §3.2):
 * where the model is, how the key is sent, how an error body looks.
 * Sources: OpenAI API reference (chat/completions, errors), Anthropic Messages API and
 * "Errors", Gemini REST API (models/{model}:generateContent, x-goog-api-key). */
#ifndef AOR_DIALECT_H
#define AOR_DIALECT_H

#include "types.h"

#include <stddef.h>

/* All functions below set errno on a NULL return: EINVAL for bad input (named in each
 * comment), ENOMEM when out of memory. */

/* Model named by a JSON request body (`"model"` field, OpenAI/Anthropic).
 * Returns a malloc'd string (caller frees), or NULL when the body is not a JSON object
 * or has no string "model" (EINVAL), or on ENOMEM. Also EINVAL for a body that only a full
 * parser can read (an escaped top-level key, ...) and that holds a NUL byte or a \u0000
 * escape: cJSON would take the key "model\u0000" for "model". */
char *aor_dialect_body_model(const char *body, size_t len);

/* aor_dialect_body_model without an allocation in the common case: a model that is a
 * plain JSON string (no escapes) shorter than cap bytes is written into buf (NUL
 * terminated) and buf is returned with *own = NULL; otherwise the result is malloc'd,
 * returned and also put in *own (the caller frees *own). buf may be NULL (cap 0). NULL
 * with errno as aor_dialect_body_model. */
const char *aor_dialect_body_model_buf(const char *body, size_t len, char *buf, size_t cap,
                                       char **own);

/* Model named by a Gemini path: "/v1beta/models/gemini-2.0-flash:generateContent?alt=sse"
 * -> "gemini-2.0-flash" (the segment after the first "/models/", up to ':', '/', '?' or
 * '#'). Returns malloc'd string, or NULL (EINVAL: no or empty model segment; ENOMEM). */
char *aor_dialect_path_model(const char *path);

/* Replaces the body's top-level "model" value by `model`. Returns a malloc'd new body
 * (NUL-terminated) and sets *out_len (bytes, without the NUL), or NULL: EINVAL when
 * aor_dialect_body_model finds no model in the body (so both agree), ENOMEM. Only called
 * when the upstream id differs. Every other byte of the body is kept as sent (the new
 * value is spliced in; a body is re-serialised by cJSON only when the raw text can't be
 * walked, e.g. an escaped key, which may change number formatting; such a body holding a
 * \u0000 escape is refused with EINVAL, as printing would cut its strings). Duplicate
 * top-level string "model" members are all replaced. */
char *aor_dialect_body_set_model(const char *body, size_t len, const char *model, size_t *out_len);

/* Replaces the model segment of a Gemini path (as found by aor_dialect_path_model).
 * Returns malloc'd path, or NULL: EINVAL when the path has no model segment or `model` is
 * empty or has a character outside [A-Za-z0-9._~-] (it would change the path's meaning);
 * ENOMEM. */
char *aor_dialect_path_set_model(const char *path, const char *model);

/* The request header that carries the key in dialect d, written as a full header line
 * without CRLF: "Authorization: Bearer SECRET", "x-api-key: SECRET",
 * "x-goog-api-key: SECRET". Returns malloc'd string (contains the secret: never log it)
 * or NULL: EINVAL for a NULL/empty secret, a secret with a control character (CR/LF would
 * inject headers) or an unknown dialect; ENOMEM. */
char *aor_dialect_auth_header(aor_dialect d, const char *secret);

/* The parts of that header line for dialect d: *name ("Authorization", "x-api-key",
 * "x-goog-api-key") and *scheme, the text before the secret in the value ("Bearer ", or
 * ""), both static. Returns 0, or -1 with errno EINVAL for an unknown dialect. For
 * callers that write the line themselves (no allocation per request); they must refuse
 * a secret aor_dialect_secret_ok refuses, as aor_dialect_auth_header does. */
int aor_dialect_auth_parts(aor_dialect d, const char **name, const char **scheme);

/* 1 when secret may go into a header line: not NULL or empty, no control character
 * (CR/LF would inject a header); 0 otherwise. The check aor_dialect_auth_header makes. */
int aor_dialect_secret_ok(const char *secret);

/* 1 when header `name` (case-insensitive) carries a credential in any dialect:
 * authorization, x-api-key, x-goog-api-key, api-key. */
int aor_dialect_is_auth_header(const char *name);

/* §3.2: a Gemini key in the URL ("?key=SECRET") is sent upstream as the x-goog-api-key
 * header instead, never in the URL. Returns a malloc'd copy of the query string `query`
 * (the bytes after '?', without it) with every `key=` parameter left out, also one whose
 * name is percent-encoded (`k%65y=`, the same name by RFC 3986 §6.2.2.2); the other
 * parameters keep their order and bytes, joined by '&'. The result is "" when none is
 * left. Caller frees. NULL on EINVAL (query NULL) or ENOMEM. */
char *aor_dialect_query_drop_key(const char *query);

/* §3.2, §5.1: the credential a client put in its URL: the value of the first non-empty
 * `key=` parameter of `query` (the bytes after '?'; NULL is allowed), percent-decoded
 * (left as it came when the decoded form would hold a control character, a space or a
 * NUL: that is no header value). Returns a malloc'd string the caller wipes and frees,
 * or NULL: errno 0 when there is no such parameter, ENOMEM when out of memory. */
char *aor_dialect_query_key(const char *query);

/* Error body in dialect d's shape (§5.6). status: the HTTP status it goes with. code:
 * machine code such as "aor_all_backed_off", or NULL for none. message: human text
 * (NULL = ""). Every string is escaped by cJSON.
 * openai:    {"error":{"message":M,"type":TYPE,"param":null,"code":CODE|null}}
 *            TYPE by status: 429 "rate_limit_exceeded", 401 "authentication_error",
 *            402 "insufficient_quota", 403 "permission_error", 5xx "server_error", other
 *            "invalid_request_error".
 * anthropic: {"type":"error","error":{"type":ATYPE,"message":"CODE: M",
 *            "details":{"error_code":CODE}}} (without code: message M, no details).
 *            ATYPE by status as Anthropic's SDKs expect: 400 invalid_request_error, 401
 *            authentication_error, 402 billing_error, 403 permission_error, 404
 *            not_found_error, 413 request_too_large, 429 rate_limit_error, 529
 *            overloaded_error, other 5xx api_error, other 4xx invalid_request_error. So a
 *            terminal 429 is a rate_limit_error to SDKs while "aor_all_backed_off" shows
 *            in the message and in details.error_code (where Anthropic puts
 *            enforced_spend_limit_reached).
 * gemini:    {"error":{"code":STATUS,"message":M,"status":S,"details":[{"@type":
 *            "type.googleapis.com/google.rpc.ErrorInfo","reason":CODE,"domain":"aor"}]}}
 *            (no details without code). S by status as google.rpc maps them: 400
 *            INVALID_ARGUMENT, 401 UNAUTHENTICATED, 402 FAILED_PRECONDITION, 403
 *            PERMISSION_DENIED, 404 NOT_FOUND, 409 ABORTED, 429 RESOURCE_EXHAUSTED, 499
 *            CANCELLED, 501 NOT_IMPLEMENTED, 502/503 UNAVAILABLE, 504 DEADLINE_EXCEEDED,
 *            other 5xx INTERNAL, other 4xx INVALID_ARGUMENT.
 * Returns malloc'd JSON (NUL-terminated, free with free()) and sets *len, or NULL on
 * ENOMEM. */
char *aor_dialect_error_body(aor_dialect d, int status, const char *code, const char *message,
                             size_t *len);

/* Dialect of a sidecar/intercepted request path (query ignored): /v1/messages and below
 * -> anthropic; /v1beta/... (Gemini's OpenAI-compatible /v1beta/openai/... too: the
 * Gemini providers'), /v1alpha/... and /v1/models/{model}:{method} -> gemini; everything else
 * (including /v1/models and /v1/models/{id}) -> openai. NULL -> openai. */
aor_dialect aor_dialect_of_path(const char *path);

#endif
