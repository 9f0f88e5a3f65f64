/* Unit tests: common/sysca.c (spec §2 "Trust": is a variable's file the system's CA
 * bundle, which bundle.pem holds). */
#include <errno.h>
#include <limits.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "sysca.h"

static void test_not_a_bundle(void **state) {
    (void)state;
    errno = 42;
    assert_int_equal(aor_sysca_is_bundle(NULL), 0);
    assert_int_equal(aor_sysca_is_bundle(""), 0);
    assert_int_equal(aor_sysca_is_bundle("/nonexistent/ca.pem"), 0);
    assert_int_equal(errno, 42);
    assert_int_equal(aor_sysca_is_bundle("/etc/ssl/certs"), 0); /* a directory */
    assert_int_equal(aor_sysca_is_bundle("/etc/hostname"), 0);
}

static void test_the_bundle_itself_and_links_but_not_copies(void **state) {
    (void)state;
    struct stat st;
    if (stat(AOR_SYSCA_BUNDLE, &st) != 0)
        skip(); /* no ca-certificates on this machine */
    char dir[] = "/tmp/aor-test-syscaXXXXXX";
    assert_non_null(mkdtemp(dir));
    char link[PATH_MAX], copy[PATH_MAX];
    snprintf(link, sizeof link, "%s/link.pem", dir);
    snprintf(copy, sizeof copy, "%s/copy.pem", dir);
    assert_int_equal(symlink(AOR_SYSCA_BUNDLE, link), 0);
    FILE *f = fopen(copy, "w");
    assert_non_null(f);
    fputs("-----BEGIN CERTIFICATE-----\n-----END CERTIFICATE-----\n", f);
    fclose(f);
    errno = 7;
    assert_int_equal(aor_sysca_is_bundle(AOR_SYSCA_BUNDLE), 1);
    assert_int_equal(errno, 7);
    assert_int_equal(aor_sysca_is_bundle(link), 1);
    assert_int_equal(aor_sysca_is_bundle(copy), 0);
    unlink(link);
    unlink(copy);
    rmdir(dir);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_not_a_bundle),
        cmocka_unit_test(test_the_bundle_itself_and_links_but_not_copies),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
