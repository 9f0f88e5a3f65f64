#include "http.h"

#include "pool.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

/* Largest announced body reserved in one block before it arrives. */
#define BODY_RESERVE_MAX (8 * 1024 * 1024)

struct aor_http_reader {
    llhttp_t parser;
    llhttp_settings_t settings;
    size_t body_max;
    size_t header_bytes;
    size_t url_bytes;
    aor_http_request *req; /* being built */
    int complete;
    int headers_done;
    int expect_continue;
    int last_was_value; /* for joining header fragments */
    int err_status;
    const char *err_why;
};

/* The strings of a request (url, names, values) live in chunks: one or two mallocs per
 * request instead of one per string (docs/performance.md). The string being built is
 * always the last one of the newest chunk, so a fragment grows it in place. */
typedef struct str_chunk {
    struct str_chunk *next; /* older chunk */
    size_t used, cap;
    char data[];
} str_chunk;

#define STR_CHUNK_MIN 2048

static void request_reset(aor_http_request *req) {
    for (str_chunk *c = req->strings; c;) {
        str_chunk *next = c->next;
        free(c);
        c = next;
    }
    free(req->fields);
    if (req->body)
        evbuffer_free(req->body);
    memset(req, 0, sizeof *req);
}

#define FIELDS_KEEP_MAX 64 /* a kept request keeps a field array of up to this many */

/* Spare requests (pool.h): aord parses requests on one thread. */
static _Thread_local aor_pool spares;

/* Poisons (AddressSanitizer) what a kept request holds besides itself. */
static void request_poison(const aor_http_request *req, int poison) {
    const str_chunk *c = req->strings;
    if (c)
        aor_pool_mark(c->data, c->cap, poison);
    aor_pool_mark(req->fields, req->fields_cap * sizeof *req->fields, poison);
}

void aor_http_request_free(aor_http_request *req) {
    if (!req)
        return;
    /* A body buffer whose reserved room got no byte (the client went away before its
     * body) would keep that room (up to 16 MiB) in the pool: such a request is freed. */
    size_t blen = req->body ? evbuffer_get_length(req->body) : 0;
    if (req->body && !(req->body_reserved && blen == 0) && evbuffer_drain(req->body, blen) == 0) {
        /* Kept for the next request: the body buffer, the field array and the first
         * string block, when they have the usual sizes. */
        str_chunk *keep = NULL;
        for (str_chunk *c = req->strings; c;) {
            str_chunk *next = c->next;
            if (!next && c->cap == STR_CHUNK_MIN)
                keep = c;
            else
                free(c);
            c = next;
        }
        req->strings = keep;
        if (keep) {
            explicit_bzero(keep->data, keep->used); /* may hold the client's credential */
            keep->used = 0;
        }
        if (req->fields_cap > FIELDS_KEEP_MAX) {
            free(req->fields);
            req->fields = NULL;
            req->fields_cap = 0;
        }
        aor_http_request kept = {.body = req->body,
                                 .fields = req->fields,
                                 .fields_cap = req->fields_cap,
                                 .strings = keep};
        *req = kept;
        request_poison(req, 1);
        if (aor_pool_keep(&spares, req, sizeof *req))
            return;
        request_poison(req, 0);
    }
    request_reset(req);
    free(req);
}

void aor_http_spares_free(void) {
    aor_http_request *req;
    while ((req = aor_pool_take(&spares, sizeof *req))) {
        request_poison(req, 0);
        request_reset(req);
        free(req);
    }
}

static int fail(aor_http_reader *r, int status, const char *why) {
    r->err_status = status;
    r->err_why = why;
    return -1;
}

/* 413 for a body over r->body_max, saying where the limit is set (fresh-user pass: "larger
 * than body_max" named neither). */
static int fail_too_large(aor_http_reader *r) {
    return fail(r, 413,
                "request body larger than body_max (set in the [daemon] section of aor.ini; "
                "default 32M)");
}

/* Appends at..len to *s, a string of q's chunks (NULL: a new one). *s must be the string
 * built last: fragments of one token arrive together, before the next token starts. */
