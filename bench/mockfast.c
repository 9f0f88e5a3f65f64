/* mockfast — the fast mock provider of `make bench` (docs/performance.md).
 *
 *   mockfast [--port P] [--tls-port T --cert PEM --key PEM] [--port-file FILE]
 *
 * One thread, epoll, HTTP/1.1 keep-alive, plain TCP and (with --tls-port) TLS through
 * OpenSSL. Every request gets a fixed small OpenAI chat.completion answer with a
 * Content-Length, except a request whose body contains "stream":true: that one gets an
 * SSE stream (chunked) of bench_chunks events (default 20) written bench_interval_us
 * apart (default 1000), each carrying "bench_t":<CLOCK_MONOTONIC ns taken just before the
 * write>, so a client on the same machine can tell how long the chunk took to reach it.
 * The first event (the role delta) goes out with the headers; the stream ends with a
 * finish_reason chunk and "data: [DONE]". Port 0 picks a free port; the ports in use
 * are written to --port-file as "PLAIN TLS\n" (TLS 0 when off) once listening.
 * Dies with its parent (PR_SET_PDEATHSIG). Benchmarks only: no limits beyond a 1 MiB
 * request cap, no validation of what it is sent. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/epoll.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define IN_MAX (1024 * 1024 + 65536)
#define DEFAULT_CHUNKS 20
#define DEFAULT_INTERVAL_US 1000

typedef struct mconn {
    int fd;
    SSL *ssl;
    int handshaking;
    char *in;
    size_t inlen, incap;
    char *out;
    size_t outlen, outoff, outcap;
    int want_out; /* EPOLLOUT registered */
    int close_after;
    /* streaming */
    int streaming;
    long chunks_left;
    uint64_t interval_ns, next_due;
    struct mconn *snext, *sprev;
} mconn;

static int ep;
static SSL_CTX *tls_ctx;
static mconn *streams; /* connections that are streaming */
static unsigned long served;

static const char json_body[] =
    "{\"id\":\"chatcmpl-bench\",\"object\":\"chat.completion\",\"created\":1700000000,"
    "\"model\":\"bench\",\"choices\":[{\"index\":0,\"message\":{\"role\":\"assistant\","
    "\"content\":\"Hello from the bench mock.\",\"refusal\":null},\"logprobs\":null,"
    "\"finish_reason\":\"stop\"}],\"usage\":{\"prompt_tokens\":9,\"completion_tokens\":6,"
    "\"total_tokens\":15},\"system_fingerprint\":\"fp_bench\"}";

static const char common_headers[] = "x-request-id: req_bench\r\n"
                                     "openai-processing-ms: 1\r\n"
                                     "x-ratelimit-limit-requests: 10000\r\n"
                                     "x-ratelimit-remaining-requests: 9999\r\n"
                                     "x-ratelimit-reset-requests: 6ms\r\n";

static char json_answer[2048];
static char json_answer_close[2048]; /* the same with Connection: close */
static size_t json_answer_close_len;
static size_t json_answer_len;

static uint64_t now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static void die(const char *what) {
    fprintf(stderr, "mockfast: %s: %s\n", what, strerror(errno));
    exit(1);
}

static void on_term(int sig) {
    _exit(0);
}

/* ---- output ------------------------------------------------------------------------ */

static void set_out_interest(mconn *c, int want) {
    if (want == c->want_out)
        return;
    struct epoll_event ev = {.events = EPOLLIN | (want ? EPOLLOUT : 0), .data.ptr = c};
    epoll_ctl(ep, EPOLL_CTL_MOD, c->fd, &ev);
    c->want_out = want;
}

static int out_add(mconn *c, const char *data, size_t len) {
    if (c->outlen + len > c->outcap) {
        size_t cap = c->outcap ? c->outcap : 4096;
        while (cap < c->outlen + len)
            cap *= 2;
        char *n = realloc(c->out, cap);
        if (!n)
            return -1;
        c->out = n;
        c->outcap = cap;
    }
    memcpy(c->out + c->outlen, data, len);
    c->outlen += len;
    return 0;
}

