/* Unit tests: shim/fdtab.c (table of redirected fds) and, through the hooks linked into
 * this test, shim/fdhooks.c and shim/sockview.c (spec §2 bookkeeping and TCP view). */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cmocka.h>

#include "fdtab.h"

static int reset(void **state) {
    aor_fdtab_reset();
    return 0;
}

static aor_fdinfo info_for(int fd, const char *ip, int port) {
    aor_fdinfo i;
    struct stat st;
    memset(&i, 0, sizeof(i));
    i.ino = 12345;
    if (fd >= 0 && fstat(fd, &st) == 0)
        i.ino = (unsigned long)st.st_ino;
    i.domain = AF_INET;
    i.protocol = IPPROTO_TCP;
    i.peer.in4.sin_family = AF_INET;
    i.peer.in4.sin_port = htons((uint16_t)port);
    inet_pton(AF_INET, ip, &i.peer.in4.sin_addr);
    i.peerlen = sizeof(i.peer.in4);
    i.local_port = 40000;
    i.nodelay = 1;
    i.keepidle = 7200;
    return i;
}

static void test_set_get_clear(void **state) {
    aor_fdinfo in = info_for(-1, "1.2.3.4", 443), out;
    assert_int_equal(aor_fdtab_any(), 0);
    assert_int_equal(aor_fdtab_get(7, &out), 0);
    assert_int_equal(aor_fdtab_set(7, &in), 0);
    assert_int_equal(aor_fdtab_any(), 1);
    assert_int_equal(aor_fdtab_marked(7), 1);
    assert_int_equal(aor_fdtab_marked(8), 0);
    assert_int_equal(aor_fdtab_get(7, &out), 1);
    assert_int_equal(out.ino, 12345);
    assert_int_equal(ntohs(out.peer.in4.sin_port), 443);
    aor_fdtab_clear(7);
    assert_int_equal(aor_fdtab_get(7, &out), 0);
    aor_fdtab_clear(-1); /* ignored */
    aor_fdtab_clear(1 << 20);
}

static void test_bad_args(void **state) {
    aor_fdinfo in = info_for(-1, "1.2.3.4", 443);
    errno = 0;
    assert_int_equal(aor_fdtab_set(-1, &in), -1);
    assert_int_equal(errno, EBADF);
    assert_int_equal(aor_fdtab_set(1 << 24, &in), -1);
    in.ino = 0;
    errno = 0;
    assert_int_equal(aor_fdtab_set(3, &in), -1);
    assert_int_equal(errno, EINVAL);
    assert_int_equal(aor_fdtab_reserve(-5), -1);
}

static void test_grows(void **state) {
    struct rlimit rl;
    assert_int_equal(getrlimit(RLIMIT_NOFILE, &rl), 0);
    int high = rl.rlim_cur > 5000 ? 4999 : (int)rl.rlim_cur - 1;
    aor_fdinfo a = info_for(-1, "1.2.3.4", 443), b = info_for(-1, "5.6.7.8", 8443), out;
    assert_int_equal(aor_fdtab_set(3, &a), 0);
    assert_int_equal(aor_fdtab_set(high, &b), 0); /* grows; entry 3 survives */
    assert_int_equal(aor_fdtab_get(3, &out), 1);
    assert_int_equal(ntohs(out.peer.in4.sin_port), 443);
    assert_int_equal(aor_fdtab_get(high, &out), 1);
    assert_int_equal(ntohs(out.peer.in4.sin_port), 8443);
}

static void test_copy_and_range(void **state) {
    aor_fdinfo a = info_for(-1, "1.2.3.4", 443), out;
    assert_int_equal(aor_fdtab_set(10, &a), 0);
    assert_int_equal(aor_fdtab_copy(10, 11), 0);
    assert_int_equal(aor_fdtab_get(11, &out), 1);
    assert_int_equal(aor_fdtab_set(12, &a), 0);
    assert_int_equal(aor_fdtab_copy(13, 12), 0); /* from an unmarked fd: clears */
    assert_int_equal(aor_fdtab_marked(12), 0);
    assert_int_equal(aor_fdtab_set(20, &a), 0);
    aor_fdtab_clear_range(11, 19);
    assert_int_equal(aor_fdtab_marked(10), 1);
    assert_int_equal(aor_fdtab_marked(11), 0);
    assert_int_equal(aor_fdtab_marked(20), 1);
    aor_fdtab_clear_range(0, ~0u);
    assert_int_equal(aor_fdtab_marked(10), 0);
    assert_int_equal(aor_fdtab_marked(20), 0);
}

