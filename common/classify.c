/* Classification of an upstream answer (spec §4.1). Rules and their order: classify.h. */
#include "classify.h"

#include <cjson/cJSON.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

/* What the error body of an answer says, in any dialect's shape. Strings point into the
 * cJSON tree, NULL when absent. */
typedef struct {
    int shaped;               /* an error object/string in a dialect's shape was found */
    const char *code;         /* error.code when a string (OpenAI) */
    double num_code;          /* error.code when a number (OpenRouter, Gemini), else 0 */
    const char *type;         /* error.type (OpenAI, Anthropic) */
    const char *status;       /* error.status (Gemini) */
    const char *details_code; /* error.details.error_code (Anthropic) */
    const char *limit_source; /* error.metadata.limit_source (OpenRouter) */
    const char *meta_reason;  /* error.metadata.reason / error_type (OpenRouter) */
    const char *info_reason;  /* last google.rpc.ErrorInfo reason (Gemini) */
    int flagged;              /* error.metadata has "reasons" or "flagged_input": OpenRouter's
                                 moderation refused the input (ModerationErrorMetadata) */
    const char *flag_reason;  /* its first reason ("harassment"), or NULL */
    const char *message;      /* error.message, or the error string */
    int per_day;              /* a QuotaFailure quotaId per day/month */
    int per_minute;           /* a QuotaFailure quotaId per second/minute/hour */
} errinfo;

static int has_suffix(const char *s, const char *suffix) {
    size_t n = strlen(s), m = strlen(suffix);
    return n >= m && strcasecmp(s + n - m, suffix) == 0;
}

/* Case-insensitive search of an ASCII needle in a bounded, maybe not NUL-terminated text. */
static int text_has(const char *text, size_t len, const char *needle) {
    size_t m = strlen(needle);
    if (!text || m == 0 || len < m)
        return 0;
    for (size_t i = 0; i + m <= len; i++)
        if (strncasecmp(text + i, needle, m) == 0)
            return 1;
    return 0;
}

static int str_has(const char *s, const char *needle) {
    return s && text_has(s, strlen(s), needle);
}

static const char *jstr(const cJSON *obj, const char *name) {
    return cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(obj, name));
}

/* Gemini error.details[]: QuotaFailure violations and ErrorInfo reasons. */
static void read_google_details(const cJSON *details, errinfo *e) {
    const cJSON *d, *v;
    cJSON_ArrayForEach(d, details) {
        const char *type = jstr(d, "@type");
        if (!type)
            continue;
        if (has_suffix(type, "google.rpc.ErrorInfo") && jstr(d, "reason"))
            e->info_reason = jstr(d, "reason");
        if (!has_suffix(type, "google.rpc.QuotaFailure"))
            continue;
        cJSON_ArrayForEach(v, cJSON_GetObjectItemCaseSensitive(d, "violations")) {
            const char *id = jstr(v, "quotaId");
            if (str_has(id, "PerDay") || str_has(id, "PerMonth"))
                e->per_day = 1;
            else if (str_has(id, "PerMinute") || str_has(id, "PerSecond") || str_has(id, "PerHour"))
                e->per_minute = 1;
        }
    }
}

/* Reads an error object (the value of "error", or an OpenAI Responses error event). */
static void read_error_object(const cJSON *err, errinfo *e) {
    const cJSON *code = cJSON_GetObjectItemCaseSensitive(err, "code");
    const cJSON *details = cJSON_GetObjectItemCaseSensitive(err, "details");
    const cJSON *meta = cJSON_GetObjectItemCaseSensitive(err, "metadata");
    e->shaped = 1;
    if (cJSON_IsString(code))
        e->code = code->valuestring;
    else if (cJSON_IsNumber(code))
        e->num_code = code->valuedouble;
    e->type = jstr(err, "type");
    e->status = jstr(err, "status");
    e->message = jstr(err, "message");
    if (cJSON_IsObject(details))
        e->details_code = jstr(details, "error_code");
    else if (cJSON_IsArray(details))
        read_google_details(details, e);
    if (cJSON_IsObject(meta)) {
        e->limit_source = jstr(meta, "limit_source");
        e->meta_reason = jstr(meta, "reason");
        if (!e->meta_reason)
            e->meta_reason = jstr(meta, "error_type");
        const cJSON *reasons = cJSON_GetObjectItemCaseSensitive(meta, "reasons");
        if (cJSON_IsArray(reasons) ||
            cJSON_GetObjectItemCaseSensitive(meta, "flagged_input") != NULL) {
            e->flagged = 1;
            e->flag_reason = cJSON_GetStringValue(cJSON_GetArrayItem(reasons, 0));
        }
    }
}

