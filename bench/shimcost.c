/* shimcost — what libaor.so costs a program on traffic it does not route (spec §10),
 * for `make bench` (docs/performance.md). Run it with and without LD_PRELOAD.
 *
 *   shimcost connect N      N x (socket, connect to a local TCP listener, accept, close
 *                           both); the listener is this process's own, on 127.0.0.1
 *   shimcost gai N [HOST]   N x getaddrinfo(HOST, "443") + freeaddrinfo (default
 *                           "localhost": /etc/hosts, not a provider host)
 *
 * Prints {"mode":...,"n":N,"ns_per_op":X}. libc only (it runs under the shim).
 *
 *   shimcost connect-ab N B, shimcost gai-ab N B [HOST]
 *                           the same loops in one process, in 2 x B alternating blocks
 *                           of N operations: the functions the program links to (with
 *                           LD_PRELOAD, the shim's hooks) against libc's own (looked up
 *                           in libc.so.6 with dlsym). Two processes differ in more than
 *                           the hooks (where they land in memory, this VM's slow
 *                           spells); one process measures only the hooks. Prints
 *                           {"mode":...,"hooked_ns":X,"libc_ns":Y,"overhead_pct":Z}: the
 *                           medians over the blocks, and the median of each pair's
 *                           hooked/libc ratio, in %. Without LD_PRELOAD both are libc's.
 *                           connect-ab resets each connection at close (no TIME_WAIT). */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <arpa/inet.h>
#include <dlfcn.h>
#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

static double now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

static void die(const char *what) {
    fprintf(stderr, "shimcost: %s: %s\n", what, strerror(errno));
    exit(1);
}

typedef int (*connect_fn)(int, const struct sockaddr *, socklen_t);
typedef int (*close_fn)(int);
typedef int (*gai_fn)(const char *, const char *, const struct addrinfo *, struct addrinfo **);

/* The functions the loops call: by default the ones this program links to. */
static connect_fn fn_connect = connect;
static close_fn fn_close = close;
static gai_fn fn_gai = getaddrinfo;
/* 1 in the -ab modes: the client's close resets the connection (SO_LINGER 0), so the
 * tens of thousands of connections of one process leave no TIME_WAIT behind: with
 * them, finding a free local port gets slower as a run goes on, a drift larger than
 * the hooks' cost. */
static int reset_on_close;

static double run_connect(long n) {
    int l = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (l < 0)
        die("socket");
    struct sockaddr_in a = {.sin_family = AF_INET};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t al = sizeof a;
    if (bind(l, (struct sockaddr *)&a, sizeof a) < 0 || listen(l, 64) < 0 ||
        getsockname(l, (struct sockaddr *)&a, &al) < 0)
        die("listen");
    double t0 = now_ns();
    for (long i = 0; i < n; i++) {
        int s = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (s < 0)
            die("socket");
        if (fn_connect(s, (struct sockaddr *)&a, sizeof a) < 0)
            die("connect");
        int c = accept4(l, NULL, NULL, SOCK_CLOEXEC);
        if (c < 0)
            die("accept");
        if (reset_on_close) {
            struct linger lg = {.l_onoff = 1, .l_linger = 0};
            if (setsockopt(s, SOL_SOCKET, SO_LINGER, &lg, sizeof lg) < 0)
                die("setsockopt");
        }
        fn_close(s);
        fn_close(c);
    }
    double t1 = now_ns();
    close(l);
    return (t1 - t0) / (double)n;
}

