/* Unit tests for daemon/publish.c: which `hosts` files aord may replace or remove (only
 * its own address set, never a file of someone else's). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "publish.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

typedef struct {
    char dir[64];
    char hosts[96];
} fixture;

static int setup(void **state) {
    fixture *f = calloc(1, sizeof *f);
    if (!f)
        return -1;
    memcpy(f->dir, "/tmp/aor-pub-XXXXXX", sizeof "/tmp/aor-pub-XXXXXX");
    if (!mkdtemp(f->dir)) {
        free(f);
        return -1;
    }
    snprintf(f->hosts, sizeof f->hosts, "%s/hosts", f->dir);
    *state = f;
    return 0;
}

static int teardown(void **state) {
    fixture *f = *state;
    char other[128];
    snprintf(other, sizeof other, "%s/other", f->dir);
    unlink(f->hosts);
    unlink(other);
    rmdir(f->dir);
    free(f);
    return 0;
}

static void put(const char *path, const char *text) {
    FILE *fp = fopen(path, "w");
    assert_non_null(fp);
    fputs(text, fp);
    assert_int_equal(fclose(fp), 0);
}

static char *get(const char *path) {
    static char buf[256];
    FILE *fp = fopen(path, "r");
    assert_non_null(fp);
    size_t n = fread(buf, 1, sizeof buf - 1, fp);
    buf[n] = '\0';
    fclose(fp);
    return buf;
}

static void test_absent_is_fine(void **state) {
    fixture *f = *state;
    char err[512] = "";
    assert_int_equal(aor_publish_check_dir(f->dir, err, sizeof err), 0);
    assert_int_equal(aor_publish_remove(f->dir), 0);
}

static void test_own_file_replaced_and_removed(void **state) {
    fixture *f = *state;
    char err[512] = "";
    put(f->hosts, "aor-hosts 1\nh api.openai.com 443\n");
    assert_int_equal(aor_publish_check_dir(f->dir, err, sizeof err), 0);
    assert_int_equal(aor_publish_remove(f->dir), 1);
    assert_int_equal(access(f->hosts, F_OK), -1);
}

static void test_foreign_file_kept(void **state) {
    fixture *f = *state;
    char err[512] = "";
    put(f->hosts, "127.0.0.1 myhost\n");
    assert_int_equal(aor_publish_check_dir(f->dir, err, sizeof err), -1);
    assert_non_null(strstr(err, f->hosts));
    assert_non_null(strstr(err, "is not aord's published address set"));
    assert_int_equal(aor_publish_remove(f->dir), 0);
    assert_string_equal(get(f->hosts), "127.0.0.1 myhost\n");
}

static void test_short_and_empty_files_are_foreign(void **state) {
    fixture *f = *state;
    char err[512] = "";
    put(f->hosts, "aor-host");
    assert_int_equal(aor_publish_check_dir(f->dir, err, sizeof err), -1);
    put(f->hosts, "");
    assert_int_equal(aor_publish_check_dir(f->dir, err, sizeof err), -1);
    assert_int_equal(aor_publish_remove(f->dir), 0);
    assert_int_equal(access(f->hosts, F_OK), 0);
}

static void test_symlink_is_foreign(void **state) {
    fixture *f = *state;
    char err[512] = "", other[128];
    snprintf(other, sizeof other, "%s/other", f->dir);
    put(other, "aor-hosts 1\n");
    assert_int_equal(symlink(other, f->hosts), 0);
    assert_int_equal(aor_publish_check_dir(f->dir, err, sizeof err), -1);
    assert_non_null(strstr(err, f->hosts));
    assert_int_equal(aor_publish_remove(f->dir), 0);
    struct stat st;
    assert_int_equal(lstat(f->hosts, &st), 0);
    assert_true(S_ISLNK(st.st_mode));
}

static void test_directory_named_hosts_is_foreign(void **state) {
    fixture *f = *state;
    char err[512] = "";
    assert_int_equal(mkdir(f->hosts, 0700), 0);
    assert_int_equal(aor_publish_check_dir(f->dir, err, sizeof err), -1);
    assert_int_equal(aor_publish_remove(f->dir), 0);
    assert_int_equal(rmdir(f->hosts), 0);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_absent_is_fine, setup, teardown),
        cmocka_unit_test_setup_teardown(test_own_file_replaced_and_removed, setup, teardown),
        cmocka_unit_test_setup_teardown(test_foreign_file_kept, setup, teardown),
        cmocka_unit_test_setup_teardown(test_short_and_empty_files_are_foreign, setup, teardown),
        cmocka_unit_test_setup_teardown(test_symlink_is_foreign, setup, teardown),
        cmocka_unit_test_setup_teardown(test_directory_named_hosts_is_foreign, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
