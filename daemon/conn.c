#include "conn.h"

#include "admin.h"
#include "guard.h"
#include "log.h"
#include "passthru.h"
#include "publish.h"
#include "sni.h"
#include "preamble.h"
#include "proxy.h"

#include <errno.h>
#include <event2/bufferevent.h>
#include <event2/bufferevent_ssl.h>
#include <event2/bufferevent_struct.h>
#include <openssl/ssl.h>
#include <stdlib.h>
#include <string.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <openssl/err.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#define PREAMBLE_TIMEOUT_S 10
#define IDLE_TIMEOUT_S 300
#define OUT_LOW_WATERMARK (256 * 1024)
#define IN_MAX_WHILE_BUSY (1024 * 1024)

struct aor_conn {
    aor_daemon *d;
    struct aor_conn *prev, *next; /* d->conns */
    struct bufferevent *bev;
    int via_shim;
    aor_preamble pre;
    char *host; /* intercepted host (lower case), NULL on the sidecar */
    aor_http_reader *reader;
    aor_proxy *proxy; /* request in flight through the walk */
    int busy;         /* a request is being answered */
    int closing;      /* close once output is flushed */
    int http10;
    int depth; /* > 0 while process_input runs: frees are deferred */
    int dead;  /* free when depth drops to 0 */
    void (*drain_cb)(void *);
    void *drain_arg;
    /* Answers are written to stage; one flush per event-loop pass moves them on (a single
     * writev, or one TLS record) instead of a write per piece. On a plain socket the flush
     * writes straight to the fd while the bufferevent's output is empty, so EV_WRITE is
     * only enabled when the kernel did not take everything (docs/performance.md). */
    struct evbuffer *stage;
    struct evbuffer_cb_entry *stage_cb;
    struct event *flush_ev;
    int flush_pending;
    int plain; /* not TLS: direct writes, and reads by rev */
    /* Plain sockets are read by this event into the bufferevent's input, not by the
     * bufferevent: libevent's socket read asks the kernel for the readable size
     * (ioctl FIONREAD) before every read, one system call per request more. */
    struct event *rev;
};

static size_t out_len(aor_conn *c) {
    return evbuffer_get_length(c->stage) + evbuffer_get_length(bufferevent_get_output(c->bev));
}

/* Starts or stops reading from the client. */
static void read_enable(aor_conn *c, int on) {
    if (c->rev) {
        if (on) {
            struct timeval idle = {IDLE_TIMEOUT_S, 0};
            if (!event_pending(c->rev, EV_READ, NULL))
                event_add(c->rev, &idle);
        } else {
            event_del(c->rev);
        }
    } else if (on) {
        bufferevent_enable(c->bev, EV_READ);
    } else {
        bufferevent_disable(c->bev, EV_READ);
    }
}

/* Preamble stage: a bare fd waiting for "AOR/1 ...\n" plus the first client byte. */
typedef struct {
    aor_daemon *d;
    int fd;
    struct event *ev;
} pending_unix;

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
    if (c->flush_ev)
        event_free(c->flush_ev);
    if (c->stage) {
        if (c->stage_cb)
            evbuffer_remove_cb_entry(c->stage, c->stage_cb);
        evbuffer_free(c->stage);
    }
    if (c->bev)
        bufferevent_free(c->bev);
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

