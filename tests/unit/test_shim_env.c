/* Unit tests: shim/env.c (socket and published-file paths, flags; spec §7, §9) and
 * shim/trust.c (CA variables; spec §2 "Trust"). */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "env.h"
#include "fdtab.h"
#include "trust.h"

static void test_paths(void **state) {
    char sock[108], hosts[116];
    assert_int_equal(
        aor_env_paths("/x/y/my.sock", "/run/user/1", 1, sock, sizeof(sock), hosts, sizeof(hosts)),
        0);
    assert_string_equal(sock, "/x/y/my.sock");
    assert_string_equal(hosts, "/x/y/hosts");
    assert_int_equal(
        aor_env_paths(NULL, "/run/user/1000", 1000, sock, sizeof(sock), hosts, sizeof(hosts)), 0);
    assert_string_equal(sock, "/run/user/1000/aor/aor.sock");
    assert_string_equal(hosts, "/run/user/1000/aor/hosts");
    /* empty AOR_SOCKET and a relative XDG_RUNTIME_DIR are ignored */
    assert_int_equal(
        aor_env_paths("", "relative/dir", 1000, sock, sizeof(sock), hosts, sizeof(hosts)), 0);
    assert_string_equal(sock, "/tmp/aor-1000/aor.sock");
    assert_string_equal(hosts, "/tmp/aor-1000/hosts");
    assert_int_equal(aor_env_paths(NULL, NULL, 7, sock, sizeof(sock), hosts, sizeof(hosts)), 0);
    assert_string_equal(sock, "/tmp/aor-7/aor.sock");
    /* a socket path longer than sun_path cannot work */
    char longdir[200];
    memset(longdir, 'd', sizeof(longdir));
    longdir[0] = '/';
    longdir[199] = '\0';
    errno = 0;
    assert_int_equal(aor_env_paths(NULL, longdir, 1, sock, sizeof(sock), hosts, sizeof(hosts)), -1);
    assert_int_equal(errno, ENAMETOOLONG);
    assert_string_equal(sock, "");
    /* QA: a relative AOR_SOCKET (which aord refuses) made the shim read ./hosts of the
     * program's working directory as the published file. */
    errno = 0;
    assert_int_equal(
        aor_env_paths("rel.sock", "/run/user/1", 1, sock, sizeof(sock), hosts, sizeof(hosts)), -1);
    assert_int_equal(errno, EINVAL);
    assert_string_equal(sock, "");
    assert_string_equal(hosts, "");
}

static void test_load(void **state) {
    setenv("AOR_SOCKET", "/tmp/aor-unit/x.sock", 1);
    setenv("AOR_STRICT", "1", 1);
    unsetenv("AOR_DISABLE");
    unsetenv("AOR_DAEMON");
    aor_env_load();
    const aor_shim_env *e = aor_env();
    assert_true(e->sock_ok);
    assert_true(e->strict);
    assert_false(e->disabled);
    assert_string_equal(e->sock_path, "/tmp/aor-unit/x.sock");
    assert_string_equal(e->hosts_path, "/tmp/aor-unit/hosts");
    assert_false(aor_daemon_socket_exists());
    setenv("AOR_DAEMON", "1", 1);
    aor_env_load();
    assert_true(aor_env()->disabled);
    unsetenv("AOR_DAEMON");
    unsetenv("AOR_STRICT");
    unsetenv("AOR_SOCKET");
    aor_env_load();
}

static volatile sig_atomic_t g_sigpipes;

static void on_sigpipe(int sig) {
    g_sigpipes++;
}

/* Bytes waiting on fd (non-blocking read, at most cap - 1), NUL-terminated. */
static size_t pending_bytes(int fd, char *buf, size_t cap) {
    ssize_t r = recv(fd, buf, cap - 1, MSG_DONTWAIT);
    if (r < 0 && errno == ENOTSOCK)
        r = read(fd, buf, cap - 1);
    size_t n = r > 0 ? (size_t)r : 0;
    buf[n] = '\0';
    return n;
}

/* A connected loopback TCP pair: *client, *server (the peer that must see nothing). */
static void tcp_pair(int *client, int *server) {
    int l = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t al = sizeof(a);
    assert_int_equal(bind(l, (struct sockaddr *)&a, sizeof(a)), 0);
    assert_int_equal(listen(l, 1), 0);
    assert_int_equal(getsockname(l, (struct sockaddr *)&a, &al), 0);
    *client = socket(AF_INET, SOCK_STREAM, 0);
    assert_int_equal(connect(*client, (struct sockaddr *)&a, sizeof(a)), 0);
    *server = accept(l, NULL, NULL);
    assert_true(*server >= 0);
    close(l);
}

