#include "conn.h"

#include "admin.h"
#include "clock.h"
#include "dialect.h"
#include "guard.h"
#include "listen.h"
#include "log.h"
#include "passthru.h"
#include "publish.h"
#include "sni.h"
#include "tls_io.h"
#include "preamble.h"
#include "proxy.h"

#include <errno.h>
#include <event2/event.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <stdlib.h>
#include <string.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#define PREAMBLE_TIMEOUT_S 10
#define IDLE_TIMEOUT_S 300
#define SLOW_REQUEST_MIN_BYTES (16 * 1024) /* per idle period, while a request arrives */
#define OUT_LOW_WATERMARK (256 * 1024)
#define IN_MAX_WHILE_BUSY (1024 * 1024)
/* Unsent answer bytes over which no further pipelined request is taken and the client
 * is not read until they fall under OUT_LOW_WATERMARK (QA: a client that pipelined
 * GET /metrics without reading grew aord by 1.8 GB in 5 s). */
#define OUT_MAX_BEFORE_READ (1024 * 1024)
#define HUP_CHECK_MS 250 /* how often a half-closed client's request looks for a close */
#define LINGER_IDLE_S 2  /* a refused client's upload read and dropped until it pauses */
#define LINGER_MAX_S 30  /* this long, */
#define LINGER_MAX_BYTES (256L * 1024 * 1024) /* or this much, at most */
#define READ_MAX 16384                        /* bytes per SSL_read (one TLS record's payload) */
#define PLAIN_READ_MAX 65536 /* bytes per recv of a plain socket (a big prompt in one) */
#define IN_READ_MAX_PER_EVENT (256 * 1024) /* bytes taken per readable event */

/* Why a connection ends (conn_gone). */
enum { GONE_EOF = 1, GONE_ERROR = 2, GONE_TIMEOUT = 4 };

/* The socket is read and written here, not through bufferevents: libevent's socket
 * bufferevent asks the kernel for the readable size (ioctl FIONREAD) before every read,
 * and bufferevent_openssl writes only from its write event, two epoll_ctl and a loop
 * round per answer or streamed chunk (docs/performance.md). With TLS, OpenSSL does the
 * handshake inside the first SSL_read, as for any accepting SSL. */
struct aor_conn {
    aor_daemon *d;
    struct aor_conn *prev, *next; /* d->conns */
    int fd;
    SSL *ssl;             /* NULL: plain HTTP */
    struct evbuffer *in;  /* bytes read (decrypted), not yet parsed */
    struct evbuffer *out; /* bytes the socket did not take yet */
    struct event *rev;    /* readable */
    struct event *wev;    /* writable: added only while out has bytes */
    /* The idle and stall timeout (on_idle): one timer per connection that is not moved
     * per request. rev and wev carry no timeout, so a request re-arms no timer: it counts
     * activity in io_count, and the timer looks at the count when it fires. */
    struct event *idle_ev;
    unsigned long io_count;     /* read or write readiness seen, answers finished */
    unsigned long io_seen;      /* io_count when idle_ev last fired */
    unsigned long taken;        /* requests taken from the reader on this connection */
    unsigned long taken_look;   /* taken at the last look of on_idle */
    unsigned long long rx;      /* bytes read from the client (decrypted with TLS) */
    unsigned long long rx_look; /* rx at the last look */
    int slow_looks;             /* looks in a row that saw a request arrive too slowly */
    int reading;                /* rev is wanted (read_enable) */
    int out_paused;             /* not reading: the client has not taken its answers */
    int read_wants_write;       /* SSL_read asked for a writable socket */
    int write_wants_read;       /* SSL_write asked for a readable socket */
    int via_shim;
    aor_preamble pre;
    char *host; /* intercepted host (lower case), NULL on the sidecar */
    aor_http_reader *reader;
    aor_proxy *proxy; /* request in flight through the walk */
    int busy;         /* a request is being answered */
    int closing;      /* close once output is flushed */
    int last;         /* stopping (aor_conn_drain): the request in flight or arriving is
                         the last one; close after its answer */
    int peer_eof;     /* the client sends no more: answer what came, then close */
    /* After peer_eof with a request in flight: is the client gone for good?
     * (hup_check, every HUP_CHECK_MS) */
    struct event *hup_ev;
    int aborted; /* an answer was cut: close without close_notify (spec §5.3) */
    /* A refused request (refuse) may still be arriving: after its answer the connection
     * closes its sending side and reads what comes, dropping it, before it closes (RFC
     * 9112 §9.6): a close with unread bytes resets the connection, and a client still
     * uploading (a body over body_max without Expect) would fail on its write and never
     * read the answer. */
    int refused;
    int lingering;             /* the answer is out; reading to drop until the client ends */
    struct event *linger_ev;   /* every LINGER_IDLE_S: a pause ends it (linger_check) */
    unsigned long linger_seen; /* io_count when linger_ev last fired */
    int linger_rounds;
    long linger_bytes;
    int http10;
    int depth; /* > 0 while process_input runs: frees are deferred */
    int dead;  /* free when depth drops to 0 */
    void (*drain_cb)(void *);
    void *drain_arg;
    void (*flushed_cb)(void *); /* aor_conn_on_flushed */
    void *flushed_arg;
    /* Answers are written to stage; one flush per event-loop pass moves them on (a single
     * writev, or one TLS record) instead of a write per piece (docs/performance.md). */
    struct evbuffer *stage;
    struct evbuffer_cb_entry *stage_cb;
    struct event *flush_ev;
    int flush_pending;
};

static size_t out_len(aor_conn *c) {
    return evbuffer_get_length(c->stage) + evbuffer_get_length(c->out);
}

/* 1 while answers the client has not taken are over OUT_MAX_BEFORE_READ: no further
 * request is taken from what it sent. */
static int out_full(aor_conn *c) {
    return out_len(c) > OUT_MAX_BEFORE_READ;
}

/* Adds or removes rev as reading and a pending SSL_write need it. */
static void update_rev(aor_conn *c) {
    int want = c->reading || c->write_wants_read;
    int pending = event_pending(c->rev, EV_READ, NULL);
    if (want && !pending) {
        event_add(c->rev, NULL);
    } else if (!want && pending) {
        event_del(c->rev);
    }
}

/* Adds or removes wev as unsent bytes and a pending SSL_read need it. */
static void update_wev(aor_conn *c) {
    int want = (evbuffer_get_length(c->out) > 0 && !c->write_wants_read) || c->read_wants_write;
    int pending = event_pending(c->wev, EV_WRITE, NULL);
    if (want && !pending) {
        event_add(c->wev, NULL);
        /* The client gets the whole period from here to take a byte (on_idle): writes
         * that went straight out before counted no activity. */
        c->io_count++;
    } else if (!want && pending)
        event_del(c->wev);
}

