/* Test client for libaor.so (tests/e2e/test_shim_basic.py).
 *
 *   connect_probe HOST PORT [MODE]
 *
 * Resolves HOST with getaddrinfo, connects, prints what the program sees ("peer IP PORT",
 * "sock IP PORT"), sends "hello\n" and prints the reply ("reply ..." with newlines shown
 * as '|'). Modes exercise one behaviour each: block (default), nonblock, epoll, eisconn,
 * fork, exec (the connected fd handed to a new program image: this probe again, mode
 * exec_child, fd number in AOR_PROBE_FD; AOR_PROBE_CHILD=exec_child_connect for another
 * child mode), threads, dup, sockopt, fastopen, cloexec, ghbn (gethostbyname), ghbnr
 * (gethostbyname_r), direct_first (a direct connection, then the name resolved),
 * direct_reset (the same, reset by its peer first), efault (bad pointers). Ends with "ok" and
 * exit 0, or "FAIL <why>" and exit 1. */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#define NTHREADS 200

static const char *g_host, *g_port;
static int g_bad; /* checks that said "wrong" */

static const char *okw(int cond) {
    if (!cond)
        g_bad++;
    return cond ? "ok" : "wrong";
}

static void fail(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    printf("FAIL ");
    vprintf(fmt, ap);
    printf("\n");
    va_end(ap);
    fflush(stdout);
    exit(1);
}

static void addr_text(const struct sockaddr *sa, char *buf, size_t len, int *port) {
    if (sa->sa_family == AF_INET) {
        const struct sockaddr_in *in = (const struct sockaddr_in *)sa;
        inet_ntop(AF_INET, &in->sin_addr, buf, (socklen_t)len);
        *port = ntohs(in->sin_port);
    } else if (sa->sa_family == AF_INET6) {
        const struct sockaddr_in6 *in6 = (const struct sockaddr_in6 *)sa;
        inet_ntop(AF_INET6, &in6->sin6_addr, buf, (socklen_t)len);
        *port = ntohs(in6->sin6_port);
    } else {
        snprintf(buf, len, "family%d", sa->sa_family);
        *port = 0;
    }
}

static void print_names(const char *tag, int fd) {
    struct sockaddr_storage ss;
    socklen_t len = sizeof(ss);
    char buf[64];
    int port;
    if (getpeername(fd, (struct sockaddr *)&ss, &len) != 0)
        fail("%s getpeername: %s", tag, strerror(errno));
    addr_text((struct sockaddr *)&ss, buf, sizeof(buf), &port);
    printf("%speer %s %d\n", tag, buf, port);
    len = sizeof(ss);
    if (getsockname(fd, (struct sockaddr *)&ss, &len) != 0)
        fail("%s getsockname: %s", tag, strerror(errno));
    addr_text((struct sockaddr *)&ss, buf, sizeof(buf), &port);
    printf("%ssock %s %d\n", tag, buf, port);
}

/* First stream address of HOST:PORT. */
static socklen_t resolve(struct sockaddr_storage *out, int verbose) {
    struct addrinfo hints, *res = NULL;
    memset(&hints, 0, sizeof(hints));
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    int rc = getaddrinfo(g_host, g_port, &hints, &res);
    if (rc != 0)
        fail("getaddrinfo %s: %s", g_host, gai_strerror(rc));
    socklen_t len = res->ai_addrlen;
    memcpy(out, res->ai_addr, len);
    if (verbose) {
        char buf[64];
        int port;
        addr_text(res->ai_addr, buf, sizeof(buf), &port);
        printf("resolved %s\n", buf);
    }
    freeaddrinfo(res);
    return len;
}

static int connect_to(const struct sockaddr_storage *ss, socklen_t len, int type_flags) {
    int fd = socket(ss->ss_family, SOCK_STREAM | type_flags, 0);
    if (fd < 0)
        fail("socket: %s", strerror(errno));
    if (connect(fd, (const struct sockaddr *)ss, len) != 0 && errno != EINPROGRESS)
        fail("connect: %s", strerror(errno));
    return fd;
}