/* Every SSL_* I/O call here is preceded by ERR_clear_error(): SSL_get_error() reads the
 * thread's error queue, so an error left there by one connection (a client gone without
 * close_notify) would otherwise end the next connection that merely has to wait. */

/* Writes what is pending. 0 (maybe partly written, EPOLLOUT armed) or -1 (connection dead). */
static int flush_out(mconn *c) {
    while (c->outoff < c->outlen) {
        size_t len = c->outlen - c->outoff;
        if (c->ssl) {
            ERR_clear_error();
            int n = SSL_write(c->ssl, c->out + c->outoff, (int)len);
            if (n > 0) {
                c->outoff += (size_t)n;
                continue;
            }
            int e = SSL_get_error(c->ssl, n);
            if (e == SSL_ERROR_WANT_WRITE || e == SSL_ERROR_WANT_READ)
                break;
            return -1;
        }
        ssize_t n = send(c->fd, c->out + c->outoff, len, MSG_NOSIGNAL);
        if (n > 0) {
            c->outoff += (size_t)n;
            continue;
        }
        if (n < 0 && (errno == EAGAIN || errno == EINTR))
            break;
        return -1;
    }
    if (c->outoff == c->outlen) {
        c->outoff = c->outlen = 0;
        set_out_interest(c, 0);
    } else {
        set_out_interest(c, 1);
    }
    return 0;
}

/* ---- connections ------------------------------------------------------------------- */

static void stream_unlink(mconn *c) {
    if (!c->streaming)
        return;
    if (c->sprev)
        c->sprev->snext = c->snext;
    else
        streams = c->snext;
    if (c->snext)
        c->snext->sprev = c->sprev;
    c->snext = c->sprev = NULL;
    c->streaming = 0;
}

static void conn_close(mconn *c) {
    stream_unlink(c);
    epoll_ctl(ep, EPOLL_CTL_DEL, c->fd, NULL);
    if (c->ssl) {
        if (c->close_after && !c->handshaking) {
            /* Connection: close answered: end with close_notify, as a server does (wrk
             * counted the bare close as a read error on every connection) */
            ERR_clear_error();
            SSL_shutdown(c->ssl);
            ERR_clear_error();
        }
        SSL_free(c->ssl);
    }
    close(c->fd);
    free(c->in);
    free(c->out);
    free(c);
}

/* Value of a small non-negative integer field "name":N in body, or def. */
static long body_num(const char *body, size_t len, const char *name, long def) {
    char pat[64];
    int pl = snprintf(pat, sizeof pat, "\"%s\":", name);
    if (pl < 0 || (size_t)pl >= sizeof pat)
        return def;
    const char *p = memmem(body, len, pat, (size_t)pl);
    if (!p)
        return def;
    p += pl;
    while (p < body + len && *p == ' ')
        p++;
    long v = 0;
    int digits = 0;
    while (p < body + len && *p >= '0' && *p <= '9' && v < 100000000) {
        v = v * 10 + (*p - '0');
        p++;
        digits++;
    }
    return digits ? v : def;
}

static int body_streams(const char *body, size_t len) {
    return memmem(body, len, "\"stream\":true", 13) || memmem(body, len, "\"stream\": true", 14);
}

static int add_chunk(mconn *c, const char *data, size_t len) {
    char hdr[32];
    int hl = snprintf(hdr, sizeof hdr, "%zx\r\n", len);
    if (hl < 0 || out_add(c, hdr, (size_t)hl) < 0 || out_add(c, data, len) < 0 ||
        out_add(c, "\r\n", 2) < 0)
        return -1;
    return 0;
}

static int add_event(mconn *c, const char *delta, const char *finish) {
    char ev[512];
    int n = snprintf(ev, sizeof ev,
                     "data: {\"id\":\"chatcmpl-bench\",\"object\":\"chat.completion.chunk\","
                     "\"created\":1700000000,\"model\":\"bench\",\"choices\":[{\"index\":0,"
                     "\"delta\":%s,\"logprobs\":null,\"finish_reason\":%s}],\"bench_t\":%llu}\n\n",
                     delta, finish, (unsigned long long)now_ns());
    if (n < 0 || (size_t)n >= sizeof ev)
        return -1;
    return add_chunk(c, ev, (size_t)n);
}

