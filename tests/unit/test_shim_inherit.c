/* Unit tests: shim/inherit.c (redirected connections inherited across exec, spec §2), and
 * through the hooks linked into this test, the adoption in shim/sockview.c. */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "env.h"
#include "fdtab.h"
#include "inherit.h"
#include "real.h"

static int reset(void **state) {
    (void)state;
    aor_shim_init();
    aor_fdtab_reset();
    return 0;
}

static struct sockaddr_in v4(const char *ip, int port) {
    struct sockaddr_in a;
    memset(&a, 0, sizeof a);
    a.sin_family = AF_INET;
    a.sin_port = htons((uint16_t)port);
    assert_int_equal(inet_pton(AF_INET, ip, &a.sin_addr), 1);
    return a;
}

/* The name a redirect binds is read back as the same socket: IPv4, and IPv6 with a
 * scope id. */
static void test_name_round_trip(void **state) {
    (void)state;
    struct sockaddr_un sun;
    aor_fdinfo info;
    struct sockaddr_in a = v4("104.18.7.192", 443);
    socklen_t n = aor_inherit_name(&sun, AF_INET, IPPROTO_TCP, (struct sockaddr *)&a, sizeof a);
    assert_true(n > offsetof(struct sockaddr_un, sun_path) + 1);
    assert_int_equal(sun.sun_path[0], '\0'); /* abstract: no file */
    memset(&info, 0, sizeof info);
    assert_int_equal(aor_inherit_parse(&sun, n, &info), 1);
    assert_int_equal(info.domain, AF_INET);
    assert_int_equal(info.protocol, IPPROTO_TCP);
    assert_int_equal(info.peerlen, sizeof(struct sockaddr_in));
    assert_memory_equal(&info.peer.in4, &a, sizeof a);

    struct sockaddr_in6 b;
    memset(&b, 0, sizeof b);
    b.sin6_family = AF_INET6;
    b.sin6_port = htons(8443);
    b.sin6_scope_id = 3;
    assert_int_equal(inet_pton(AF_INET6, "2606:4700::6812:7c0", &b.sin6_addr), 1);
    n = aor_inherit_name(&sun, AF_INET6, 0, (struct sockaddr *)&b, sizeof b);
    assert_true(n > 0);
    memset(&info, 0, sizeof info);
    assert_int_equal(aor_inherit_parse(&sun, n, &info), 1);
    assert_int_equal(info.domain, AF_INET6);
    assert_int_equal(info.protocol, 0);
    assert_int_equal(info.peerlen, sizeof(struct sockaddr_in6));
    assert_memory_equal(&info.peer.in6, &b, sizeof b);

    /* Two names of one process differ (the abstract namespace is shared). */
    struct sockaddr_un sun2;
    socklen_t n2 = aor_inherit_name(&sun2, AF_INET, IPPROTO_TCP, (struct sockaddr *)&a, sizeof a);
    assert_true(n2 > 0);
    assert_true(n2 != n || memcmp(&sun, &sun2, n) != 0);
    /* A family that does not match the domain, or a short address: no name. */
    assert_int_equal(aor_inherit_name(&sun, AF_INET6, 0, (struct sockaddr *)&a, sizeof a), 0);
    assert_int_equal(aor_inherit_name(&sun, AF_INET, 0, (struct sockaddr *)&a, 8), 0);
}

/* Names that are not the shim's are not taken: a file path, another abstract name, a
 * cut or padded one, bad numbers. */
static void test_parse_refuses_other_names(void **state) {
    (void)state;
    static const char *const bad[] = {
        "aor/1 1.2 2 6 1.2.3.4 443",         /* no scope field */
        "aor/1 1.2 2 6 1.2.3.4 443 0 extra", /* trailing text */
        "aor/1 1.2 2 6 1.2.3.4 70000 0",     /* port */
        "aor/1 1.2 2 6 1.2.3.999 443 0",     /* address */
        "aor/1 1.2 10 6 1.2.3.4 443 0",      /* an IPv4 address with AF_INET6 */
        "aor/1 1.2 1 6 /tmp/x 443 0",        /* AF_UNIX */
        "aor/2 1.2 2 6 1.2.3.4 443 0",       /* another version */
        "@dbus-abstract-name",
    };
    aor_fdinfo info;
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        struct sockaddr_un sun;
        memset(&sun, 0, sizeof sun);
        sun.sun_family = AF_UNIX;
        size_t l = strlen(bad[i]);
        memcpy(sun.sun_path + 1, bad[i], l);
        socklen_t len = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 + l);
        if (aor_inherit_parse(&sun, len, &info) != 0)
            fail_msg("taken: %s", bad[i]);
    }
    /* The good one, as a file path (not abstract), and cut short. */
    struct sockaddr_un sun;
    memset(&sun, 0, sizeof sun);
    sun.sun_family = AF_UNIX;
    const char *good = "aor/1 1.2 2 6 1.2.3.4 443 0";
    size_t l = strlen(good);
    memcpy(sun.sun_path + 1, good, l);
    socklen_t len = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 + l);
    assert_int_equal(aor_inherit_parse(&sun, len, &info), 1);
    assert_int_equal(aor_inherit_parse(&sun, len - 2, &info), 0);
    memcpy(sun.sun_path, good, l + 1);
    assert_int_equal(aor_inherit_parse(&sun, len, &info), 0);
    assert_int_equal(aor_inherit_parse(&sun, 0, &info), 0);
}

