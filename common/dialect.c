/* Dialect differences: model location, key header, error shapes (spec §5.1, §5.6, §3.2).
 * Contract: dialect.h. */
#include "dialect.h"

#include "jsonscan.h"
#include "utf8.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

static cJSON *parse_object(const char *body, size_t len) {
    if (!body || len == 0) {
        errno = EINVAL;
        return NULL;
    }
    cJSON *root = cJSON_ParseWithLength(body, len);
    if (!cJSON_IsObject(root)) {
        cJSON_Delete(root);
        errno = EINVAL;
        return NULL;
    }
    return root;
}

static char *dup_or_enomem(const char *s) {
    char *r = strdup(s);
    if (!r)
        errno = ENOMEM;
    return r;
}

/* 1 when the body holds a NUL byte or a \u0000 escape. cJSON keeps strings as C strings:
 * it would read the key "model\u0000" as "model" and cut a string at the NUL when
 * printing, so such a body (rare: the allocation-free scan answers for plain ones) is not
 * read or rewritten through cJSON. */
static int has_nul(const char *body, size_t len) {
    if (!body)
        return 0;
    if (memchr(body, '\0', len))
        return 1;
    for (const char *p = body, *end = body + len;
         (p = memmem(p, (size_t)(end - p), "\\u0000", 6)) != NULL; p++) {
        size_t bs = 0; /* backslashes before: odd means "\\u0000" is text, not an escape */
        while (p - bs > body && p[-(ptrdiff_t)bs - 1] == '\\')
            bs++;
        if (bs % 2 == 0)
            return 1;
    }
    return 0;
}

char *aor_dialect_body_model(const char *body, size_t len) {
    char *own = NULL;
    aor_dialect_body_model_buf(body, len, NULL, 0, &own);
    return own;
}

const char *aor_dialect_body_model_buf(const char *body, size_t len, char *buf, size_t cap,
                                       char **own) {
    /* Fast path: a scan that allocates nothing answers for plain valid bodies; a tree of
     * a large body (a long conversation) cost more than everything else on the request
     * path together (docs/performance.md). cJSON decides the rest. */
    *own = NULL;
    const char *v = NULL;
    size_t vl = 0;
    int found = aor_json_top_string(body, len, "model", &v, &vl);
    if (found == 1 && buf && vl < cap) {
        memcpy(buf, v, vl);
        buf[vl] = '\0';
        return buf;
    }
    if (found == 1) {
        *own = strndup(v, vl);
        if (!*own)
            errno = ENOMEM;
        return *own;
    }
    if (found == 0 || has_nul(body, len)) {
        errno = EINVAL;
        return NULL;
    }
    cJSON *root = parse_object(body, len);
    if (!root)
        return NULL;
    /* The last member named "model" when there are several, as Python's json, JavaScript's
     * JSON.parse and Go read such a body: the upstream sees the model aord routed on. */
    const cJSON *last = NULL;
    for (const cJSON *it = root->child; it != NULL; it = it->next)
        if (it->string != NULL && strcmp(it->string, "model") == 0)
            last = it;
    const char *m = cJSON_GetStringValue(last);
    if (m)
        *own = dup_or_enomem(m);
    else
        errno = EINVAL;
    cJSON_Delete(root);
    return *own;
}

/* --- splicing a new "model" value into the raw body --------------------------------- */
/* The body is re-serialised by cJSON only as a last resort: cJSON keeps numbers as
 * double, so printing would change integers above 2^53 and the exact text of floats.
 * Splicing keeps every other byte as the client sent it. */

#define MAX_MODEL_SPANS 8

typedef struct {
    size_t off, len;
} span;

/* cJSON (which validated the body) skips every byte <= 0x20 between tokens, not only JSON
 * whitespace; the walk must split the text where cJSON does. */
static int is_ws(char c) {
    return (unsigned char)c <= 0x20;
}

static size_t skip_ws(const char *s, size_t n, size_t i) {
    while (i < n && is_ws(s[i]))
        i++;
    return i;
}

