/* Unit tests: shim/trust.c, NODE_EXTRA_CA_CERTS merged with the user's file (spec §2
 * "Trust": "points NODE_EXTRA_CA_CERTS (merged with any the user set)"). */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "sysca.h"
#include "trust.h"

/* Text only: the shim never parses these as certificates. */
static const char CA_PEM[] = "-----BEGIN CERTIFICATE-----\n"
                             "MIIBszCCAVmgAwIBAgIQAORlocalCAbodyLine1AAAAAAAAAAAAAAAAAAAAAAAAAA\n"
                             "AORlocalCAbodyLine2BBBBBBBBBBBB==\n"
                             "-----END CERTIFICATE-----\n";
static const char USER_PEM[] = "-----BEGIN CERTIFICATE-----\n"
                               "MIIBcorporateRootCAxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx\n"
                               "-----END CERTIFICATE-----"; /* no final newline */

typedef struct {
    char dir[64];
    char ca[PATH_MAX];
    char user[PATH_MAX];
} fixture;

static void write_text(const char *path, const char *text, size_t len) {
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    assert_int_equal(fwrite(text, 1, len, f), len);
    assert_int_equal(fclose(f), 0);
}

/* Reads a whole small file into buf (NUL-terminated); returns its length. */
static size_t read_text(const char *path, char *buf, size_t cap) {
    FILE *f = fopen(path, "rb");
    assert_non_null(f);
    size_t n = fread(buf, 1, cap - 1, f);
    buf[n] = '\0';
    fclose(f);
    return n;
}

static int setup(void **state) {
    fixture *fx = calloc(1, sizeof *fx);
    assert_non_null(fx);
    snprintf(fx->dir, sizeof fx->dir, "/tmp/aor-test-trustXXXXXX");
    assert_non_null(mkdtemp(fx->dir));
    snprintf(fx->ca, sizeof fx->ca, "%s/ca.pem", fx->dir);
    snprintf(fx->user, sizeof fx->user, "%s/user.pem", fx->dir);
    write_text(fx->ca, CA_PEM, strlen(CA_PEM));
    write_text(fx->user, USER_PEM, strlen(USER_PEM));
    *state = fx;
    return 0;
}

static int teardown(void **state) {
    fixture *fx = *state;
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", fx->dir);
    assert_int_equal(system(cmd), 0);
    free(fx);
    return 0;
}

static void test_pem_contains(void **state) {
    size_t cl = strlen(CA_PEM);
    assert_int_equal(aor_trust_pem_contains(CA_PEM, cl, CA_PEM, cl), 1);
    assert_int_equal(aor_trust_pem_contains(USER_PEM, strlen(USER_PEM), CA_PEM, cl), 0);

    /* the CA after another block, re-wrapped, with CRLF line ends: still found */
    const char *rewrapped = "-----BEGIN CERTIFICATE-----\r\nAAAA\r\n-----END CERTIFICATE-----\r\n"
                            "-----BEGIN CERTIFICATE-----\r\n"
                            "MIIBszCCAVmgAwIBAgIQAORlocalCAbodyLine1AAAAAAAAAAAAAAAA\r\n"
                            "AAAAAAAAAAAORlocalCAbodyLine2BBBBBBBBBBBB==\r\n"
                            "-----END CERTIFICATE-----\r\n";
    assert_int_equal(aor_trust_pem_contains(rewrapped, strlen(rewrapped), CA_PEM, cl), 1);

    /* one character different: not the CA */
    char changed[sizeof CA_PEM];
    memcpy(changed, CA_PEM, sizeof CA_PEM);
    char *p = strstr(changed, "Line2");
    assert_non_null(p);
    p[4] = '3';
    assert_int_equal(aor_trust_pem_contains(changed, strlen(changed), CA_PEM, cl), 0);

    /* a BEGIN without END, then the real block: the real block counts */
    const char *broken = "-----BEGIN CERTIFICATE-----\nAAAA\n"
                         "-----BEGIN CERTIFICATE-----\n"
                         "MIIBszCCAVmgAwIBAgIQAORlocalCAbodyLine1AAAAAAAAAAAAAAAAAAAAAAAAAA\n"
                         "AORlocalCAbodyLine2BBBBBBBBBBBB==\n"
                         "-----END CERTIFICATE-----\n";
    assert_int_equal(aor_trust_pem_contains(broken, strlen(broken), CA_PEM, cl), 1);
    /* the CA's text cut before its END line is not a match */
    assert_int_equal(aor_trust_pem_contains(CA_PEM, cl - 26, CA_PEM, cl), 0);
    assert_int_equal(aor_trust_pem_contains("", 0, CA_PEM, cl), 0);

    /* a "CA" without a complete, non-empty block cannot be looked for */
    const char *empty = "-----BEGIN CERTIFICATE-----\n-----END CERTIFICATE-----\n";
    assert_int_equal(aor_trust_pem_contains(CA_PEM, cl, empty, strlen(empty)), -1);
    assert_int_equal(aor_trust_pem_contains(CA_PEM, cl, "not pem", 7), -1);
}

