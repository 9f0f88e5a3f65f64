/* Client connections of aord (spec §7 socket, §8 sidecar): the shim's Unix-socket
 * connections (uid check, preamble, TLS with a leaf for the SNI host) and the loopback
 * sidecar's TCP connections; HTTP/1.1 keep-alive request loop; dispatch of each request
 * to the proxy walk or the local routes. */
#ifndef AOR_CONN_H
#define AOR_CONN_H

#include "daemon.h"
#include "http.h"

#include <event2/buffer.h>

typedef struct aor_conn aor_conn;

/* Takes over fd accepted on the Unix socket (peer uid already checked): reads the
 * preamble, then serves TLS or plain HTTP. Closes fd on any failure. */
void aor_conn_accept_unix(aor_daemon *d, int fd);

/* Takes over fd accepted on the sidecar listener (peer uid already checked). */
void aor_conn_accept_tcp(aor_daemon *d, int fd);

/* Closes every open client connection now (requests in flight are cancelled, no
 * answer is sent): the last step of a shutdown, before the upstream is freed. */
void aor_conn_close_all(aor_daemon *d);

/* The start of a graceful stop (SIGTERM): closes the connections that have no request in
 * flight (idle keep-alive ones, shim connections before their preamble) and marks the
 * others to close once their answer is out. Returns how many are still answering. */
size_t aor_conn_drain(aor_daemon *d);

/* Number of client connections with an answer to finish (a request in flight, or
 * bytes not yet written). O(connections). */
size_t aor_conn_busy(const aor_daemon *d);

/* The connection's output buffer (the response goes there). */
struct evbuffer *aor_conn_output(aor_conn *c);

/* The request currently served is fully answered; keep_alive 0 closes the connection
 * once the output is flushed. Starts the next request when bytes are waiting. */
void aor_conn_response_done(aor_conn *c, int keep_alive);

/* Ends the connection now without finishing the response (the client must see an error,
 * never a clean end: spec §5.3). */
void aor_conn_abort(aor_conn *c);

/* Called by the proxy to learn when the output buffer drained below the low watermark
 * (flow control); cb NULL to stop. */
void aor_conn_on_drain(aor_conn *c, void (*cb)(void *arg), void *arg);

/* Calls cb(arg) once, right after the next flush of staged bytes (within the event-loop
 * pass that staged them, or from aor_conn_flush): they were handed to the socket, or
 * queued behind bytes it has not taken yet; cb NULL to cancel. Not
 * called when the connection ends first: the owner of arg must then do the work itself
 * (the proxy records in proxy_free). The callback must not end the connection. */
void aor_conn_on_flushed(aor_conn *c, void (*cb)(void *arg), void *arg);

/* Sends what the answer staged so far now instead of at the end of this event-loop
 * pass. The connection is not freed by this while a response is in progress (the caller
 * still holds it); a write error is handled as usual (the client is gone). */
void aor_conn_flush(aor_conn *c);

/* Bytes waiting in the output buffer. */
size_t aor_conn_output_len(aor_conn *c);

/* 1 when the answer being written is c's last (aord is stopping: aor_conn_drain), so
 * it must say "Connection: close" (RFC 9112 §9.6) and the client opens a new connection
 * for its next request instead of failing on this one. */
int aor_conn_last(const aor_conn *c);

/* 1 when the client speaks HTTP/1.0 (no chunked encoding). */
int aor_conn_http10(const aor_conn *c);

#endif