static int append(aor_http_request *q, char **s, const char *at, size_t len) {
    str_chunk *c = q->strings;
    size_t old = *s ? strlen(*s) : 0;
    size_t start = *s && c ? (size_t)(*s - c->data) : (c ? c->used : 0);
    if (!c || start + old + len + 1 > c->cap) {
        size_t cap = STR_CHUNK_MIN;
        while (cap < old + len + 1)
            cap *= 2;
        str_chunk *n = malloc(sizeof *n + cap);
        if (!n)
            return -1;
        n->next = c;
        n->used = 0;
        n->cap = cap;
        if (*s)
            memcpy(n->data, *s, old); /* move the string being built */
        q->strings = n;
        c = n;
        start = 0;
        *s = c->data;
    } else if (!*s) {
        *s = c->data + start;
    }
    memcpy(c->data + start + old, at, len);
    c->data[start + old + len] = '\0';
    c->used = start + old + len + 1;
    return 0;
}

static int ensure_req(aor_http_reader *r) {
    if (r->req)
        return 0;
    r->req = aor_pool_take(&spares, sizeof *r->req);
    if (r->req) {
        request_poison(r->req, 0);
        return 0;
    }
    r->req = calloc(1, sizeof *r->req); /* the pool, not this, is the fast path */
    if (!r->req)
        return -1;
    r->req->body = evbuffer_new();
    if (!r->req->body) {
        free(r->req);
        r->req = NULL;
        return -1;
    }
    return 0;
}

static int on_message_begin(llhttp_t *p) {
    aor_http_reader *r = p->data;
    r->header_bytes = 0;
    r->url_bytes = 0;
    r->headers_done = 0;
    r->expect_continue = 0;
    r->last_was_value = 0;
    if (ensure_req(r) < 0)
        return fail(r, 500, "out of memory");
    return 0;
}

static int count_header_bytes(aor_http_reader *r, size_t len) {
    r->header_bytes += len;
    if (r->header_bytes > AOR_HTTP_MAX_HEADER_BYTES)
        return fail(r, 431, "request header section too large");
    return 0;
}

static int on_url(llhttp_t *p, const char *at, size_t len) {
    aor_http_reader *r = p->data;
    if (count_header_bytes(r, len) < 0)
        return -1;
    r->url_bytes += len;
    if (r->url_bytes > AOR_HTTP_MAX_URL_BYTES)
        return fail(r, 414, "request target longer than 32 KiB");
    if (append(r->req, &r->req->url, at, len) < 0)
        return fail(r, 500, "out of memory");
    return 0;
}

static int on_header_field(llhttp_t *p, const char *at, size_t len) {
    aor_http_reader *r = p->data;
    aor_http_request *q = r->req;
    if (count_header_bytes(r, len) < 0)
        return -1;
    /* RFC 9112 §5.1: no whitespace between a field name and its colon ("Content-Length : 5"
     * would be a field the body is not framed by). llhttp rejects it already; kept so the
     * rule does not depend on the parser's strictness. */
    if (memchr(at, ' ', len))
        return fail(r, 400, "whitespace in a request header field name");
    if (q->nfields == 0 || r->last_was_value) {
        if (q->nfields >= AOR_HTTP_MAX_HEADERS)
            return fail(r, 431, "too many request header fields");
        /* Room for 8, then doubled: not a realloc per field (docs/performance.md). */
        if (q->nfields == q->fields_cap) {
            size_t cap = q->fields_cap ? 2 * q->fields_cap : 8;
            aor_http_field *n = realloc(q->fields, cap * sizeof *n);
            if (!n)
                return fail(r, 500, "out of memory");
            q->fields = n;
            q->fields_cap = cap;
        }
        q->fields[q->nfields].name = NULL;
        q->fields[q->nfields].value = NULL;
        q->nfields++;
        r->last_was_value = 0;
    }
    if (append(q, &q->fields[q->nfields - 1].name, at, len) < 0)
        return fail(r, 500, "out of memory");
    return 0;
}

