/* HTTP/1.1 request parsing glue over llhttp (Node.js's parser, 8.1 from Debian's
 * node-llhttp) and response framing helpers. Source: RFC 9112 (message syntax), spec §8.
 * Limits: headers at most AOR_HTTP_MAX_HEADER_BYTES in total and AOR_HTTP_MAX_HEADERS
 * fields; the body at most the configured body_max (413 beyond it). */
#ifndef AOR_HTTP_H
#define AOR_HTTP_H

#include <event2/buffer.h>
#include <llhttp.h>
#include <stddef.h>

#define AOR_HTTP_MAX_HEADER_BYTES (64 * 1024)
#define AOR_HTTP_MAX_HEADERS 200
#define AOR_HTTP_MAX_URL_BYTES (32 * 1024) /* request target (414 beyond) */

typedef struct {
    char *name; /* as received; compare case-insensitively */
    char *value;
} aor_http_field;

/* Header fields aor reads on every request, indexed once when the header section is
 * complete (aor_http_request_known) instead of searched by name each time. */
typedef enum {
    AOR_HF_HOST = 0,
    AOR_HF_CONNECTION,
    AOR_HF_UPGRADE,
    AOR_HF_EXPECT,
    AOR_HF_AUTHORIZATION,
    AOR_HF_X_API_KEY,
    AOR_HF_X_GOOG_API_KEY,
    AOR_HF_API_KEY,
    AOR_HF_ORIGIN,
    AOR_HF_SEC_FETCH_SITE,
    AOR_HF_COUNT
} aor_http_known_field;

/* One parsed request. Owned by the aor_http_reader that produced it until taken. */
typedef struct {
    unsigned method; /* llhttp_method_t: HTTP_GET, HTTP_POST, ... */
    char *url;       /* request target as received, e.g. "/v1/chat/completions?x=1" */
    aor_http_field *fields;
    size_t nfields;
    size_t nheaders;       /* fields[0..nheaders) are the header section; the rest, trailer
                              fields of a chunked body (not forwarded: RFC 9110 §6.5.1) */
    struct evbuffer *body; /* whole request body (buffered, capped) */
    int keep_alive;        /* connection may carry another request after this one */
    int upgrade;           /* Upgrade header present (WebSocket) */
    unsigned short http_major, http_minor;
    void *strings;     /* internal: the memory of url, names and values (freed with the request) */
    size_t fields_cap; /* internal: room in fields */
    int body_reserved; /* internal: room for the announced body was reserved in body */
    unsigned short known[AOR_HF_COUNT]; /* internal: 1 + index in fields of the first field
                                           of each aor_http_known_field name; 0: none */
} aor_http_request;

typedef struct aor_http_reader aor_http_reader;

/* Result of feeding bytes. */
typedef enum {
    AOR_HTTP_NEED_MORE = 0, /* all bytes consumed, no complete request yet */
    AOR_HTTP_REQUEST,       /* a complete request is ready (aor_http_reader_take) */
    AOR_HTTP_CONTINUE,      /* headers done with "Expect: 100-continue": send 100 */
    AOR_HTTP_ERROR          /* malformed / over a limit: answer `status` and close */
} aor_http_result;

/* The bytes of data (len bytes) that llhttp_execute took when it returned e: all of them
 * on HPE_OK, else those before the point where it paused or failed (llhttp_get_error_pos;
 * 0 when that is unknown). Can't fail. Source: llhttp.h. */
size_t aor_http_parsed(const llhttp_t *p, llhttp_errno_t e, const char *data, size_t len);

/* A static text naming parser p's error e: llhttp's reason ("Invalid header value char"),
 * else the error's name. Never NULL; not owned by the caller. */
const char *aor_http_parse_error(const llhttp_t *p, llhttp_errno_t e);

/* New reader for one connection; body_max in bytes. NULL on ENOMEM. */
aor_http_reader *aor_http_reader_new(size_t body_max);
void aor_http_reader_free(aor_http_reader *r);

/* Feeds up to len bytes of data. Sets *consumed to how many were used (the rest belongs
 * to a following request and must be fed again after the current one was handled).
 * On AOR_HTTP_ERROR, *status is the status to answer (400, 413, 414, 431, 501, 505) and *why a
 * static text naming the problem. */