static void on_readable(evutil_socket_t fd, short what, void *arg);

/* Starts or stops reading from the client. */
static void read_enable(aor_conn *c, int on) {
    c->reading = on;
    update_rev(c);
    /* Decrypted bytes OpenSSL still holds raise no readiness of the socket. */
    if (on && c->ssl && SSL_has_pending(c->ssl))
        event_active(c->rev, EV_READ, 0);
}

/* Preamble stage: a bare fd waiting for "AOR/1 ...\n" plus the first client byte. */
typedef struct aor_conn_pending {
    aor_daemon *d;
    struct aor_conn_pending *prev, *next; /* d->pendings, for shutdown */
    int fd;
    struct event *ev;
    long long deadline_ms; /* CLOCK_MONOTONIC: the preamble and first bytes by then */
} pending_unix;

/* 1 for the TLS alerts a client sends when it does not accept the certificate it got
 * (OpenSSL's reason codes for received alerts: SSL_AD_* + 1000). */
static int cert_alert(int reason) {
    switch (reason) {
    case SSL_R_SSLV3_ALERT_BAD_CERTIFICATE:
    case SSL_R_SSLV3_ALERT_UNSUPPORTED_CERTIFICATE:
    case SSL_R_SSLV3_ALERT_CERTIFICATE_REVOKED:
    case SSL_R_SSLV3_ALERT_CERTIFICATE_EXPIRED:
    case SSL_R_SSLV3_ALERT_CERTIFICATE_UNKNOWN:
    case SSL_R_TLSV1_ALERT_UNKNOWN_CA:
        return 1;
    default:
        return 0;
    }
}

/* A client that refused aor's certificate during the handshake is worth a line without
 * AOR_DEBUG (QA: a rustls client failed with "UnknownIssuer" and aord.log said nothing):
 * the host, the alert, and where the reasons are written down. At most one a minute. */
static void note_cert_refused(const aor_conn *c) {
    static long long last_ms;
    unsigned long e = ERR_peek_error();
    if (!c->ssl || SSL_is_init_finished(c->ssl) || e == 0 || !cert_alert(ERR_GET_REASON(e)))
        return;
    long long now = aor_clock_mono_ms();
    if (last_ms != 0 && now - last_ms < 60000)
        return;
    last_ms = now;
    aor_warn("client TLS: a client refused aor's certificate for %s (%s): it does not trust "
             "aor's CA; see docs/tls.md \"Which clients accept it\" (clients with their own "
             "root list; rustls with webpki 0.22, e.g. Debian 12's, refuses every "
             "name-constrained CA)",
             c->host ? c->host : "the sidecar", ERR_reason_error_string(e));
}

/* Logs (at debug level) and clears OpenSSL's error queue. */
static void log_tls_errors(void) {
    unsigned long e;
    while ((e = ERR_get_error())) {
        char buf[256];
        ERR_error_string_n(e, buf, sizeof buf);
        aor_debug("client TLS: %s", buf);
    }
}

/* Sends the TLS close_notify of c (c->ssl set) once its handshake is done and none went
 * out yet: best effort, the socket is non-blocking and closed or shut down right after. */
static void send_close_notify(aor_conn *c) {
    if (!SSL_is_init_finished(c->ssl) || (SSL_get_shutdown(c->ssl) & SSL_SENT_SHUTDOWN))
        return;
    ERR_clear_error();
    SSL_shutdown(c->ssl);
    ERR_clear_error();
}

static void conn_free(aor_conn *c) {
    if (c->prev)
        c->prev->next = c->next;
    else if (c->d->conns == c)
        c->d->conns = c->next;
    if (c->next)
        c->next->prev = c->prev;
    if (c->proxy)
        aor_proxy_cancel(c->proxy);
    if (c->rev)
        event_free(c->rev);
    if (c->wev)
        event_free(c->wev);
    if (c->idle_ev)
        event_free(c->idle_ev);
    if (c->hup_ev)
        event_free(c->hup_ev);
    if (c->linger_ev)
        event_free(c->linger_ev);
    if (c->flush_ev)
        event_free(c->flush_ev);
    if (c->stage) {
        if (c->stage_cb)
            evbuffer_remove_cb_entry(c->stage, c->stage_cb);
        evbuffer_free(c->stage);
    }
    if (c->in)
        evbuffer_free(c->in);
    if (c->out)
        evbuffer_free(c->out);
    if (c->ssl) {
        /* A close that sent everything says so. */
        if (c->closing && !c->dead && !c->aborted && out_len(c) == 0)
            send_close_notify(c);
        SSL_free(c->ssl);
    }
    if (c->fd >= 0)
        close(c->fd);
    aor_http_reader_free(c->reader);
    free(c->host);
    free(c);
}

/* Frees c now, or when the outermost process_input returns. */
static void conn_release(aor_conn *c) {
    if (c->depth > 0) {
        c->dead = 1;
        return;
    }
    conn_free(c);
}

static void linger_check(evutil_socket_t fd, short what, void *arg);

/* The answer to a refused request is out, and the client may still be sending (a body
 * over body_max, without Expect: 100-continue). Closing now, with its bytes unread,
 * would reset the connection: a client still writing fails on its write and never reads
 * the answer (QA: curl 55, fetch ECONNRESET, SDKs "Connection error" and a retry of the
 * whole upload). So the connection ends its sending side (close_notify first, on TLS),
 * then reads and drops what comes until the client closes, pauses for LINGER_IDLE_S,
 * or LINGER_MAX_S or LINGER_MAX_BYTES are reached (RFC 9112 §9.6; nginx's lingering
 * close). Returns 0 when c lingers, -1 when it is to be freed now. */
static int linger_start(aor_conn *c) {
    if (!c->refused || c->peer_eof || c->dead || c->aborted || c->lingering)
        return -1;
    c->linger_ev = evtimer_new(c->d->base, linger_check, c);
    if (!c->linger_ev)
        return -1;
    if (c->ssl)
        send_close_notify(c);
    shutdown(c->fd, SHUT_WR);
    c->lingering = 1;
    evbuffer_drain(c->in, evbuffer_get_length(c->in));
    event_del(c->idle_ev); /* linger_ev bounds it now */
    c->linger_seen = c->io_count;
    struct timeval tv = {LINGER_IDLE_S, 0};
    event_add(c->linger_ev, &tv);
    read_enable(c, 1);
    return 0;
}