/* s[*i] is '"'; moves *i past the closing quote. */
static int skip_string(const char *s, size_t n, size_t *i) {
    size_t j = *i + 1;
    while (j < n && s[j] != '"')
        j += (s[j] == '\\') ? 2 : 1;
    if (j >= n)
        return -1;
    *i = j + 1;
    return 0;
}

/* Moves *i past one JSON value (the text is known valid: cJSON parsed it). */
static int skip_value(const char *s, size_t n, size_t *i) {
    size_t j = *i;
    if (j >= n)
        return -1;
    if (s[j] == '"')
        return skip_string(s, n, i);
    if (s[j] == '{' || s[j] == '[') {
        size_t depth = 0;
        while (j < n) {
            if (s[j] == '"') {
                if (skip_string(s, n, &j))
                    return -1;
                continue;
            }
            if (s[j] == '{' || s[j] == '[')
                depth++;
            else if ((s[j] == '}' || s[j] == ']') && --depth == 0) {
                *i = j + 1;
                return 0;
            }
            j++;
        }
        return -1;
    }
    while (j < n && s[j] != ',' && s[j] != '}' && s[j] != ']' && !is_ws(s[j]))
        j++;
    *i = j;
    return 0;
}

/* Finds the string values of top-level "model" members. Returns how many (0..MAX), or -1
 * when the text can't be walked or has more than MAX_MODEL_SPANS of them. */
static int find_model_spans(const char *s, size_t n, span *out) {
    size_t i = 0;
    int found = 0;
    if (n >= 3 && memcmp(s, "\xef\xbb\xbf", 3) == 0)
        i = 3;
    i = skip_ws(s, n, i);
    if (i >= n || s[i] != '{')
        return -1;
    i = skip_ws(s, n, i + 1);
    if (i < n && s[i] == '}')
        return 0;
    while (i < n) {
        size_t k = i;
        if (s[i] != '"' || skip_string(s, n, &i))
            return -1;
        /* A key with an escape or a control byte may mean "model" to cJSON ("mod\u0065l",
         * "model\u0000"): only cJSON can tell, so the walk gives up. */
        for (size_t c = k + 1; c + 1 < i; c++)
            if (s[c] == '\\' || (unsigned char)s[c] < 0x20)
                return -1;
        int is_model = i - k == 7 && memcmp(s + k, "\"model\"", 7) == 0;
        i = skip_ws(s, n, i);
        if (i >= n || s[i] != ':')
            return -1;
        i = skip_ws(s, n, i + 1);
        size_t v = i;
        if (skip_value(s, n, &i))
            return -1;
        if (is_model && s[v] == '"') {
            if (found == MAX_MODEL_SPANS)
                return -1;
            out[found].off = v;
            out[found++].len = i - v;
        }
        i = skip_ws(s, n, i);
        if (i < n && s[i] == '}')
            return found;
        if (i >= n || s[i] != ',')
            return -1;
        i = skip_ws(s, n, i + 1);
    }
    return -1;
}

/* Re-serialises the whole body with the new model (fallback); every top-level string
 * "model" member gets it, as in the splice. */
static char *reprint_with_model(cJSON *root, const char *model, size_t *out_len) {
    for (cJSON *c = root->child; c; c = c->next) {
        if (c->string && strcmp(c->string, "model") == 0 && cJSON_IsString(c) &&
            !cJSON_SetValuestring(c, model)) {
            errno = ENOMEM;
            return NULL;
        }
    }
    char *printed = cJSON_PrintUnformatted(root);
    char *r = printed ? strdup(printed) : NULL; /* the caller frees with free() */
    cJSON_free(printed);
    if (!r) {
        errno = ENOMEM;
        return NULL;
    }
    *out_len = strlen(r);
    return r;
}

