/* loadgen — HTTP/1.1 keep-alive load for `make bench` (docs/performance.md).
 *
 *   loadgen --host H --port P [--tls] [--path /v1/chat/completions] [--model M]
 *           [--body-bytes N | --body JSON] [--conns N] [--rate R] [--duration S]
 *           [--warmup S] [--cpu-pid PID]... [--samples]
 *
 * The request is a POST of an OpenAI chat body for model M (default "bench") whose user
 * message is padded so the body is about N bytes (default: a short "hi"), or --body as
 * given.
 *
 * --rate 0 (default): closed loop, each connection sends its next request as soon as the
 * answer is complete; latency = answer complete - request sent.
 * --rate R: open loop at R requests/s in total, spread over the connections (each gets
 * R/N, staggered). A request that fell due while its connection was still waiting for
 * the previous answer is sent at once and its latency counts from when it was due, so a
 * slow answer that delays the next request counts against the path (no coordinated
 * omission); a request sent on a timer wake counts from when it was sent.
 * Only requests due after the warm-up and answered before the end are counted; the CPU
 * time of each --cpu-pid (all its threads, /proc/PID/task/ * /schedstat) is read at the
 * same two moments. Prints one JSON object on stdout (with --samples also every counted
 * latency, "samples_us"). The host is resolved with
 * getaddrinfo, so LD_PRELOAD=libaor.so redirects provider hosts. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "bcommon.h"

#include <errno.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/prctl.h>
#include <time.h>
#include <unistd.h>

#define MAX_CONNS 4096
#define MAX_PIDS 8

typedef struct {
    bc_conn c;
    bc_resp r;
    int busy;
    uint64_t due;  /* open loop: when the next request is due */
    uint64_t sent; /* latency is measured from here (see the file comment) */
    int overdue;   /* open loop: the next request fell due while this one was in flight */
} lconn;

static const char *opt_host = "127.0.0.1", *opt_port = "80", *opt_path = "/v1/chat/completions";
static const char *opt_body, *opt_model = "bench";
static long opt_body_bytes;
static int opt_tls, opt_samples, opt_conns = 1;
static double opt_rate, opt_duration = 2, opt_warmup = 0.5;
static pid_t opt_pids[MAX_PIDS];
static int opt_npids;

static char *request;
static size_t request_len;
static SSL_CTX *tls_ctx;

static double parse_num(const char *s, const char *what) {
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (errno || end == s || *end || v < 0)
        bc_die("bad %s: %s", what, s);
    return v;
}

static void usage(void) {
    fprintf(stderr, "usage: loadgen --host H --port P [--tls] [--path P] [--model M] "
                    "[--body-bytes N | --body JSON] [--conns N] [--rate R] [--duration S] "
                    "[--warmup S] [--cpu-pid PID] [--samples]\n");
    exit(2);
}

static void parse_args(int argc, char **argv) {
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (strcmp(a, "--tls") == 0) {
            opt_tls = 1;
            continue;
        }
        if (strcmp(a, "--samples") == 0) {
            opt_samples = 1;
            continue;
        }
        if (!v)
            usage();
        i++;
        if (strcmp(a, "--host") == 0)
            opt_host = v;
        else if (strcmp(a, "--port") == 0)
            opt_port = v;
        else if (strcmp(a, "--path") == 0)
            opt_path = v;
        else if (strcmp(a, "--body") == 0)
            opt_body = v;
        else if (strcmp(a, "--model") == 0)
            opt_model = v;
        else if (strcmp(a, "--body-bytes") == 0)
            opt_body_bytes = (long)parse_num(v, "--body-bytes");
        else if (strcmp(a, "--conns") == 0)
            opt_conns = (int)parse_num(v, "--conns");
        else if (strcmp(a, "--rate") == 0)
            opt_rate = parse_num(v, "--rate");
        else if (strcmp(a, "--duration") == 0)
            opt_duration = parse_num(v, "--duration");
        else if (strcmp(a, "--warmup") == 0)
            opt_warmup = parse_num(v, "--warmup");
        else if (strcmp(a, "--cpu-pid") == 0 && opt_npids < MAX_PIDS)
            opt_pids[opt_npids++] = (pid_t)parse_num(v, "--cpu-pid");
        else
            usage();
    }
    if (opt_conns < 1 || opt_conns > MAX_CONNS || opt_duration <= 0)
        bc_die("--conns must be 1..%d and --duration > 0", MAX_CONNS);
    if (opt_body_bytes > 64L * 1024 * 1024 || strlen(opt_model) > 200)
        bc_die("--body-bytes at most 64 MiB, --model at most 200 characters");
}

