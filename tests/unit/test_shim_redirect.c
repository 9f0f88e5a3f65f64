/* Unit tests: shim/redirect.c through the connect()/sendto() hooks linked into this
 * program (spec §2 "The redirect", fail-open, AOR_STRICT; §7 preamble). A thread plays
 * the daemon on a Unix socket. */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cmocka.h>

#include "env.h"
#include "fdtab.h"
#include "hosts.h"
#include "ipaddr.h"

static char g_dir[] = "/tmp/aor-test-redirXXXXXX";
static char g_sock[256];
static int g_listen = -1;
static pthread_t g_thread;
static char g_last[512]; /* last preamble line the fake daemon read */
static pthread_mutex_t g_mu = PTHREAD_MUTEX_INITIALIZER;

/* Fake daemon: reads the preamble line, replies "ok\n", echoes until EOF. */
static void *daemon_main(void *arg) {
    for (;;) {
        int c = accept(g_listen, NULL, NULL);
        if (c < 0)
            return NULL;
        char line[512];
        size_t n = 0;
        while (n + 1 < sizeof(line)) {
            ssize_t r = read(c, line + n, 1);
            if (r <= 0 || line[n] == '\n')
                break;
            n++;
        }
        line[n] = '\0';
        pthread_mutex_lock(&g_mu);
        snprintf(g_last, sizeof(g_last), "%s", line);
        pthread_mutex_unlock(&g_mu);
        if (write(c, "ok\n", 3) != 3) {
            close(c);
            continue;
        }
        char buf[256];
        ssize_t r;
        while ((r = read(c, buf, sizeof(buf))) > 0) {
            if (write(c, buf, (size_t)r) != r)
                break;
        }
        close(c);
    }
}

static int setup(void **state) {
    assert_non_null(mkdtemp(g_dir));
    snprintf(g_sock, sizeof(g_sock), "%s/aor.sock", g_dir);
    g_listen = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_un sun = {.sun_family = AF_UNIX};
    assert_true(strlen(g_sock) < sizeof(sun.sun_path));
    memcpy(sun.sun_path, g_sock, strlen(g_sock) + 1);
    assert_int_equal(bind(g_listen, (struct sockaddr *)&sun, sizeof(sun)), 0);
    assert_int_equal(listen(g_listen, 16), 0);
    pthread_create(&g_thread, NULL, daemon_main, NULL);
    setenv("AOR_SOCKET", g_sock, 1);
    unsetenv("AOR_STRICT");
    unsetenv("AOR_DISABLE");
    unsetenv("AOR_DAEMON");
    aor_env_load();
    return 0;
}

static int teardown(void **state) {
    shutdown(g_listen, SHUT_RDWR);
    close(g_listen);
    pthread_join(g_thread, NULL);
    unlink(g_sock);
    rmdir(g_dir);
    return 0;
}

static struct sockaddr_in sin_of(const char *ip, int port) {
    struct sockaddr_in s;
    memset(&s, 0, sizeof(s));
    s.sin_family = AF_INET;
    s.sin_port = htons((uint16_t)port);
    inet_pton(AF_INET, ip, &s.sin_addr);
    return s;
}

static void record(const char *ip, const char *host, int synthetic) {
    aor_ip a;
    assert_int_equal(aor_ip_parse(ip, strlen(ip), &a), 0);
    aor_hosts_record(&a, host, synthetic);
}

static void read_line(int fd, char *buf, size_t cap) {
    size_t n = 0;
    while (n + 1 < cap) {
        struct pollfd p = {fd, POLLIN, 0};
        if (poll(&p, 1, 5000) != 1)
            break;
        ssize_t r = read(fd, buf + n, 1);
        if (r < 0 && errno == EAGAIN)
            continue;
        if (r <= 0 || buf[n] == '\n')
            break;
        n++;
    }
    buf[n] = '\0';
}