/* Reads until "hello\n" came back or EOF/timeout; returns bytes read into buf. */
static size_t read_reply(int fd, char *buf, size_t cap) {
    size_t n = 0;
    while (n + 1 < cap) {
        struct pollfd p = {fd, POLLIN, 0};
        if (poll(&p, 1, 5000) <= 0)
            break;
        ssize_t r = read(fd, buf + n, cap - 1 - n);
        if (r < 0 && (errno == EAGAIN || errno == EINTR))
            continue;
        if (r <= 0)
            break;
        n += (size_t)r;
        buf[n] = '\0';
        if (strstr(buf, "hello\n") != NULL)
            break;
    }
    buf[n] = '\0';
    return n;
}

static int exchange(int fd, int print) {
    char buf[2048];
    if (write(fd, "hello\n", 6) != 6)
        return -1;
    size_t n = read_reply(fd, buf, sizeof(buf));
    for (size_t i = 0; i < n; i++)
        if (buf[i] == '\n')
            buf[i] = '|';
    if (print)
        printf("reply %s\n", buf);
    return strstr(buf, "hello|") != NULL ? 0 : -1;
}

static void mode_block(void) {
    struct sockaddr_storage ss;
    socklen_t len = resolve(&ss, 1);
    int fd = connect_to(&ss, len, 0);
    print_names("", fd);
    if (exchange(fd, 1) != 0)
        fail("no echo");
    close(fd);
}

static void mode_nonblock(void) {
    struct sockaddr_storage ss;
    socklen_t len = resolve(&ss, 1);
    int fd = socket(ss.ss_family, SOCK_STREAM | SOCK_NONBLOCK, 0);
    int rc = connect(fd, (struct sockaddr *)&ss, len);
    printf("connect %s\n", rc == 0 ? "0" : strerror(errno));
    if (rc != 0 && errno != EINPROGRESS)
        fail("connect");
    struct pollfd p = {fd, POLLOUT, 0};
    if (poll(&p, 1, 5000) != 1)
        fail("poll POLLOUT");
    int err = -1;
    socklen_t el = sizeof(err);
    getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &el);
    printf("so_error %d\n", err);
    printf("nonblock %d\n", (fcntl(fd, F_GETFL) & O_NONBLOCK) != 0);
    print_names("", fd);
    if (exchange(fd, 1) != 0)
        fail("no echo");
    close(fd);
}

static void mode_epoll(void) {
    struct sockaddr_storage ss;
    socklen_t len = resolve(&ss, 1);
    int fd = connect_to(&ss, len, SOCK_NONBLOCK);
    int ep = epoll_create1(EPOLL_CLOEXEC);
    struct epoll_event ev = {.events = EPOLLOUT, .data.fd = fd}, out;
    if (epoll_ctl(ep, EPOLL_CTL_ADD, fd, &ev) != 0)
        fail("epoll_ctl: %s", strerror(errno));
    if (epoll_wait(ep, &out, 1, 5000) != 1 || !(out.events & EPOLLOUT))
        fail("epoll_wait EPOLLOUT");
    if (write(fd, "hello\n", 6) != 6)
        fail("write");
    ev.events = EPOLLIN;
    epoll_ctl(ep, EPOLL_CTL_MOD, fd, &ev);
    char buf[2048];
    size_t n = 0;
    while (n + 1 < sizeof(buf)) {
        if (epoll_wait(ep, &out, 1, 5000) != 1)
            break;
        ssize_t r = read(fd, buf + n, sizeof(buf) - 1 - n);
        if (r <= 0)
            break;
        n += (size_t)r;
        buf[n] = '\0';
        if (strstr(buf, "hello\n"))
            break;
    }
    buf[n] = '\0';
    printf("epoll %s\n", strstr(buf, "hello\n") ? "ok" : "no-echo");
    if (!strstr(buf, "hello\n"))
        fail("epoll no echo");
    close(ep);
    close(fd);
}

static void mode_eisconn(void) {
    struct sockaddr_storage ss;
    socklen_t len = resolve(&ss, 1);
    int fd = connect_to(&ss, len, 0);
    int rc = connect(fd, (struct sockaddr *)&ss, len);
    printf("second_connect %s\n", rc == 0 ? "0" : errno == EISCONN ? "EISCONN" : strerror(errno));
    if (rc == 0 || errno != EISCONN)
        fail("second connect");
    if (exchange(fd, 1) != 0)
        fail("no echo");
    close(fd);
}