static double run_gai(long n, const char *host) {
    struct addrinfo hints = {0};
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    double t0 = now_ns();
    for (long i = 0; i < n; i++) {
        struct addrinfo *res = NULL;
        int rc = fn_gai(host, "443", &hints, &res);
        if (rc != 0) {
            fprintf(stderr, "shimcost: getaddrinfo %s: %s\n", host, gai_strerror(rc));
            exit(1);
        }
        freeaddrinfo(res);
    }
    return (now_ns() - t0) / (double)n;
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static double median(double *v, long n) {
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

/* The -ab modes: blocks alternate (hooked first in even pairs, libc first in odd ones,
 * so neither always runs warmer). */
static int run_ab(const char *mode, long n, long blocks, const char *host) {
    void *libc = dlopen("libc.so.6", RTLD_LAZY | RTLD_NOLOAD);
    if (libc == NULL) {
        fprintf(stderr, "shimcost: libc.so.6 not loaded: %s\n", dlerror());
        return 1;
    }
    connect_fn libc_connect = (connect_fn)dlsym(libc, "connect");
    close_fn libc_close = (close_fn)dlsym(libc, "close");
    gai_fn libc_gai = (gai_fn)dlsym(libc, "getaddrinfo");
    if (!libc_connect || !libc_close || !libc_gai) {
        fprintf(stderr, "shimcost: libc symbols not found\n");
        return 1;
    }
    connect_fn linked_connect = fn_connect;
    close_fn linked_close = fn_close;
    gai_fn linked_gai = fn_gai;
    int is_gai = strcmp(mode, "gai-ab") == 0;
    reset_on_close = 1;
    double *hooked = calloc((size_t)blocks, sizeof(double));
    double *plain = calloc((size_t)blocks, sizeof(double));
    double *ratio = calloc((size_t)blocks, sizeof(double));
    if (!hooked || !plain || !ratio)
        die("calloc");
    for (long b = 0; b < blocks; b++) {
        for (int k = 0; k < 2; k++) {
            int use_hooked = (k == 0) == (b % 2 == 0);
            fn_connect = use_hooked ? linked_connect : libc_connect;
            fn_close = use_hooked ? linked_close : libc_close;
            fn_gai = use_hooked ? linked_gai : libc_gai;
            double ns = is_gai ? run_gai(n, host) : run_connect(n);
            (use_hooked ? hooked : plain)[b] = ns;
        }
        ratio[b] = hooked[b] / plain[b];
    }
    double r = median(ratio, blocks);
    printf("{\"mode\":\"%s\",\"n\":%ld,\"blocks\":%ld,\"hooked_ns\":%.1f,\"libc_ns\":%.1f,"
           "\"overhead_pct\":%.3f,\"same_function\":%s}\n",
           mode, n, blocks, median(hooked, blocks), median(plain, blocks), (r - 1) * 100,
           is_gai ? ((void *)linked_gai == (void *)libc_gai ? "true" : "false")
                  : ((void *)linked_connect == (void *)libc_connect ? "true" : "false"));
    free(hooked);
    free(plain);
    free(ratio);
    return 0;
}

int main(int argc, char **argv) {
    if (argc < 3) {
        fprintf(stderr, "usage: shimcost connect N | shimcost gai N [HOST] |\n"
                        "       shimcost connect-ab N B | shimcost gai-ab N B [HOST]\n");
        return 2;
    }
    char *end;
    errno = 0;
    long n = strtol(argv[2], &end, 10);
    if (errno || end == argv[2] || *end || n < 1) {
        fprintf(stderr, "shimcost: bad count %s\n", argv[2]);
        return 2;
    }
    if (strcmp(argv[1], "connect-ab") == 0 || strcmp(argv[1], "gai-ab") == 0) {
        long blocks = argc > 3 ? strtol(argv[3], NULL, 10) : 0;
        if (blocks < 1 || blocks > 100000) {
            fprintf(stderr, "shimcost: bad block count\n");
            return 2;
        }
        return run_ab(argv[1], n, blocks, argc > 4 ? argv[4] : "localhost");
    }
    double ns;
    if (strcmp(argv[1], "connect") == 0)
        ns = run_connect(n);
    else if (strcmp(argv[1], "gai") == 0)
        ns = run_gai(n, argc > 3 ? argv[3] : "localhost");
    else
        return 2;
    printf("{\"mode\":\"%s\",\"n\":%ld,\"ns_per_op\":%.1f}\n", argv[1], n, ns);
    return 0;
}