static int on_header_value(llhttp_t *p, const char *at, size_t len) {
    aor_http_reader *r = p->data;
    aor_http_request *q = r->req;
    if (count_header_bytes(r, len) < 0)
        return -1;
    if (q->nfields == 0)
        return fail(r, 400, "header value without a name");
    if (memchr(at, '\0', len))
        return fail(r, 400, "NUL byte in a request header value");
    r->last_was_value = 1;
    if (append(q, &q->fields[q->nfields - 1].value, at, len) < 0)
        return fail(r, 500, "out of memory");
    return 0;
}

/* Drops the trailing whitespace of the values of fields from..nfields: not part of the value
 * (RFC 9112 §5.1); llhttp drops only the leading one. */
static void trim_values(aor_http_request *q, size_t from) {
    for (size_t i = from; i < q->nfields; i++) {
        char *v = q->fields[i].value;
        size_t n = v ? strlen(v) : 0;
        while (n > 0 && (v[n - 1] == ' ' || v[n - 1] == '\t'))
            v[--n] = '\0';
    }
}

/* The aor_http_known_field of a field name, or -1. */
static int known_of(const char *n) {
    size_t len = strlen(n);
    switch (n[0] | 0x20) {
    case 'h':
        return len == 4 && strcasecmp(n, "host") == 0 ? AOR_HF_HOST : -1;
    case 'c':
        return len == 10 && strcasecmp(n, "connection") == 0 ? AOR_HF_CONNECTION : -1;
    case 'u':
        return len == 7 && strcasecmp(n, "upgrade") == 0 ? AOR_HF_UPGRADE : -1;
    case 'e':
        return len == 6 && strcasecmp(n, "expect") == 0 ? AOR_HF_EXPECT : -1;
    case 'a':
        if (len == 13 && strcasecmp(n, "authorization") == 0)
            return AOR_HF_AUTHORIZATION;
        return len == 7 && strcasecmp(n, "api-key") == 0 ? AOR_HF_API_KEY : -1;
    case 'x':
        if (len == 9 && strcasecmp(n, "x-api-key") == 0)
            return AOR_HF_X_API_KEY;
        return len == 14 && strcasecmp(n, "x-goog-api-key") == 0 ? AOR_HF_X_GOOG_API_KEY : -1;
    case 'o':
        return len == 6 && strcasecmp(n, "origin") == 0 ? AOR_HF_ORIGIN : -1;
    case 's':
        return len == 14 && strcasecmp(n, "sec-fetch-site") == 0 ? AOR_HF_SEC_FETCH_SITE : -1;
    default:
        return -1;
    }
}

/* Indexes the known fields of the header section (aor_http_request_known). */
/* Indexes the known fields (the first of each name). Returns the number of Host fields. */
static int index_known(aor_http_request *q) {
    memset(q->known, 0, sizeof q->known);
    int hosts = 0;
    for (size_t i = 0; i < q->nfields; i++) {
        int k = known_of(q->fields[i].name);
        if (k == AOR_HF_HOST)
            hosts++;
        if (k >= 0 && !q->known[k])
            q->known[k] = (unsigned short)(i + 1); /* nfields <= AOR_HTTP_MAX_HEADERS */
    }
    return hosts;
}

