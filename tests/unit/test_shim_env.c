/* Unit tests: shim/env.c (socket and published-file paths, flags; spec §7, §9) and
 * shim/trust.c (CA variables; spec §2 "Trust"). */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "env.h"
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
}

static void test_flag(void **state) {
    assert_false(aor_env_flag(NULL));
    assert_false(aor_env_flag(""));
    assert_false(aor_env_flag("0"));
    assert_true(aor_env_flag("1"));
    assert_true(aor_env_flag("yes"));
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
        cmocka_unit_test(test_paths),       cmocka_unit_test(test_flag),
        cmocka_unit_test(test_load),        cmocka_unit_test(test_data_dir),
        cmocka_unit_test(test_trust_apply),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
