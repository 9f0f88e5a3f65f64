/* Unit tests for common/paths.c (spec §7 socket path, §9 file places, XDG rules). */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "paths.h"

static void expect_str(char *got, const char *want) {
    assert_non_null(got);
    assert_string_equal(got, want);
    free(got);
}

/* XDG variable when absolute; relative or empty values are ignored (XDG spec). */
static void test_xdg_dir_rule(void **state) {
    expect_str(aor_path_xdg_dir("/x/state", "/home/u", ".local/state"), "/x/state/aor");
    expect_str(aor_path_xdg_dir(NULL, "/home/u", ".local/state"), "/home/u/.local/state/aor");
    expect_str(aor_path_xdg_dir("", "/home/u", ".local/share"), "/home/u/.local/share/aor");
    expect_str(aor_path_xdg_dir("relative/dir", "/home/u", ".config"), "/home/u/.config/aor");
    errno = 0;
    assert_null(aor_path_xdg_dir(NULL, NULL, ".config"));
    assert_int_equal(errno, ENOENT);
    assert_null(aor_path_xdg_dir("rel", "also-rel", ".config"));
}

/* §7: AOR_SOCKET, else $XDG_RUNTIME_DIR/aor/aor.sock, else /tmp/aor-$UID/aor.sock. */
static void test_socket_rule(void **state) {
    expect_str(aor_path_socket_for("/my/s.sock", "/run/user/7", 7), "/my/s.sock");
    expect_str(aor_path_socket_for("", "/run/user/7", 7), "/run/user/7/aor/aor.sock");
    expect_str(aor_path_socket_for(NULL, "/run/user/7", 7), "/run/user/7/aor/aor.sock");
    expect_str(aor_path_socket_for(NULL, "run/user", 1000), "/tmp/aor-1000/aor.sock");
    expect_str(aor_path_socket_for(NULL, NULL, 0), "/tmp/aor-0/aor.sock");
}

static void test_join(void **state) {
    expect_str(aor_path_join("/a/b", "c.pem"), "/a/b/c.pem");
    expect_str(aor_path_join("/a/b/", "c.pem"), "/a/b/c.pem");
    expect_str(aor_path_join("/", "x"), "/x");
}

/* The environment wrappers follow the variables (how tests isolate themselves, §9). */
static void test_from_environment(void **state) {
    setenv("HOME", "/home/tester", 1);
    setenv("XDG_STATE_HOME", "/t/state", 1);
    setenv("XDG_DATA_HOME", "/t/data", 1);
    setenv("XDG_CONFIG_HOME", "/t/config", 1);
    setenv("XDG_RUNTIME_DIR", "/t/run", 1);
    unsetenv("AOR_SOCKET");
    expect_str(aor_path_state_dir(), "/t/state/aor");
    expect_str(aor_path_data_dir(), "/t/data/aor");
    expect_str(aor_path_config_dir(), "/t/config/aor");
    expect_str(aor_path_config_home(), "/t/config");
    expect_str(aor_path_socket(), "/t/run/aor/aor.sock");
    expect_str(aor_path_home(), "/home/tester");

    unsetenv("XDG_STATE_HOME");
    setenv("XDG_DATA_HOME", "relative", 1);
    unsetenv("XDG_CONFIG_HOME");
    unsetenv("XDG_RUNTIME_DIR");
    expect_str(aor_path_state_dir(), "/home/tester/.local/state/aor");
    expect_str(aor_path_data_dir(), "/home/tester/.local/share/aor");
    expect_str(aor_path_config_dir(), "/home/tester/.config/aor");
    expect_str(aor_path_config_home(), "/home/tester/.config");
    char want[64];
    snprintf(want, sizeof want, "/tmp/aor-%lu/aor.sock", (unsigned long)getuid());
    expect_str(aor_path_socket(), want);
    setenv("AOR_SOCKET", "/elsewhere.sock", 1);
    expect_str(aor_path_socket(), "/elsewhere.sock");
    unsetenv("AOR_SOCKET");
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_xdg_dir_rule),
        cmocka_unit_test(test_socket_rule),
        cmocka_unit_test(test_join),
        cmocka_unit_test(test_from_environment),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