/* Every LINGER_IDLE_S while lingering: nothing came since the last look, or LINGER_MAX_S
 * passed: closed. */
static void linger_check(evutil_socket_t fd, short what, void *arg) {
    aor_conn *c = arg;
    if (c->io_count == c->linger_seen || ++c->linger_rounds * LINGER_IDLE_S >= LINGER_MAX_S) {
        aor_debug("refused client: stopped reading its upload after %ld bytes", c->linger_bytes);
        conn_release(c);
        return;
    }
    c->linger_seen = c->io_count;
    struct timeval tv = {LINGER_IDLE_S, 0};
    event_add(c->linger_ev, &tv);
}

/* Readable while lingering: the bytes are dropped; the client's end (or an error, or
 * LINGER_MAX_BYTES) closes the connection. */
static void linger_read(aor_conn *c) {
    static char sink[PLAIN_READ_MAX];
    for (int i = 0; i < 16; i++) { /* at most 1 MiB per event: others get their turn */
        long n;
        if (c->ssl) {
            aor_tls_io_clear_errors();
            int r = SSL_read(c->ssl, sink, (int)sizeof sink);
            if (r <= 0 && SSL_get_error(c->ssl, r) == SSL_ERROR_WANT_READ)
                return;
            n = r;
        } else {
            ssize_t r = recv(c->fd, sink, sizeof sink, 0);
            if (r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR))
                return;
            n = (long)r;
        }
        if (n <= 0) /* its end (FIN, close_notify), or an error */
            break;
        c->linger_bytes += n;
        if (c->linger_bytes > LINGER_MAX_BYTES)
            break;
        if (i == 15) { /* more next time; what OpenSSL holds raises no readiness */
            if (c->ssl && SSL_has_pending(c->ssl))
                event_active(c->rev, EV_READ, 0);
            return;
        }
    }
    conn_release(c);
}

/* A closing connection has sent everything: it lingers (linger_start) or is freed. */
static void closed_after_answer(aor_conn *c) {
    if (linger_start(c) != 0)
        conn_release(c);
}

static void process_input(aor_conn *c);

/* The client sends no more (FIN, or a close_notify without one): it may still read, as
 * after `nc -N` or shutdown(SHUT_WR). The complete requests already received are
 * answered in order, then the connection closes (process_input). A client that is
 * really gone shows up as a write error. */
static void peer_eof_seen(aor_conn *c) {
    c->peer_eof = 1;
    read_enable(c, 0);
}

/* 1 when the client closed its connection for good, not only its sending side (both
 * look alike as an end of input): then nobody can read an answer, and the request in
 * flight is cancelled (its upstream transfer closed, no further candidate tried) instead
 * of walking on for a client that left. On the shim's Unix socket a close (or
 * shutdown(SHUT_RDWR)) hangs ours up (POLLHUP), a shutdown(SHUT_WR) does not. On the
 * sidecar's loopback TCP the client's socket is asked after (aor_listen_peer): closed by
 * its process, it is orphaned (or a TIME_WAIT mini socket); half-closed, still held.
 * When that cannot be told (no inet_diag), the close is seen at the first write of the
 * answer. */
static int peer_closed_for_good(const aor_conn *c) {
    if (c->via_shim) {
        struct pollfd pfd = {.fd = c->fd, .events = 0};
        return poll(&pfd, 1, 0) == 1 && (pfd.revents & POLLHUP);
    }
    int held = 1;
    if (aor_listen_peer(c->fd, NULL, &held) < 0)
        return errno == ENOENT || errno == ENOTCONN; /* its socket is gone altogether */
    return !held;
}

static void on_hup_check(evutil_socket_t fd, short what, void *arg);

/* A client stopped sending while its request is in flight. Gone for good (closed, not
 * only shut down for writing): the request is cancelled now. Else looked at again every
 * HUP_CHECK_MS while the request lasts: a TLS client's close_notify comes just before
 * its close(), a TCP client's FIN leaves before its socket is released, and the end of
 * its sending side shows no readiness again. Returns 1 when c was released. */
static int hup_check(aor_conn *c) {
    if (!c->busy)
        return 0;
    if (peer_closed_for_good(c)) {
        aor_debug("%s client closed its connection with a request in flight: cancelled",
                  c->via_shim ? "shim" : "sidecar");
        conn_release(c);
        return 1;
    }
    if (!c->hup_ev)
        c->hup_ev = evtimer_new(c->d->base, on_hup_check, c);
    if (c->hup_ev) { /* ENOMEM: seen at the first write of the answer */
        struct timeval tv = {0, HUP_CHECK_MS * 1000};
        event_add(c->hup_ev, &tv);
    }
    return 0;
}

static void on_hup_check(evutil_socket_t fd, short what, void *arg) {
    hup_check(arg);
}

/* The client is gone (EOF, error or idle timeout), or only stopped sending. */
static void conn_gone(aor_conn *c, int why) {
    if (why == GONE_EOF && hup_check(c))
        return;
    if (why == GONE_EOF) {
        peer_eof_seen(c);
        process_input(c); /* answers what is complete, or closes */
        return;
    }
    conn_release(c);
}

/* Writes the answer to a refused request (status, why; code: the error code, or NULL) in
 * its API's error shape and ends the connection after. target: the request target, or
 * NULL. */
static void refuse(aor_conn *c, int status, const char *code, const char *why, const char *target,
                   int head) {
    /* A path the sidecar does not serve (code set) is no bad request: no line on disk, as
     * when the proxy answers it (§4.5). */
    aor_log(code ? AOR_LOG_DEBUG : AOR_LOG_WARN, "bad request from client: %s (answered %d)", why,
            status);
    char msg[512];
    snprintf(msg, sizeof msg, "aor: %s", why);
    size_t len = 0;
    char *body = aor_dialect_error_body(aor_proxy_dialect(c->d->cfg, c->host, target), status, code,
                                        msg, &len);
    /* §5.6: every answer carries the x-aor-* headers, local refusals too; a 405 (a
     * method aor does not serve) the methods it does (RFC 9110 §15.5.6). */
    const char *aor_hdrs[] = {"x-aor-provider: -", "x-aor-key: -", "x-aor-attempts: 0",
                              status == 405 ? "Allow: GET, HEAD, POST, PUT, PATCH, DELETE" : NULL,
                              NULL};
    /* HEAD: the head only (body NULL). */
    aor_http_write_response(c->stage, status, "application/json", aor_hdrs,
                            head || !body ? NULL : body, body ? len : 0, NULL);
    free(body);
    c->closing = 1;
    c->refused = 1;
}

