/* Unit tests for daemon/listen.c's aor_listen_peer: what NETLINK_SOCK_DIAG says of the
 * other end of a loopback TCP connection (its uid; held by its process, half-closed, or
 * closed), and that a query that fails is not taken for "the peer is gone" (review: any
 * netlink error read as ENOENT, so a half-closed sidecar client had its request
 * cancelled). recv is interposed here to make the netlink answer fail on demand. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "listen.h"

#include <arpa/inet.h>
#include <dlfcn.h>
#include <errno.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

static int fail_recv_errno; /* nonzero: recv on a netlink socket fails with it */

ssize_t recv(int fd, void *buf, size_t len, int flags) {
    static ssize_t (*real)(int, void *, size_t, int);
    if (!real)
        real = (ssize_t(*)(int, void *, size_t, int))dlsym(RTLD_NEXT, "recv");
    struct sockaddr_storage ss;
    socklen_t sl = sizeof ss;
    if (fail_recv_errno && getsockname(fd, (struct sockaddr *)&ss, &sl) == 0 &&
        ss.ss_family == AF_NETLINK) {
        errno = fail_recv_errno;
        return -1;
    }
    return real(fd, buf, len, flags);
}

/* A loopback TCP connection: *client and *server (the accepted end). */
static void tcp_pair(int family, int *client, int *server) {
    int l = socket(family, SOCK_STREAM, 0);
    assert_true(l >= 0);
    struct sockaddr_storage ss = {0};
    socklen_t sl;
    if (family == AF_INET) {
        struct sockaddr_in *a = (struct sockaddr_in *)&ss;
        a->sin_family = AF_INET;
        a->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        sl = sizeof *a;
    } else {
        struct sockaddr_in6 *a = (struct sockaddr_in6 *)&ss;
        a->sin6_family = AF_INET6;
        a->sin6_addr = in6addr_loopback;
        sl = sizeof *a;
    }
    assert_int_equal(bind(l, (struct sockaddr *)&ss, sl), 0);
    assert_int_equal(listen(l, 4), 0);
    assert_int_equal(getsockname(l, (struct sockaddr *)&ss, &sl), 0);
    *client = socket(family, SOCK_STREAM, 0);
    assert_int_equal(connect(*client, (struct sockaddr *)&ss, sl), 0);
    *server = accept(l, NULL, NULL);
    assert_true(*server >= 0);
    close(l);
}

/* aor_listen_peer(fd).held, asked until it is want or 2 s passed (a close's FIN can
 * arrive a moment before the client's socket is released). */
static int held_becomes(int fd, int want) {
    int held = -1;
    for (int i = 0; i < 200; i++) {
        unsigned uid;
        held = -1;
        if (aor_listen_peer(fd, &uid, &held) == 0 && held == want)
            return held;
        struct timespec ts = {0, 10 * 1000 * 1000};
        nanosleep(&ts, NULL);
    }
    return held;
}

static void peer_states(int family) {
    int c, s;
    tcp_pair(family, &c, &s);
    unsigned uid = 12345;
    int held = -1;
    assert_int_equal(aor_listen_peer(s, &uid, &held), 0);
    assert_int_equal(uid, getuid());
    assert_int_equal(held, 1);
    assert_int_equal(aor_listen_peer(s, NULL, NULL), 0);
    assert_int_equal(shutdown(c, SHUT_WR), 0); /* half-closed: still held */
    assert_int_equal(held_becomes(s, 1), 1);
    close(c); /* closed: released by its process */
    assert_int_equal(held_becomes(s, 0), 0);
    close(s);
}

static void test_ipv4(void **state) {
    (void)state;
    peer_states(AF_INET);
}

static void test_ipv6(void **state) {
    (void)state;
    int probe = socket(AF_INET6, SOCK_STREAM, 0);
    if (probe < 0)
        skip();
    close(probe);
    peer_states(AF_INET6);
}

static void test_query_failure_is_not_gone(void **state) {
    (void)state;
    int c, s;
    tcp_pair(AF_INET, &c, &s);
    int held = -1;
    fail_recv_errno = ENOBUFS;
    errno = 0;
    assert_int_equal(aor_listen_peer(s, NULL, &held), -1);
    fail_recv_errno = 0;
    assert_int_equal(errno, ENOBUFS);
    assert_int_equal(held, -1); /* untouched */
    close(c);
    close(s);
}

static void test_not_tcp(void **state) {
    (void)state;
    int sv[2];
    assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
    errno = 0;
    assert_int_equal(aor_listen_peer(sv[0], NULL, NULL), -1);
    assert_int_equal(errno, EAFNOSUPPORT);
    close(sv[0]);
    close(sv[1]);
    assert_int_equal(aor_listen_peer(-1, NULL, NULL), -1);
    assert_int_equal(errno, EBADF);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_ipv4),
        cmocka_unit_test(test_ipv6),
        cmocka_unit_test(test_query_failure_is_not_gone),
        cmocka_unit_test(test_not_tcp),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