static void test_merged_name(void **state) {
    char a[64], b[64], c[64];
    assert_int_equal(aor_trust_merged_name("abc", 3, a, sizeof a), 0);
    assert_int_equal(aor_trust_merged_name("abc", 3, b, sizeof b), 0);
    assert_int_equal(aor_trust_merged_name("abd", 3, c, sizeof c), 0);
    assert_string_equal(a, b);
    assert_string_not_equal(a, c);
    assert_int_equal(strlen(a), strlen("node-extra-ca-") + 16 + strlen(".pem"));
    assert_memory_equal(a, "node-extra-ca-", 14);
    /* FNV-1a 64 of "" is its offset basis */
    assert_int_equal(aor_trust_merged_name("", 0, a, sizeof a), 0);
    assert_string_equal(a, "node-extra-ca-cbf29ce484222325.pem");
    assert_int_equal(aor_trust_merged_name("abc", 3, a, 20), -1);
}

static void test_node_merge(void **state) {
    fixture *fx = *state;
    char out[PATH_MAX], want[4096], got[4096];
    struct stat st1, st2;

    mode_t old_umask = umask(077); /* the merged file is 0644 whatever the umask */
    errno = 777;
    assert_int_equal(aor_trust_node_value(fx->dir, fx->user, fx->ca, out, sizeof out), 1);
    umask(old_umask);
    assert_int_equal(errno, 777);
    assert_memory_equal(out, fx->dir, strlen(fx->dir));
    assert_non_null(strstr(out, "/node-extra-ca-"));

    /* the user's file, the newline it lacked, then ca.pem */
    snprintf(want, sizeof want, "%s\n%s", USER_PEM, CA_PEM);
    read_text(out, got, sizeof got);
    assert_string_equal(got, want);
    assert_int_equal(stat(out, &st1), 0);
    assert_int_equal(st1.st_mode & 07777, 0644);
    assert_int_equal(aor_trust_pem_contains(got, strlen(got), CA_PEM, strlen(CA_PEM)), 1);

    /* the next process finds it in place and does not write it again (same inode; a
     * rewrite renames a new file over it) */
    char out2[PATH_MAX];
    assert_int_equal(aor_trust_node_value(fx->dir, fx->user, fx->ca, out2, sizeof out2), 1);
    assert_string_equal(out2, out);
    assert_int_equal(stat(out2, &st2), 0);
    assert_int_equal(st1.st_ino, st2.st_ino);

    /* a damaged merged file is rewritten */
    write_text(out, "junk", 4);
    assert_int_equal(aor_trust_node_value(fx->dir, fx->user, fx->ca, out2, sizeof out2), 1);
    read_text(out2, got, sizeof got);
    assert_string_equal(got, want);

    /* the merged file itself already holds the CA: left as it is */
    memset(out2, 0, sizeof out2);
    assert_int_equal(aor_trust_node_value(fx->dir, out, fx->ca, out2, sizeof out2), 0);
    assert_int_equal(out2[0], '\0');
    /* so is ca.pem itself */
    assert_int_equal(aor_trust_node_value(fx->dir, fx->ca, fx->ca, out2, sizeof out2), 0);

    /* no tmp file is left behind */
    char tmp[PATH_MAX + 32];
    snprintf(tmp, sizeof tmp, "%s.tmp.%ld", out, (long)getpid());
    assert_int_equal(access(tmp, F_OK), -1);
}