static int on_headers_complete(llhttp_t *p) {
    aor_http_reader *r = p->data;
    aor_http_request *q = r->req;
    for (size_t i = 0; i < q->nfields; i++) {
        if (!q->fields[i].value && append(q, &q->fields[i].value, "", 0) < 0)
            return fail(r, 500, "out of memory");
    }
    trim_values(q, 0);
    q->nheaders = q->nfields;
    int hosts = index_known(q);
    if (!q->url)
        return fail(r, 400, "request without a target");
    /* RFC 9112 §2.3: a major version this server does not speak gets 505; §3.2: more
     * than one Host field is a bad request (which would the checks and the upstream
     * believe?). */
    if (p->http_major != 1)
        return fail(r, 505, "HTTP version not supported: aor speaks HTTP/1.x");
    if (hosts > 1)
        return fail(r, 400, "more than one Host header");
    /* RFC 9112 §6.1: Transfer-Encoding in an HTTP/1.0 message is faulty framing. */
    if ((p->flags & F_TRANSFER_ENCODING) && p->http_minor == 0)
        return fail(r, 400,
                    "Transfer-Encoding in an HTTP/1.0 request: its framing cannot "
                    "be trusted (RFC 9112 section 6.1)");
    /* RFC 9112 §6.1: a transfer coding aor does not know (gzip, chunked) gets 501; only
     * chunked is decoded (and the body forwarded with a Content-Length). */
    if (p->flags & F_TRANSFER_ENCODING) {
        const char *te = aor_http_request_field(q, "transfer-encoding");
        if (!te || strcasecmp(te, "chunked") != 0)
            return fail(r, 501, "a transfer coding other than chunked is not supported");
    }
    int has_length = (p->flags & F_CONTENT_LENGTH) && !(p->flags & F_CHUNKED);
    if (has_length && p->content_length > r->body_max)
        return fail_too_large(r);
    q->method = p->method;
    q->http_major = p->http_major;
    q->http_minor = p->http_minor;
    const char *up = aor_http_request_known(q, AOR_HF_UPGRADE);
    if (up && strcasecmp(up, "h2c") == 0) {
        /* curl --http2 asks for h2c; a server may ignore that and answer in HTTP/1.1
         * (RFC 9110 §7.8), which is what aor does: read the body as usual. */
        p->upgrade = 0;
        up = NULL;
    }
    q->upgrade = up != NULL;
    if (p->upgrade) {
        /* No body is read: the answer is 426 and the connection ends (proxy.c). Skipping
         * it (1: no body) ends the request at the empty line whatever the read boundaries;
         * before, a body cut by a read was handed over in part. */
        r->headers_done = 1;
        return 1;
    }
    const char *expect = aor_http_request_known(q, AOR_HF_EXPECT);
    /* An HTTP/1.0 client's expectation is ignored and gets no 1xx, which it could take
     * for the final answer (RFC 9110 §10.1.1, §15.2; QA). */
    if (expect && strcasecmp(expect, "100-continue") == 0 &&
        (q->http_major > 1 || (q->http_major == 1 && q->http_minor >= 1)))
        r->expect_continue = 1;
    /* A body of known length (up to BODY_RESERVE_MAX) goes into one block reserved now,
     * so that the proxy's evbuffer_pullup of it is free instead of another allocation and
     * copy of the whole body (docs/performance.md). Larger ones grow as they arrive. */
    if (has_length && p->content_length > 0 && p->content_length <= BODY_RESERVE_MAX &&
        evbuffer_expand(q->body, (size_t)p->content_length) < 0)
        return fail(r, 500, "out of memory");
    if (has_length && p->content_length > 0)
        q->body_reserved = 1;
    r->headers_done = 1;
    return 0;
}

static int on_body(llhttp_t *p, const char *at, size_t len) {
    aor_http_reader *r = p->data;
    if (evbuffer_get_length(r->req->body) + len > r->body_max)
        return fail_too_large(r);
    if (evbuffer_add(r->req->body, at, len) < 0)
        return fail(r, 500, "out of memory");
    return 0;
}

static int on_message_complete(llhttp_t *p) {
    aor_http_reader *r = p->data;
    trim_values(r->req, r->req->nheaders); /* trailer fields */
    r->req->keep_alive = llhttp_should_keep_alive(p) && !p->upgrade;
    r->complete = 1;
    return HPE_PAUSED; /* execute stops right after this request */
}

size_t aor_http_parsed(const llhttp_t *p, llhttp_errno_t e, const char *data, size_t len) {
    if (e == HPE_OK)
        return len;
    const char *pos = llhttp_get_error_pos(p);
    if (!pos || pos < data || pos > data + len)
        return 0;
    return (size_t)(pos - data);
}

const char *aor_http_parse_error(const llhttp_t *p, llhttp_errno_t e) {
    const char *why = llhttp_get_error_reason(p);
    return why && *why ? why : llhttp_errno_name(e);
}

aor_http_reader *aor_http_reader_new(size_t body_max) {
    aor_http_reader *r = calloc(1, sizeof *r);
    if (!r)
        return NULL;
    r->body_max = body_max;
    llhttp_settings_init(&r->settings);
    r->settings.on_message_begin = on_message_begin;
    r->settings.on_url = on_url;
    r->settings.on_header_field = on_header_field;
    r->settings.on_header_value = on_header_value;
    r->settings.on_headers_complete = on_headers_complete;
    r->settings.on_body = on_body;
    r->settings.on_message_complete = on_message_complete;
    llhttp_init(&r->parser, HTTP_REQUEST, &r->settings); /* keeps &r->settings */
    r->parser.data = r;
    return r;
}