/* A request that waits for "100 Continue" (its header block read, its body not sent
 * yet) that aor would refuse once it came whole: the admission rules (guard.h) and, on the
 * sidecar, a path it does not forward. Refused now, instead of a 100 Continue, so that the
 * client does not upload a body only to get the refusal (RFC 9110 §10.1.1). Returns 1
 * when it was refused. */
static int refuse_before_body(aor_conn *c, const aor_http_request *head) {
    const char *why = NULL, *code = NULL;
    int status = aor_guard_check(head, !c->via_shim, c->d->sidecar_url, &why);
    if (!status && !c->via_shim && !aor_admin_is_local(head->url)) {
        char *path = aor_http_request_path(head);
        if (path) /* out of memory: left to the full request's checks */
            status = aor_proxy_sidecar_check(path, &code, &why);
        free(path);
    }
    if (!status)
        return 0;
    refuse(c, status, code, why, head->url, head->method == HTTP_HEAD);
    return 1;
}

/* Acts on a result of aor_http_reader_feed other than NEED_MORE. Returns 1 when the next
 * request may be read, 0 to stop reading. */
static int take_result(aor_conn *c, aor_http_result res, int status, const char *why) {
    if (res == AOR_HTTP_CONTINUE) {
        const aor_http_request *head = aor_http_reader_head(c->reader);
        if (head && refuse_before_body(c, head))
            return 0;
        evbuffer_add(c->stage, "HTTP/1.1 100 Continue\r\n\r\n", 25);
        return 1;
    }
    if (res == AOR_HTTP_ERROR) {
        refuse(c, status, NULL, why, aor_http_reader_target(c->reader), 0);
        return 0;
    }
    /* AOR_HTTP_REQUEST */
    aor_http_request *req = aor_http_reader_take(c->reader);
    if (!req)
        return 0;
    status = aor_guard_check(req, !c->via_shim, c->d->sidecar_url, &why);
    if (status) {
        refuse(c, status, NULL, why, req->url, req->method == HTTP_HEAD);
        aor_http_request_free(req);
        return 0;
    }
    c->busy = 1;
    c->taken++;
    c->http10 = req->http_major == 1 && req->http_minor == 0;
    c->d->m.requests++;
    if (!c->via_shim && aor_admin_is_local(req->url)) {
        aor_admin_handle(c->d, c, req);
    } else {
        c->proxy = aor_proxy_start(c->d, c, req, c->host);
    }
    if (c->peer_eof && hup_check(c)) /* the request came with the client's end */
        return 0;
    return 1;
}

/* After requests were read: closes, or stops reading, as the state asks. */
static void input_done(aor_conn *c) {
    c->depth--;
    if (c->depth > 0)
        return;
    /* Every complete request is answered, unless unread answers stopped the taking of
     * them (out_full): then after_write takes the rest before the close (QA: a half-close
     * behind many pipelined requests left most of them unanswered). */
    if (c->peer_eof && !c->busy && !out_full(c))
        c->closing = 1;
    if (c->dead) {
        conn_free(c);
        return;
    }
    if (c->closing && !c->busy && out_len(c) == 0) {
        closed_after_answer(c);
        return;
    }
    if (c->closing)
        read_enable(c, 0);
    else if (c->busy && evbuffer_get_length(c->in) > IN_MAX_WHILE_BUSY)
        read_enable(c, 0);
    else if (!c->busy && out_full(c)) {
        c->out_paused = 1; /* after_write reads on when the answers went out */
        read_enable(c, 0);
    }
}

static void process_input(aor_conn *c) {
    struct evbuffer *in = c->in;
    c->depth++;
    while (!c->dead && !c->busy && !c->closing && !out_full(c) && evbuffer_get_length(in) > 0) {
        struct evbuffer_iovec v[8];
        int n = evbuffer_peek(in, -1, NULL, v, 8);
        if (n > 8)
            n = 8;
        size_t total = 0;
        aor_http_result res = AOR_HTTP_NEED_MORE;
        int status = 0;
        const char *why = NULL;
        for (int i = 0; i < n; i++) {
            size_t used = 0;
            res =
                aor_http_reader_feed(c->reader, v[i].iov_base, v[i].iov_len, &used, &status, &why);
            total += used;
            if (res != AOR_HTTP_NEED_MORE)
                break;
        }
        evbuffer_drain(in, total);
        if (res == AOR_HTTP_NEED_MORE) {
            if (total == 0)
                break;
            continue;
        }
        if (!take_result(c, res, status, why))
            break;
    }
    input_done(c);
}

/* process_input for bytes just read while c->in is empty: parsed where they are, and
 * only what is not taken now (pipelined after a request, or after the end) goes into
 * c->in; no copy into c->in and back for every request (docs/performance.md). */
static void process_bytes(aor_conn *c, const char *data, size_t len) {
    c->depth++;
    size_t off = 0;
    while (!c->dead && !c->busy && !c->closing && !out_full(c) && off < len) {
        size_t used = 0;
        int status = 0;
        const char *why = NULL;
        aor_http_result res =
            aor_http_reader_feed(c->reader, data + off, len - off, &used, &status, &why);
        off += used;
        if (res == AOR_HTTP_NEED_MORE) {
            if (used == 0)
                break;
            continue;
        }
        if (!take_result(c, res, status, why))
            break;
    }
    if (off < len && !c->dead && evbuffer_add(c->in, data + off, len - off) != 0)
        c->dead = 1; /* out of memory: the bytes cannot wait, the connection ends */
    input_done(c);
}

/* Output went out: close a closing connection that has sent everything, or tell the
 * request in flight that there is room again. */
static void after_write(aor_conn *c) {
    if (c->closing && !c->busy && out_len(c) == 0) {
        closed_after_answer(c);
        return;
    }
    if (c->drain_cb && evbuffer_get_length(c->out) < OUT_LOW_WATERMARK)
        c->drain_cb(c->drain_arg);
    else if (c->out_paused && out_len(c) < OUT_LOW_WATERMARK && c->depth == 0) {
        c->out_paused = 0;
        if (!c->busy && !c->closing && !c->peer_eof)
            read_enable(c, 1);
        process_input(c); /* the requests that waited in c->in */
    }
}

/* Writes what out holds until the socket takes no more. 0, or -1 when the client is
 * gone (a write error). */