static void test_node_other_user_files(void **state) {
    fixture *fx = *state;
    char out[PATH_MAX], out2[PATH_MAX], other[PATH_MAX];

    /* two different user files get two merged files: neither overwrites the other */
    snprintf(other, sizeof other, "%s/other.pem", fx->dir);
    const char *other_pem = "-----BEGIN CERTIFICATE-----\nOTHER\n-----END CERTIFICATE-----\n";
    write_text(other, other_pem, strlen(other_pem));
    assert_int_equal(aor_trust_node_value(fx->dir, fx->user, fx->ca, out, sizeof out), 1);
    assert_int_equal(aor_trust_node_value(fx->dir, other, fx->ca, out2, sizeof out2), 1);
    assert_string_not_equal(out, out2);
    char got[4096];
    read_text(out2, got, sizeof got);
    assert_non_null(strstr(got, "OTHER"));
    assert_null(strstr(got, "corporate"));
    read_text(out, got, sizeof got);
    assert_non_null(strstr(got, "corporate"));
}

static void test_node_cannot_merge(void **state) {
    fixture *fx = *state;
    char out[PATH_MAX], path[PATH_MAX];

    /* a file Node cannot read either: ca.pem instead (as `aor run` does) */
    snprintf(path, sizeof path, "%s/missing.pem", fx->dir);
    errno = 55;
    assert_int_equal(aor_trust_node_value(fx->dir, path, fx->ca, out, sizeof out), 1);
    assert_int_equal(errno, 55);
    assert_string_equal(out, fx->ca);
    assert_int_equal(aor_trust_node_value(fx->dir, fx->dir, fx->ca, out, sizeof out), 1);
    assert_string_equal(out, fx->ca); /* a directory */

    /* a FIFO (process substitution): not opened for good, not read, left alone, and the
     * call does not hang waiting for a writer (QA) */
    snprintf(path, sizeof path, "%s/ca.fifo", fx->dir);
    assert_int_equal(mkfifo(path, 0600), 0);
    out[0] = '\0';
    assert_int_equal(aor_trust_node_value(fx->dir, path, fx->ca, out, sizeof out), 0);
    assert_int_equal(out[0], '\0');

    /* over the cap: not read, not merged, left alone */
    size_t big = AOR_TRUST_FILE_MAX + 1;
    char *buf = malloc(big);
    assert_non_null(buf);
    memset(buf, 'A', big);
    snprintf(path, sizeof path, "%s/big.pem", fx->dir);
    write_text(path, buf, big);
    free(buf);
    out[0] = '\0';
    assert_int_equal(aor_trust_node_value(fx->dir, path, fx->ca, out, sizeof out), 0);
    assert_int_equal(out[0], '\0');

    /* the merged file cannot be written (no such data directory): left alone */
    snprintf(path, sizeof path, "%s/nodir", fx->dir);
    assert_int_equal(aor_trust_node_value(path, fx->user, fx->ca, out, sizeof out), 0);

    /* ca.pem without a PEM block: nothing to merge */
    const char *empty = "-----BEGIN CERTIFICATE-----\n-----END CERTIFICATE-----\n";
    write_text(fx->ca, empty, strlen(empty));
    assert_int_equal(aor_trust_node_value(fx->dir, fx->user, fx->ca, out, sizeof out), 0);
}

