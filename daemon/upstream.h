/* Upstream transfers (spec §1 "forwards upstream", §5.3 the walk). One aor_upstream per
 * daemon; one aor_xfer per upstream attempt. Two backends behind this one interface
 * (docs/architecture.md, "Upstream"):
 *  - direct HTTP/1.1 keep-alive (upstream_h1.h): http:// and https:// upstreams reached
 *    without a proxy; libevent sockets, http_parser for answers, OpenSSL for TLS, a pool
 *    of idle connections per origin;
 *  - libcurl's multi interface (upstream_curl.h): when a proxy variable applies
 *    (HTTPS_PROXY / HTTP_PROXY / ALL_PROXY, lower or upper case), or AOR_UPSTREAM=curl.
 * No callback is ever called before aor_xfer_start returns. */
#ifndef AOR_UPSTREAM_H
#define AOR_UPSTREAM_H

#include <curl/curl.h>
#include <event2/event.h>
#include <stddef.h>

typedef struct aor_upstream aor_upstream;
typedef struct aor_xfer aor_xfer;

typedef struct {
    /* One response header line without CRLF, status lines included ("HTTP/2 429"); an
     * empty line ends the header block. */
    void (*on_header)(void *arg, const char *line, size_t len);
    /* Body bytes as they arrive. Return len to go on, or CURL_WRITEFUNC_PAUSE to stop
     * the flow until aor_xfer_resume. */
    size_t (*on_data)(void *arg, const char *data, size_t len);
    /* The transfer ended: rc CURLE_OK or an error (errtext names it); status is the HTTP
     * status received (0 when none). Called once; the xfer is freed right after. */
    void (*on_done)(void *arg, CURLcode rc, long status, const char *errtext);
} aor_xfer_callbacks;

typedef struct {
    const char *url;            /* full upstream URL */
    const char *method;         /* "POST", "GET", ... */
    struct curl_slist *headers; /* request headers; ownership passes to the xfer */
    const char *body;           /* request body (must stay valid until on_done) */
    size_t body_len;
    const char *ca_file;     /* extra CA file for upstream TLS, or NULL */
    long connect_timeout_ms; /* 0 = default 10000 */
    /* Instead of headers (then NULL): the request headers as one block of
     * "Name: value\r\n" lines, each a valid field line (no CR or LF inside, no Host,
     * Content-Length or Transfer-Encoding). Borrowed: copied before aor_xfer_start
     * returns. The cheap form: no list to build (docs/performance.md). */
    const char *header_block;
    size_t header_block_len;
} aor_xfer_request;

/* New upstream on base; reads AOR_UPSTREAM and the proxy variables once (the daemon's
 * environment does not change). Returns NULL on failure (out of memory). */
aor_upstream *aor_upstream_new(struct event_base *base);

/* Cancels every transfer (without callbacks) and frees. */
void aor_upstream_free(aor_upstream *u);

/* The CA files may have changed (SIGHUP): the direct path loads them again for its next
 * new TLS connections (aor_h1_reload_trust). libcurl reads a provider's ca_file for each
 * new connection itself (upstream_curl.c). */
void aor_upstream_reload_trust(aor_upstream *u);

/* Starts a transfer. req->headers are "Name: value" lines (a line "Name:" with nothing
 * after the colon is skipped; Host and Content-Length are added from url and body_len).
 * Returns the xfer, or NULL (then req->headers was freed and no callback will come). */
aor_xfer *aor_xfer_start(aor_upstream *u, const aor_xfer_request *req, const aor_xfer_callbacks *cb,
                         void *arg);

/* Resumes a transfer that on_data paused. */
void aor_xfer_resume(aor_xfer *x);

/* Stops a transfer now; no further callbacks. The xfer is freed. */
void aor_xfer_cancel(aor_xfer *x);

#endif
