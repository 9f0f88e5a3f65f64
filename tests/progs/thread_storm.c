/* Concurrency stress client for libaor.so (tests/tsan-stress, spec §2 "Works in
 * multi-threaded programs, across fork/exec").
 *
 *   thread_storm [--fork] HOST PORT [THREADS [ROUNDS]]
 *
 * Starts THREADS threads (default 200) that wait on one barrier and then, ROUNDS times
 * (default 3) each: resolve HOST:PORT (getaddrinfo, or gethostbyname_r on odd rounds),
 * connect a TCP socket, check getpeername/getsockname, set and read socket options,
 * exchange "hello\n" with the peer (the fake daemon echoes), dup and close. The barrier
 * makes the threads run the shim's hooks at the same moment (without it, thread start-up
 * serialises them and a race detector sees little). With --fork, thread 0 also forks in
 * the first round while the others are inside the hooks; the child connects and
 * exchanges once (the shim's fork handlers must leave its locks usable). Not under
 * ThreadSanitizer: GCC 12's TSan runtime can deadlock in its own allocator in the child
 * of a multi-threaded fork.
 * Prints "storm GOOD/TOTAL", "fork ok|failed" (with --fork), then "ok" (exit 0) or
 * "FAIL ..." (exit 1). It has no sleeps. */
#include <arpa/inet.h>
#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#define MAX_THREADS 1000
#define MAX_ROUNDS 100
#define IO_TIMEOUT_MS 10000

static const char *g_host, *g_port;
static int g_rounds;
static int g_fork;
static pthread_barrier_t g_start;
static volatile int g_fork_ok = -1; /* written by thread 0 only, read after join */

/* Parses a decimal count in [1, max]; exits on anything else. */
static int parse_count(const char *s, int max, const char *what) {
    char *end = NULL;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno != 0 || end == s || *end != '\0' || v < 1 || v > max) {
        printf("FAIL bad %s '%s' (1..%d)\n", what, s, max);
        exit(1);
    }
    return (int)v;
}

/* First stream address of HOST:PORT into out. use_ghbn: gethostbyname_r (IPv4 only).
 * Returns the address length, or 0. */
static socklen_t resolve(struct sockaddr_storage *out, int use_ghbn) {
    if (use_ghbn) {
        struct hostent he, *res = NULL;
        char buf[4096];
        int herr = 0;
        if (gethostbyname_r(g_host, &he, buf, sizeof buf, &res, &herr) != 0 || res == NULL ||
            res->h_addrtype != AF_INET || res->h_addr_list[0] == NULL)
            return 0;
        struct sockaddr_in *in = (struct sockaddr_in *)out;
        memset(in, 0, sizeof *in);
        in->sin_family = AF_INET;
        in->sin_port = htons((unsigned short)strtol(g_port, NULL, 10));
        memcpy(&in->sin_addr, res->h_addr_list[0], sizeof in->sin_addr);
        return (socklen_t)sizeof *in;
    }
    struct addrinfo hints, *res = NULL;
    memset(&hints, 0, sizeof hints);
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    if (getaddrinfo(g_host, g_port, &hints, &res) != 0 || res == NULL)
        return 0;
    socklen_t len = 0;
    if (res->ai_addrlen <= sizeof *out) {
        len = res->ai_addrlen;
        memcpy(out, res->ai_addr, len);
    }
    freeaddrinfo(res);
    return len;
}

/* Writes "hello\n" and reads until it came back. 0 or -1. */
static int exchange(int fd) {
    char buf[512];
    size_t n = 0;
    if (write(fd, "hello\n", 6) != 6)
        return -1;
    while (n + 1 < sizeof buf) {
        struct pollfd p = {fd, POLLIN, 0};
        if (poll(&p, 1, IO_TIMEOUT_MS) <= 0)
            return -1;
        ssize_t r = read(fd, buf + n, sizeof buf - 1 - n);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            return -1;
        n += (size_t)r;
        buf[n] = '\0';
        if (strstr(buf, "hello\n") != NULL)
            return 0;
    }
    return -1;
}