static void process_input(aor_conn *c) {
    struct evbuffer *in = bufferevent_get_input(c->bev);
    c->depth++;
    while (!c->dead && !c->busy && !c->closing && evbuffer_get_length(in) > 0) {
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
        if (res == AOR_HTTP_CONTINUE) {
            evbuffer_add(c->stage, "HTTP/1.1 100 Continue\r\n\r\n", 25);
            continue;
        }
        if (res == AOR_HTTP_ERROR) {
        refuse:
            aor_warn("bad request from client: %s (answered %d)", why, status);
            char body[640];
            int len = snprintf(body, sizeof body,
                               "{\"error\":{\"message\":\"aor: %s\","
                               "\"type\":\"invalid_request_error\"}}",
                               why);
            /* §5.6: every answer carries the x-aor-* headers, local refusals too. */
            static const char *const aor_hdrs[] = {"x-aor-provider: -", "x-aor-key: -",
                                                   "x-aor-attempts: 0", NULL};
            aor_http_write_response(c->stage, status, "application/json", aor_hdrs, body,
                                    (size_t)len, 0);
            c->closing = 1;
            break;
        }
        /* AOR_HTTP_REQUEST */
        aor_http_request *req = aor_http_reader_take(c->reader);
        if (!req)
            break;
        status = aor_guard_check(req, !c->via_shim, &why);
        if (status) {
            aor_http_request_free(req);
            goto refuse;
        }
        c->busy = 1;
        c->http10 = req->http_major == 1 && req->http_minor == 0;
        c->d->m.requests++;
        char *path = aor_http_request_path(req);
        int local = !c->via_shim && path && aor_admin_is_local(path);
        free(path);
        if (local) {
            aor_admin_handle(c->d, c, req);
        } else {
            c->proxy = aor_proxy_start(c->d, c, req, c->host);
        }
    }
    c->depth--;
    if (c->depth > 0)
        return;
    if (c->dead || (c->closing && out_len(c) == 0)) {
        conn_free(c);
        return;
    }
    if (c->closing)
        read_enable(c, 0);
    else if (c->busy && evbuffer_get_length(in) > IN_MAX_WHILE_BUSY)
        read_enable(c, 0);
}

static void on_read(struct bufferevent *bev, void *arg) {
    process_input(arg);
}

static void on_event(struct bufferevent *bev, short what, void *arg);

#define PLAIN_READ_MAX 16384 /* bytes per read of a plain client socket */

/* Plain client socket readable (or idle for IDLE_TIMEOUT_S). */
static void on_plain_read(evutil_socket_t fd, short what, void *arg) {
    aor_conn *c = arg;
    if (what & EV_TIMEOUT) {
        on_event(c->bev, BEV_EVENT_READING | BEV_EVENT_TIMEOUT, c);
        return;
    }
    /* Into a scratch buffer, then only the bytes read are added: reserving room in the
     * input buffer would allocate a 16 KiB chain per request (a slow, large malloc). */
    static char scratch[PLAIN_READ_MAX];
    ssize_t n = read(fd, scratch, sizeof scratch);
    if (n <= 0) {
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR))
            return;
        on_event(c->bev, BEV_EVENT_READING | (n == 0 ? BEV_EVENT_EOF : BEV_EVENT_ERROR), c);
        return;
    }
    if (evbuffer_add(bufferevent_get_input(c->bev), scratch, (size_t)n) != 0) {
        on_event(c->bev, BEV_EVENT_READING | BEV_EVENT_ERROR, c);
        return;
    }
    process_input(c);
}

/* Output went out: close a closing connection that has sent everything, or tell the
 * request in flight that there is room again. */
static void after_write(aor_conn *c) {
    if (c->closing && !c->busy && out_len(c) == 0) {
        conn_release(c);
        return;
    }
    if (c->drain_cb)
        c->drain_cb(c->drain_arg);
}

static void on_write(struct bufferevent *bev, void *arg) {
    aor_conn *c = arg;
    if (c->plain && evbuffer_get_length(bufferevent_get_output(bev)) == 0)
        bufferevent_disable(bev, EV_WRITE); /* the next flush writes directly again */
    after_write(c);
}

static void on_flush(evutil_socket_t fd, short what, void *arg) {
    aor_conn *c = arg;
    c->flush_pending = 0;
    if (evbuffer_get_length(c->stage) == 0)
        return;
    struct evbuffer *out = bufferevent_get_output(c->bev);
    if (c->plain && evbuffer_get_length(out) == 0) {
        int n = evbuffer_write(c->stage, bufferevent_getfd(c->bev));
        if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) {
            on_event(c->bev, BEV_EVENT_WRITING | BEV_EVENT_ERROR, c);
            return;
        }
        if (evbuffer_get_length(c->stage) == 0) {
            after_write(c);
            return;
        }
    }
    int was_empty = evbuffer_get_length(out) == 0;
    evbuffer_add_buffer(out, c->stage);
    if (c->plain) {
        bufferevent_enable(c->bev, EV_WRITE);
    } else if (was_empty) {
        /* bufferevent_openssl writes only from its write event, which waits for the next
         * epoll_wait: run it in this pass instead (the socket is writable as a rule). */
        event_active(&c->bev->ev_write, EV_WRITE, 1);
    }
}