char *aor_dialect_body_set_model(const char *body, size_t len, const char *model, size_t *out_len) {
    char *res = NULL, *quoted = NULL;
    cJSON *str = NULL;
    span spans[MAX_MODEL_SPANS];
    if (!model) {
        errno = EINVAL;
        return NULL;
    }
    /* Rewrite exactly the bodies in which aor_dialect_body_model finds a model. */
    char *cur = aor_dialect_body_model(body, len);
    if (!cur)
        return NULL; /* errno set */
    free(cur);
    cJSON *root = parse_object(body, len);
    if (!root)
        return NULL;
    int n = find_model_spans(body, len, spans);
    if (n <= 0) { /* e.g. an escaped key "mod\u0065l": let cJSON do it */
        if (has_nul(body, len))
            errno = EINVAL; /* printing would cut strings at the NUL */
        else
            res = reprint_with_model(root, model, out_len);
        goto out_root;
    }
    str = cJSON_CreateString(model);
    quoted = str ? cJSON_PrintUnformatted(str) : NULL; /* "..." with JSON escapes */
    if (!quoted) {
        errno = ENOMEM;
        goto out_str;
    }
    size_t ql = strlen(quoted), total = len;
    for (int i = 0; i < n; i++)
        total = total - spans[i].len + ql; /* spans lie inside the body: no underflow */
    res = malloc(total + 1);
    if (!res) {
        errno = ENOMEM;
        goto out_quoted;
    }
    size_t from = 0, to = 0;
    for (int i = 0; i < n; i++) {
        memcpy(res + to, body + from, spans[i].off - from);
        to += spans[i].off - from;
        memcpy(res + to, quoted, ql);
        to += ql;
        from = spans[i].off + spans[i].len;
    }
    memcpy(res + to, body + from, len - from);
    to += len - from;
    res[to] = '\0';
    *out_len = to;
out_quoted:
    cJSON_free(quoted);
out_str:
    cJSON_Delete(str);
out_root:
    cJSON_Delete(root);
    return res;
}

/* --- Gemini paths ------------------------------------------------------------------- */

/* Finds the model segment of "/.../models/{model}[:method][?query]". */
static int path_model_span(const char *path, size_t *off, size_t *len) {
    if (!path)
        return -1;
    size_t plen = strcspn(path, "?#");
    const char *hit = strstr(path, "/models/");
    if (!hit || (size_t)(hit - path) + 8 > plen)
        return -1;
    size_t b = (size_t)(hit - path) + 8;
    size_t e = b + strcspn(path + b, ":/?#");
    if (e > plen)
        e = plen;
    if (e == b)
        return -1;
    *off = b;
    *len = e - b;
    return 0;
}

char *aor_dialect_path_model(const char *path) {
    size_t off, len;
    if (path_model_span(path, &off, &len)) {
        errno = EINVAL;
        return NULL;
    }
    char *r = strndup(path + off, len);
    if (!r)
        errno = ENOMEM;
    return r;
}

static int model_char_ok(char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' ||
           c == '.' || c == '_' || c == '~';
}

char *aor_dialect_path_set_model(const char *path, const char *model) {
    size_t off, len;
    if (!model || !*model || path_model_span(path, &off, &len)) {
        errno = EINVAL;
        return NULL;
    }
    size_t ml = strlen(model);
    for (size_t i = 0; i < ml; i++) {
        if (!model_char_ok(model[i])) {
            errno = EINVAL;
            return NULL;
        }
    }
    size_t plen = strlen(path), total = plen - len + ml;
    char *r = malloc(total + 1);
    if (!r) {
        errno = ENOMEM;
        return NULL;
    }
    memcpy(r, path, off);
    memcpy(r + off, model, ml);
    memcpy(r + off + ml, path + off + len, plen - off - len + 1);
    return r;
}

/* --- credentials (§3.2) ------------------------------------------------------------- */

int aor_dialect_secret_ok(const char *secret) {
    if (!secret || !*secret)
        return 0;
    for (const char *p = secret; *p; p++)
        if ((unsigned char)*p < 0x20 || *p == 0x7f) /* CR/LF would inject a header */
            return 0;
    return 1;
}

int aor_dialect_auth_parts(aor_dialect d, const char **name, const char **scheme) {
    static const char *const names[] = {"Authorization", "x-api-key", "x-goog-api-key"};
    if ((unsigned)d > AOR_DIALECT_GEMINI) {
        errno = EINVAL;
        return -1;
    }
    *name = names[d];
    *scheme = d == AOR_DIALECT_OPENAI ? "Bearer " : "";
    return 0;
}