static void test_tcpopt(void **state) {
    aor_fdinfo a = info_for(-1, "1.2.3.4", 443), out;
    aor_fdtab_set(5, &a);
    aor_fdtab_set_tcpopt(5, TCP_NODELAY, 0);
    aor_fdtab_set_tcpopt(5, TCP_KEEPIDLE, 30);
    aor_fdtab_set_tcpopt(6, TCP_KEEPIDLE, 99); /* unmarked: ignored */
    aor_fdtab_get(5, &out);
    assert_int_equal(out.nodelay, 0);
    assert_int_equal(out.keepidle, 30);
    assert_int_equal(aor_fdtab_marked(6), 0);
}

/* dup3 without the hook, as a program using syscall() would. */
static long syscall_dup3_helper(int from, int to) {
    return syscall(SYS_dup3, from, to, 0);
}

/* An entry is trusted only while the fd is the same Unix socket. */
static void test_checked_detects_reuse(void **state) {
    int sv[2];
    assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
    aor_fdinfo a = info_for(sv[0], "1.2.3.4", 443), out;
    assert_int_equal(aor_fdtab_set(sv[0], &a), 0);
    assert_int_equal(aor_fdtab_get_checked(sv[0], &out), 1);
    /* replaced behind the shim's back (a raw dup3 would do the same) */
    int other = socket(AF_INET, SOCK_STREAM, 0);
    assert_true(other >= 0);
    assert_int_equal((int)syscall_dup3_helper(other, sv[0]), sv[0]);
    errno = 1234;
    assert_int_equal(aor_fdtab_get_checked(sv[0], &out), 0);
    assert_int_equal(errno, 1234);                /* kept */
    assert_int_equal(aor_fdtab_marked(sv[0]), 0); /* the stale entry is gone */
    close(other);
    close(sv[0]);
    close(sv[1]);
}

/* Through the hooks (they are linked into this test program). */
static void test_hooks_view_and_bookkeeping(void **state) {
    int sv[2];
    assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
    aor_fdinfo a = info_for(sv[0], "162.159.140.245", 443);
    assert_int_equal(aor_fdtab_set(sv[0], &a), 0);

    struct sockaddr_storage ss;
    socklen_t len = sizeof(ss);
    assert_int_equal(getpeername(sv[0], (struct sockaddr *)&ss, &len), 0);
    assert_int_equal(len, sizeof(struct sockaddr_in));
    struct sockaddr_in *in = (struct sockaddr_in *)&ss;
    char buf[64];
    assert_string_equal(inet_ntop(AF_INET, &in->sin_addr, buf, sizeof(buf)), "162.159.140.245");
    assert_int_equal(ntohs(in->sin_port), 443);
    len = sizeof(ss);
    assert_int_equal(getsockname(sv[0], (struct sockaddr *)&ss, &len), 0);
    assert_string_equal(inet_ntop(AF_INET, &in->sin_addr, buf, sizeof(buf)), "127.0.0.1");
    assert_int_equal(ntohs(in->sin_port), 40000);

    int v = -1;
    socklen_t vl = sizeof(v);
    assert_int_equal(getsockopt(sv[0], SOL_SOCKET, SO_DOMAIN, &v, &vl), 0);
    assert_int_equal(v, AF_INET);
    assert_int_equal(getsockopt(sv[0], SOL_SOCKET, SO_PROTOCOL, &v, &vl), 0);
    assert_int_equal(v, IPPROTO_TCP);
    assert_int_equal(getsockopt(sv[0], IPPROTO_TCP, TCP_NODELAY, &v, &vl), 0);
    assert_int_equal(v, 1);
    assert_int_equal(getsockopt(sv[0], IPPROTO_IP, IP_TTL, &v, &vl), 0);
    assert_int_equal(v, 64);
    assert_int_equal(getsockopt(sv[0], SOL_SOCKET, SO_RCVBUF, &v, &vl), 0); /* real */
    assert_true(v > 0);
    int zero = 0;
    assert_int_equal(setsockopt(sv[0], IPPROTO_TCP, TCP_NODELAY, &zero, sizeof(zero)), 0);
    assert_int_equal(getsockopt(sv[0], IPPROTO_TCP, TCP_NODELAY, &v, &vl), 0);
    assert_int_equal(v, 0);
    int tos = 0x10;
    assert_int_equal(setsockopt(sv[0], IPPROTO_IP, IP_TOS, &tos, sizeof(tos)), 0);
    /* an fd that is not redirected keeps its real answers */
    assert_int_equal(getsockopt(sv[1], SOL_SOCKET, SO_DOMAIN, &v, &vl), 0);
    assert_int_equal(v, AF_UNIX);
    assert_int_equal(setsockopt(sv[1], IPPROTO_TCP, TCP_NODELAY, &zero, sizeof(zero)), -1);

    int d = dup(sv[0]);
    assert_int_equal(aor_fdtab_marked(d), 1);
    int d2 = fcntl(sv[0], F_DUPFD_CLOEXEC, 100);
    assert_true(d2 >= 100);
    assert_int_equal(aor_fdtab_marked(d2), 1);
    int d3 = dup3(sv[0], 150, O_CLOEXEC);
    assert_int_equal(d3, 150);
    assert_int_equal(aor_fdtab_marked(150), 1);
    /* dup2 of an ordinary fd over a redirected one: ordinary */
    assert_int_equal(dup2(sv[1], d), d);
    assert_int_equal(aor_fdtab_marked(d), 0);
    len = sizeof(ss);
    assert_int_equal(getpeername(d, (struct sockaddr *)&ss, &len), 0);
    assert_int_equal(ss.ss_family, AF_UNIX);
    /* close clears; the copies stay */
    int num = sv[0];
    assert_int_equal(close(sv[0]), 0);
    assert_int_equal(aor_fdtab_marked(num), 0);
    assert_int_equal(aor_fdtab_get_checked(d2, NULL), 1);
    /* close_range with CLOSE_RANGE_CLOEXEC closes nothing */
    assert_int_equal(close_range((unsigned)d2, (unsigned)d2, CLOSE_RANGE_CLOEXEC), 0);
    assert_int_equal(aor_fdtab_marked(d2), 1);
    assert_int_equal(close_range((unsigned)d2, (unsigned)d2, 0), 0);
    assert_int_equal(aor_fdtab_marked(d2), 0);
    /* the reused number is an ordinary socket */
    int s = socket(AF_INET, SOCK_STREAM, 0);
    assert_int_equal(s, num);
    assert_int_equal(getsockopt(s, SOL_SOCKET, SO_DOMAIN, &v, &vl), 0);
    assert_int_equal(v, AF_INET);
    len = sizeof(ss);
    assert_int_equal(getpeername(s, (struct sockaddr *)&ss, &len), -1);
    assert_int_equal(errno, ENOTCONN);
    closefrom(150);
    assert_int_equal(aor_fdtab_marked(150), 0);
    close(s);
    close(d);
    close(sv[1]);
}