static int write_out(aor_conn *c) {
    while (evbuffer_get_length(c->out) > 0) {
        if (!c->ssl) {
            int n = evbuffer_write(c->out, c->fd);
            if (n < 0) {
                if (errno == EAGAIN || errno == EWOULDBLOCK)
                    break;
                if (errno == EINTR)
                    continue;
                return -1;
            }
            continue;
        }
        aor_tls_io_status st = aor_tls_io_write(c->ssl, c->out);
        if (st == AOR_TLS_IO_WANT_READ)
            c->write_wants_read = 1;
        if (st == AOR_TLS_IO_WANT_READ || st == AOR_TLS_IO_WANT_WRITE)
            break;
        if (st != AOR_TLS_IO_DONE) {
            log_tls_errors();
            return -1;
        }
    }
    update_rev(c);
    update_wev(c);
    return 0;
}

/* Reads what the socket has (decrypting with TLS) into in. Returns 0, or a GONE_*
 * reason. */
static int read_in(aor_conn *c, const char **direct, size_t *direct_len) {
    /* Into a scratch buffer, then only the bytes read are added: reserving room in the
     * input buffer would allocate a 16 KiB chain per request (a slow, large malloc). */
    static char scratch[PLAIN_READ_MAX];
    if (!c->ssl) {
        /* recv, not read: the socket call without the VFS layer (as nginx reads). A
         * full read means more may wait: read on (up to IN_READ_MAX_PER_EVENT) instead
         * of a loop round per read. */
        for (size_t got = 0; got < IN_READ_MAX_PER_EVENT;) {
            ssize_t n = recv(c->fd, scratch, sizeof scratch, 0);
            if (n < 0)
                return errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR ? 0 : GONE_ERROR;
            if (n == 0)
                return GONE_EOF;
            c->rx += (size_t)n;
            if (got == 0 && (size_t)n < sizeof scratch && evbuffer_get_length(c->in) == 0) {
                /* All there is, and nothing before it: parsed from scratch (process_bytes),
                 * valid until the next read. */
                *direct = scratch;
                *direct_len = (size_t)n;
                return 0;
            }
            if (evbuffer_add(c->in, scratch, (size_t)n) != 0)
                return GONE_ERROR;
            if ((size_t)n < sizeof scratch)
                break;
            got += (size_t)n;
        }
        return 0;
    }
    c->read_wants_write = 0;
    int gone = 0;
    for (size_t got = 0;;) {
        if (got >= IN_READ_MAX_PER_EVENT) {
            /* Other connections get their turn; rev fires again for what the socket
             * has, and for what OpenSSL decrypted already: */
            if (SSL_has_pending(c->ssl))
                event_active(c->rev, EV_READ, 0);
            break;
        }
        aor_tls_io_clear_errors();
        int n = SSL_read(c->ssl, scratch, READ_MAX);
        if (n > 0) {
            c->rx += (size_t)n;
            if (evbuffer_add(c->in, scratch, (size_t)n) != 0) {
                gone = GONE_ERROR;
                break;
            }
            got += (size_t)n;
            /* With read-ahead, OpenSSL read what the socket had (up to its buffer): once
             * it holds nothing, stop instead of a read() that finds nothing, unless the
             * record was a full one (a big body goes on); rev fires again for the rest. */
            if (!SSL_has_pending(c->ssl) && n < READ_MAX)
                break;
            continue;
        }
        int e = SSL_get_error(c->ssl, n);
        if (e == SSL_ERROR_WANT_READ)
            break;
        if (e == SSL_ERROR_WANT_WRITE) { /* a handshake message the socket did not take */
            c->read_wants_write = 1;
            break;
        }
        /* close_notify, or EOF (SSL_OP_IGNORE_UNEXPECTED_EOF makes that a clean end) */
        if (e == SSL_ERROR_ZERO_RETURN || (e == SSL_ERROR_SYSCALL && !ERR_peek_error())) {
            gone = GONE_EOF;
            break;
        }
        note_cert_refused(c);
        log_tls_errors();
        gone = GONE_ERROR;
        break;
    }
    update_wev(c);
    return gone;
}

/* The idle period in seconds: IDLE_TIMEOUT_S, or a shorter AOR_CLIENT_IDLE_S (a test
 * hook: tests/e2e/test_conn_io.py), read once. */
static int idle_period(void) {
    static int period;
    if (!period) {
        const char *e = getenv("AOR_CLIENT_IDLE_S");
        long v = e ? strtol(e, NULL, 10) : 0;
        period = v >= 1 && v <= IDLE_TIMEOUT_S ? (int)v : IDLE_TIMEOUT_S;
    }
    return period;
}

static void idle_arm(aor_conn *c) {
    struct timeval tv = {idle_period(), 0};
    event_add(c->idle_ev, &tv);
}

/* Every IDLE_TIMEOUT_S: a connection with no activity since the last look (io_count) is
 * closed when the client took no byte of its answer in that time (it reads nothing, also
 * after a half-close), or when it sent nothing and no request is in flight (idle; a
 * long answer, a stream, is not idle). A connection ends IDLE_TIMEOUT_S to twice that
 * after its last activity. */
static void on_idle(evutil_socket_t fd, short what, void *arg) {
    aor_conn *c = arg;
    /* A request arriving too slowly: at two looks in a row the client had sent something
     * (a partial request, or any activity: a TLS record arrives whole or not at all)
     * without a request taken, nothing was being answered, and fewer than
     * SLOW_REQUEST_MIN_BYTES arrived in the period. Each byte counted as activity, so a
     * client sending a byte now and then (slowloris, also inside one TLS record) held
     * the connection for ever (QA, review); a steady upload, however slow, makes that
     * much progress (55 bytes a second at the 300 s period). */
    int arriving = !c->busy && out_len(c) == 0 && c->taken == c->taken_look &&
                   (aor_http_reader_partial(c->reader) || c->io_count != c->io_seen);
    if (arriving && c->rx - c->rx_look < SLOW_REQUEST_MIN_BYTES) {
        if (++c->slow_looks >= 2) {
            aor_warn("client: a request arriving with fewer than %d bytes in %d s: closed",
                     SLOW_REQUEST_MIN_BYTES, idle_period());
            conn_gone(c, GONE_TIMEOUT);
            return;
        }
    } else {
        c->slow_looks = 0;
    }
    c->rx_look = c->rx;
    c->taken_look = c->taken;
    if (c->io_count != c->io_seen) {
        c->io_seen = c->io_count;
        idle_arm(c);
        return;
    }
    if (event_pending(c->wev, EV_WRITE, NULL)) {
        aor_debug("client took no byte for %d s: closed", idle_period());
        conn_release(c);
        return;
    }
    if (!c->busy && event_pending(c->rev, EV_READ, NULL)) {
        conn_gone(c, GONE_TIMEOUT);
        return;
    }
    idle_arm(c);
}