/* {"model":M,"messages":[{"role":"user","content":"hi xxxx..."}]} of about want bytes. */
static char *make_body(long want) {
    static const char head[] =
        "{\"model\":\"%s\",\"messages\":[{\"role\":\"user\",\"content\":\"hi";
    static const char tail[] = "\"}]}";
    size_t cap = (size_t)(want > 0 ? want : 0) + strlen(opt_model) + sizeof head + sizeof tail;
    char *b = malloc(cap);
    if (!b)
        bc_die("out of memory");
    int n = snprintf(b, cap, head, opt_model);
    if (n < 0 || (size_t)n >= cap)
        bc_die("body too long");
    size_t len = (size_t)n;
    while ((long)(len + sizeof tail - 1) < want) {
        /* words of a conversation, not one run of a single letter */
        static const char words[] = " lorem ipsum dolor sit amet";
        size_t w = sizeof words - 1;
        if ((long)(len + w + sizeof tail - 1) > want)
            w = (size_t)want - len - (sizeof tail - 1);
        memcpy(b + len, words, w);
        len += w;
    }
    memcpy(b + len, tail, sizeof tail);
    return b;
}

static void build_request(void) {
    char *made = NULL;
    if (!opt_body)
        opt_body = made = make_body(opt_body_bytes);
    size_t blen = strlen(opt_body);
    size_t cap = strlen(opt_path) + strlen(opt_host) + blen + 256;
    request = malloc(cap);
    if (!request)
        bc_die("out of memory");
    int n = snprintf(request, cap,
                     "POST %s HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\n"
                     "Authorization: Bearer bench-client-token\r\nContent-Length: %zu\r\n\r\n%s",
                     opt_path, opt_host, blen, opt_body);
    if (n < 0 || (size_t)n >= cap)
        bc_die("request too long");
    request_len = (size_t)n;
    free(made);
    opt_body = NULL;
}

static void dial(lconn *l, int ep) {
    char err[512];
    if (bc_dial(&l->c, opt_host, opt_port, tls_ctx, err, sizeof err) < 0)
        bc_die("%s", err);
    struct epoll_event ev = {.events = EPOLLIN, .data.ptr = l};
    if (epoll_ctl(ep, EPOLL_CTL_ADD, l->c.fd, &ev) < 0)
        bc_die("epoll_ctl: %s", strerror(errno));
    bc_resp_reset(&l->r);
    l->busy = 0;
}

static void cpu_snapshot(uint64_t *out) {
    for (int i = 0; i < opt_npids; i++)
        out[i] = bc_proc_cpu_ns(opt_pids[i]);
}