/* A connected loopback TCP socket of family dom (the kernel's reference), or -1 when the
 * family is not available here. *lst gets the listener, *acc the accepted end. */
static int tcp_pair(int dom, int *lst, int *acc) {
    struct sockaddr_storage ss;
    socklen_t sl;
    memset(&ss, 0, sizeof(ss));
    if (dom == AF_INET) {
        struct sockaddr_in *a = (struct sockaddr_in *)&ss;
        a->sin_family = AF_INET;
        a->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        sl = sizeof(*a);
    } else {
        struct sockaddr_in6 *a = (struct sockaddr_in6 *)&ss;
        a->sin6_family = AF_INET6;
        a->sin6_addr = in6addr_loopback;
        sl = sizeof(*a);
    }
    *lst = socket(dom, SOCK_STREAM, 0);
    if (*lst < 0 || bind(*lst, (struct sockaddr *)&ss, sl) != 0 || listen(*lst, 1) != 0 ||
        getsockname(*lst, (struct sockaddr *)&ss, &sl) != 0) {
        if (*lst >= 0)
            close(*lst);
        return -1;
    }
    int fd = socket(dom, SOCK_STREAM, 0);
    assert_true(fd >= 0);
    assert_int_equal(connect(fd, (struct sockaddr *)&ss, sl), 0);
    *acc = accept(*lst, NULL, NULL);
    assert_true(*acc >= 0);
    return fd;
}

/* QA: setsockopt at IPPROTO_TCP/IP/IPV6 on a redirected fd answered 0 for arguments a
 * TCP socket refuses. The answers must be the kernel's: compared here, case by case,
 * with a real connected TCP socket of the same family. */