/* Connect to ss + checks + exchange + dup/close. 1 when everything held. */
static int connect_check(const struct sockaddr_storage *ss, socklen_t len) {
    struct sockaddr_storage peer, self;
    socklen_t pl = sizeof peer, sl = sizeof self;
    int fd = socket(ss->ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return 0;
    int ok = connect(fd, (const struct sockaddr *)ss, len) == 0;
    ok = ok && getpeername(fd, (struct sockaddr *)&peer, &pl) == 0 && pl == len &&
         memcmp(&peer, ss, len) == 0;
    ok = ok && getsockname(fd, (struct sockaddr *)&self, &sl) == 0 &&
         self.ss_family == ss->ss_family;
    int one = 1, v = 0;
    socklen_t vl = sizeof v;
    ok = ok && setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one) == 0;
    ok = ok && getsockopt(fd, SOL_SOCKET, SO_DOMAIN, &v, &vl) == 0 && v == ss->ss_family;
    ok = ok && exchange(fd) == 0;
    int d = ok ? dup(fd) : -1;
    ok = ok && d >= 0 && getpeername(d, (struct sockaddr *)&peer, &(socklen_t){sizeof peer}) == 0;
    if (d >= 0)
        close(d);
    close(fd);
    return ok;
}

/* One resolve + connect_check. 1 when everything held. */
static int one_connection(int round) {
    struct sockaddr_storage ss;
    socklen_t len = resolve(&ss, round % 2);
    return len != 0 && connect_check(&ss, len);
}

/* fork() while the other threads are busy; the child connects once to an address
 * resolved before the fork (the resolver itself is not usable in the child of a
 * multi-threaded fork: glibc's resolv.conf lock may be held by another thread, and POSIX
 * allows only async-signal-safe calls there). 1 when the child's connection worked. */
static int fork_and_connect(void) {
    struct sockaddr_storage ss;
    socklen_t len = resolve(&ss, 0);
    if (len == 0)
        return 0;
    fflush(stdout);
    pid_t pid = fork();
    if (pid < 0)
        return 0;
    if (pid == 0)
        _exit(connect_check(&ss, len) ? 0 : 1);
    int st = 0;
    while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
        ;
    return WIFEXITED(st) && WEXITSTATUS(st) == 0;
}

static void *thread_main(void *arg) {
    int id = (int)(intptr_t)arg;
    intptr_t good = 0;
    pthread_barrier_wait(&g_start);
    for (int r = 0; r < g_rounds; r++) {
        if (g_fork && id == 0 && r == 0)
            g_fork_ok = fork_and_connect();
        good += one_connection(r);
    }
    return (void *)good;
}

int main(int argc, char **argv) {
    if (argc > 1 && strcmp(argv[1], "--fork") == 0) {
        g_fork = 1;
        argv++;
        argc--;
    }
    if (argc < 3 || argc > 5) {
        printf("usage: thread_storm [--fork] HOST PORT [THREADS [ROUNDS]]\n");
        return 2;
    }
    g_host = argv[1];
    g_port = argv[2];
    int nthreads = argc > 3 ? parse_count(argv[3], MAX_THREADS, "thread count") : 200;
    g_rounds = argc > 4 ? parse_count(argv[4], MAX_ROUNDS, "round count") : 3;
    pthread_t *t = calloc((size_t)nthreads, sizeof *t);
    if (t == NULL || pthread_barrier_init(&g_start, NULL, (unsigned)nthreads) != 0) {
        printf("FAIL setup: %s\n", strerror(errno));
        return 1;
    }
    for (int i = 0; i < nthreads; i++) {
        int e = pthread_create(&t[i], NULL, thread_main, (void *)(intptr_t)i);
        if (e != 0) {
            printf("FAIL pthread_create: %s\n", strerror(e));
            return 1; /* the started threads wait on the barrier forever: exit ends them */
        }
    }
    long good = 0;
    for (int i = 0; i < nthreads; i++) {
        void *r = NULL;
        pthread_join(t[i], &r);
        good += (long)(intptr_t)r;
    }
    pthread_barrier_destroy(&g_start);
    free(t);
    long total = (long)nthreads * g_rounds;
    printf("storm %ld/%ld\n", good, total);
    if (g_fork)
        printf("fork %s\n", g_fork_ok == 1 ? "ok" : "failed");
    if (good != total || (g_fork && g_fork_ok != 1)) {
        printf("FAIL storm\n");
        return 1;
    }
    printf("ok\n");
    return 0;
}