/* Client socket readable. */
static void on_readable(evutil_socket_t fd, short what, void *arg) {
    aor_conn *c = arg;
    c->io_count++;
    if (c->lingering) {
        linger_read(c);
        return;
    }
    if (c->write_wants_read) {
        c->write_wants_read = 0;
        c->depth++;
        int r = write_out(c);
        c->depth--;
        if (r < 0 || c->dead) {
            conn_release(c);
            return;
        }
        if (evbuffer_get_length(c->out) == 0) {
            /* Reading (if wanted) resumes at the next readiness, or now for bytes OpenSSL
             * read during the write (read-ahead). */
            if (c->reading && SSL_has_pending(c->ssl))
                event_active(c->rev, EV_READ, 0);
            after_write(c);
            return;
        }
        if (!c->reading)
            return;
    }
    if (!c->reading)
        return;
    size_t before = evbuffer_get_length(c->in);
    const char *direct = NULL;
    size_t direct_len = 0;
    int gone = read_in(c, &direct, &direct_len);
    if (gone && gone != GONE_EOF) {
        conn_release(c);
        return;
    }
    if (direct_len) {
        process_bytes(c, direct, direct_len);
        return;
    }
    if (evbuffer_get_length(c->in) == before) {
        if (gone)
            conn_gone(c, gone);
        return;
    }
    if (gone) {
        peer_eof_seen(c); /* bytes, then the end: answer them first */
        if (hup_check(c)) /* unless nobody is left to read the answers */
            return;
    }
    process_input(c);
}

/* Client socket writable again (only while out had bytes left, or a handshake
 * message waits). */
static void on_writable(evutil_socket_t fd, short what, void *arg) {
    aor_conn *c = arg;
    c->io_count++;
    if (c->read_wants_write) {
        c->read_wants_write = 0;
        if (c->reading) {
            on_readable(fd, EV_READ, c); /* the SSL_read goes on (and writes) */
            return;
        }
    }
    if (write_out(c) < 0) {
        conn_release(c);
        return;
    }
    after_write(c);
}

static void on_flush(evutil_socket_t fd, short what, void *arg) {
    aor_conn *c = arg;
    c->flush_pending = 0;
    if (evbuffer_get_length(c->stage) == 0)
        return;
    int was_empty = evbuffer_get_length(c->out) == 0;
    evbuffer_add_buffer(c->out, c->stage);
    if (was_empty && !c->write_wants_read && write_out(c) < 0) {
        conn_release(c);
        return;
    }
    /* else wev (or rev) is waiting for the socket: the order of bytes stays */
    if (c->flushed_cb) {
        void (*cb)(void *) = c->flushed_cb;
        c->flushed_cb = NULL;
        cb(c->flushed_arg);
    }
    if (evbuffer_get_length(c->out) == 0)
        after_write(c);
}

static void on_stage(struct evbuffer *buf, const struct evbuffer_cb_info *info, void *arg) {
    aor_conn *c = arg;
    if (info->n_added && !c->flush_pending) {
        c->flush_pending = 1;
        /* Runs later in this same pass of the loop: no system call, no extra round. */
        event_active(c->flush_ev, EV_WRITE, 0);
    }
}

/* Takes fd and ssl (NULL: plain). NULL on ENOMEM, with both freed and closed. */
static aor_conn *conn_new(aor_daemon *d, int fd, SSL *ssl) {
    aor_conn *c = calloc(1, sizeof *c);
    if (!c) {
        SSL_free(ssl);
        close(fd);
        return NULL;
    }
    c->d = d;
    c->fd = fd;
    c->ssl = ssl;
    c->reader = aor_http_reader_new((size_t)d->cfg->body_max);
    c->in = evbuffer_new();
    c->out = evbuffer_new();
    c->stage = evbuffer_new();
    c->flush_ev = event_new(d->base, -1, 0, on_flush, c);
    c->rev = event_new(d->base, fd, EV_READ | EV_PERSIST, on_readable, c);
    c->wev = event_new(d->base, fd, EV_WRITE | EV_PERSIST, on_writable, c);
    c->idle_ev = evtimer_new(d->base, on_idle, c);
    if (!c->reader || !c->in || !c->out || !c->stage || !c->flush_ev || !c->rev || !c->wev ||
        !c->idle_ev)
        goto fail;
    c->stage_cb = evbuffer_add_cb(c->stage, on_stage, c);
    if (!c->stage_cb)
        goto fail;
    d->m.connections++;
    c->next = d->conns;
    if (d->conns)
        d->conns->prev = c;
    d->conns = c;
    read_enable(c, 1);
    idle_arm(c);
    return c;
fail:
    conn_free(c); /* not linked yet: unlinking is a no-op */
    return NULL;
}

void aor_conn_accept_tcp(aor_daemon *d, int fd) {
    evutil_make_socket_nonblocking(fd);
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    conn_new(d, fd, NULL);
}

static void start_session(aor_daemon *d, int fd, const aor_preamble *pre, int tls) {
    SSL *ssl = NULL;
    if (tls) {
        ssl = SSL_new(aor_tls_server_ctx(d->tls));
        if (!ssl || aor_tls_io_attach(ssl, fd, 1) != 0) {
            SSL_free(ssl);
            close(fd);
            return;
        }
        /* The leaf for clients that send no SNI: the host the shim saw. */
        aor_tls_set_conn_host(ssl, pre->host[0] ? pre->host : pre->ip);
    }
    aor_conn *c = conn_new(d, fd, ssl);
    if (!c)
        return;
    c->via_shim = 1;
    c->pre = *pre;
    if (pre->host[0]) {
        c->host = strdup(pre->host);
    } else {
        c->host = strdup(pre->ip);
    }
    if (!c->host)
        conn_free(c);
}

static void pending_free(pending_unix *p, int close_fd) {
    if (p->prev)
        p->prev->next = p->next;
    else if (p->d->pendings == p)
        p->d->pendings = p->next;
    if (p->next)
        p->next->prev = p->prev;
    if (p->ev)
        event_free(p->ev);
    if (close_fd)
        close(p->fd);
    free(p);
}

/* 1 when the peer shut down its sending side (no more bytes will come). */
static int fd_peer_closed(int fd) {
    struct pollfd pfd = {.fd = fd, .events = POLLRDHUP};
    return poll(&pfd, 1, 0) == 1 && (pfd.revents & (POLLRDHUP | POLLHUP | POLLERR));
}

/* 1 when ip (text) lies in 198.18.0.0/15, the range the shim answers from when the real
 * resolver fails (spec §2 step 3): an address no packet may go to. */