char *aor_dialect_auth_header(aor_dialect d, const char *secret) {
    const char *name, *scheme;
    if (!secret || !*secret || aor_dialect_auth_parts(d, &name, &scheme) < 0) {
        errno = EINVAL;
        return NULL;
    }
    if (!aor_dialect_secret_ok(secret)) {
        errno = EINVAL;
        return NULL;
    }
    size_t nl = strlen(name), cl = strlen(scheme), sl = strlen(secret);
    char *r = malloc(nl + 2 + cl + sl + 1);
    if (!r) {
        errno = ENOMEM;
        return NULL;
    }
    memcpy(r, name, nl);
    memcpy(r + nl, ": ", 2);
    memcpy(r + nl + 2, scheme, cl);
    memcpy(r + nl + 2 + cl, secret, sl + 1);
    return r;
}

int aor_dialect_is_auth_header(const char *name) {
    static const char *const names[] = {"authorization", "x-api-key", "x-goog-api-key", "api-key"};
    if (!name)
        return 0;
    char first = (char)(name[0] | 0x20); /* most names differ here: no strcasecmp */
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        if (names[i][0] == first && strcasecmp(name, names[i]) == 0)
            return 1;
    return 0;
}

static int hexval(char c) {
    if (c >= '0' && c <= '9')
        return c - '0';
    if ((c | 0x20) >= 'a' && (c | 0x20) <= 'f')
        return (c | 0x20) - 'a' + 10;
    return -1;
}

/* 1 with *c the byte of a %XX escape at v[i] (v of n bytes), else 0. */
static int escape_at(const char *v, size_t i, size_t n, unsigned char *c) {
    int h, l;
    if (v[i] != '%' || i + 2 >= n || (h = hexval(v[i + 1])) < 0 || (l = hexval(v[i + 2])) < 0)
        return 0;
    *c = (unsigned char)(h * 16 + l);
    return 1;
}

/* 1 when the query parameter at s (l bytes, up to its '&') is named "key", also with its
 * letters percent-encoded (`k%65y=`: RFC 3986 §6.2.2.2 makes it the same name, and
 * Google's server reads it so); *value is set to the offset of its value. A bare `key`
 * without '=' is not one. */
static int param_is_key(const char *s, size_t l, size_t *value) {
    const char *eq = memchr(s, '=', l);
    size_t nl = eq ? (size_t)(eq - s) : l;
    if (!eq || nl < 3 || nl > 9)
        return 0;
    char name[3];
    size_t o = 0;
    for (size_t i = 0; i < nl; i++) {
        unsigned char c;
        if (escape_at(s, i, nl, &c))
            i += 2;
        else
            c = (unsigned char)s[i];
        if (o == 3)
            return 0;
        name[o++] = (char)c;
    }
    if (o != 3 || memcmp(name, "key", 3) != 0)
        return 0;
    *value = nl + 1;
    return 1;
}

char *aor_dialect_query_drop_key(const char *query) {
    if (!query) {
        errno = EINVAL;
        return NULL;
    }
    size_t n = strlen(query);
    char *out = malloc(n + 1);
    if (!out) {
        errno = ENOMEM;
        return NULL;
    }
    size_t o = 0;
    int kept = 0; /* parameters kept so far, empty ones too: their '&' is kept */
    for (const char *s = query;; s++) {
        size_t l = strcspn(s, "&"), v;
        if (!param_is_key(s, l, &v)) {
            if (kept++)
                out[o++] = '&';
            memcpy(out + o, s, l);
            o += l;
        }
        s += l;
        if (*s != '&')
            break;
    }
    out[o] = '\0';
    return out;
}

/* Decodes the %XX escapes of a key value in place. A value whose decoded form would hold
 * a control character, a space or a NUL is left as it came: it cannot be a header value,
 * and is no key. */