static void test_setsockopt_matches_tcp(void **state) {
    enum { V_NULL, V_INT, V_SHORT, V_NAME };
    static const struct {
        const char *what;
        int level, opt, val;
        socklen_t len;
    } cases[] = {
        {"TCP_NODELAY int", IPPROTO_TCP, TCP_NODELAY, V_INT, 4},
        {"TCP_NODELAY NULL,0", IPPROTO_TCP, TCP_NODELAY, V_NULL, 0},
        {"TCP_NODELAY len 2", IPPROTO_TCP, TCP_NODELAY, V_SHORT, 2},
        {"TCP_NODELAY NULL,4", IPPROTO_TCP, TCP_NODELAY, V_NULL, 4},
        {"TCP_KEEPIDLE len 0", IPPROTO_TCP, TCP_KEEPIDLE, V_INT, 0},
        {"TCP_KEEPINTVL int", IPPROTO_TCP, TCP_KEEPINTVL, V_INT, 4},
        {"TCP_CONGESTION len 0", IPPROTO_TCP, TCP_CONGESTION, V_NAME, 0},
        {"TCP_CONGESTION NULL,5", IPPROTO_TCP, TCP_CONGESTION, V_NULL, 5},
        {"IP_TOS int", IPPROTO_IP, IP_TOS, V_INT, 4},
        {"IP_TOS NULL,4", IPPROTO_IP, IP_TOS, V_NULL, 4},
        {"IP_TOS NULL,0", IPPROTO_IP, IP_TOS, V_NULL, 0},
        {"IP_TTL len 2", IPPROTO_IP, IP_TTL, V_SHORT, 2},
        {"IPV6_TCLASS int", IPPROTO_IPV6, IPV6_TCLASS, V_INT, 4},
        {"IPV6_TCLASS len 2", IPPROTO_IPV6, IPV6_TCLASS, V_SHORT, 2},
        {"IPV6_TCLASS NULL,0", IPPROTO_IPV6, IPV6_TCLASS, V_NULL, 0},
        {"IPV6_V6ONLY", IPPROTO_IPV6, IPV6_V6ONLY, V_INT, 4},
        {"level 9999", 9999, 1, V_INT, 4},
        {"level IPPROTO_UDP", IPPROTO_UDP, 1, V_INT, 4},
    };
    const int doms[2] = {AF_INET, AF_INET6};
    for (int d = 0; d < 2; d++) {
        int lst, acc;
        int tcp = tcp_pair(doms[d], &lst, &acc);
        if (tcp < 0)
            continue; /* no IPv6 here */
        int sv[2];
        assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
        aor_fdinfo a = info_for(sv[0], "192.0.2.1", 443);
        a.domain = doms[d];
        assert_int_equal(aor_fdtab_set(sv[0], &a), 0);
        for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
            int one = 1;
            short sone = 1;
            const void *val = cases[i].val == V_INT     ? (const void *)&one
                              : cases[i].val == V_SHORT ? (const void *)&sone
                              : cases[i].val == V_NAME  ? (const void *)"reno"
                                                        : NULL;
            errno = 0;
            int want = setsockopt(tcp, cases[i].level, cases[i].opt, val, cases[i].len);
            int want_errno = want != 0 ? errno : 0;
            errno = 0;
            int got = setsockopt(sv[0], cases[i].level, cases[i].opt, val, cases[i].len);
            int got_errno = got != 0 ? errno : 0;
            if (got != want || got_errno != want_errno)
                fail_msg("%s on %s: kernel %d (%s), redirected fd %d (%s)", cases[i].what,
                         doms[d] == AF_INET ? "AF_INET" : "AF_INET6", want, strerror(want_errno),
                         got, strerror(got_errno));
        }
        close(sv[0]);
        close(sv[1]);
        close(tcp);
        close(acc);
        close(lst);
    }
}

static void *churn(void *arg) {
    int base = (int)(intptr_t)arg;
    aor_fdinfo a = info_for(-1, "1.2.3.4", 443), out;
    for (int i = 0; i < 2000; i++) {
        int fd = base + (i % 50) * 16;
        if (aor_fdtab_set(fd, &a) != 0 || aor_fdtab_get(fd, &out) != 1)
            return (void *)1;
        aor_fdtab_clear(fd);
    }
    return NULL;
}

static void test_threads(void **state) {
    pthread_t t[8];
    for (int i = 0; i < 8; i++)
        pthread_create(&t[i], NULL, churn, (void *)(intptr_t)(3 + i));
    int bad = 0;
    for (int i = 0; i < 8; i++) {
        void *r;
        pthread_join(t[i], &r);
        bad += r != NULL;
    }
    assert_int_equal(bad, 0);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup(test_set_get_clear, reset),
        cmocka_unit_test_setup(test_bad_args, reset),
        cmocka_unit_test_setup(test_grows, reset),
        cmocka_unit_test_setup(test_copy_and_range, reset),
        cmocka_unit_test_setup(test_tcpopt, reset),
        cmocka_unit_test_setup(test_checked_detects_reuse, reset),
        cmocka_unit_test_setup(test_hooks_view_and_bookkeeping, reset),
        cmocka_unit_test_setup(test_setsockopt_matches_tcp, reset),
        cmocka_unit_test_setup(test_threads, reset),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