static int fallback_address(const char *ip) {
    struct in_addr a;
    if (inet_pton(AF_INET, ip, &a) != 1)
        return 0;
    return (ntohl(a.s_addr) & 0xfffe0000u) == 0xc6120000u;
}

/* Decides whether aord serves a shim connection (spec §2) from r, the result of
 * aor_sni_parse (tls) or aor_sni_http_host (plain HTTP) for the client's first bytes,
 * and name, the host they named. Served (why set to "") only when they name an
 * intercepted host; otherwise why (whylen bytes) says why the connection is passed
 * through: no name, an address, another host, bytes that cannot be read. */
static void pass_reason(const aor_daemon *d, int tls, int r, const char *name, char *why,
                        size_t whylen) {
    const char *what = tls ? "SNI" : "plain HTTP Host";
    why[0] = '\0';
    /* An address is never an intercepted host as an SNI (RFC 6066 §3 allows none there)
     * or as a plain-HTTP Host: aord intercepts names only (the config's own test). */
    if (r == 1 && aor_config_host_is_address(name))
        snprintf(why, whylen, "%s %s is an address, not a provider host name", what, name);
    else if (r == 1 && !aor_publish_host_intercepted(d->cfg, name))
        snprintf(why, whylen, "%s %s is not a provider host", what, name);
    else if (r == 0)
        snprintf(why, whylen, "%s", tls ? "TLS without SNI" : "plain HTTP without a Host header");
    else if (r != 1)
        snprintf(why, whylen, "%s not readable (malformed, or no decision within %d bytes)",
                 tls ? "TLS ClientHello" : "plain HTTP request head",
                 tls ? AOR_SNI_MAX_HELLO : AOR_SNI_MAX_HTTP_HEAD);
}

static void on_preamble(evutil_socket_t fd, short what, void *arg) {
    pending_unix *p = arg;
    aor_daemon *d = p->d;
    /* A deadline, not an idle timeout: libevent restarts a persistent event's timeout
     * each time it fires, so a byte every few seconds would keep the stage open for ever
     * (QA); the timeout is set again to what is left. */
    long long left = p->deadline_ms - aor_clock_mono_ms();
    if (!(what & EV_TIMEOUT) && left > 0) {
        struct timeval tv = {(time_t)(left / 1000), (suseconds_t)(left % 1000) * 1000};
        event_add(p->ev, &tv);
    }
    if ((what & EV_TIMEOUT) || left <= 0) {
        /* A valid preamble with too few client bytes after it (a connection opened
         * ahead, a stalled client) is not a malformed preamble (§7; QA: it was counted
         * as one). */
        char head[AOR_PREAMBLE_MAX + 1];
        aor_preamble tp;
        const char *terr = NULL;
        ssize_t hn = recv(fd, head, sizeof head, MSG_PEEK | MSG_DONTWAIT);
        if (hn > 0 && aor_preamble_parse(head, (size_t)hn, &tp, &terr) > 0) {
            aor_warn("shim connection to %s:%d: its first bytes (a TLS ClientHello or a "
                     "request head) did not come whole within %d s after the preamble, closed",
                     tp.ip, tp.port, PREAMBLE_TIMEOUT_S);
        } else {
            aor_warn("shim connection: no complete preamble within %d s, closed",
                     PREAMBLE_TIMEOUT_S);
            d->m.bad_preambles++;
        }
        pending_free(p, 1);
        return;
    }
    /* Peek the preamble and the client's first bytes: for TLS the whole ClientHello
     * (for its SNI), for plain HTTP the request head up to its Host header. */
    static char buf[AOR_PREAMBLE_MAX + 1 + AOR_SNI_MAX_HELLO];
    int final_peek = 0; /* the peer's end was seen: every byte it sent is readable */
again:;
    ssize_t n = recv(fd, buf, sizeof buf, MSG_PEEK);
    if (n < 0 && (errno == EAGAIN || errno == EINTR))
        return;
    if (n <= 0) {
        if (n == 0)
            aor_debug("shim connection ended before its first byte (the shim's check that "
                      "aord is up, or a probe)");
        pending_free(p, 1);
        return;
    }
    aor_preamble pre;
    const char *err = NULL;
    size_t plen = (size_t)n < AOR_PREAMBLE_MAX + 1 ? (size_t)n : AOR_PREAMBLE_MAX + 1;
    int used = aor_preamble_parse(buf, plen, &pre, &err);
    if (used == 0 && plen < AOR_PREAMBLE_MAX + 1)
        goto need_more;
    if (used <= 0) {
        aor_warn("shim connection: malformed preamble (%s), closed",
                 err ? err : "no newline within the size limit");
        d->m.bad_preambles++;
        pending_free(p, 1);
        return;
    }
    if (n == used)
        goto need_more; /* the first client byte tells TLS from plain HTTP */
    int tls = (unsigned char)buf[used] == 0x16;
    const char *first = buf + used;
    size_t first_len = (size_t)n - (size_t)used;
    /* The host the client's bytes name: the SNI, or for plain HTTP recognised by address
     * only (preamble host "-") the Host header, which then plays the role of SNI. A
     * plain-HTTP preamble host stands for itself (docs/shim.md "Pass-through"). */
    char name[AOR_HOST_MAX + 2] = ""; /* + the trailing dot of an FQDN */
    char why[AOR_HOST_MAX + 128] = "";
    if (tls) {
        int r = aor_sni_parse((const unsigned char *)first, first_len, name, sizeof name);
        if (r == -2)
            goto need_more; /* the rest of the ClientHello is on its way */
        if (r == 1) {
            /* One trailing dot is dropped before the length counts (docs/tls.md; QA: a
             * 253-byte intercepted name with its dot was passed through as malformed). */
            size_t nl = strlen(name);
            if (nl > 1 && name[nl - 1] == '.')
                name[--nl] = '\0';
            if (nl > AOR_HOST_MAX)
                r = -1;
        }
        pass_reason(d, 1, r, name, why, sizeof why);
    } else if (!pre.host[0]) {
        int r = aor_sni_http_host(first, first_len, name, AOR_HOST_MAX + 1);
        if (r == -2)
            goto need_more; /* the rest of the request head is on its way */
        pass_reason(d, 0, r, name, why, sizeof why);
        /* Nothing vouches for a plain-HTTP Host as a certificate does for an SNI: it is
         * taken only when the published set has this address for it, so a request to
         * another server that names a provider host is not sent there (review). */
        if (!why[0] && !aor_publish_has_addr(name, pre.ip))
            snprintf(why, sizeof why, "plain HTTP Host %s does not have the address %s", name,
                     pre.ip);
    } else if (!aor_publish_host_intercepted(d->cfg, pre.host)) {
        snprintf(why, sizeof why, "plain HTTP to %s is not a provider host", pre.host);
    }
    if (why[0])
        name[0] = '\0';
    /* Consume exactly the preamble; the client's bytes stay for TLS / HTTP. */
    char sink[AOR_PREAMBLE_MAX + 1];
    if (recv(fd, sink, (size_t)used, 0) != used) {
        pending_free(p, 1);
        return;
    }
    int sfd = p->fd;
    pending_free(p, 0);
    if (why[0]) {
        if (fallback_address(pre.ip)) {
            /* The shim's offline stand-in (spec §2 step 3): nothing is there to pass to,
             * and a connect would only hang until the kernel gives up. */
            aor_warn("shim connection: %s, to the offline stand-in address %s: nothing to "
                     "pass it to, closed",
                     why, pre.ip);
            close(sfd);
            return;
        }
        aor_debug("shim connection: %s; passing through to %s:%d", why, pre.ip, pre.port);
        aor_passthru_start(d, sfd, pre.ip, pre.port);
        return;
    }
    if (name[0]) {
        size_t hl = strlen(name);
        memcpy(pre.host, name, hl + 1);
    }
    aor_debug("shim connection: host=%s ip=%s port=%d %s", pre.host[0] ? pre.host : "-", pre.ip,
              pre.port, tls ? "tls" : "plain");
    start_session(d, sfd, &pre, tls);
    return;
need_more:
    /* Peeked bytes stay readable, so an EOF is only visible as RDHUP. The rest of the
     * bytes and the end may have come between the peek and this look (a client that
     * sends its request and shuts down its side at once): peek once more first. */
    if (fd_peer_closed(fd)) {
        if (!final_peek) {
            final_peek = 1;
            goto again;
        }
        if (used > 0) {
            /* A valid preamble, then the client closed before or while sending: a port
             * probe, a happy-eyeballs loser, a pool's spare. Not the shim's fault. */
            aor_debug("shim connection to %s:%d closed by the client before its first "
                      "bytes were complete",
                      pre.ip, pre.port);
        } else {
            aor_warn("shim connection: closed by the client before the preamble was "
                     "complete");
            d->m.bad_preambles++;
        }
        pending_free(p, 1);
    }
}

