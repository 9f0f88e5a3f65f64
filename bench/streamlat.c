/* streamlat — SSE chunk latency for `make bench` (docs/performance.md).
 *
 *   streamlat --host H --port P [--tls] [--path /v1/chat/completions] [--model M]
 *             [--streams N] [--count K] [--chunks C] [--interval-us U] [--samples]
 *
 * Opens N connections and runs K streaming requests on each, one after the other (all N
 * at once). bench/mockfast stamps every event with "bench_t": CLOCK_MONOTONIC ns just
 * before it writes it; this client takes the time when the read() that completed the
 * event returned, so latency = time from the mock writing a chunk to the client having
 * it, through whatever path sits between them. The first event of a stream (it leaves
 * with the response headers) is reported apart as time to first event. Also reports the
 * highest number of streams open at the same moment. Prints one JSON object; with
 * --samples it also holds every chunk latency ("samples_us"). */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "bcommon.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <unistd.h>

#define MAX_STREAMS 8192
#define EVBUF_MAX 65536

typedef struct {
    bc_conn c;
    bc_resp r;
    int left;        /* streams still to run on this connection */
    int events;      /* events seen in the current stream */
    int open;        /* current stream has started */
    uint64_t t_read; /* time of the read being processed */
    char ev[EVBUF_MAX];
    size_t evlen;
} sconn;

static const char *opt_host = "127.0.0.1", *opt_port = "80", *opt_path = "/v1/chat/completions";
static const char *opt_model = "bench";
static int opt_tls, opt_samples, opt_streams = 1, opt_count = 1;
static long opt_chunks = 200, opt_interval_us = 2000;

static bc_samples lat, first;
static unsigned long events_total, bad_events;
static int open_now, open_max;

static long parse_long(const char *s, const char *what) {
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno || end == s || *end || v < 0)
        bc_die("bad %s: %s", what, s);
    return v;
}

static void parse_args(int argc, char **argv) {
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (strcmp(a, "--tls") == 0) {
            opt_tls = 1;
            continue;
        }
        if (strcmp(a, "--samples") == 0) {
            opt_samples = 1;
            continue;
        }
        if (i + 1 >= argc)
            bc_die("%s needs a value", a);
        const char *v = argv[++i];
        if (strcmp(a, "--host") == 0)
            opt_host = v;
        else if (strcmp(a, "--port") == 0)
            opt_port = v;
        else if (strcmp(a, "--path") == 0)
            opt_path = v;
        else if (strcmp(a, "--model") == 0)
            opt_model = v;
        else if (strcmp(a, "--streams") == 0)
            opt_streams = (int)parse_long(v, a);
        else if (strcmp(a, "--count") == 0)
            opt_count = (int)parse_long(v, a);
        else if (strcmp(a, "--chunks") == 0)
            opt_chunks = parse_long(v, a);
        else if (strcmp(a, "--interval-us") == 0)
            opt_interval_us = parse_long(v, a);
        else
            bc_die("unknown option %s", a);
    }
    if (opt_streams < 1 || opt_streams > MAX_STREAMS || opt_count < 1)
        bc_die("--streams must be 1..%d, --count >= 1", MAX_STREAMS);
}

/* One complete SSE event of s. */
static void on_event(sconn *s, const char *ev, size_t len) {
    const char *p = memmem(ev, len, "\"bench_t\":", 10);
    s->events++;
    if (!p) {
        if (!memmem(ev, len, "[DONE]", 6))
            bad_events++;
        return;
    }
    p += 10;
    unsigned long long t = 0;
    while (p < ev + len && *p >= '0' && *p <= '9')
        t = t * 10 + (unsigned long long)(*p++ - '0');
    uint64_t d = s->t_read > t ? s->t_read - t : 0;
    events_total++;
    if (s->events == 1)
        bc_samples_add(&first, d);
    else
        bc_samples_add(&lat, d);
}

static void on_body(void *arg, const char *data, size_t len) {
    sconn *s = arg;
    if (!s->open) {
        s->open = 1;
        if (++open_now > open_max)
            open_max = open_now;
    }
    while (len) {
        size_t n = len;
        if (n > EVBUF_MAX - s->evlen)
            n = EVBUF_MAX - s->evlen;
        if (n == 0)
            bc_die("SSE event larger than %d bytes", EVBUF_MAX);
        memcpy(s->ev + s->evlen, data, n);
        s->evlen += n;
        data += n;
        len -= n;
        for (;;) {
            char *e = memmem(s->ev, s->evlen, "\n\n", 2);
            if (!e)
                break;
            size_t el = (size_t)(e - s->ev) + 2;
            on_event(s, s->ev, el);
            memmove(s->ev, s->ev + el, s->evlen - el);
            s->evlen -= el;
        }
    }
}

static char *request;
static size_t request_len;

static void send_request(sconn *s) {
    bc_resp_reset(&s->r);
    s->events = 0;
    s->evlen = 0;
    s->open = 0;
    if (bc_send_all(&s->c, request, request_len) < 0)
        bc_die("send to %s:%s failed", opt_host, opt_port);
}

