/* The walk (spec §5.3, §5.6): for one proxied request, select the candidate sequence,
 * try (provider, key) pairs upstream, classify each answer, record state, and stream the
 * winning answer back (SSE event by event). */
#ifndef AOR_PROXY_H
#define AOR_PROXY_H

#include "config.h"
#include "conn.h"
#include "daemon.h"
#include "dialect.h"
#include "http.h"

typedef struct aor_proxy aor_proxy;

/* The API (dialect) of a request: the provider's that owns host (an intercepted
 * connection), else the one of path (aor_dialect_of_path; openai for NULL or unknown).
 * Used for the providers a request may go to and the answer's error shape. Can't fail.
 * Source: spec §5.2, §5.6, §8. */
aor_dialect aor_proxy_dialect(const aor_config *cfg, const char *host, const char *path);

/* Whether the sidecar forwards a request for path (the request target without its query
 * and fragment): spec §8's provider
 * APIs, all under /v1/, /v1beta/ or /v1alpha/, with no "." or ".." segment a server might
 * resolve to another path. Returns 0 when it does; else 404 with *code and *why set to
 * static texts for the answer (no "aor: " prefix). Used by aor_proxy_start and, for a
 * request that waits for "100 Continue", before its body is sent (daemon/conn.c). */
int aor_proxy_sidecar_check(const char *path, const char **code, const char **why);

/* Starts proxying req (ownership passes to the proxy) for connection c.
 * host: the host the client asked for (intercepted connection: SNI or preamble host),
 * or NULL on the sidecar. Answers through aor_conn_output and finishes with
 * aor_conn_response_done / aor_conn_abort. Returns the proxy (for aor_proxy_cancel), or
 * NULL when it answered at once. */
aor_proxy *aor_proxy_start(aor_daemon *d, aor_conn *c, aor_http_request *req, const char *host);

/* The client went away: stop the upstream transfer and free, without touching c. A 2xx
 * answer whose head was already staged is recorded first (success, usage snapshot). */
void aor_proxy_cancel(aor_proxy *p);

/* Frees the spare proxies this thread keeps for reuse (daemon/pool.h; a finished proxy
 * waits there with its header memory and buffers). Called once at shutdown, after the
 * last proxy ended; the pool starts over empty. */
void aor_proxy_spares_free(void);

#endif
