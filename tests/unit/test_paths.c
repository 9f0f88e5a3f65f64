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
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
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

/* A fresh 0700 directory under /tmp for the file checks; the caller frees the name. */
static char *tmp_dir(void) {
    char *d = strdup("/tmp/aor-paths-XXXXXX");
    assert_non_null(d);
    assert_non_null(mkdtemp(d));
    return d;
}

static char *sub(const char *dir, const char *name) {
    char *p = aor_path_join(dir, name);
    assert_non_null(p);
    return p;
}

static void write_text(const char *path, const char *text) {
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs(text, f);
    fclose(f);
}

/* The state/data directory check aord applies at start, and its wording. */
static void test_dir_problem(void **state) {
    char *d = tmp_dir(), *why = (char *)"x";
    assert_int_equal(aor_path_dir_problem(d, "state directory", NULL, "chmod 700 it", &why), 0);
    assert_null(why);
    char *missing = sub(d, "nope");
    assert_int_equal(aor_path_dir_problem(missing, "state directory", NULL, NULL, &why), 1);
    assert_null(why);
    assert_int_equal(chmod(d, 0777), 0);
    assert_int_equal(aor_path_dir_problem(d, "state directory", NULL, "chmod 700 it", &why), -1);
    char want[256];
    snprintf(want, sizeof want,
             "state directory %s: writable by group or others (mode 0777); chmod 700 it", d);
    assert_string_equal(why, want);
    free(why);
    assert_int_equal(chmod(d, 0750), 0); /* group may read: fine */
    assert_int_equal(aor_path_dir_problem(d, NULL, NULL, NULL, &why), 0);
    assert_int_equal(chmod(d, 0720), 0);
    assert_int_equal(aor_path_dir_problem(d, NULL, NULL, "chmod 700 it", &why), -1);
    snprintf(want, sizeof want, "%s: writable by group or others (mode 0720); chmod 700 it", d);
    assert_string_equal(why, want);
    free(why);
    char *file = sub(d, "f");
    write_text(file, "x");
    assert_int_equal(aor_path_dir_problem(file, "data directory", NULL, NULL, &why), -1);
    snprintf(want, sizeof want, "data directory %s: not a directory", file);
    assert_string_equal(why, want);
    free(why);
    unlink(file);
    rmdir(d);
    free(file);
    free(missing);
    free(d);
}

/* What aord refuses about its socket path (daemon/listen.c), found without a change. */
static void test_socket_problem(void **state) {
    char *d = tmp_dir(), *why = NULL;
    char *sock = sub(d, "aor.sock");
    setenv("XDG_RUNTIME_DIR", "/nonexistent-run", 1);
    assert_int_equal(aor_path_socket_problem(sock, &why), 0);
    assert_null(why);
    /* relative: aord would make it in its own working directory */
    assert_int_equal(aor_path_socket_problem("rel.sock", &why), -1);
    assert_non_null(strstr(why, "socket path rel.sock is not absolute"));
    free(why);
    /* a sticky world-writable directory (/tmp-like) */
    assert_int_equal(chmod(d, 01777), 0);
    assert_int_equal(aor_path_socket_problem(sock, &why), -1);
    char want[512];
    snprintf(want, sizeof want,
             "socket directory %s: writable by group or others (mode 1777); chmod 700 it or "
             "choose a socket in a directory of your own",
             d);
    assert_string_equal(why, want);
    free(why);
    /* ... unless it is the default directory ($XDG_RUNTIME_DIR/aor), which aord
     * tightens itself: then only its owner counts */
    assert_int_equal(aor_path_is_default_socket_dir(d), 0);
    char *def = sub(d, "aor");
    assert_int_equal(mkdir(def, 0777), 0);
    assert_int_equal(chmod(def, 0777), 0);
    setenv("XDG_RUNTIME_DIR", d, 1);
    assert_int_equal(aor_path_is_default_socket_dir(def), 1);
    char *defsock = sub(def, "aor.sock");
    assert_int_equal(aor_path_socket_problem(defsock, &why), 0);
    setenv("XDG_RUNTIME_DIR", "/nonexistent-run", 1);
    assert_int_equal(aor_path_socket_problem(defsock, &why), -1);
    free(why);
    assert_int_equal(chmod(def, 0700), 0);
    /* something other than a socket at the path */
    assert_int_equal(chmod(d, 0700), 0);
    write_text(sock, "notes");
    assert_int_equal(aor_path_socket_problem(sock, &why), -1);
    snprintf(want, sizeof want,
             "socket %s: the path exists and is not a socket; refusing to replace it (remove "
             "it or choose another socket path)",
             sock);
    assert_string_equal(why, want);
    free(why);
    unlink(sock);
    /* a hosts file that is not aord's; aord's own is fine */
    char *hosts = sub(d, "hosts");
    write_text(hosts, "127.0.0.1 myhost\n");
    assert_int_equal(aor_path_socket_problem(sock, &why), -1);
    assert_non_null(strstr(why, "is not aord's published address set"));
    free(why);
    write_text(hosts, "aor-hosts 1\n");
    assert_int_equal(aor_path_socket_problem(sock, &why), 0);
    unlink(hosts);
    rmdir(def);
    rmdir(d);
    free(hosts);
    free(defsock);
    free(def);
    free(sock);
    free(d);
}

/* The line of an option, for "FILE:LINE:" messages. */
static void test_ini_line(void **state) {
    char *d = tmp_dir();
    char *f = sub(d, "a.ini");
    write_text(f, "; socket = /c\n[routing]\nsocket = /r\n\n  [ daemon ]\n"
                  "# socket = /x\nlisten = off\n  socket\t= /tmp/x.sock  \n");
    assert_int_equal(aor_path_ini_line(f, "daemon", "socket"), 8);
    assert_int_equal(aor_path_ini_line(f, "daemon", "listen"), 7);
    assert_int_equal(aor_path_ini_line(f, "daemon", "state"), 0);
    assert_int_equal(aor_path_ini_line(f, "routing", "socket"), 3);
    /* QA: names without case, and a BOM, as the loader reads them. */
    write_text(f, "\xEF\xBB\xBF[Daemon]\nlisten = off\nSocket = /tmp/x.sock\n");
    assert_int_equal(aor_path_ini_line(f, "daemon", "socket"), 3);
    write_text(f, "\xEF\xBB\xBFsocket = /a\n[daemon]\nsocket = /b\n");
    assert_int_equal(aor_path_ini_line(f, "daemon", "socket"), 3);
    char *none = sub(d, "none.ini");
    assert_int_equal(aor_path_ini_line(none, "daemon", "socket"), 0);
    unlink(f);
    rmdir(d);
    free(none);
    free(f);
    free(d);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_xdg_dir_rule), cmocka_unit_test(test_socket_rule),
        cmocka_unit_test(test_join),         cmocka_unit_test(test_from_environment),
        cmocka_unit_test(test_dir_problem),  cmocka_unit_test(test_socket_problem),
        cmocka_unit_test(test_ini_line),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