void aor_http_reader_free(aor_http_reader *r) {
    if (!r)
        return;
    aor_http_request_free(r->req);
    free(r);
}

aor_http_result aor_http_reader_feed(aor_http_reader *r, const char *data, size_t len,
                                     size_t *consumed, int *status, const char **why) {
    *consumed = 0;
    if (r->complete)
        return AOR_HTTP_REQUEST;
    int had_headers = r->headers_done;
    llhttp_errno_t e = llhttp_execute(&r->parser, data, len);
    *consumed = aor_http_parsed(&r->parser, e, data, len);
    if (r->complete)
        return AOR_HTTP_REQUEST;
    if (r->err_status) {
        *status = r->err_status;
        *why = r->err_why;
        return AOR_HTTP_ERROR;
    }
    if (e == HPE_PAUSED_UPGRADE && r->headers_done) {
        /* An Upgrade request that on_message_complete did not end: complete as it is. */
        r->req->keep_alive = 0;
        r->complete = 1;
        return AOR_HTTP_REQUEST;
    }
    if (e != HPE_OK && e != HPE_PAUSED) {
        /* RFC 9112 §2.3: a version this server does not speak (HTTP/3.0, the HTTP/2
         * connection preface "PRI * HTTP/2.0") gets 505; other syntax errors 400. */
        const char *reason = llhttp_get_error_reason(&r->parser);
        int version = e == HPE_PAUSED_H2_UPGRADE ||
                      (e == HPE_INVALID_VERSION && reason && /* well-formed, not 1.0/1.1 */
                       strcmp(reason, "Invalid HTTP version") == 0);
        *status = version ? 505 : 400;
        *why = version ? "HTTP version not supported: aor speaks HTTP/1.x"
                       : aor_http_parse_error(&r->parser, e);
        return AOR_HTTP_ERROR;
    }
    if (!had_headers && r->headers_done && r->expect_continue)
        return AOR_HTTP_CONTINUE;
    return AOR_HTTP_NEED_MORE;
}

const char *aor_http_reader_target(const aor_http_reader *r) {
    return r->req ? r->req->url : NULL;
}

const aor_http_request *aor_http_reader_head(const aor_http_reader *r) {
    return r->req != NULL && r->headers_done ? r->req : NULL;
}

int aor_http_reader_partial(const aor_http_reader *r) {
    return r->req != NULL && !r->complete;
}

aor_http_request *aor_http_reader_take(aor_http_reader *r) {
    if (!r->complete)
        return NULL;
    aor_http_request *q = r->req;
    r->req = NULL;
    r->complete = 0;
    r->headers_done = 0;
    llhttp_resume(&r->parser); /* paused by on_message_complete */
    return q;
}

const char *aor_http_request_field(const aor_http_request *req, const char *name) {
    char first = (char)(name[0] | 0x20);
    for (size_t i = 0; i < req->nheaders; i++) { /* not trailer fields (RFC 9110 §6.5.1) */
        const char *n = req->fields[i].name;
        if (n && (char)(n[0] | 0x20) == first && strcasecmp(n, name) == 0)
            return req->fields[i].value;
    }
    return NULL;
}

char *aor_http_request_path(const aor_http_request *req) {
    const char *u = req->url ? req->url : "/";
    size_t n = strcspn(u, "?#");
    return strndup(u, n);
}