/* Fills *e from a parsed body: {"error":{...}}, {"error":"text"},
 * {"type":"error","error":{...}}, [{"error":{...}}], and (SSE) {"type":"error","code",
 * "message"} or {"type":"response.failed","response":{"error":{...}}}. */
static void read_errinfo(const cJSON *root, errinfo *e) {
    memset(e, 0, sizeof *e);
    if (cJSON_IsArray(root))
        root = cJSON_GetArrayItem(root, 0);
    if (!cJSON_IsObject(root))
        return;
    const cJSON *err = cJSON_GetObjectItemCaseSensitive(root, "error");
    const char *rtype = jstr(root, "type");
    if (cJSON_IsObject(err)) {
        read_error_object(err, e);
    } else if (cJSON_IsString(err)) {
        e->shaped = 1;
        e->message = err->valuestring;
    } else if (rtype && strcmp(rtype, "error") == 0) {
        read_error_object(root, e); /* Responses API error event: fields at top level */
        e->type = NULL;
    } else if (rtype && strcmp(rtype, "response.failed") == 0) {
        const cJSON *rerr = cJSON_GetObjectItemCaseSensitive(
            cJSON_GetObjectItemCaseSensitive(root, "response"), "error");
        if (cJSON_IsObject(rerr))
            read_error_object(rerr, e);
        else
            e->shaped = 1;
    }
}

static int is_quota_code(const char *s) {
    static const char *const exact[] = {
        "insufficient_quota",           "credit_balance_exhausted", "billing_error",
        "billing_hard_limit_reached",   "billing_not_active",       "insufficient_balance",
        "enforced_spend_limit_reached", "BILLING_DISABLED",         "payment_required"};
    if (!s)
        return 0;
    for (size_t i = 0; i < sizeof exact / sizeof exact[0]; i++)
        if (strcasecmp(s, exact[i]) == 0)
            return 1;
    return has_suffix(s, "_spend_limit_exceeded") || has_suffix(s, "_spend_limit_reached");
}

static int is_rate_code(const char *s) {
    static const char *const exact[] = {
        "rate_limit_exceeded", "rate_limit_error",    "requests",         "tokens",
        "RESOURCE_EXHAUSTED",  "RATE_LIMIT_EXCEEDED", "too_many_requests"};
    if (!s)
        return 0;
    for (size_t i = 0; i < sizeof exact / sizeof exact[0]; i++)
        if (strcasecmp(s, exact[i]) == 0)
            return 1;
    return 0;
}

/* Codes that say the key is wrong on a status other than 401 (Gemini sends an invalid key
 * as 400 INVALID_ARGUMENT with ErrorInfo reason API_KEY_INVALID). */
static int is_auth_code(const char *s) {
    static const char *const exact[] = {"API_KEY_INVALID", "invalid_api_key",
                                        "authentication_error", "UNAUTHENTICATED"};
    if (!s)
        return 0;
    for (size_t i = 0; i < sizeof exact / sizeof exact[0]; i++)
        if (strcasecmp(s, exact[i]) == 0)
            return 1;
    return 0;
}

static int is_overloaded_code(const char *s) {
    return s && strcasecmp(s, "overloaded_error") == 0;
}

/* Every string code the error carries, for the code tests. */
static int any_code(const errinfo *e, int (*test)(const char *)) {
    return test(e->code) || test(e->type) || test(e->status) || test(e->details_code) ||
           test(e->meta_reason) || test(e->info_reason);
}

static int in_flight(const errinfo *e) {
    return str_has(e->limit_source, "in_flight") ||
           (e->meta_reason && strcasecmp(e->meta_reason, "in_flight_budget_exhausted") == 0);
}

/* "api usage limit": Anthropic's 400 invalid_request_error when the workspace's spend
 * limit is reached, sent without details.error_code: "You have reached your specified API
 * usage limits. You will regain access on ..." (claude-code issues 38035, 2127; QA). */
static int text_says_quota(const char *text, size_t len) {
    static const char *const phrases[] = {
        "insufficient balance", "insufficient credit", "insufficient funds", "quota exceeded",
        "credit balance",       "spend limit",         "api usage limit",    "billing"};
    for (size_t i = 0; i < sizeof phrases / sizeof phrases[0]; i++)
        if (text_has(text, len, phrases[i]))
            return 1;
    return 0;
}

/* Decides the kind of an error status (>= 400) from the error info and the text
 * (message, or the body when it is not a dialect answer). */