/* QA: a program that closed stderr may get a socket as fd 2. The shim's lines must not
 * go into a TCP connection or a redirected fd, and must never raise SIGPIPE (the
 * program died with exit 141). docs/shim.md "Output". Everything is measured with fd 2
 * replaced, then fd 2 is restored before asserting (cmocka reports on stderr). */
static void test_stderr_guard(void **state) {
    setenv("AOR_DEBUG", "1", 1);
    unsetenv("AOR_SOCKET");
    aor_env_load();
    struct sigaction sa, old_sa;
    memset(&sa, 0, sizeof(sa));
    sa.sa_handler = on_sigpipe;
    sigemptyset(&sa.sa_mask);
    assert_int_equal(sigaction(SIGPIPE, &sa, &old_sa), 0);
    int saved = dup(2);
    assert_true(saved > 2);
    char buf[512];
    int fds[2], client, server;

    /* 1. an unconnected TCP socket (the fail-open warning comes before the connect) */
    int t = socket(AF_INET, SOCK_STREAM, 0);
    dup2(t, 2);
    errno = 1234;
    aor_debug("to an unconnected socket");
    int errno_kept = errno == 1234;
    dup2(saved, 2);
    close(t);
    int pipes_unconnected = g_sigpipes;

    /* 2. a connected TCP socket: its peer receives nothing */
    tcp_pair(&client, &server);
    dup2(client, 2);
    aor_debug("secret for the peer");
    dup2(saved, 2);
    size_t leaked_tcp = pending_bytes(server, buf, sizeof(buf));
    close(client);
    close(server);

    /* 3. a redirected fd (in the fd table): the daemon stream receives nothing */
    assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM, 0, fds), 0);
    dup2(fds[0], 2);
    struct stat st;
    assert_int_equal(fstat(2, &st), 0);
    aor_fdinfo info;
    memset(&info, 0, sizeof(info));
    info.ino = (unsigned long)st.st_ino;
    info.domain = AF_INET;
    info.protocol = IPPROTO_TCP;
    assert_int_equal(aor_fdtab_set(2, &info), 0);
    aor_debug("into the daemon stream");
    aor_fdtab_clear(2);
    dup2(saved, 2);
    size_t leaked_redirected = pending_bytes(fds[1], buf, sizeof(buf));
    close(fds[0]);
    close(fds[1]);

    /* 4. a pipe whose reader is gone: no SIGPIPE, none left pending */
    assert_int_equal(pipe(fds), 0);
    close(fds[0]);
    int before = g_sigpipes;
    dup2(fds[1], 2);
    aor_debug("to a closed pipe");
    dup2(saved, 2);
    close(fds[1]);
    int pipes_closed_pipe = g_sigpipes - before;
    sigset_t pend;
    sigpending(&pend);
    int left_pending = sigismember(&pend, SIGPIPE);

    /* 5. a pipe and a Unix socket (journald's stream) do get the line */
    assert_int_equal(pipe(fds), 0);
    dup2(fds[1], 2);
    aor_debug("to a pipe");
    dup2(saved, 2);
    close(fds[1]);
    char pipe_line[512];
    pending_bytes(fds[0], pipe_line, sizeof(pipe_line));
    close(fds[0]);
    assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM, 0, fds), 0);
    dup2(fds[0], 2);
    aor_debug("to a unix socket");
    dup2(saved, 2);
    char unix_line[512];
    pending_bytes(fds[1], unix_line, sizeof(unix_line));
    close(fds[0]);
    close(fds[1]);

    /* 6. fd 2 closed: nothing happens */
    close(2);
    aor_debug("to nowhere");
    dup2(saved, 2);
    close(saved);
    sigaction(SIGPIPE, &old_sa, NULL);
    unsetenv("AOR_DEBUG");
    aor_env_load();

    assert_true(errno_kept);
    assert_int_equal(pipes_unconnected, 0);
    assert_int_equal(leaked_tcp, 0);
    assert_int_equal(leaked_redirected, 0);
    assert_int_equal(pipes_closed_pipe, 0);
    assert_int_equal(left_pending, 0);
    assert_non_null(strstr(pipe_line, "]: to a pipe\n"));
    assert_non_null(strstr(unix_line, "]: to a unix socket\n"));
}

/* QA: an AOR_SOCKET longer than a Unix socket path holds showed up cut in the warning,
 * as if that were the path. The line says it is too long and how long. (The warning is
 * once per process: this is the only test here that triggers it.) */