static void mode_fork(void) {
    struct sockaddr_storage ss;
    socklen_t len = resolve(&ss, 1);
    int fd = connect_to(&ss, len, 0);
    fflush(stdout);
    pid_t pid = fork();
    if (pid == 0) {
        print_names("child_inherited_", fd);
        struct sockaddr_storage s2;
        socklen_t l2 = resolve(&s2, 0);
        int fd2 = connect_to(&s2, l2, 0);
        print_names("child_", fd2);
        int ok = exchange(fd2, 1) == 0;
        fflush(stdout);
        _exit(ok ? 0 : 1);
    }
    int st = 0;
    waitpid(pid, &st, 0);
    printf("child %s\n", WIFEXITED(st) && WEXITSTATUS(st) == 0 ? "ok" : "failed");
    if (!WIFEXITED(st) || WEXITSTATUS(st) != 0)
        fail("child");
    if (exchange(fd, 1) != 0)
        fail("no echo");
    close(fd);
}

/* The connected fd goes to a new program image (exec of this probe, mode exec_child):
 * spec §2 "works across fork/exec", and the new image's view must still be TCP. */
static void mode_exec(void) {
    struct sockaddr_storage ss;
    socklen_t len = resolve(&ss, 1);
    int fd = connect_to(&ss, len, SOCK_CLOEXEC);
    print_names("", fd);
    if (fcntl(fd, F_SETFD, 0) != 0)
        fail("F_SETFD: %s", strerror(errno));
    fflush(stdout);
    pid_t pid = fork();
    if (pid == 0) {
        char fdtext[16];
        snprintf(fdtext, sizeof fdtext, "%d", fd);
        setenv("AOR_PROBE_FD", fdtext, 1);
        const char *child = getenv("AOR_PROBE_CHILD");
        execl("/proc/self/exe", "connect_probe", g_host, g_port, child ? child : "exec_child",
              (char *)NULL);
        _exit(127);
    }
    int st = 0;
    waitpid(pid, &st, 0);
    printf("exec child %s\n", WIFEXITED(st) && WEXITSTATUS(st) == 0 ? "ok" : "failed");
    if (!WIFEXITED(st) || WEXITSTATUS(st) != 0)
        fail("exec child");
    close(fd);
}

static void mode_exec_child(void) {
    const char *v = getenv("AOR_PROBE_FD");
    int fd = v ? (int)strtol(v, NULL, 10) : -1;
    if (fd < 0)
        fail("no AOR_PROBE_FD");
    print_names("exec_", fd);
    int dom = -1, one = 1, nd = -1;
    socklen_t l = sizeof(dom);
    if (getsockopt(fd, SOL_SOCKET, SO_DOMAIN, &dom, &l) != 0)
        fail("SO_DOMAIN: %s", strerror(errno));
    printf("exec_domain %s\n", dom == AF_INET ? "AF_INET" : dom == AF_INET6 ? "AF_INET6" : "other");
    printf("exec_set_nodelay %d\n",
           setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one)) == 0 ? 0 : errno);
    l = sizeof(nd);
    printf("exec_nodelay %d\n", getsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &nd, &l) == 0 ? nd : -1);
    if (exchange(fd, 1) != 0)
        fail("no echo after exec");
    close(fd);
}

/* The inherited fd's first calls are connect() and sendto() with the address (QA: before
 * any getpeername the fd was not known to be redirected: connect gave EINVAL, sendto
 * EISCONN, where the TCP socket says EISCONN and sends). Parent: mode exec with
 * AOR_PROBE_CHILD=exec_child_connect. */