static aor_kind decide_error(long status, const errinfo *e, int dialect_like, int html,
                             const char *text, size_t tlen) {
    int is4xx = status >= 400 && status < 500;
    if (status == 401)
        return AOR_KIND_AUTH;
    /* A wrong base_url shows as a page (HTML) or as "no such path" without the dialect's
     * error shape. Other non-dialect 4xx (a proxy's plain-text 400) stay client errors and
     * reach the client with their real status. */
    if (is4xx && !dialect_like && status != 402 && status != 403 && status != 408 &&
        status != 413 && status != 429 && (html || status == 404 || status == 405))
        return AOR_KIND_CONFIG;
    /* 501 without the dialect's shape: a web server that does not take POST (python -m
     * http.server, a static site), not a provider's outage. */
    if (status == 501 && !dialect_like)
        return AOR_KIND_CONFIG;
    /* OpenRouter's moderation flagged the input (403 with ModerationErrorMetadata): the
     * request is at fault, every key would get the same answer (§4.1 client). */
    if (status == 403 && e->flagged)
        return AOR_KIND_CLIENT;
    /* §4.1 names 413 a client error: the request is too large for any key. Groq answers a
     * request over its tokens-per-minute limit with 413 and code rate_limit_exceeded
     * (QA: every key was backed off by one oversized prompt). */
    if (status == 413)
        return AOR_KIND_CLIENT;
    if (in_flight(e))
        return AOR_KIND_TRANSIENT;
    if (is4xx && (any_code(e, is_quota_code) || e->per_day || e->limit_source))
        return AOR_KIND_QUOTA;
    /* "Request too large" in the message, or in a body that is not the dialect's error
     * shape (a gateway's plain text, {"message": ...}): QA, such a 429 walked every key
     * and opened the circuit for everyone. */
    if (status == 429 &&
        (str_has(e->message, "request too large") || text_has(text, tlen, "request too large")))
        return AOR_KIND_CLIENT;
    if (status == 529 || any_code(e, is_overloaded_code) ||
        (status == 503 && text_has(text, tlen, "overload")))
        return AOR_KIND_RATE;
    if (status >= 500)
        return AOR_KIND_TRANSIENT;
    /* A rate code makes a 4xx a rate limit, except on the statuses §4.1 lists as client
     * (400, 404, 422; 413 above): a request refused as malformed or unknown is refused by
     * every key, whatever code the provider attached. */
    int rate_code = any_code(e, is_rate_code) || e->per_minute;
    if (is4xx && rate_code && status != 400 && status != 404 && status != 422)
        return AOR_KIND_RATE;
    if (is4xx && any_code(e, is_auth_code))
        return AOR_KIND_AUTH;
    if (is4xx && !rate_code && text_says_quota(text, tlen))
        return AOR_KIND_QUOTA;
    switch (status) {
    case 402:
        return AOR_KIND_QUOTA;
    case 403:
        return AOR_KIND_AUTH;
    case 407:
        return AOR_KIND_CONFIG;
    case 408:
        return AOR_KIND_TRANSIENT;
    case 429:
        return AOR_KIND_RATE;
    default:
        return is4xx ? AOR_KIND_CLIENT : AOR_KIND_TRANSIENT;
    }
}

/* Copies s into a label: printable ASCII only (others become '?'), at most 64 bytes
 * (and size - 1). A longer s is not cut but left out ("a value of N characters"): an
 * upstream code is upstream input and may echo a key, which the caller's redaction masks
 * only whole; a cut one would leave its start in logs and error bodies (QA, §3.2). */
static void clean(char *dst, size_t size, const char *s) {
    size_t max = size - 1 < 64 ? size - 1 : 64;
    size_t n = s ? strlen(s) : 0;
    if (n > max) {
        snprintf(dst, size, "a value of %zu characters", n);
        return;
    }
    size_t i = 0;
    for (; i < n; i++)
        dst[i] = (s[i] >= 0x20 && s[i] < 0x7f) ? s[i] : '?';
    dst[i] = '\0';
}

/* The most specific code of an error, for the reason text. */
static const char *label_of(const errinfo *e, aor_kind kind) {
    if (kind == AOR_KIND_TRANSIENT && e->limit_source)
        return e->limit_source;
    if (kind == AOR_KIND_CLIENT && e->flagged)
        return "moderation_flagged";
    const char *order[] = {e->details_code, e->code, e->meta_reason, e->limit_source,
                           e->info_reason,  e->type, e->status};
    for (size_t i = 0; i < sizeof order / sizeof order[0]; i++)
        if (order[i] && order[i][0])
            return order[i];
    return NULL;
}