aor_http_result aor_http_reader_feed(aor_http_reader *r, const char *data, size_t len,
                                     size_t *consumed, int *status, const char **why);

/* The request target of the request being read, as far as it arrived (NULL when none
 * yet): to answer a refused request in its API's error shape. Valid until the next
 * aor_http_reader_feed or aor_http_reader_take. Can't fail. */
const char *aor_http_reader_target(const aor_http_reader *r);

/* The request being read once its header block is complete (method, target, fields;
 * its body still arriving), else NULL: to refuse a request that announced
 * "Expect: 100-continue" before its body is sent (RFC 9110 §10.1.1). Borrowed: valid
 * until the next aor_http_reader_feed or aor_http_reader_take. Can't fail. */
const aor_http_request *aor_http_reader_head(const aor_http_reader *r);

/* 1 while a request has begun arriving (its first bytes were fed) and is not complete
 * yet: a client uploading a prompt. O(1). */
int aor_http_reader_partial(const aor_http_reader *r);

/* Takes the completed request (caller frees it with aor_http_request_free) and readies the
 * reader for the next one. NULL if none is complete. */
aor_http_request *aor_http_reader_take(aor_http_reader *r);

void aor_http_request_free(aor_http_request *req);

/* Frees the spare requests this thread keeps for reuse (daemon/pool.h: a freed request
 * waits there with its string memory, field array and body buffer for the next one
 * parsed). Called once at shutdown; the pool starts over empty. */
void aor_http_spares_free(void);

/* Value of the first header field named `name` (case-insensitive; trailer fields are not
 * looked at: RFC 9110 §6.5.1), or NULL. */
const char *aor_http_request_field(const aor_http_request *req, const char *name);

/* Value of the first header field (not trailer) of the known name k, or NULL: the same
 * answer as aor_http_request_field for that name in O(1). For requests the reader made
 * (aor_http_reader_take). */
static inline const char *aor_http_request_known(const aor_http_request *req,
                                                 aor_http_known_field k) {
    return req->known[k] ? req->fields[req->known[k] - 1].value : NULL;
}

/* Path of the request target without the query ("/v1/x?y" -> "/v1/x"); malloc'd. */
char *aor_http_request_path(const aor_http_request *req);

/* The Connection line an answer to req needs: "Connection: close\r\n" when the
 * connection ends after it, "Connection: keep-alive\r\n" for an HTTP/1.0 client that
 * asked to keep it (RFC 9112 §9.3: without it that client takes the answer as the
 * connection's last), else "" (HTTP/1.1 persists by default). */
static inline const char *aor_http_connection_line(const aor_http_request *req) {
    if (!req->keep_alive)
        return "Connection: close\r\n";
    return req->http_major == 1 && req->http_minor == 0 ? "Connection: keep-alive\r\n" : "";
}

/* Appends a complete small response: status line, Content-Type, Content-Length, the
 * extra header lines (each "Name: value", NULL-terminated array, may be NULL), the
 * Connection line (conn_line: aor_http_connection_line; NULL: "Connection: close"),
 * then the body. body NULL with len > 0: the head only, with the Content-Length of a
 * body of len bytes (the answer to HEAD, RFC 9110 §9.3.2). Returns 0 or -1 (ENOMEM). */
int aor_http_write_response(struct evbuffer *out, int status, const char *content_type,
                            const char *const *extra, const char *body, size_t len,
                            const char *conn_line);

/* Writes the decimal digits of v at d (no NUL; at most 20 bytes) and returns the end:
 * for status codes and lengths in heads built without printf (docs/performance.md). */
char *aor_http_put_dec(char *d, unsigned long long v);

/* Reason phrase for a status code ("OK", "Too Many Requests", ...; RFC 9110 §15), the
 * class's name ("Client Error") for a code it does not list; never NULL, static. */
const char *aor_http_reason(int status);

/* 1 when a header is hop-by-hop (RFC 9110 §7.6.1) or otherwise re-made by aor
 * (connection, keep-alive, proxy-*, te, trailer(s), transfer-encoding, upgrade, host,
 * content-length, expect, http2-settings). */
int aor_http_is_hop_header(const char *name);

/* aor_http_is_hop_header for a name of len bytes (strlen(name) == len; no NUL inside). */
int aor_http_is_hop_header_len(const char *name, size_t len);

#endif
