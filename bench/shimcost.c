/* shimcost — what libaor.so costs a program on traffic it does not route (spec §10),
 * for `make bench` (docs/performance.md). Run it with and without LD_PRELOAD.
 *
 *   shimcost connect N      N x (socket, connect to a local TCP listener, accept, close
 *                           both); the listener is this process's own, on 127.0.0.1
 *   shimcost gai N [HOST]   N x getaddrinfo(HOST, "443") + freeaddrinfo (default
 *                           "localhost": /etc/hosts, not a provider host)
 *
 * Prints {"mode":...,"n":N,"ns_per_op":X}. libc only (it runs under the shim). */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <arpa/inet.h>
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
        if (connect(s, (struct sockaddr *)&a, sizeof a) < 0)
            die("connect");
        int c = accept4(l, NULL, NULL, SOCK_CLOEXEC);
        if (c < 0)
            die("accept");
        close(c);
        close(s);
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
        int rc = getaddrinfo(host, "443", &hints, &res);
        if (rc != 0) {
            fprintf(stderr, "shimcost: getaddrinfo %s: %s\n", host, gai_strerror(rc));
            exit(1);
        }
        freeaddrinfo(res);
    }
    return (now_ns() - t0) / (double)n;
}

int main(int argc, char **argv) {
    if (argc < 3) {
        fprintf(stderr, "usage: shimcost connect N | shimcost gai N [HOST]\n");
        return 2;
    }
    char *end;
    errno = 0;
    long n = strtol(argv[2], &end, 10);
    if (errno || end == argv[2] || *end || n < 1) {
        fprintf(stderr, "shimcost: bad count %s\n", argv[2]);
        return 2;
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