static void on_stage(struct evbuffer *buf, const struct evbuffer_cb_info *info, void *arg) {
    aor_conn *c = arg;
    if (info->n_added && !c->flush_pending) {
        c->flush_pending = 1;
        /* Runs later in this same pass of the loop: no system call, no extra round. */
        event_active(c->flush_ev, EV_WRITE, 0);
    }
}

static void on_event(struct bufferevent *bev, short what, void *arg) {
    aor_conn *c = arg;
    if (what & BEV_EVENT_CONNECTED)
        return;
    if (what & BEV_EVENT_ERROR) {
        unsigned long e;
        while ((e = bufferevent_get_openssl_error(bev))) {
            char buf[256];
            ERR_error_string_n(e, buf, sizeof buf);
            aor_debug("client TLS: %s", buf);
        }
    }
    if ((what & BEV_EVENT_EOF) && !(what & BEV_EVENT_ERROR) && c->busy && !c->closing) {
        /* Half-close after a complete request (`nc -N`, shutdown(SHUT_WR)): the client
         * still reads; answer, then close. A client that is really gone shows up as a
         * write error. */
        c->closing = 1;
        read_enable(c, 0);
        return;
    }
    /* EOF, error or timeout: the client is gone. */
    conn_release(c);
}

/* Takes bev (plain: a socket bufferevent, else TLS). NULL on ENOMEM (bev not freed). */
static aor_conn *conn_new(aor_daemon *d, struct bufferevent *bev, int plain) {
    aor_conn *c = calloc(1, sizeof *c);
    if (!c)
        return NULL;
    c->d = d;
    c->plain = plain;
    c->reader = aor_http_reader_new((size_t)d->cfg->body_max);
    c->stage = evbuffer_new();
    c->flush_ev = event_new(d->base, -1, 0, on_flush, c);
    if (!c->reader || !c->stage || !c->flush_ev)
        goto fail;
    c->stage_cb = evbuffer_add_cb(c->stage, on_stage, c);
    if (!c->stage_cb)
        goto fail;
    if (plain) {
        c->rev = event_new(d->base, bufferevent_getfd(bev), EV_READ | EV_PERSIST, on_plain_read, c);
        if (!c->rev)
            goto fail;
    }
    c->bev = bev;
    bufferevent_setcb(bev, on_read, on_write, on_event, c);
    bufferevent_setwatermark(bev, EV_WRITE, OUT_LOW_WATERMARK, 0);
    if (plain) {
        bufferevent_disable(bev, EV_READ | EV_WRITE);
        /* A socket bufferevent freezes the end of its input (only it may add); here
         * on_plain_read adds instead. */
        evbuffer_unfreeze(bufferevent_get_input(bev), 0);
        read_enable(c, 1);
    } else {
        struct timeval idle = {IDLE_TIMEOUT_S, 0};
        bufferevent_set_timeouts(bev, &idle, NULL);
        bufferevent_enable(bev, EV_READ | EV_WRITE);
    }
    d->m.connections++;
    c->next = d->conns;
    if (d->conns)
        d->conns->prev = c;
    d->conns = c;
    return c;
fail:
    if (c->rev)
        event_free(c->rev);
    aor_http_reader_free(c->reader);
    if (c->stage)
        evbuffer_free(c->stage);
    if (c->flush_ev)
        event_free(c->flush_ev);
    free(c);
    return NULL;
}

void aor_conn_accept_tcp(aor_daemon *d, int fd) {
    evutil_make_socket_nonblocking(fd);
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    struct bufferevent *bev = bufferevent_socket_new(d->base, fd, BEV_OPT_CLOSE_ON_FREE);
    if (!bev) {
        close(fd);
        return;
    }
    if (!conn_new(d, bev, 1))
        bufferevent_free(bev);
}

