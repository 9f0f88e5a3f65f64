/* Direct HTTP/1.1 upstream transfers (docs/architecture.md, "Upstream";
 * docs/performance.md): the common case of spec §1's "forwards upstream" without
 * libcurl's per-transfer machinery. One request per connection at a time (RFC 9112
 * keep-alive, no pipelining); idle connections are pooled per origin (scheme, host,
 * port, CA file) and reused most-recently-used first. Sockets and the event loop are
 * libevent's, answers are parsed by http_parser (HTTP_RESPONSE), TLS is OpenSSL on the
 * socket, SSL_read/SSL_write (peer verified against the system store or the provider's
 * ca_file, host name checked, SNI sent for names), host names are resolved by evdns
 * (resolv.conf, /etc/hosts) and each address is tried in turn. A request that finds its
 * reused connection closed before any byte of the answer is sent once more on a new
 * connection (as libcurl does). */
#ifndef AOR_UPSTREAM_H1_H
#define AOR_UPSTREAM_H1_H

#include "upstream_impl.h"

typedef struct aor_h1 aor_h1;

/* *why of aor_h1_start when the URL is one this path does not take. */
#define AOR_H1_UNSUPPORTED 1

/* New direct upstream on base. Returns NULL on failure (out of memory). Free with
 * aor_h1_free. */
aor_h1 *aor_h1_new(struct event_base *base);

/* Cancels every transfer (no callbacks), closes every connection, frees h. NULL is a
 * no-op. */
void aor_h1_free(aor_h1 *h);

/* Starts a transfer as aor_xfer_start (upstream.h) describes. Returns the transfer, or
 * NULL: with *why = AOR_H1_UNSUPPORTED when the URL has user info or is not an absolute
 * http(s) URL with a host (req->headers are then NOT freed: the caller may hand the
 * request to libcurl), otherwise (out of memory) with req->headers freed. Failures found
 * while starting (a refused connect, an unknown host) come later through on_done, never
 * before this returns. */
aor_xfer *aor_h1_start(aor_h1 *h, const aor_xfer_request *req, const aor_xfer_callbacks *cb,
                       void *arg, int *why);

/* Delivers the body bytes held since on_data asked for a pause, then reads on. */
void aor_h1_resume(aor_xfer *x);

/* Stops a transfer: no callback after this; its connection is closed (or pooled when the
 * answer was complete). Safe from inside the transfer's own callbacks. */
void aor_h1_cancel(aor_xfer *x);

/* Idle pooled connections right now (tests, admin). */
size_t aor_h1_idle_count(const aor_h1 *h);

/* How long (milliseconds, monotonic clock) a pooled connection may stay idle: older ones
 * are not reused, and the sweep closes them. Default 60,000; tests shorten it. */
void aor_h1_set_idle_max_ms(aor_h1 *h, long long ms);

/* How long (milliseconds, monotonic clock) a pooled connection must have been idle
 * before a request written whole on it, that it then ends without an answer, is sent
 * once more on a new connection (the upstream's keep-alive timeout may have closed it as
 * the request went out); a shorter idle time makes that a failed attempt (spec §5.3: no
 * (provider, key) twice in one walk). Default 1,000; tests change it. */
void aor_h1_set_retry_idle_min_ms(aor_h1 *h, long long ms);

/* Seconds a connected transfer may go without a byte read or written before it fails
 * with CURLE_OPERATION_TIMEDOUT ("<origin> sent nothing for N s"): a timeout, which
 * spec §4.1 classes as transient (before the answer started: backoff and the next
 * candidate; after: the client's response ends without its terminator). As long as the
 * providers' SDKs wait for an answer by default (OpenAI's and Anthropic's: 600 s), so a
 * slow model that is still thinking is not cut. Not counted: the connect phase (its own
 * timeout), and time in which the client held the answer back. */
#define AOR_H1_STALL_S 600.0

/* Header fields an answer may have (proxy.c keeps as many); an answer with more is not
 * taken, on both upstream paths. */
#define AOR_H1_HEAD_MAX_LINES 256

/* Checks every transfer for a stall (AOR_H1_STALL_S, measured on CLOCK_MONOTONIC, or on
 * the daemon's fake clock when AOR_FAKE_CLOCK is set, so a test moves it with
 * aor_clock_advance), and closes pooled connections idle for longer than their limit
 * (aor_h1_set_idle_max_ms). A timer calls it every second while transfers or idle
 * connections exist; tests may call it directly. Failures arrive through on_done from
 * the event loop, not from inside this call. */
void aor_h1_sweep(aor_h1 *h);

/* The CA files (a provider's ca_file, the system store) may have changed: TLS origins
 * load them again when next used, for their new connections (pooled ones stay); each
 * store (the system store, plus a ca_file) is loaded once and shared by the origins
 * that use it. Called on SIGHUP (spec §9 "reloads config"). Cheap: no file is read
 * here. */
void aor_h1_reload_trust(aor_h1 *h);

#endif