void aor_conn_accept_unix(aor_daemon *d, int fd) {
    evutil_make_socket_nonblocking(fd);
    pending_unix *p = calloc(1, sizeof *p);
    if (!p) {
        close(fd);
        return;
    }
    p->d = d;
    p->fd = fd;
    p->next = d->pendings;
    if (d->pendings)
        d->pendings->prev = p;
    d->pendings = p;
    p->deadline_ms = aor_clock_mono_ms() + PREAMBLE_TIMEOUT_S * 1000LL;
    p->ev = event_new(d->base, fd, EV_READ | EV_PERSIST | EV_ET, on_preamble, p);
    struct timeval tv = {PREAMBLE_TIMEOUT_S, 0};
    if (!p->ev || event_add(p->ev, &tv) < 0)
        pending_free(p, 1);
}

struct evbuffer *aor_conn_output(aor_conn *c) {
    return c->stage;
}

size_t aor_conn_output_len(aor_conn *c) {
    return out_len(c);
}

int aor_conn_last(const aor_conn *c) {
    return c->last;
}

int aor_conn_http10(const aor_conn *c) {
    return c->http10;
}

void aor_conn_on_drain(aor_conn *c, void (*cb)(void *arg), void *arg) {
    c->drain_cb = cb;
    c->drain_arg = arg;
}

void aor_conn_on_flushed(aor_conn *c, void (*cb)(void *arg), void *arg) {
    c->flushed_cb = cb;
    c->flushed_arg = arg;
}

void aor_conn_response_done(aor_conn *c, int keep_alive) {
    c->proxy = NULL;
    c->busy = 0;
    c->drain_cb = NULL;
    c->flushed_cb = NULL;
    if (!keep_alive || c->last)
        c->closing = 1;
    if (c->depth > 0)
        return; /* the running process_input goes on */
    if (!c->closing && !c->peer_eof) {
        read_enable(c, 1);
        c->io_count++; /* idle from now (on_idle) */
    }
    process_input(c);
}

void aor_conn_abort(aor_conn *c) {
    c->aborted = 1;
    c->proxy = NULL;
    c->drain_cb = NULL;
    c->flushed_cb = NULL;
    c->busy = 0;
    /* Bytes already queued (headers, events) still reach the client; then the connection
     * closes with the response unfinished, which the client sees as an error. */
    if (c->depth == 0 && out_len(c) > 0) {
        c->closing = 1;
        read_enable(c, 0);
        return;
    }
    conn_release(c);
}

/* 1 while c has an answer to finish: a request in flight or still arriving (a prompt
 * being uploaded), or bytes not yet written. */
static int answering(aor_conn *c) {
    if (c->lingering) /* answered: only reading what a refused client still sends */
        return 0;
    return c->busy || out_len(c) > 0 || aor_http_reader_partial(c->reader) ||
           (!c->closing && evbuffer_get_length(c->in) > 0);
}

size_t aor_conn_drain(aor_daemon *d) {
    while (d->pendings)
        pending_free(d->pendings, 1); /* no request yet: nothing to finish */
    size_t n = 0;
    for (aor_conn *c = d->conns, *next; c; c = next) {
        next = c->next;
        if (answering(c)) {
            c->last = 1; /* closed after this answer (aor_conn_response_done) */
            if (!c->busy && !aor_http_reader_partial(c->reader) && evbuffer_get_length(c->in) == 0)
                c->closing = 1; /* only output left: close once it is out */
            n++;
        } else {
            conn_free(c);
        }
    }
    return n;
}

size_t aor_conn_busy(const aor_daemon *d) {
    size_t n = 0;
    for (aor_conn *c = d->conns; c; c = c->next)
        n += answering(c) != 0;
    return n;
}

void aor_conn_close_all(aor_daemon *d) {
    while (d->conns)
        conn_free(d->conns); /* unlinks itself */
    while (d->pendings)
        pending_free(d->pendings, 1); /* shim connections still in the preamble stage */
}

void aor_conn_flush(aor_conn *c) {
    if (!c->flush_pending)
        return;
    /* As inside process_input: a write error only marks c dead, the caller's
     * aor_conn_response_done / aor_conn_abort frees it. */
    c->depth++;
    on_flush(-1, EV_WRITE, c); /* the activated event then finds nothing to do */
    c->depth--;
}