static void start_session(aor_daemon *d, int fd, const aor_preamble *pre, int tls) {
    struct bufferevent *bev;
    if (tls) {
        SSL *ssl = SSL_new(aor_tls_server_ctx(d->tls));
        if (!ssl) {
            close(fd);
            return;
        }
        /* The leaf for clients that send no SNI: the host the shim saw. */
        aor_tls_set_conn_host(ssl, pre->host[0] ? pre->host : pre->ip);
        /* No deferred callbacks: answers leave through the flush event (stage), never
         * from inside a bufferevent callback, so OpenSSL cannot report an error into a
         * half-written answer; a deferred read would cost a loop round per request. */
        bev = bufferevent_openssl_socket_new(d->base, fd, ssl, BUFFEREVENT_SSL_ACCEPTING,
                                             BEV_OPT_CLOSE_ON_FREE);
        if (!bev) {
            SSL_free(ssl);
            close(fd);
            return;
        }
        bufferevent_openssl_set_allow_dirty_shutdown(bev, 1);
    } else {
        bev = bufferevent_socket_new(d->base, fd, BEV_OPT_CLOSE_ON_FREE);
        if (!bev) {
            close(fd);
            return;
        }
    }
    aor_conn *c = conn_new(d, bev, !tls);
    if (!c) {
        bufferevent_free(bev);
        return;
    }
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

static void on_preamble(evutil_socket_t fd, short what, void *arg) {
    pending_unix *p = arg;
    aor_daemon *d = p->d;
    if (what & EV_TIMEOUT) {
        aor_warn("shim connection: no complete preamble and first client bytes within %d s, "
                 "closed",
                 PREAMBLE_TIMEOUT_S);
        d->m.bad_preambles++;
        pending_free(p, 1);
        return;
    }
    /* Peek the preamble and, for TLS, the whole ClientHello (for its SNI). */
    static char buf[AOR_PREAMBLE_MAX + 1 + AOR_SNI_MAX_HELLO];
    ssize_t n = recv(fd, buf, sizeof buf, MSG_PEEK);
    if (n < 0 && (errno == EAGAIN || errno == EINTR))
        return;
    if (n <= 0) {
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
    char sni[AOR_HOST_MAX + 1] = "";
    if (tls) {
        int r = aor_sni_parse((const unsigned char *)buf + used, (size_t)n - (size_t)used, sni,
                              sizeof sni);
        if (r == -2)
            goto need_more; /* the rest of the ClientHello is on its way */
        if (r != 1)
            sni[0] = '\0';
    }
    /* Consume exactly the preamble; the client's bytes stay for TLS / HTTP. */
    char sink[AOR_PREAMBLE_MAX + 1];
    if (recv(fd, sink, (size_t)used, 0) != used) {
        pending_free(p, 1);
        return;
    }
    int sfd = p->fd;
    pending_free(p, 0);
    if (!tls && pre.host[0] && !aor_publish_host_intercepted(d->cfg, pre.host)) {
        aor_debug("shim connection: plain HTTP to %s is not a provider host; passing through "
                  "to %s:%d",
                  pre.host, pre.ip, pre.port);
        aor_passthru_start(d, sfd, pre.ip, pre.port);
        return;
    }
    if (sni[0] && !aor_publish_host_intercepted(d->cfg, sni)) {
        aor_debug("shim connection: SNI %s is not a provider host; passing through to %s:%d", sni,
                  pre.ip, pre.port);
        aor_passthru_start(d, sfd, pre.ip, pre.port);
        return;
    }
    if (sni[0]) {
        size_t hl = strlen(sni);
        memcpy(pre.host, sni, hl + 1);
    }
    aor_debug("shim connection: host=%s ip=%s port=%d %s", pre.host[0] ? pre.host : "-", pre.ip,
              pre.port, tls ? "tls" : "plain");
    start_session(d, sfd, &pre, tls);
    return;
need_more:
    /* Peeked bytes stay readable, so an EOF is only visible as RDHUP. */
    if (fd_peer_closed(fd)) {
        aor_warn("shim connection: closed by the client before the preamble and its first "
                 "bytes were complete");
        d->m.bad_preambles++;
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

int aor_conn_http10(const aor_conn *c) {
    return c->http10;
}

void aor_conn_on_drain(aor_conn *c, void (*cb)(void *arg), void *arg) {
    c->drain_cb = cb;
    c->drain_arg = arg;
}

void aor_conn_response_done(aor_conn *c, int keep_alive) {
    c->proxy = NULL;
    c->busy = 0;
    c->drain_cb = NULL;
    if (!keep_alive)
        c->closing = 1;
    if (c->depth > 0)
        return; /* the running process_input goes on */
    if (!c->closing)
        read_enable(c, 1);
    process_input(c);
}

void aor_conn_abort(aor_conn *c) {
    c->proxy = NULL;
    c->drain_cb = NULL;
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

void aor_conn_close_all(aor_daemon *d) {
    while (d->conns)
        conn_free(d->conns); /* unlinks itself */
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
