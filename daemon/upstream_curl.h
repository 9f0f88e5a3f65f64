/* Upstream transfers through libcurl's multi interface, driven by the daemon's libevent
 * loop (curl_multi_socket_action; the wiring of curl's multi-event / hiperfifo examples).
 * Used for what the direct HTTP/1.1 path (upstream_h1.h) does not do: upstreams reached
 * through a proxy (HTTPS_PROXY, HTTP_PROXY, ALL_PROXY, honoured by libcurl) and
 * AOR_UPSTREAM=curl. Connections are reused by curl's connection cache. */
#ifndef AOR_UPSTREAM_CURL_H
#define AOR_UPSTREAM_CURL_H

#include "upstream_impl.h"

typedef struct aor_upcurl aor_upcurl;

/* New multi handle on base; loads libcurl on first use (curl_api.h). Returns NULL on
 * failure (libcurl missing, out of memory; logged). The caller frees it with
 * aor_upcurl_free. */
aor_upcurl *aor_upcurl_new(struct event_base *base);

/* Cancels every transfer (without callbacks) and frees u. NULL is a no-op. */
void aor_upcurl_free(aor_upcurl *u);

/* Starts a transfer as aor_xfer_start (upstream.h) describes; no callback is called
 * before this returns. Returns the transfer, or NULL (req->headers freed, no callback). */
aor_xfer *aor_upcurl_start(aor_upcurl *u, const aor_xfer_request *req, const aor_xfer_callbacks *cb,
                           void *arg);

/* aor_xfer_resume / aor_xfer_cancel for transfers of this backend. */
void aor_upcurl_resume(aor_xfer *x);
void aor_upcurl_cancel(aor_xfer *x);

#endif