static void set_reason(aor_verdict *out, const char *prefix, long status, const errinfo *e) {
    char label[72], extra[40] = "";
    clean(label, sizeof label, label_of(e, out->kind));
    if (e->per_day && out->kind == AOR_KIND_QUOTA)
        snprintf(extra, sizeof extra, " (per-day quota)");
    else if (e->per_minute && out->kind == AOR_KIND_RATE)
        snprintf(extra, sizeof extra, " (per-minute quota)");
    else if (out->kind == AOR_KIND_CLIENT && status == 429)
        snprintf(extra, sizeof extra, " (request too large)");
    else if (out->kind == AOR_KIND_CLIENT && e->flagged && e->flag_reason) {
        char why[32]; /* a category name ("harassment"), never the flagged text */
        clean(why, sizeof why, e->flag_reason);
        snprintf(extra, sizeof extra, " (%s)", why);
    }
    /* truncation of the fixed-size reason is fine */
    if (snprintf(out->reason, sizeof out->reason, "%s%ld %s%s", prefix, status,
                 label[0] ? label : aor_kind_name(out->kind), extra) < 0)
        out->reason[0] = '\0';
}

static const char *header_value(const aor_header *hdrs, size_t n, const char *name) {
    const char *v = NULL;
    for (size_t i = 0; hdrs && i < n; i++)
        if (hdrs[i].name && hdrs[i].value && strcasecmp(hdrs[i].name, name) == 0)
            v = hdrs[i].value;
    return v;
}

/* Skips whitespace and a UTF-8 BOM at the start of a body; returns the offset. */
static size_t body_start(const char *body, size_t len) {
    size_t i = 0;
    if (len >= 3 && memcmp(body, "\xef\xbb\xbf", 3) == 0)
        i = 3;
    while (i < len && (body[i] == ' ' || body[i] == '\t' || body[i] == '\r' || body[i] == '\n'))
        i++;
    return i;
}

static int media_is(const char *ct, const char *type) {
    if (!ct)
        return 0;
    while (*ct == ' ' || *ct == '\t')
        ct++;
    size_t n = strlen(type);
    return strncasecmp(ct, type, n) == 0 &&
           (ct[n] == '\0' || ct[n] == ';' || ct[n] == ' ' || ct[n] == '\t');
}

/* 1 when a 2xx answer is an HTML page rather than the dialect's JSON/SSE. */
static int answer_is_html(const char *ct, const char *body, size_t len) {
    if (media_is(ct, "text/html") || media_is(ct, "application/xhtml+xml"))
        return 1;
    if (media_is(ct, "application/json") || media_is(ct, "text/event-stream") ||
        media_is(ct, "application/x-ndjson"))
        return 0;
    size_t i = body ? body_start(body, len) : 0;
    return body && (text_has(body + i, len - i < 14 ? len - i : 14, "<!doctype") ||
                    text_has(body + i, len - i < 5 ? len - i : 5, "<html"));
}