static void mode_exec_child_connect(void) {
    const char *v = getenv("AOR_PROBE_FD");
    int fd = v ? (int)strtol(v, NULL, 10) : -1;
    if (fd < 0)
        fail("no AOR_PROBE_FD");
    struct sockaddr_storage ss;
    socklen_t len = resolve(&ss, 0);
    int rc = connect(fd, (struct sockaddr *)&ss, len);
    printf("exec_connect %s\n", rc == 0 ? "0" : errno == EISCONN ? "EISCONN" : strerror(errno));
    ssize_t w = sendto(fd, "hello\n", 6, 0, (struct sockaddr *)&ss, len);
    printf("exec_sendto %s\n", w == 6 ? "6" : w < 0 ? strerror(errno) : "short");
    char buf[2048];
    size_t n = read_reply(fd, buf, sizeof(buf));
    printf("exec_echo %s\n", n > 0 && strstr(buf, "hello\n") ? "ok" : "none");
    close(fd);
}

/* A direct connection made before the name was resolved (so its address was not yet a
 * provider's), then the name resolved: a second connect() must get EISCONN and leave the
 * program's own connection alone (QA: it was replaced by one to aord); a listening
 * socket given the address keeps listening. HOST resolves to 127.0.0.1. */
static void mode_direct_first(void) {
    struct sockaddr_in in;
    memset(&in, 0, sizeof(in));
    in.sin_family = AF_INET;
    in.sin_port = htons((uint16_t)strtol(g_port, NULL, 10));
    in.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    int fd = connect_to((const struct sockaddr_storage *)(const void *)&in, sizeof(in), 0);
    struct sockaddr_storage ss;
    socklen_t len = resolve(&ss, 1);
    int rc = connect(fd, (struct sockaddr *)&ss, len);
    printf("second_connect %s\n", rc == 0 ? "0" : errno == EISCONN ? "EISCONN" : strerror(errno));
    if (exchange(fd, 1) != 0)
        fail("the direct connection is gone");
    close(fd);

    int l = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in la;
    socklen_t lal = sizeof(la);
    memset(&la, 0, sizeof(la));
    la.sin_family = AF_INET;
    la.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (l < 0 || bind(l, (struct sockaddr *)&la, sizeof(la)) != 0 || listen(l, 4) != 0 ||
        getsockname(l, (struct sockaddr *)&la, &lal) != 0)
        fail("listener: %s", strerror(errno));
    rc = connect(l, (struct sockaddr *)&ss, len);
    printf("listen_connect %s\n", rc == 0 ? "0" : errno == EISCONN ? "EISCONN" : strerror(errno));
    int c = socket(AF_INET, SOCK_STREAM, 0);
    int a =
        c >= 0 && connect(c, (struct sockaddr *)&la, sizeof(la)) == 0 ? accept(l, NULL, NULL) : -1;
    printf("listener %s\n", a >= 0 ? "ok" : strerror(errno));
    if (a >= 0)
        close(a);
    close(c);
    close(l);
}

/* A direct connection (made before the name was resolved) that its peer reset, then the
 * name resolved and connect() called again: the kernel still takes the socket for
 * connected (EISCONN), and the shim must not replace it (QA). The probe is its own
 * server on PORT (HOST resolves to 127.0.0.1). */