int main(int argc, char **argv) {
    signal(SIGPIPE, SIG_IGN);
    parse_args(argc, argv);
    char body[512];
    int bl = snprintf(body, sizeof body,
                      "{\"model\":\"%s\",\"stream\":true,\"bench_chunks\":%ld,"
                      "\"bench_interval_us\":%ld,\"messages\":[{\"role\":\"user\",\"content\":"
                      "\"hi\"}]}",
                      opt_model, opt_chunks, opt_interval_us);
    if (bl < 0 || (size_t)bl >= sizeof body)
        bc_die("model name too long");
    size_t cap = (size_t)bl + strlen(opt_path) + strlen(opt_host) + 256;
    request = malloc(cap);
    if (!request)
        bc_die("out of memory");
    int rl = snprintf(request, cap,
                      "POST %s HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\n"
                      "Accept: text/event-stream\r\nAuthorization: Bearer bench-client-token\r\n"
                      "Content-Length: %d\r\n\r\n%s",
                      opt_path, opt_host, bl, body);
    if (rl < 0 || (size_t)rl >= cap)
        bc_die("request too long");
    request_len = (size_t)rl;

    SSL_CTX *ctx = opt_tls ? bc_tls_ctx() : NULL;
    int ep = epoll_create1(EPOLL_CLOEXEC);
    sconn *ss = calloc((size_t)opt_streams, sizeof *ss);
    if (ep < 0 || !ss)
        bc_die("setup failed");
    for (int i = 0; i < opt_streams; i++) {
        char err[512];
        if (bc_dial(&ss[i].c, opt_host, opt_port, ctx, err, sizeof err) < 0)
            bc_die("%s (stream %d)", err, i);
        ss[i].r.on_body = on_body;
        ss[i].r.arg = &ss[i];
        ss[i].left = opt_count;
        struct epoll_event ev = {.events = EPOLLIN, .data.ptr = &ss[i]};
        if (epoll_ctl(ep, EPOLL_CTL_ADD, ss[i].c.fd, &ev) < 0)
            bc_die("epoll_ctl: %s", strerror(errno));
    }
    uint64_t t0 = bc_now_ns();
    for (int i = 0; i < opt_streams; i++)
        send_request(&ss[i]);
    int running = opt_streams;
    unsigned long done = 0, failed = 0;
    static char rbuf[65536];
    struct epoll_event evs[256];
    while (running > 0) {
        int n = epoll_wait(ep, evs, 256, 30000);
        if (n == 0)
            bc_die("no progress for 30 s (%d streams running)", running);
        for (int k = 0; k < n; k++) {
            sconn *s = evs[k].data.ptr;
            for (;;) {
                ssize_t got = bc_recv(&s->c, rbuf, sizeof rbuf);
                if (got == -2)
                    break;
                s->t_read = bc_now_ns();
                if (got <= 0) {
                    failed++;
                    if (s->open)
                        open_now--;
                    epoll_ctl(ep, EPOLL_CTL_DEL, s->c.fd, NULL);
                    bc_close(&s->c);
                    running--;
                    break;
                }
                ssize_t used = bc_resp_feed(&s->r, rbuf, (size_t)got);
                if (used < 0)
                    bc_die("malformed answer");
                if (s->r.st == BC_R_DONE) {
                    if (s->r.status != 200)
                        failed++;
                    else
                        done++;
                    if (s->open)
                        open_now--;
                    if (--s->left > 0) {
                        send_request(s);
                    } else {
                        epoll_ctl(ep, EPOLL_CTL_DEL, s->c.fd, NULL);
                        bc_close(&s->c);
                        running--;
                        break;
                    }
                }
                if (!s->c.ssl && (size_t)got < sizeof rbuf)
                    break;
            }
        }
    }
    double secs = (double)(bc_now_ns() - t0) / 1e9;
    printf("{\"streams\":%lu,\"failed\":%lu,\"events\":%lu,\"bad_events\":%lu,\"open_max\":%d,"
           "\"seconds\":%.3f,\"p50_us\":%.1f,\"p90_us\":%.1f,\"p99_us\":%.1f,\"max_us\":%.1f,"
           "\"first_p50_us\":%.1f,\"first_p99_us\":%.1f",
           done, failed, events_total, bad_events, open_max, secs, bc_samples_pct(&lat, 50) / 1e3,
           bc_samples_pct(&lat, 90) / 1e3, bc_samples_pct(&lat, 99) / 1e3,
           bc_samples_pct(&lat, 100) / 1e3, bc_samples_pct(&first, 50) / 1e3,
           bc_samples_pct(&first, 99) / 1e3);
    if (opt_samples)
        bc_samples_print_json(&lat, "samples_us");
    printf("}\n");
    free(ss);
    free(request);
    if (ctx)
        SSL_CTX_free(ctx);
    return failed ? 1 : 0;
}