void aor_classify(aor_dialect d, long status, const aor_header *hdrs, size_t nhdrs,
                  const char *body, size_t len, double now, int ignore_hints, aor_verdict *out) {
    errinfo e;
    memset(&e, 0, sizeof e);
    out->hint_s = -1;
    out->status = status;
    out->reason[0] = '\0';
    if (!body)
        len = 0;
    if (len > AOR_CLASSIFY_MAX_BODY)
        len = AOR_CLASSIFY_MAX_BODY;
    const char *ct = header_value(hdrs, nhdrs, "content-type");
    char ctl[72];
    clean(ctl, sizeof ctl, ct ? ct : "no content-type");

    if (status == 0) {
        out->kind = AOR_KIND_TRANSIENT;
        snprintf(out->reason, sizeof out->reason, "no answer (network, TLS or timeout)");
        return;
    }
    if (status >= 200 && status < 300) {
        out->kind = answer_is_html(ct, body, len) ? AOR_KIND_CONFIG : AOR_KIND_OK;
        if (out->kind == AOR_KIND_CONFIG)
            snprintf(out->reason, sizeof out->reason,
                     "%ld %s answer, not the %s API: wrong base_url?", status, ctl,
                     aor_dialect_name(d));
        else
            snprintf(out->reason, sizeof out->reason, "%ld ok", status);
        return;
    }
    if (status == 304) {
        /* Not Modified: the answer to a conditional request the client made, returned as
         * it came; no failure, no walk (RFC 9110 §15.4.5). */
        out->kind = AOR_KIND_CLIENT;
        snprintf(out->reason, sizeof out->reason, "304 not modified");
        return;
    }
    if (status >= 300 && status < 400) {
        out->kind = AOR_KIND_CONFIG;
        snprintf(out->reason, sizeof out->reason, "%ld redirect from the %s API: wrong base_url?",
                 status, aor_dialect_name(d));
        return;
    }
    if (status < 200 || status >= 600) {
        out->kind = AOR_KIND_TRANSIENT;
        snprintf(out->reason, sizeof out->reason, "%ld unexpected status", status);
        return;
    }

    cJSON *root = len ? cJSON_ParseWithLength(body, len) : NULL;
    size_t start = len ? body_start(body, len) : 0;
    read_errinfo(root, &e);
    /* not parseable but looks like JSON: a cut dialect answer, not a wrong base_url */
    int dialect_like =
        e.shaped || (!root && start < len && (body[start] == '{' || body[start] == '['));
    const char *text = e.shaped ? e.message : body;
    size_t tlen = e.shaped ? (e.message ? strlen(e.message) : 0) : len;
    out->kind = decide_error(status, &e, dialect_like, answer_is_html(ct, body, len), text, tlen);
    if (out->kind == AOR_KIND_CONFIG && !dialect_like) {
        snprintf(out->reason, sizeof out->reason,
                 "%ld answer is not the %s API's (%s): wrong base_url?", status,
                 aor_dialect_name(d), ctl);
    } else if (!dialect_like) {
        /* A JSON body without an error object ({}, {"detail":...}) is JSON all the same
         * (QA: it was logged as "not a JSON answer"). */
        snprintf(out->reason, sizeof out->reason, "%ld %s: %s (%s)", status,
                 aor_kind_name(out->kind),
                 root ? "a JSON answer without an error object" : "not a JSON answer", ctl);
    } else {
        set_reason(out, "", status, &e);
    }
    if (!ignore_hints && (out->kind == AOR_KIND_RATE || out->kind == AOR_KIND_TRANSIENT)) {
        unsigned flags = AOR_HINT_HEADERS | AOR_HINT_BODY;
        if (status == 429 && out->kind == AOR_KIND_RATE)
            flags |= AOR_HINT_RESETS;
        out->hint_s = aor_hint_pick(hdrs, nhdrs, body, len, now, flags);
    }
    cJSON_Delete(root);
}

/* HTTP status an SSE error stands for (see aor_classify_sse_error in classify.h). */
static long sse_status(const errinfo *e) {
    static const struct {
        const char *code;
        long status;
    } map[] = {
        {"overloaded_error", 529},   {"rate_limit_exceeded", 429}, {"rate_limit_error", 429},
        {"insufficient_quota", 429}, {"billing_error", 402},       {"authentication_error", 401},
        {"invalid_api_key", 401},    {"permission_error", 403},    {"invalid_request_error", 400},
        {"not_found_error", 404},    {"request_too_large", 413},   {"RESOURCE_EXHAUSTED", 429},
        {"UNAVAILABLE", 503},        {"INVALID_ARGUMENT", 400},    {"FAILED_PRECONDITION", 400},
        {"OUT_OF_RANGE", 400},       {"UNAUTHENTICATED", 401},     {"PERMISSION_DENIED", 403},
        {"NOT_FOUND", 404},          {"DEADLINE_EXCEEDED", 504},   {"INTERNAL", 500},
    };
    if (e->num_code >= 400 && e->num_code < 600)
        return (long)e->num_code;
    const char *codes[] = {e->details_code, e->code, e->type, e->status};
    for (size_t i = 0; i < sizeof codes / sizeof codes[0]; i++)
        for (size_t j = 0; codes[i] && j < sizeof map / sizeof map[0]; j++)
            if (strcasecmp(codes[i], map[j].code) == 0)
                return map[j].status;
    if (any_code(e, is_quota_code))
        return 429;
    return 500;
}

int aor_classify_sse_error(aor_dialect d, const char *data, size_t len, aor_verdict *out) {
    errinfo e;
    if (!data || len == 0)
        return 0;
    if (len > AOR_CLASSIFY_MAX_BODY)
        return 0; /* an error event is small; a huge chunk is content */
    cJSON *root = cJSON_ParseWithLength(data, len);
    if (!root)
        return 0;
    read_errinfo(root, &e);
    if (!e.shaped) {
        cJSON_Delete(root);
        return 0;
    }
    long status = sse_status(&e);
    out->hint_s = -1;
    out->status = status;
    out->kind = decide_error(status, &e, 1, 0, e.message, e.message ? strlen(e.message) : 0);
    set_reason(out, "stream error ", status, &e);
    if (out->kind == AOR_KIND_RATE || out->kind == AOR_KIND_TRANSIENT)
        out->hint_s = aor_hint_pick(NULL, 0, data, len, 0, AOR_HINT_BODY);
    cJSON_Delete(root);
    return 1;
}