static void decode_key(char *v) {
    size_t n = strlen(v), o = 0;
    unsigned char c;
    for (size_t i = 0; i < n; i++) {
        if (escape_at(v, i, n, &c))
            i += 2;
        else
            c = (unsigned char)v[i];
        if (c <= 0x20 || c == 0x7f)
            return; /* left as it came */
    }
    for (size_t i = 0; i < n; i++) {
        if (escape_at(v, i, n, &c))
            i += 2;
        else
            c = (unsigned char)v[i];
        v[o++] = (char)c;
    }
    explicit_bzero(v + o, n - o);
    v[o] = '\0';
}

char *aor_dialect_query_key(const char *query) {
    errno = 0;
    for (const char *s = query; s && *s;) {
        size_t l = strcspn(s, "&"), at;
        /* An empty key= is no credential: a later one may be (`key=&key=K` took the empty
         * one, and K went upstream neither in the URL nor as a header). */
        if (param_is_key(s, l, &at) && at < l) {
            char *key = strndup(s + at, l - at);
            if (!key) {
                errno = ENOMEM;
                return NULL;
            }
            decode_key(key);
            return key;
        }
        s += l;
        if (*s == '&')
            s++;
    }
    return NULL;
}

/* --- error bodies (§5.6) ------------------------------------------------------------ */

static const char *openai_type(int status) {
    if (status == 429)
        return "rate_limit_exceeded";
    if (status == 401)
        return "authentication_error";
    if (status == 402)
        return "insufficient_quota";
    if (status == 403)
        return "permission_error";
    if (status >= 500)
        return "server_error";
    return "invalid_request_error";
}

static const char *anthropic_type(int status) {
    switch (status) {
    case 401:
        return "authentication_error";
    case 402:
        return "billing_error";
    case 403:
        return "permission_error";
    case 404:
        return "not_found_error";
    case 413:
        return "request_too_large";
    case 429:
        return "rate_limit_error";
    case 529:
        return "overloaded_error";
    default:
        return status >= 500 ? "api_error" : "invalid_request_error";
    }
}

static const char *google_status(int status) {
    switch (status) {
    case 400:
        return "INVALID_ARGUMENT";
    case 401:
        return "UNAUTHENTICATED";
    case 402:
        return "FAILED_PRECONDITION";
    case 403:
        return "PERMISSION_DENIED";
    case 404:
        return "NOT_FOUND";
    case 409:
        return "ABORTED";
    case 429:
        return "RESOURCE_EXHAUSTED";
    case 499:
        return "CANCELLED";
    case 501:
        return "NOT_IMPLEMENTED";
    case 502:
    case 503:
        return "UNAVAILABLE";
    case 504:
        return "DEADLINE_EXCEEDED";
    default:
        return status >= 500 ? "INTERNAL" : "INVALID_ARGUMENT";
    }
}

/* Adds every member; returns 0, or -1 when one could not be added (ENOMEM). */
static int build_openai(cJSON *root, const char *code, const char *message, int status) {
    cJSON *err = cJSON_AddObjectToObject(root, "error");
    return err && cJSON_AddStringToObject(err, "message", message) &&
                   cJSON_AddStringToObject(err, "type", openai_type(status)) &&
                   cJSON_AddNullToObject(err, "param") &&
                   (code ? cJSON_AddStringToObject(err, "code", code) != NULL
                         : cJSON_AddNullToObject(err, "code") != NULL)
               ? 0
               : -1;
}

static int build_anthropic(cJSON *root, const char *code, const char *message, int status) {
    cJSON *err;
    if (!cJSON_AddStringToObject(root, "type", "error") ||
        !(err = cJSON_AddObjectToObject(root, "error")) ||
        !cJSON_AddStringToObject(err, "type", anthropic_type(status)))
        return -1;
    if (!code)
        return cJSON_AddStringToObject(err, "message", message) ? 0 : -1;
    /* the code goes in front of the message and into details.error_code */
    size_t n = strlen(code) + strlen(message) + 3;
    char *msg = malloc(n);
    if (!msg)
        return -1;
    int w = snprintf(msg, n, message[0] ? "%s: %s" : "%s", code, message);
    cJSON *details = NULL;
    int ok = w >= 0 && (size_t)w < n && cJSON_AddStringToObject(err, "message", msg) &&
             (details = cJSON_AddObjectToObject(err, "details")) &&
             cJSON_AddStringToObject(details, "error_code", code);
    free(msg);
    return ok ? 0 : -1;
}