static void last_preamble(char *out, size_t cap) {
    pthread_mutex_lock(&g_mu);
    size_t n = strnlen(g_last, cap - 1);
    memcpy(out, g_last, n);
    out[n] = '\0';
    pthread_mutex_unlock(&g_mu);
}

static void test_redirect_blocking(void **state) {
    record("192.0.2.10", "api.openai.com", 0);
    struct sockaddr_in to = sin_of("192.0.2.10", 443);
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    errno = 77;
    assert_int_equal(connect(fd, (struct sockaddr *)&to, sizeof(to)), 0);
    assert_int_equal(errno, 77); /* errno kept */
    char line[128];
    read_line(fd, line, sizeof(line));
    assert_string_equal(line, "ok");
    last_preamble(line, sizeof(line));
    assert_string_equal(line, "AOR/1 api.openai.com 192.0.2.10 443");
    assert_int_equal(write(fd, "ping\n", 5), 5);
    read_line(fd, line, sizeof(line));
    assert_string_equal(line, "ping");
    /* the program still sees its TCP connection */
    struct sockaddr_in peer;
    socklen_t pl = sizeof(peer);
    assert_int_equal(getpeername(fd, (struct sockaddr *)&peer, &pl), 0);
    assert_int_equal(peer.sin_port, to.sin_port);
    assert_int_equal(peer.sin_addr.s_addr, to.sin_addr.s_addr);
    assert_int_equal(fcntl(fd, F_GETFD) & FD_CLOEXEC, 0);
    assert_int_equal(connect(fd, (struct sockaddr *)&to, sizeof(to)), -1);
    assert_int_equal(errno, EISCONN);
    close(fd);
    assert_int_equal(aor_fdtab_marked(fd), 0);
}

/* connect with a longer length than the family's (a sockaddr_storage's) and with RFC
 * 2133's 24-byte sockaddr_in6, both of which Linux takes: redirected, and getpeername
 * reports the family's size as the kernel does, writing nothing past it (QA). */
static void test_connect_lengths(void **state) {
    record("192.0.2.12", "api.openai.com", 0);
    struct sockaddr_storage ss;
    memset(&ss, 0, sizeof(ss));
    struct sockaddr_in to = sin_of("192.0.2.12", 443);
    memcpy(&ss, &to, sizeof(to));
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    assert_int_equal(connect(fd, (struct sockaddr *)&ss, sizeof(ss)), 0);
    char line[128];
    read_line(fd, line, sizeof(line));
    assert_string_equal(line, "ok");
    unsigned char out[sizeof(struct sockaddr_storage)];
    memset(out, 0xee, sizeof(out));
    socklen_t pl = sizeof(out);
    assert_int_equal(getpeername(fd, (struct sockaddr *)out, &pl), 0);
    assert_int_equal(pl, sizeof(struct sockaddr_in));
    assert_memory_equal(out, &to, sizeof(to));
    assert_int_equal(out[sizeof(to)], 0xee);
    close(fd);

    record("2001:db8::12", "api.openai.com", 0);
    struct sockaddr_in6 to6;
    memset(&to6, 0, sizeof(to6));
    to6.sin6_family = AF_INET6;
    to6.sin6_port = htons(443);
    inet_pton(AF_INET6, "2001:db8::12", &to6.sin6_addr);
    fd = socket(AF_INET6, SOCK_STREAM | SOCK_NONBLOCK, 0); /* a direct connect would hang */
    assert_int_equal(connect(fd, (struct sockaddr *)&to6, AOR_SIN6_LEN_MIN), 0);
    read_line(fd, line, sizeof(line));
    assert_string_equal(line, "ok");
    last_preamble(line, sizeof(line));
    assert_string_equal(line, "AOR/1 api.openai.com 2001:db8::12 443");
    pl = sizeof(out);
    assert_int_equal(getpeername(fd, (struct sockaddr *)out, &pl), 0);
    assert_int_equal(pl, sizeof(struct sockaddr_in6));
    assert_memory_equal(out, &to6, sizeof(to6));
    close(fd);
}