/* The daemon socket of these tests: AOR_SOCKET, set in main. */
static char g_sock[96];

/* A listener at path (a file), or -1. */
static int listen_at(const char *path) {
    struct sockaddr_un srv;
    memset(&srv, 0, sizeof srv);
    srv.sun_family = AF_UNIX;
    snprintf(srv.sun_path, sizeof srv.sun_path, "%s", path);
    unlink(path);
    int l = socket(AF_UNIX, SOCK_STREAM, 0);
    if (l < 0 || bind(l, (struct sockaddr *)&srv, sizeof srv) != 0 || listen(l, 8) != 0) {
        if (l >= 0)
            close(l);
        return -1;
    }
    return l;
}

/* A Unix socket bound to a fresh name for a (the previous names stay bound until their
 * sockets close), connected to the socket at path (NULL: an abstract listener of the
 * test's, not the daemon), as a redirect makes it. */
static int named_conn(const struct sockaddr_in *a, const char *path) {
    struct sockaddr_un sun, srv;
    socklen_t n =
        aor_inherit_name(&sun, AF_INET, IPPROTO_TCP, (const struct sockaddr *)a, sizeof *a);
    int fd = socket(AF_UNIX, SOCK_STREAM, 0);
    assert_true(fd >= 0);
    assert_int_equal(bind(fd, (struct sockaddr *)&sun, n), 0);
    if (path == NULL)
        return fd; /* unconnected */
    memset(&srv, 0, sizeof srv);
    srv.sun_family = AF_UNIX;
    snprintf(srv.sun_path, sizeof srv.sun_path, "%s", path);
    assert_int_equal(connect(fd, (struct sockaddr *)&srv, sizeof srv), 0);
    return fd;
}

/* A Unix socket bound to such a name and connected to the daemon socket, unknown to the
 * table (as in a program that inherited it across exec), is adopted by the first hook
 * that sees AF_UNIX: getpeername then gives the original address, SO_DOMAIN the original
 * family, TCP options work. */
static void test_hooks_adopt_an_inherited_connection(void **state) {
    (void)state;
    struct sockaddr_in a = v4("104.18.7.192", 443);
    int l = listen_at(g_sock);
    assert_true(l >= 0);
    int hooks[] = {0, 1, 2, 3}; /* getpeername, getsockname, SO_DOMAIN, setsockopt TCP */
    for (size_t h = 0; h < sizeof hooks / sizeof hooks[0]; h++) {
        aor_fdtab_reset();
        int fd = named_conn(&a, g_sock);
        assert_int_equal(aor_fdtab_marked(fd), 0);
        struct sockaddr_storage ss;
        socklen_t sl = sizeof ss;
        int v = -1, one = 1;
        socklen_t vl = sizeof v;
        errno = 4242;
        switch (hooks[h]) {
        case 0:
            assert_int_equal(getpeername(fd, (struct sockaddr *)&ss, &sl), 0);
            assert_int_equal(ss.ss_family, AF_INET);
            break;
        case 1:
            assert_int_equal(getsockname(fd, (struct sockaddr *)&ss, &sl), 0);
            assert_int_equal(ss.ss_family, AF_INET);
            assert_int_equal(sl, sizeof(struct sockaddr_in));
            break;
        case 2:
            assert_int_equal(getsockopt(fd, SOL_SOCKET, SO_DOMAIN, &v, &vl), 0);
            assert_int_equal(v, AF_INET);
            break;
        case 3:
            assert_int_equal(setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one), 0);
            break;
        }
        assert_int_equal(errno, 4242);
        assert_int_equal(aor_fdtab_marked(fd), 1);
        sl = sizeof ss;
        assert_int_equal(getpeername(fd, (struct sockaddr *)&ss, &sl), 0);
        assert_int_equal(sl, sizeof a);
        assert_memory_equal(&ss, &a, sizeof a);
        vl = sizeof v;
        assert_int_equal(getsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &v, &vl), 0);
        assert_int_equal(v, 1);
        close(fd);
        assert_int_equal(aor_fdtab_marked(fd), 0);
    }
    close(l);
    unlink(g_sock);
}