static int build_gemini(cJSON *root, const char *code, const char *message, int status) {
    cJSON *err, *details, *info;
    if (!(err = cJSON_AddObjectToObject(root, "error")) ||
        !cJSON_AddNumberToObject(err, "code", status) ||
        !cJSON_AddStringToObject(err, "message", message) ||
        !cJSON_AddStringToObject(err, "status", google_status(status)))
        return -1;
    if (!code)
        return 0;
    if (!(details = cJSON_AddArrayToObject(err, "details")) || !(info = cJSON_CreateObject()))
        return -1;
    if (!cJSON_AddItemToArray(details, info)) {
        cJSON_Delete(info);
        return -1;
    }
    return cJSON_AddStringToObject(info, "@type", "type.googleapis.com/google.rpc.ErrorInfo") &&
                   cJSON_AddStringToObject(info, "reason", code) &&
                   cJSON_AddStringToObject(info, "domain", "aor")
               ? 0
               : -1;
}

char *aor_dialect_error_body(aor_dialect d, int status, const char *code, const char *message,
                             size_t *len) {
    cJSON *root = cJSON_CreateObject();
    char *printed = NULL, *r = NULL, *fixed = NULL;
    int rc;
    if (!root)
        goto fail_nomem;
    if (!message)
        message = "";
    if (!aor_utf8_valid(message, strlen(message))) { /* RFC 8259 §8.1: UTF-8 only */
        fixed = aor_utf8_sanitize(message);
        if (!fixed)
            goto fail_root;
        message = fixed;
    }
    if (d == AOR_DIALECT_ANTHROPIC)
        rc = build_anthropic(root, code, message, status);
    else if (d == AOR_DIALECT_GEMINI)
        rc = build_gemini(root, code, message, status);
    else
        rc = build_openai(root, code, message, status);
    if (rc || !(printed = cJSON_PrintUnformatted(root)))
        goto fail_root;
    r = strdup(printed); /* the caller frees with free() */
    cJSON_free(printed);
    if (!r)
        goto fail_root;
    cJSON_Delete(root);
    free(fixed);
    *len = strlen(r);
    return r;
fail_root:
    cJSON_Delete(root);
    free(fixed);
fail_nomem:
    errno = ENOMEM;
    return NULL;
}

/* --- request paths ------------------------------------------------------------------ */

static int has_prefix_seg(const char *path, size_t plen, const char *prefix) {
    size_t n = strlen(prefix);
    /* memcmp: path has plen >= n bytes; with a literal prefix it is inlined */
    return plen >= n && memcmp(path, prefix, n) == 0 &&
           (plen == n || path[n] == '/' || path[n] == '?' || path[n] == '#');
}

aor_dialect aor_dialect_of_path(const char *path) {
    if (!path)
        return AOR_DIALECT_OPENAI;
    size_t plen = strcspn(path, "?#");
    if (has_prefix_seg(path, plen, "/v1/messages"))
        return AOR_DIALECT_ANTHROPIC;
    /* /v1beta/openai/... too: Gemini's OpenAI-compatible API is the Gemini providers',
     * with their keys, its bodies OpenAI-shaped (QA: on the sidecar it went to the OpenAI
     * providers, and with none configured a client's Gemini key to api.openai.com). */
    if ((plen >= 8 && memcmp(path, "/v1beta/", 8) == 0) ||
        (plen >= 9 && memcmp(path, "/v1alpha/", 9) == 0))
        return AOR_DIALECT_GEMINI; /* v1alpha: Gemini's preview API (QA: sent to OpenAI) */
    /* Gemini v1: /v1/models/{model}:method; OpenAI /v1/models/{id} has no ':' */
    if (plen > 11 && memcmp(path, "/v1/models/", 11) == 0 &&
        memchr(path + 11, ':', plen - 11) != NULL)
        return AOR_DIALECT_GEMINI;
    return AOR_DIALECT_OPENAI;
}