static void test_redirect_nonblocking_cloexec(void **state) {
    record("192.0.2.11", "api.anthropic.com", 0);
    struct sockaddr_in to = sin_of("192.0.2.11", 443);
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    assert_int_equal(connect(fd, (struct sockaddr *)&to, sizeof(to)), 0);
    assert_true(fcntl(fd, F_GETFL) & O_NONBLOCK);
    assert_true(fcntl(fd, F_GETFD) & FD_CLOEXEC);
    int err = -1;
    socklen_t el = sizeof(err);
    assert_int_equal(getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &el), 0);
    assert_int_equal(err, 0);
    char line[128];
    read_line(fd, line, sizeof(line));
    assert_string_equal(line, "ok");
    close(fd);
}

static void test_not_recognised_or_udp(void **state) {
    /* a plain local TCP server on port 443 cannot be bound here; use an address the
     * shim does not know on 443: the real connect runs (and fails: nothing listens). */
    struct sockaddr_in to = sin_of("127.0.0.1", 443);
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    int rc = connect(fd, (struct sockaddr *)&to, sizeof(to));
    assert_int_equal(rc, -1);
    assert_int_equal(errno, ECONNREFUSED);
    assert_int_equal(aor_fdtab_marked(fd), 0);
    close(fd);
    /* UDP to a recognised address: untouched */
    record("192.0.2.12", "api.openai.com", 0);
    to = sin_of("192.0.2.12", 443);
    fd = socket(AF_INET, SOCK_DGRAM, 0);
    rc = connect(fd, (struct sockaddr *)&to, sizeof(to));
    int dom = 0;
    socklen_t dl = sizeof(dom);
    getsockopt(fd, SOL_SOCKET, SO_DOMAIN, &dom, &dl);
    assert_int_equal(dom, AF_INET);
    assert_int_equal(aor_fdtab_marked(fd), 0);
    close(fd);
    /* another port of a recognised address: untouched */
    to = sin_of("192.0.2.10", 80);
    fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
    rc = connect(fd, (struct sockaddr *)&to, sizeof(to));
    assert_int_equal(aor_fdtab_marked(fd), 0);
    close(fd);
}

static void test_fastopen(void **state) {
    record("192.0.2.13", "api.openai.com", 0);
    struct sockaddr_in to = sin_of("192.0.2.13", 443);
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    assert_int_equal(sendto(fd, "tfo\n", 4, MSG_FASTOPEN, (struct sockaddr *)&to, sizeof(to)), 4);
    char line[128];
    read_line(fd, line, sizeof(line));
    assert_string_equal(line, "ok");
    read_line(fd, line, sizeof(line));
    assert_string_equal(line, "tfo");
    /* sendmsg with a destination on the redirected fd: the address is dropped */
    struct iovec iov = {.iov_base = "msg\n", .iov_len = 4};
    struct msghdr mh = {
        .msg_name = &to, .msg_namelen = sizeof(to), .msg_iov = &iov, .msg_iovlen = 1};
    assert_int_equal(sendmsg(fd, &mh, 0), 4);
    read_line(fd, line, sizeof(line));
    assert_string_equal(line, "msg");
    close(fd);
}

/* QA: the socket's family must match the address's, as the kernel demands; a mismatch
 * gets the kernel's own error (AF_INET socket + sockaddr_in6: EAFNOSUPPORT, even for a
 * v4-mapped address), not a redirect. A v4-mapped address on an AF_INET6 socket is
 * fine. */