const char *aor_http_reason(int status) {
    switch (status) {
    case 100:
        return "Continue";
    case 200:
        return "OK";
    case 201:
        return "Created";
    case 202:
        return "Accepted";
    case 204:
        return "No Content";
    case 206:
        return "Partial Content";
    case 301:
        return "Moved Permanently";
    case 302:
        return "Found";
    case 303:
        return "See Other";
    case 304:
        return "Not Modified";
    case 307:
        return "Temporary Redirect";
    case 308:
        return "Permanent Redirect";
    case 400:
        return "Bad Request";
    case 401:
        return "Unauthorized";
    case 402:
        return "Payment Required";
    case 403:
        return "Forbidden";
    case 404:
        return "Not Found";
    case 405:
        return "Method Not Allowed";
    case 406:
        return "Not Acceptable";
    case 407:
        return "Proxy Authentication Required";
    case 408:
        return "Request Timeout";
    case 409:
        return "Conflict";
    case 410:
        return "Gone";
    case 411:
        return "Length Required";
    case 412:
        return "Precondition Failed";
    case 413:
        return "Content Too Large";
    case 414:
        return "URI Too Long";
    case 415:
        return "Unsupported Media Type";
    case 416:
        return "Range Not Satisfiable";
    case 417:
        return "Expectation Failed";
    case 421:
        return "Misdirected Request";
    case 422:
        return "Unprocessable Content";
    case 424:
        return "Failed Dependency";
    case 425:
        return "Too Early";
    case 426:
        return "Upgrade Required";
    case 429:
        return "Too Many Requests";
    case 431:
        return "Request Header Fields Too Large";
    case 451:
        return "Unavailable For Legal Reasons";
    case 499:
        return "Client Closed Request";
    case 500:
        return "Internal Server Error";
    case 502:
        return "Bad Gateway";
    case 503:
        return "Service Unavailable";
    case 504:
        return "Gateway Timeout";
    case 501:
        return "Not Implemented";
    case 505:
        return "HTTP Version Not Supported";
    case 529:
        return "Site Overloaded";
    default: /* the class's name (RFC 9110 §15): clients go by the code */
        return status >= 500   ? "Server Error"
               : status >= 400 ? "Client Error"
               : status >= 300 ? "Redirection"
               : status >= 200 ? "Success"
                               : "Informational";
    }
}

int aor_http_write_response(struct evbuffer *out, int status, const char *content_type,
                            const char *const *extra, const char *body, size_t len,
                            const char *conn_line) {
    if (evbuffer_add_printf(out, "HTTP/1.1 %d %s\r\n", status, aor_http_reason(status)) < 0)
        return -1;
    if (content_type && evbuffer_add_printf(out, "Content-Type: %s\r\n", content_type) < 0)
        return -1;
    for (size_t i = 0; extra && extra[i]; i++) {
        if (evbuffer_add_printf(out, "%s\r\n", extra[i]) < 0)
            return -1;
    }
    if (evbuffer_add_printf(out, "Content-Length: %zu\r\n%s\r\n", len,
                            conn_line ? conn_line : "Connection: close\r\n") < 0)
        return -1;
    if (len && body && evbuffer_add(out, body, len) < 0)
        return -1;
    return 0;
}

int aor_http_is_hop_header(const char *name) {
    return aor_http_is_hop_header_len(name, strlen(name));
}

int aor_http_is_hop_header_len(const char *name, size_t len) {
    /* Every forwarded header line passes here: pick the one or two candidates of the
     * name's length, then compare (docs/performance.md). */
    const char *a = NULL, *b = NULL;
    switch (len) {
    case 2:
        a = "te";
        break;
    case 4:
        a = "host";
        break;
    case 6:
        a = "expect";
        break;
    case 7:
        a = "trailer";
        b = "upgrade";
        break;
    case 8:
        a = "trailers";
        break;
    case 10:
        a = "connection";
        b = "keep-alive";
        break;
    case 14:
        a = "content-length";
        b = "http2-settings";
        break;
    case 16:
        a = "proxy-connection";
        break;
    case 17:
        a = "transfer-encoding";
        break;
    case 18:
        a = "proxy-authenticate";
        break;
    case 19:
        a = "proxy-authorization";
        break;
    default:
        return 0;
    }
    return strncasecmp(name, a, len) == 0 || (b && strncasecmp(name, b, len) == 0);
}

char *aor_http_put_dec(char *d, unsigned long long v) {
    char tmp[20];
    size_t i = sizeof tmp;
    do {
        tmp[--i] = (char)('0' + v % 10);
        v /= 10;
    } while (v);
    memcpy(d, tmp + i, sizeof tmp - i);
    return d + (sizeof tmp - i);
}