static void mode_direct_reset(void) {
    struct sockaddr_in in;
    memset(&in, 0, sizeof(in));
    in.sin_family = AF_INET;
    in.sin_port = htons((uint16_t)strtol(g_port, NULL, 10));
    in.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    int l = socket(AF_INET, SOCK_STREAM, 0), one = 1;
    setsockopt(l, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    if (l < 0 || bind(l, (struct sockaddr *)&in, sizeof(in)) != 0 || listen(l, 4) != 0)
        fail("listener: %s", strerror(errno));
    int fd = connect_to((const struct sockaddr_storage *)(const void *)&in, sizeof(in), 0);
    int a = accept(l, NULL, NULL);
    struct linger lg = {1, 0};
    if (a < 0 || setsockopt(a, SOL_SOCKET, SO_LINGER, &lg, sizeof(lg)) != 0)
        fail("accept: %s", strerror(errno));
    close(a); /* a reset */
    char b;
    struct pollfd pf = {fd, POLLIN, 0};
    poll(&pf, 1, 2000);
    ssize_t r = read(fd, &b, 1);
    printf("read_after_reset %s\n", r < 0 && errno == ECONNRESET ? "ECONNRESET" : "other");
    struct sockaddr_storage ss;
    socklen_t len = resolve(&ss, 1);
    int rc = connect(fd, (struct sockaddr *)&ss, len);
    printf("connect_after_reset %s\n", rc == 0            ? "0"
                                       : errno == EISCONN ? "EISCONN"
                                                          : strerror(errno));
    close(fd);
    close(l);
}

/* Bad pointers get the kernel's EFAULT, not a crash in a hook (QA: connect(fd, (void *)16,
 * 16) and any sendmsg(fd, (void *)16, 0) crashed with the shim loaded). */
static void mode_efault(void) {
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    int rc = connect(fd, (const struct sockaddr *)(uintptr_t)16, 16);
    printf("connect_bad %s\n", rc == 0 ? "0" : errno == EFAULT ? "EFAULT" : strerror(errno));
    ssize_t w = sendmsg(fd, (const struct msghdr *)(uintptr_t)16, 0);
    printf("sendmsg_bad %s\n", w >= 0 ? "sent" : errno == EFAULT ? "EFAULT" : strerror(errno));
    w = sendto(fd, "x", 1, MSG_FASTOPEN, (const struct sockaddr *)(uintptr_t)16, 16);
    printf("sendto_bad %s\n", w >= 0 ? "sent" : errno == EFAULT ? "EFAULT" : strerror(errno));
    close(fd);
}

static void *thread_main(void *arg) {
    struct sockaddr_storage ss;
    socklen_t len = resolve(&ss, 0);
    int fd = socket(ss.ss_family, SOCK_STREAM, 0);
    intptr_t ok = 0;
    if (fd >= 0 && connect(fd, (struct sockaddr *)&ss, len) == 0) {
        struct sockaddr_storage peer;
        socklen_t pl = sizeof(peer);
        ok = getpeername(fd, (struct sockaddr *)&peer, &pl) == 0 && pl == len &&
             memcmp(&peer, &ss, len) == 0 && exchange(fd, 0) == 0;
    }
    if (fd >= 0)
        close(fd);
    return (void *)ok;
}

static void mode_threads(void) {
    pthread_t t[NTHREADS];
    int good = 0;
    for (int i = 0; i < NTHREADS; i++) {
        if (pthread_create(&t[i], NULL, thread_main, NULL) != 0)
            fail("pthread_create");
    }
    for (int i = 0; i < NTHREADS; i++) {
        void *r = NULL;
        pthread_join(t[i], &r);
        good += r != NULL;
    }
    printf("threads %d/%d\n", good, NTHREADS);
    if (good != NTHREADS)
        fail("threads");
}

static int same_peer(int fd, const struct sockaddr_storage *ss, socklen_t len) {
    struct sockaddr_storage peer;
    socklen_t pl = sizeof(peer);
    return getpeername(fd, (struct sockaddr *)&peer, &pl) == 0 && pl == len &&
           memcmp(&peer, ss, len) == 0;
}

static void mode_dup(void) {
    struct sockaddr_storage ss;
    socklen_t len = resolve(&ss, 1);
    int fd = connect_to(&ss, len, 0);
    print_names("", fd);

    /* A plain local TCP listener for the reuse checks. */
    int lst = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in la = {.sin_family = AF_INET};
    la.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t ll = sizeof(la);
    if (bind(lst, (struct sockaddr *)&la, sizeof(la)) != 0 || listen(lst, 8) != 0 ||
        getsockname(lst, (struct sockaddr *)&la, &ll) != 0)
        fail("listener");

    int d = dup(fd);
    printf("dup_peer %s\n", okw(same_peer(d, &ss, len)));
    int d2 = fcntl(fd, F_DUPFD_CLOEXEC, 50);
    printf("dupfd_peer %s\n", okw(d2 >= 50 && same_peer(d2, &ss, len)));
    close(d2);
    close(fd);
    printf("after_close_dup_peer %s\n", okw(same_peer(d, &ss, len)));

    /* The closed number, reused for an ordinary socket, is ordinary. */
    int s = socket(AF_INET, SOCK_STREAM, 0);
    printf("reused %s\n", okw(s == fd));
    int rc = connect(s, (struct sockaddr *)&la, sizeof(la));
    printf("reuse_connect %s\n", rc == 0 ? "ok" : strerror(errno));
    okw(rc == 0);
    struct sockaddr_in p;
    socklen_t pl = sizeof(p);
    int pr = getpeername(s, (struct sockaddr *)&p, &pl);
    printf("reuse_peer %s\n",
           okw(pr == 0 && p.sin_port == la.sin_port && p.sin_addr.s_addr == la.sin_addr.s_addr));

    /* dup2 of a redirected fd over it, then of an ordinary fd over that. */
    dup2(d, s);
    printf("dup2_peer %s\n", okw(same_peer(s, &ss, len)));
    dup2(lst, s);
    pl = sizeof(p);
    pr = getpeername(s, (struct sockaddr *)&p, &pl);
    printf("dup2_over %s\n", okw(pr != 0 && errno == ENOTCONN));

    /* close_range clears marks too: d's number, reused, is ordinary (s still holds the
     * lower number, so the next socket gets d's). */
    int num = d;
    close_range((unsigned)d, (unsigned)d, 0);
    int s2 = socket(AF_INET, SOCK_STREAM, 0);
    rc = connect(s2, (struct sockaddr *)&la, sizeof(la));
    printf("close_range_reuse %s\n", okw(s2 == num && rc == 0));
    close(s2);
    close(s);
    close(lst);
    if (rc != 0)
        fail("reuse");
}

static void mode_sockopt(void) {
    struct sockaddr_storage ss;
    socklen_t len = resolve(&ss, 1);
    int one = 1, v = -1;
    socklen_t vl = sizeof(v);
    /* SO_KEEPALIVE set before connect, as libcurl and Node do, reads back after it */
    int fd = socket(ss.ss_family, SOCK_STREAM, 0);
    if (fd < 0 || setsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &one, sizeof(one)) != 0 ||
        connect(fd, (struct sockaddr *)&ss, len) != 0)
        fail("keepalive socket: %s", strerror(errno));
    getsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &v, &vl);
    printf("keepalive_before_connect %d\n", v);
    vl = sizeof(v);
    printf("set_nodelay %d\n", setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one)));
    getsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &v, &vl);
    printf("nodelay %d\n", v);
    vl = sizeof(v);
    getsockopt(fd, SOL_SOCKET, SO_DOMAIN, &v, &vl);
    printf("domain %s\n", v == AF_INET ? "AF_INET" : v == AF_INET6 ? "AF_INET6" : "other");
    vl = sizeof(v);
    getsockopt(fd, SOL_SOCKET, SO_PROTOCOL, &v, &vl);
    printf("protocol %s\n", v == IPPROTO_TCP ? "tcp" : "other");
    vl = sizeof(v);
    getsockopt(fd, SOL_SOCKET, SO_TYPE, &v, &vl);
    printf("type %s\n", v == SOCK_STREAM ? "stream" : "other");
    int tos = 0x10;
    printf("set_tos %d\n", setsockopt(fd, IPPROTO_IP, IP_TOS, &tos, sizeof(tos)));
    printf("set_keepalive %d\n", setsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &one, sizeof(one)));
    int idle = 30;
    printf("set_keepidle %d\n", setsockopt(fd, IPPROTO_TCP, TCP_KEEPIDLE, &idle, sizeof(idle)));
    vl = sizeof(v);
    getsockopt(fd, IPPROTO_TCP, TCP_KEEPIDLE, &v, &vl);
    printf("keepidle %d\n", v);
    struct tcp_info ti;
    socklen_t tl = sizeof(ti);
    memset(&ti, 0, sizeof(ti));
    int rc = getsockopt(fd, IPPROTO_TCP, TCP_INFO, &ti, &tl);
    printf("tcp_info %s\n", rc == 0 && ti.tcpi_state == 1 ? "established" : "other");
    print_names("", fd);
    if (exchange(fd, 1) != 0)
        fail("no echo");
    close(fd);
}