static void test_family_mismatch(void **state) {
    record("192.0.2.16", "api.openai.com", 0);
    struct sockaddr_in6 to6;
    memset(&to6, 0, sizeof(to6));
    to6.sin6_family = AF_INET6;
    to6.sin6_port = htons(443);
    assert_int_equal(inet_pton(AF_INET6, "::ffff:192.0.2.16", &to6.sin6_addr), 1);

    /* each connect is closed before its result is checked: a redirected fd left open
     * by a failed assertion would keep the fake daemon's thread from ending */
    int rc, err, marked;
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
    assert_true(fd >= 0);
    rc = connect(fd, (struct sockaddr *)&to6, sizeof(to6));
    err = errno;
    marked = aor_fdtab_marked(fd);
    close(fd);
    assert_int_equal(rc, -1);
    assert_int_equal(err, EAFNOSUPPORT);
    assert_int_equal(marked, 0);

    /* an AF_INET6 socket given a sockaddr_in: the kernel's EINVAL */
    struct sockaddr_in to4 = sin_of("192.0.2.16", 443);
    fd = socket(AF_INET6, SOCK_STREAM | SOCK_NONBLOCK, 0);
    if (fd >= 0) {
        rc = connect(fd, (struct sockaddr *)&to4, sizeof(to4));
        err = errno;
        marked = aor_fdtab_marked(fd);
        close(fd);
        assert_int_equal(rc, -1);
        assert_int_equal(err, EINVAL);
        assert_int_equal(marked, 0);
    }
    /* a Unix stream socket given a sockaddr_in: EINVAL, untouched */
    fd = socket(AF_UNIX, SOCK_STREAM, 0);
    rc = connect(fd, (struct sockaddr *)&to4, sizeof(to4));
    err = errno;
    marked = aor_fdtab_marked(fd);
    close(fd);
    assert_int_equal(rc, -1);
    assert_int_equal(err, EINVAL);
    assert_int_equal(marked, 0);

    /* v4-mapped on an AF_INET6 socket: redirected, the preamble has the IPv4 form */
    fd = socket(AF_INET6, SOCK_STREAM, 0);
    if (fd < 0)
        return; /* no IPv6 here */
    assert_int_equal(connect(fd, (struct sockaddr *)&to6, sizeof(to6)), 0);
    char line[128];
    read_line(fd, line, sizeof(line));
    assert_string_equal(line, "ok");
    last_preamble(line, sizeof(line));
    assert_string_equal(line, "AOR/1 api.openai.com 192.0.2.16 443");
    close(fd);
}

static void test_daemon_down(void **state) {
    char gone[300];
    snprintf(gone, sizeof(gone), "%s/nothing.sock", g_dir);
    setenv("AOR_SOCKET", gone, 1);
    aor_env_load();

    /* offline fallback address, no daemon: fails fast instead of a doomed connect */
    record("198.18.9.9", "api.openai.com", 1);
    struct sockaddr_in to = sin_of("198.18.9.9", 443);
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    assert_int_equal(connect(fd, (struct sockaddr *)&to, sizeof(to)), -1);
    assert_int_equal(errno, ECONNREFUSED);
    close(fd);

    /* strict: ECONNREFUSED for a real address too */
    setenv("AOR_STRICT", "1", 1);
    aor_env_load();
    record("127.0.0.1", "localhost", 0);
    to = sin_of("127.0.0.1", 443);
    fd = socket(AF_INET, SOCK_STREAM, 0);
    assert_int_equal(connect(fd, (struct sockaddr *)&to, sizeof(to)), -1);
    assert_int_equal(errno, ECONNREFUSED);
    close(fd);

    /* disabled: pass-through */
    unsetenv("AOR_STRICT");
    setenv("AOR_DISABLE", "1", 1);
    setenv("AOR_SOCKET", g_sock, 1);
    aor_env_load();
    record("192.0.2.14", "api.openai.com", 0);
    to = sin_of("192.0.2.14", 443);
    fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
    connect(fd, (struct sockaddr *)&to, sizeof(to));
    assert_int_equal(aor_fdtab_marked(fd), 0);
    close(fd);
    unsetenv("AOR_DISABLE");
    aor_env_load();
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_connect_lengths),
        cmocka_unit_test(test_redirect_blocking),
        cmocka_unit_test(test_redirect_nonblocking_cloexec),
        cmocka_unit_test(test_not_recognised_or_udp),
        cmocka_unit_test(test_fastopen),
        cmocka_unit_test(test_family_mismatch),
        cmocka_unit_test(test_daemon_down),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