/* Every hook leaves fd alone (real answers: AF_UNIX), and it stays out of the table. */
static void assert_not_adopted(int fd) {
    struct sockaddr_storage ss;
    socklen_t sl = sizeof ss;
    int v = -1, one = 1;
    socklen_t vl = sizeof v;
    assert_int_equal(getsockopt(fd, SOL_SOCKET, SO_DOMAIN, &v, &vl), 0);
    assert_int_equal(v, AF_UNIX);
    assert_int_equal(setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one), -1);
    assert_int_equal(getsockname(fd, (struct sockaddr *)&ss, &sl), 0);
    assert_int_equal(ss.ss_family, AF_UNIX);
    sl = sizeof ss;
    int rc = getpeername(fd, (struct sockaddr *)&ss, &sl);
    assert_true(rc == -1 || ss.ss_family == AF_UNIX);
    assert_int_equal(aor_fdtab_marked(fd), 0);
}

/* The name alone is not trusted: any process can bind "aor/1 ..." and pass the socket
 * over SCM_RIGHTS. Not adopted: a named socket connected to another server, an
 * unconnected one, an ordinary socket pair, and (as root) a named socket connected to
 * the daemon path when another uid serves it. */
static void test_hooks_refuse_what_is_not_the_daemon(void **state) {
    (void)state;
    struct sockaddr_in a = v4("104.18.7.192", 443);

    /* Connected to another listener (abstract name). */
    int l = socket(AF_UNIX, SOCK_STREAM, 0);
    struct sockaddr_un srv;
    memset(&srv, 0, sizeof srv);
    srv.sun_family = AF_UNIX;
    snprintf(srv.sun_path + 1, sizeof srv.sun_path - 1, "aor-test-listener-%d", (int)getpid());
    socklen_t srvlen =
        (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 + strlen(srv.sun_path + 1));
    assert_int_equal(bind(l, (struct sockaddr *)&srv, srvlen), 0);
    assert_int_equal(listen(l, 1), 0);
    int fd = named_conn(&a, NULL);
    assert_int_equal(connect(fd, (struct sockaddr *)&srv, srvlen), 0);
    assert_not_adopted(fd);
    close(fd);
    close(l);

    /* Connected to a listener at another path. */
    char other[128];
    snprintf(other, sizeof other, "%s.other", g_sock);
    l = listen_at(other);
    assert_true(l >= 0);
    fd = named_conn(&a, other);
    assert_not_adopted(fd);
    close(fd);
    close(l);
    unlink(other);

    /* Not connected at all. */
    fd = named_conn(&a, NULL);
    assert_not_adopted(fd);
    close(fd);

    /* An ordinary Unix socket pair. */
    int sv[2];
    assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
    assert_not_adopted(sv[0]);
    close(sv[0]);
    close(sv[1]);

    /* The daemon path served by another uid (needs root to listen as one). */
    if (getuid() != 0)
        return;
    int ready[2];
    assert_int_equal(pipe(ready), 0);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        /* Never outlives the test, even one that failed before killing it. */
        alarm(30);
        int devnull = open("/dev/null", O_WRONLY);
        if (devnull >= 0) {
            dup2(devnull, STDOUT_FILENO);
            dup2(devnull, STDERR_FILENO);
        }
        char b = 'x';
        if (setgid(65534) != 0 || setuid(65534) != 0)
            _exit(1);
        int cl = listen_at(g_sock); /* the directory is world-writable */
        if (cl < 0 || write(ready[1], &b, 1) != 1)
            _exit(1);
        pause();
        _exit(0);
    }
    char b;
    int got = (int)read(ready[0], &b, 1);
    close(ready[0]);
    close(ready[1]);
    if (got == 1) {
        fd = named_conn(&a, g_sock);
        int leaked = aor_inherit_adopt(fd, NULL); /* before the listener goes */
        kill(pid, SIGKILL);
        waitpid(pid, NULL, 0);
        assert_int_equal(leaked, 0);
        assert_not_adopted(fd);
        close(fd);
    } else {
        kill(pid, SIGKILL);
        waitpid(pid, NULL, 0);
    }
    unlink(g_sock);
    assert_int_equal(got, 1);
}

int main(void) {
    /* The daemon socket: a world-writable directory, so that another uid can listen
     * there in the last test. */
    char dir[] = "/tmp/aor-inherit-XXXXXX";
    if (mkdtemp(dir) == NULL || chmod(dir, 01777) != 0)
        return 1;
    snprintf(g_sock, sizeof g_sock, "%s/aor.sock", dir);
    setenv("AOR_SOCKET", g_sock, 1);
    aor_env_load(); /* the constructor read the environment before main */
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup(test_name_round_trip, reset),
        cmocka_unit_test_setup(test_parse_refuses_other_names, reset),
        cmocka_unit_test_setup(test_hooks_adopt_an_inherited_connection, reset),
        cmocka_unit_test_setup(test_hooks_refuse_what_is_not_the_daemon, reset),
    };
    int rc = cmocka_run_group_tests(tests, NULL, NULL);
    unlink(g_sock);
    rmdir(dir);
    return rc;
}