static void stream_start(mconn *c, const char *body, size_t len) {
    static const char head[] =
        "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream; charset=utf-8\r\n"
        "Cache-Control: no-cache\r\nTransfer-Encoding: chunked\r\n";
    out_add(c, head, sizeof head - 1);
    out_add(c, common_headers, sizeof common_headers - 1);
    out_add(c, "\r\n", 2);
    add_event(c, "{\"role\":\"assistant\",\"content\":\"\",\"refusal\":null}", "null");
    c->chunks_left = body_num(body, len, "bench_chunks", DEFAULT_CHUNKS);
    c->interval_ns = (uint64_t)body_num(body, len, "bench_interval_us", DEFAULT_INTERVAL_US) * 1000;
    c->next_due = now_ns() + c->interval_ns;
    c->streaming = 1;
    c->sprev = NULL;
    c->snext = streams;
    if (streams)
        streams->sprev = c;
    streams = c;
}

static int process_requests(mconn *c);

/* One stream step when due: a content event, or the end. -1 when the connection died. */
static int stream_tick(mconn *c, uint64_t now) {
    if (c->chunks_left > 0) {
        c->chunks_left--;
        if (add_event(c, "{\"content\":\" tok\"}", "null") < 0)
            return -1;
        c->next_due += c->interval_ns;
        if (c->next_due < now)
            c->next_due = now; /* fell behind: no burst */
        return flush_out(c);
    }
    static const char done[] = "data: [DONE]\n\n";
    if (add_event(c, "{}", "\"stop\"") < 0 || add_chunk(c, done, sizeof done - 1) < 0 ||
        out_add(c, "0\r\n\r\n", 5) < 0)
        return -1;
    stream_unlink(c);
    served++;
    if (flush_out(c) < 0)
        return -1;
    return process_requests(c);
}

/* Answers every complete request in c->in (until a stream starts). -1: close c. */
static int process_requests(mconn *c) {
    size_t off = 0;
    while (!c->streaming && off < c->inlen) {
        char *start = c->in + off;
        size_t avail = c->inlen - off;
        char *hend = memmem(start, avail, "\r\n\r\n", 4);
        if (!hend)
            break;
        size_t hlen = (size_t)(hend - start) + 4;
        long long clen = 0;
        int close_req = 0;
        /* headers: Content-Length and Connection only */
        char *line = memchr(start, '\n', hlen);
        while (line && line < start + hlen - 2) {
            line++;
            if (strncasecmp(line, "content-length:", 15) == 0) {
                clen = strtoll(line + 15, NULL, 10);
                if (clen < 0 || clen > 1024 * 1024)
                    return -1;
            } else if (strncasecmp(line, "connection:", 11) == 0) {
                const char *v = line + 11;
                while (*v == ' ')
                    v++;
                close_req = strncasecmp(v, "close", 5) == 0;
            } else if (strncasecmp(line, "transfer-encoding:", 18) == 0) {
                return -1; /* chunked requests are not used by the benchmarks */
            }
            line = memchr(line, '\n', (size_t)(start + hlen - line));
        }
        if (avail < hlen + (size_t)clen)
            break;
        const char *body = start + hlen;
        if (body_streams(body, (size_t)clen)) {
            stream_start(c, body, (size_t)clen);
        } else {
            if (close_req) /* say so: wrk takes an answer without it as keep-alive */
                out_add(c, json_answer_close, json_answer_close_len);
            else
                out_add(c, json_answer, json_answer_len);
            served++;
        }
        off += hlen + (size_t)clen;
        if (close_req) {
            c->close_after = 1;
            break;
        }
    }
    if (off) {
        memmove(c->in, c->in + off, c->inlen - off);
        c->inlen -= off;
    }
    if (flush_out(c) < 0)
        return -1;
    if (c->close_after && !c->streaming && c->outlen == 0)
        return -1;
    return 0;
}

