/* Unit tests for daemon/pool.c: spare objects kept for the next request (issue 5). A
 * pool is bounded, gives back what it kept, and under AddressSanitizer a kept object
 * cannot be touched unnoticed. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include "pool.h"

#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

static void test_take_empty(void **state) {
    aor_pool pl = {0};
    assert_null(aor_pool_take(&pl, 16));
}

/* What was kept comes back (last kept first), with its bytes. */
static void test_keep_take(void **state) {
    aor_pool pl = {0};
    char *a = malloc(32), *b = malloc(32);
    assert_non_null(a);
    assert_non_null(b);
    memset(a, 'a', 32);
    memset(b, 'b', 32);
    assert_int_equal(aor_pool_keep(&pl, a, 32), 1);
    assert_int_equal(aor_pool_keep(&pl, b, 32), 1);
    char *x = aor_pool_take(&pl, 32);
    assert_ptr_equal(x, b);
    assert_int_equal(x[31], 'b');
    x = aor_pool_take(&pl, 32);
    assert_ptr_equal(x, a);
    assert_int_equal(x[0], 'a');
    assert_null(aor_pool_take(&pl, 32));
    free(a);
    free(b);
}

/* At most AOR_POOL_MAX are kept: the next one stays the caller's. */
static void test_bounded(void **state) {
    aor_pool pl = {0};
    void *objs[AOR_POOL_MAX + 1];
    for (int i = 0; i < AOR_POOL_MAX; i++) {
        objs[i] = malloc(8);
        assert_non_null(objs[i]);
        assert_int_equal(aor_pool_keep(&pl, objs[i], 8), 1);
    }
    objs[AOR_POOL_MAX] = malloc(8);
    assert_int_equal(aor_pool_keep(&pl, objs[AOR_POOL_MAX], 8), 0);
    free(objs[AOR_POOL_MAX]);
    int n = 0;
    void *o;
    while ((o = aor_pool_take(&pl, 8))) {
        free(o);
        n++;
    }
    assert_int_equal(n, AOR_POOL_MAX);
}

/* Under AddressSanitizer, reading a kept object (or a buffer marked with it) is reported
 * as it would be after free: a child that does so dies. */
static void test_kept_is_poisoned(void **state) {
#if defined(__SANITIZE_ADDRESS__)
    for (int which = 0; which < 2; which++) {
        pid_t pid = fork();
        assert_true(pid >= 0);
        if (pid == 0) {
            int devnull = open("/dev/null", 1);
            if (devnull >= 0)
                dup2(devnull, 2); /* the expected report */
            aor_pool pl = {0};
            char *obj = malloc(64), *buf = malloc(64);
            aor_pool_mark(buf, 64, 1);
            aor_pool_keep(&pl, obj, 64);
            volatile char c = which ? buf[5] : obj[10];
            (void)c;
            _exit(0); /* not reported: the test fails */
        }
        int st = 0;
        assert_int_equal(waitpid(pid, &st, 0), pid);
        assert_false(WIFEXITED(st) && WEXITSTATUS(st) == 0);
    }
    /* Taken back, or unmarked, the bytes are usable again. */
    aor_pool pl = {0};
    char *obj = malloc(64), *buf = malloc(64);
    aor_pool_mark(buf, 64, 1);
    aor_pool_keep(&pl, obj, 64);
    char *back = aor_pool_take(&pl, 64);
    back[10] = 1;
    aor_pool_mark(buf, 64, 0);
    buf[5] = 1;
    free(back);
    free(buf);
#else
    skip();
#endif
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_take_empty),
        cmocka_unit_test(test_keep_take),
        cmocka_unit_test(test_bounded),
        cmocka_unit_test(test_kept_is_poisoned),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