static void mode_fastopen(void) {
    struct sockaddr_storage ss;
    socklen_t len = resolve(&ss, 1);
    int fd = socket(ss.ss_family, SOCK_STREAM, 0);
    ssize_t n = sendto(fd, "hello\n", 6, MSG_FASTOPEN, (struct sockaddr *)&ss, len);
    printf("fastopen_sent %zd\n", n);
    if (n != 6)
        fail("sendto MSG_FASTOPEN: %s", strerror(errno));
    print_names("", fd);
    char buf[2048];
    size_t r = read_reply(fd, buf, sizeof(buf));
    for (size_t i = 0; i < r; i++)
        if (buf[i] == '\n')
            buf[i] = '|';
    printf("reply %s\n", buf);
    if (!strstr(buf, "hello|"))
        fail("no echo");
    close(fd);
}

static void mode_cloexec(void) {
    struct sockaddr_storage ss;
    socklen_t len = resolve(&ss, 1);
    int a = connect_to(&ss, len, SOCK_CLOEXEC);
    int b = connect_to(&ss, len, 0);
    printf("cloexec_set %d\n", (fcntl(a, F_GETFD) & FD_CLOEXEC) != 0);
    printf("cloexec_unset %d\n", (fcntl(b, F_GETFD) & FD_CLOEXEC) != 0);
    print_names("", a);
    if (exchange(a, 0) != 0 || exchange(b, 0) != 0)
        fail("no echo");
    close(a);
    close(b);
}