static int read_in(mconn *c) {
    for (;;) {
        if (c->incap - c->inlen < 16384) {
            size_t cap = c->incap ? c->incap * 2 : 32768;
            if (cap > IN_MAX)
                return -1;
            char *n = realloc(c->in, cap);
            if (!n)
                return -1;
            c->in = n;
            c->incap = cap;
        }
        size_t room = c->incap - c->inlen;
        if (c->ssl) {
            ERR_clear_error();
            int n = SSL_read(c->ssl, c->in + c->inlen, (int)room);
            if (n > 0) {
                c->inlen += (size_t)n;
                continue;
            }
            int e = SSL_get_error(c->ssl, n);
            if (e == SSL_ERROR_WANT_READ || e == SSL_ERROR_WANT_WRITE)
                return 0;
            return -1;
        }
        ssize_t n = recv(c->fd, c->in + c->inlen, room, 0);
        if (n > 0) {
            c->inlen += (size_t)n;
            if ((size_t)n < room)
                return 0;
            continue;
        }
        if (n < 0 && (errno == EAGAIN || errno == EINTR))
            return 0;
        return -1;
    }
}

static void on_conn_event(mconn *c, uint32_t events) {
    if (c->handshaking) {
        ERR_clear_error();
        int r = SSL_accept(c->ssl);
        if (r != 1) {
            int e = SSL_get_error(c->ssl, r);
            if (e == SSL_ERROR_WANT_READ || e == SSL_ERROR_WANT_WRITE) {
                set_out_interest(c, e == SSL_ERROR_WANT_WRITE);
                return;
            }
            conn_close(c);
            return;
        }
        c->handshaking = 0;
        set_out_interest(c, 0);
    }
    if ((events & EPOLLOUT) && flush_out(c) < 0) {
        conn_close(c);
        return;
    }
    if (events & (EPOLLIN | EPOLLHUP | EPOLLERR)) {
        int r = read_in(c);
        if (r < 0 && c->inlen == 0) {
            conn_close(c);
            return;
        }
        if (process_requests(c) < 0 || r < 0) {
            conn_close(c);
            return;
        }
    } else if (c->close_after && !c->streaming && c->outlen == 0) {
        conn_close(c);
    }
}

/* ---- listeners ------------------------------------------------------------------------ */

typedef struct {
    int fd;
    int tls;
} listener;

static int listen_on(int port) {
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0)
        die("socket");
    int one = 1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (bind(fd, (struct sockaddr *)&a, sizeof a) < 0)
        die("bind");
    if (listen(fd, 4096) < 0)
        die("listen");
    return fd;
}

static int bound_port(int fd) {
    struct sockaddr_in a;
    socklen_t l = sizeof a;
    if (getsockname(fd, (struct sockaddr *)&a, &l) < 0)
        die("getsockname");
    return ntohs(a.sin_port);
}

static void on_accept(listener *l) {
    for (;;) {
        int fd = accept4(l->fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd < 0)
            return;
        int one = 1;
        setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
        mconn *c = calloc(1, sizeof *c);
        if (!c) {
            close(fd);
            continue;
        }
        c->fd = fd;
        if (l->tls) {
            c->ssl = SSL_new(tls_ctx);
            if (!c->ssl) {
                close(fd);
                free(c);
                continue;
            }
            SSL_set_fd(c->ssl, fd);
            c->handshaking = 1;
        }
        struct epoll_event ev = {.events = EPOLLIN, .data.ptr = c};
        if (epoll_ctl(ep, EPOLL_CTL_ADD, fd, &ev) < 0) {
            conn_close(c);
            continue;
        }
    }
}

static long parse_port(const char *s) {
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno || end == s || *end || v < 0 || v > 65535) {
        fprintf(stderr, "mockfast: bad port %s\n", s);
        exit(2);
    }
    return v;
}

/* The fixed JSON answer into buf (cap bytes), with the header lines extra; its length in
 * *len. -1 when it does not fit. */
static int make_json_answer(char *buf, size_t cap, const char *extra, size_t *len) {
    int n = snprintf(buf, cap,
                     "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n%s%s"
                     "Content-Length: %zu\r\n\r\n%s",
                     extra, common_headers, sizeof json_body - 1, json_body);
    if (n < 0 || (size_t)n >= cap)
        return -1;
    *len = (size_t)n;
    return 0;
}