static void test_apply_merges(void **state) {
    fixture *fx = *state;
    char bundle[PATH_MAX];
    snprintf(bundle, sizeof bundle, "%s/bundle.pem", fx->dir);
    write_text(bundle, CA_PEM, strlen(CA_PEM));
    unsetenv("SSL_CERT_FILE");
    setenv("REQUESTS_CA_BUNDLE", "/mine/bundle.pem", 1);
    unsetenv("CURL_CA_BUNDLE");
    setenv("NODE_EXTRA_CA_CERTS", fx->user, 1);
    errno = 99;
    assert_int_equal(aor_trust_apply(fx->dir), 3);
    assert_int_equal(errno, 99);
    assert_string_equal(getenv("SSL_CERT_FILE"), bundle);
    assert_string_equal(getenv("REQUESTS_CA_BUNDLE"), "/mine/bundle.pem"); /* left alone */
    const char *node = getenv("NODE_EXTRA_CA_CERTS");
    assert_non_null(node);
    assert_non_null(strstr(node, "/node-extra-ca-"));
    /* a child process inherits the merged file: nothing more to do */
    unsetenv("SSL_CERT_FILE");
    unsetenv("CURL_CA_BUNDLE");
    char keep[PATH_MAX];
    snprintf(keep, sizeof keep, "%s", node);
    assert_int_equal(aor_trust_apply(fx->dir), 2);
    assert_string_equal(getenv("NODE_EXTRA_CA_CERTS"), keep);
    unsetenv("SSL_CERT_FILE");
    unsetenv("REQUESTS_CA_BUNDLE");
    unsetenv("CURL_CA_BUNDLE");
    unsetenv("NODE_EXTRA_CA_CERTS");
}

/* A bundle variable that names the system's CA bundle (itself or through a symbolic
 * link) is pointed at bundle.pem, which holds the same CAs plus aor's; a copy of it at
 * another path is the user's own file and is left alone. */
static void test_apply_replaces_the_system_bundle(void **state) {
    fixture *fx = *state;
    struct stat st;
    if (stat(AOR_SYSCA_BUNDLE, &st) != 0)
        skip(); /* no ca-certificates on this machine */
    char bundle[PATH_MAX], link[PATH_MAX], copy[PATH_MAX];
    snprintf(bundle, sizeof bundle, "%s/bundle.pem", fx->dir);
    snprintf(link, sizeof link, "%s/system-link.pem", fx->dir);
    snprintf(copy, sizeof copy, "%s/system-copy.pem", fx->dir);
    write_text(bundle, CA_PEM, strlen(CA_PEM));
    assert_int_equal(symlink(AOR_SYSCA_BUNDLE, link), 0);
    write_text(copy, CA_PEM, strlen(CA_PEM));
    setenv("SSL_CERT_FILE", AOR_SYSCA_BUNDLE, 1);
    setenv("CURL_CA_BUNDLE", link, 1);
    setenv("REQUESTS_CA_BUNDLE", copy, 1);
    setenv("NODE_EXTRA_CA_CERTS", fx->ca, 1); /* already aor's CA: unchanged */
    assert_int_equal(aor_trust_apply(fx->dir), 2);
    assert_string_equal(getenv("SSL_CERT_FILE"), bundle);
    assert_string_equal(getenv("CURL_CA_BUNDLE"), bundle);
    assert_string_equal(getenv("REQUESTS_CA_BUNDLE"), copy);
    unsetenv("SSL_CERT_FILE");
    unsetenv("REQUESTS_CA_BUNDLE");
    unsetenv("CURL_CA_BUNDLE");
    unsetenv("NODE_EXTRA_CA_CERTS");
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_pem_contains),
        cmocka_unit_test(test_merged_name),
        cmocka_unit_test_setup_teardown(test_node_merge, setup, teardown),
        cmocka_unit_test_setup_teardown(test_node_other_user_files, setup, teardown),
        cmocka_unit_test_setup_teardown(test_node_cannot_merge, setup, teardown),
        cmocka_unit_test_setup_teardown(test_apply_merges, setup, teardown),
        cmocka_unit_test_setup_teardown(test_apply_replaces_the_system_bundle, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