static void test_warn_path_too_long(void **state) {
    char path[200];
    memset(path, 'p', sizeof(path));
    memcpy(path, "/tmp/", 5);
    memcpy(path + sizeof(path) - 6, ".sock", 6);
    setenv("AOR_SOCKET", path, 1);
    aor_env_load();
    assert_false(aor_env()->sock_ok);
    int fds[2], saved = dup(2);
    assert_int_equal(pipe(fds), 0);
    dup2(fds[1], 2);
    aor_warn_failopen(0);
    dup2(saved, 2);
    close(saved);
    close(fds[1]);
    char line[1024];
    pending_bytes(fds[0], line, sizeof(line));
    close(fds[0]);
    unsetenv("AOR_SOCKET");
    aor_env_load();
    char want[64];
    snprintf(want, sizeof(want), "too long (%zu bytes, at most 107)", strlen(path));
    assert_non_null(strstr(line, want));
    assert_non_null(strstr(line, "connecting directly (fail-open)\n"));
    assert_null(strstr(line, "not reachable at"));
}

static void test_data_dir(void **state) {
    char out[256];
    assert_int_equal(aor_trust_data_dir("/xdg", "/home/u", out, sizeof(out)), 0);
    assert_string_equal(out, "/xdg/aor");
    assert_int_equal(aor_trust_data_dir(NULL, "/home/u", out, sizeof(out)), 0);
    assert_string_equal(out, "/home/u/.local/share/aor");
    assert_int_equal(aor_trust_data_dir("rel", "/home/u", out, sizeof(out)), 0);
    assert_string_equal(out, "/home/u/.local/share/aor");
    assert_int_equal(aor_trust_data_dir(NULL, NULL, out, sizeof(out)), -1);
    assert_int_equal(aor_trust_data_dir("/xdg", NULL, out, 5), -1);
}

static void touch(const char *dir, const char *name) {
    char p[512];
    snprintf(p, sizeof(p), "%s/%s", dir, name);
    FILE *f = fopen(p, "w");
    assert_non_null(f);
    fputs("-----BEGIN CERTIFICATE-----\n", f);
    fclose(f);
}

static void clear_vars(void) {
    unsetenv("SSL_CERT_FILE");
    unsetenv("REQUESTS_CA_BUNDLE");
    unsetenv("CURL_CA_BUNDLE");
    unsetenv("NODE_EXTRA_CA_CERTS");
}

static void test_trust_apply(void **state) {
    char dir[] = "/tmp/aor-test-trustXXXXXX";
    char bundle[512], ca[512];
    assert_non_null(mkdtemp(dir));
    snprintf(bundle, sizeof(bundle), "%s/bundle.pem", dir);
    snprintf(ca, sizeof(ca), "%s/ca.pem", dir);

    clear_vars();
    assert_int_equal(aor_trust_apply(dir), 0); /* no files: nothing */
    assert_null(getenv("SSL_CERT_FILE"));

    touch(dir, "bundle.pem");
    touch(dir, "ca.pem");
    errno = 4321;
    assert_int_equal(aor_trust_apply(dir), 4);
    assert_int_equal(errno, 4321);
    assert_string_equal(getenv("SSL_CERT_FILE"), bundle);
    assert_string_equal(getenv("REQUESTS_CA_BUNDLE"), bundle);
    assert_string_equal(getenv("CURL_CA_BUNDLE"), bundle);
    assert_string_equal(getenv("NODE_EXTRA_CA_CERTS"), ca);

    /* the user's own values are left alone; empty counts as unset. A
     * NODE_EXTRA_CA_CERTS file that cannot be read (Node ignores it too) gives way to
     * ca.pem; merging readable ones: test_shim_trust.c */
    clear_vars();
    setenv("SSL_CERT_FILE", "/mine/ca.pem", 1);
    setenv("REQUESTS_CA_BUNDLE", "", 1);
    setenv("NODE_EXTRA_CA_CERTS", "/mine/node.pem", 1);
    assert_int_equal(aor_trust_apply(dir), 3);
    assert_string_equal(getenv("SSL_CERT_FILE"), "/mine/ca.pem");
    assert_string_equal(getenv("REQUESTS_CA_BUNDLE"), bundle);
    assert_string_equal(getenv("CURL_CA_BUNDLE"), bundle);
    assert_string_equal(getenv("NODE_EXTRA_CA_CERTS"), ca);

    /* ca.pem alone: only Node's variable */
    clear_vars();
    unlink(bundle);
    assert_int_equal(aor_trust_apply(dir), 1);
    assert_null(getenv("SSL_CERT_FILE"));
    assert_string_equal(getenv("NODE_EXTRA_CA_CERTS"), ca);
    clear_vars();
    unlink(ca);
    rmdir(dir);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_paths),        cmocka_unit_test(test_load),
        cmocka_unit_test(test_data_dir),     cmocka_unit_test(test_trust_apply),
        cmocka_unit_test(test_stderr_guard), cmocka_unit_test(test_warn_path_too_long),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