int main(int argc, char **argv) {
    long port = 0, tls_port = -1;
    const char *cert = NULL, *key = NULL, *port_file = NULL;
    for (int i = 1; i + 1 < argc; i += 2) {
        if (strcmp(argv[i], "--port") == 0)
            port = parse_port(argv[i + 1]);
        else if (strcmp(argv[i], "--tls-port") == 0)
            tls_port = parse_port(argv[i + 1]);
        else if (strcmp(argv[i], "--cert") == 0)
            cert = argv[i + 1];
        else if (strcmp(argv[i], "--key") == 0)
            key = argv[i + 1];
        else if (strcmp(argv[i], "--port-file") == 0)
            port_file = argv[i + 1];
        else {
            fprintf(stderr, "usage: mockfast [--port P] [--tls-port T --cert PEM --key PEM] "
                            "[--port-file FILE]\n");
            return 2;
        }
    }
    prctl(PR_SET_PDEATHSIG, SIGTERM);
    signal(SIGTERM, on_term);
    signal(SIGPIPE, SIG_IGN);
    if (make_json_answer(json_answer, sizeof json_answer, "", &json_answer_len) < 0 ||
        make_json_answer(json_answer_close, sizeof json_answer_close, "Connection: close\r\n",
                         &json_answer_close_len) < 0)
        return 1;

    ep = epoll_create1(EPOLL_CLOEXEC);
    if (ep < 0)
        die("epoll_create1");
    listener plain = {listen_on((int)port), 0}, tls = {-1, 1};
    struct epoll_event ev = {.events = EPOLLIN, .data.ptr = &plain};
    epoll_ctl(ep, EPOLL_CTL_ADD, plain.fd, &ev);
    if (tls_port >= 0) {
        if (!cert || !key) {
            fprintf(stderr, "mockfast: --tls-port needs --cert and --key\n");
            return 2;
        }
        tls_ctx = SSL_CTX_new(TLS_server_method());
        if (!tls_ctx || SSL_CTX_use_certificate_chain_file(tls_ctx, cert) != 1 ||
            SSL_CTX_use_PrivateKey_file(tls_ctx, key, SSL_FILETYPE_PEM) != 1) {
            ERR_print_errors_fp(stderr);
            return 1;
        }
        SSL_CTX_set_mode(tls_ctx,
                         SSL_MODE_ENABLE_PARTIAL_WRITE | SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER);
        tls.fd = listen_on((int)tls_port);
        struct epoll_event ev2 = {.events = EPOLLIN, .data.ptr = &tls};
        epoll_ctl(ep, EPOLL_CTL_ADD, tls.fd, &ev2);
    }
    if (port_file) {
        char tmp[4096];
        int tl = snprintf(tmp, sizeof tmp, "%s.tmp", port_file);
        if (tl < 0 || (size_t)tl >= sizeof tmp)
            return 2;
        FILE *f = fopen(tmp, "w");
        if (!f)
            die("port file");
        fprintf(f, "%d %d\n", bound_port(plain.fd), tls.fd >= 0 ? bound_port(tls.fd) : 0);
        fclose(f);
        if (rename(tmp, port_file) < 0)
            die("rename port file");
    }

    struct epoll_event evs[512];
    for (;;) {
        struct timespec ts, *tsp = NULL;
        if (streams) {
            uint64_t now = now_ns(), due = UINT64_MAX;
            for (mconn *s = streams; s; s = s->snext)
                if (s->next_due < due)
                    due = s->next_due;
            uint64_t d = due > now ? due - now : 0;
            ts.tv_sec = (time_t)(d / 1000000000u);
            ts.tv_nsec = (long)(d % 1000000000u);
            tsp = &ts;
        }
        int k = epoll_pwait2(ep, evs, 512, tsp, NULL);
        if (k < 0 && errno != EINTR)
            die("epoll_pwait2");
        for (int i = 0; i < k; i++) {
            void *p = evs[i].data.ptr;
            if (p == &plain || p == &tls)
                on_accept(p);
            else
                on_conn_event(p, evs[i].events);
        }
        if (streams) {
            uint64_t now = now_ns();
            mconn *s = streams;
            while (s) {
                mconn *next = s->snext;
                if (s->next_due <= now + 20000 && stream_tick(s, now) < 0)
                    conn_close(s);
                s = next;
            }
        }
    }
}