int main(int argc, char **argv) {
    signal(SIGPIPE, SIG_IGN);
    prctl(PR_SET_TIMERSLACK, 1UL); /* wake on time for the open-loop schedule */
    parse_args(argc, argv);
    build_request();
    if (opt_tls)
        tls_ctx = bc_tls_ctx();
    int ep = epoll_create1(EPOLL_CLOEXEC);
    if (ep < 0)
        bc_die("epoll_create1: %s", strerror(errno));
    lconn *conns = calloc((size_t)opt_conns, sizeof *conns);
    if (!conns)
        bc_die("out of memory");
    for (int i = 0; i < opt_conns; i++)
        dial(&conns[i], ep);

    uint64_t t0 = bc_now_ns();
    uint64_t mstart = t0 + (uint64_t)(opt_warmup * 1e9);
    uint64_t mend = mstart + (uint64_t)(opt_duration * 1e9);
    uint64_t interval = opt_rate > 0 ? (uint64_t)(1e9 * opt_conns / opt_rate) : 0;
    for (int i = 0; i < opt_conns; i++)
        conns[i].due = t0 + (interval ? interval * (uint64_t)i / (uint64_t)opt_conns : 0);

    bc_samples lat = {0};
    uint64_t cpu0[MAX_PIDS] = {0}, cpu1[MAX_PIDS] = {0};
    int measuring = 0;
    unsigned long counted = 0, errors = 0, bad_status = 0, reconnects = 0;
    static char rbuf[65536];
    struct epoll_event evs[256];

    for (;;) {
        uint64_t now = bc_now_ns();
        if (!measuring && now >= mstart) {
            cpu_snapshot(cpu0);
            measuring = 1;
        }
        if (now >= mend)
            break;
        /* send what is due */
        uint64_t next_wake = mend;
        for (int i = 0; i < opt_conns; i++) {
            lconn *l = &conns[i];
            if (l->busy)
                continue;
            if (interval && l->due > now) {
                if (l->due < next_wake)
                    next_wake = l->due;
                continue;
            }
            /* Open loop: a request that fell due while the previous one was still in flight
             * counts from when it was due (the path made it wait); one sent after a timer
             * wake counts from when it was sent (a late wake of this client is not the
             * path's fault). */
            l->sent = interval && l->overdue ? l->due : now;
            l->overdue = 0;
            if (interval)
                l->due += interval;
            if (bc_send_all(&l->c, request, request_len) < 0) {
                errors++;
                epoll_ctl(ep, EPOLL_CTL_DEL, l->c.fd, NULL);
                bc_close(&l->c);
                dial(l, ep);
                reconnects++;
                continue;
            }
            l->busy = 1;
        }
        now = bc_now_ns();
        struct timespec ts = {0, 0};
        if (next_wake > now) {
            uint64_t d = next_wake - now;
            ts.tv_sec = (time_t)(d / 1000000000u);
            ts.tv_nsec = (long)(d % 1000000000u);
        }
        int n = epoll_pwait2(ep, evs, 256, &ts, NULL);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            bc_die("epoll_pwait2: %s", strerror(errno));
        }
        for (int k = 0; k < n; k++) {
            lconn *l = evs[k].data.ptr;
            for (;;) {
                ssize_t got = bc_recv(&l->c, rbuf, sizeof rbuf);
                if (got == -2)
                    break;
                if (got <= 0) {
                    errors++;
                    epoll_ctl(ep, EPOLL_CTL_DEL, l->c.fd, NULL);
                    bc_close(&l->c);
                    dial(l, ep);
                    reconnects++;
                    break;
                }
                size_t off = 0;
                while (off < (size_t)got) {
                    if (!l->busy) {
                        errors++; /* bytes nobody asked for */
                        break;
                    }
                    ssize_t used = bc_resp_feed(&l->r, rbuf + off, (size_t)got - off);
                    if (used < 0)
                        bc_die("malformed answer from %s:%s", opt_host, opt_port);
                    off += (size_t)used;
                    if (l->r.st != BC_R_DONE)
                        continue;
                    uint64_t done = bc_now_ns();
                    if (l->r.status < 200 || l->r.status > 299)
                        bad_status++;
                    if (l->sent >= mstart && done <= mend) {
                        bc_samples_add(&lat, done - l->sent);
                        counted++;
                    }
                    int closing = l->r.close;
                    bc_resp_reset(&l->r);
                    l->busy = 0;
                    l->overdue = interval && l->due <= done;
                    if (closing) {
                        epoll_ctl(ep, EPOLL_CTL_DEL, l->c.fd, NULL);
                        bc_close(&l->c);
                        dial(l, ep);
                        reconnects++;
                        break;
                    }
                }
                if (l->c.fd < 0 || (!l->c.ssl && (size_t)got < sizeof rbuf))
                    break;
            }
        }
    }
    cpu_snapshot(cpu1);
    double secs = opt_duration;
    printf("{\"requests\":%lu,\"errors\":%lu,\"bad_status\":%lu,\"reconnects\":%lu,"
           "\"duration_s\":%.3f,\"rps\":%.1f,\"rate\":%.0f,\"conns\":%d,"
           "\"p50_us\":%.1f,\"p90_us\":%.1f,\"p99_us\":%.1f,\"p999_us\":%.1f,\"max_us\":%.1f,"
           "\"cpu_ns\":[",
           counted, errors, bad_status, reconnects, secs, counted / secs, opt_rate, opt_conns,
           bc_samples_pct(&lat, 50) / 1e3, bc_samples_pct(&lat, 90) / 1e3,
           bc_samples_pct(&lat, 99) / 1e3, bc_samples_pct(&lat, 99.9) / 1e3,
           bc_samples_pct(&lat, 100) / 1e3);
    for (int i = 0; i < opt_npids; i++)
        printf("%s%" PRIu64, i ? "," : "", cpu1[i] - cpu0[i]);
    printf("]");
    if (opt_samples)
        bc_samples_print_json(&lat, "samples_us");
    printf("}\n");
    bc_samples_free(&lat);
    for (int i = 0; i < opt_conns; i++)
        bc_close(&conns[i].c);
    free(conns);
    free(request);
    if (tls_ctx)
        SSL_CTX_free(tls_ctx);
    return 0;
}