static void connect_hostent(const struct hostent *he) {
    if (he == NULL || he->h_addrtype != AF_INET)
        fail("gethostbyname: no IPv4 answer");
    struct sockaddr_storage ss;
    memset(&ss, 0, sizeof(ss));
    struct sockaddr_in *in = (struct sockaddr_in *)&ss;
    in->sin_family = AF_INET;
    in->sin_port = htons((uint16_t)strtol(g_port, NULL, 10));
    memcpy(&in->sin_addr, he->h_addr_list[0], 4);
    char buf[64];
    inet_ntop(AF_INET, &in->sin_addr, buf, sizeof(buf));
    printf("resolved %s\n", buf);
    int fd = connect_to(&ss, sizeof(*in), 0);
    print_names("", fd);
    if (exchange(fd, 1) != 0)
        fail("no echo");
    close(fd);
}

static void mode_ghbn(void) {
    connect_hostent(gethostbyname(g_host));
}

static void mode_ghbnr(void) {
    struct hostent he, *res = NULL;
    char buf[1024];
    int herr = 0;
    int rc = gethostbyname_r(g_host, &he, buf, sizeof(buf), &res, &herr);
    if (rc != 0 || res == NULL)
        fail("gethostbyname_r rc=%d h_errno=%d", rc, herr);
    connect_hostent(res);
}

int main(int argc, char **argv) {
    if (argc < 3) {
        fprintf(stderr, "usage: connect_probe HOST PORT [MODE]\n");
        return 2;
    }
    g_host = argv[1];
    g_port = argv[2];
    const char *mode = argc > 3 ? argv[3] : "block";
    static const struct {
        const char *name;
        void (*fn)(void);
    } modes[] = {
        {"block", mode_block},
        {"nonblock", mode_nonblock},
        {"epoll", mode_epoll},
        {"eisconn", mode_eisconn},
        {"fork", mode_fork},
        {"threads", mode_threads},
        {"dup", mode_dup},
        {"sockopt", mode_sockopt},
        {"fastopen", mode_fastopen},
        {"cloexec", mode_cloexec},
        {"ghbn", mode_ghbn},
        {"ghbnr", mode_ghbnr},
        {"exec", mode_exec},
        {"exec_child", mode_exec_child},
        {"exec_child_connect", mode_exec_child_connect},
        {"direct_first", mode_direct_first},
        {"efault", mode_efault},
        {"direct_reset", mode_direct_reset},
    };
    for (size_t i = 0; i < sizeof(modes) / sizeof(modes[0]); i++) {
        if (strcmp(mode, modes[i].name) == 0) {
            modes[i].fn();
            if (g_bad > 0)
                fail("%d check(s) wrong", g_bad);
            printf("ok\n");
            return 0;
        }
    }
    fprintf(stderr, "connect_probe: unknown mode %s\n", mode);
    return 2;
}
