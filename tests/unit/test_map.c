/* Generic string-pair hash map (common/map.h). */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include "map.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A value that owns its key strings, as the state tables do. */
typedef struct {
    int id;
    char a[24];
    char b[24];
} item;

static item *item_new(int id, const char *a, const char *b) {
    item *it = calloc(1, sizeof *it);
    assert_non_null(it);
    it->id = id;
    assert_true((size_t)snprintf(it->a, sizeof it->a, "%s", a) < sizeof it->a);
    assert_true((size_t)snprintf(it->b, sizeof it->b, "%s", b) < sizeof it->b);
    return it;
}

static void test_put_get_remove(void **state) {
    aor_map *m = aor_map_new();
    assert_non_null(m);
    assert_null(aor_map_get(m, "p", "k"));
    assert_null(aor_map_remove(m, "p", "k"));
    item *x = item_new(1, "p", "k");
    void *old = (void *)1;
    assert_int_equal(aor_map_put(m, x->a, x->b, x, &old), 0);
    assert_null(old);
    assert_int_equal(aor_map_count(m), 1);
    assert_ptr_equal(aor_map_get(m, "p", "k"), x);
    assert_null(aor_map_get(m, "p", "K"));
    assert_null(aor_map_get(m, "pk", ""));
    assert_null(aor_map_get(m, "p", NULL));
    assert_ptr_equal(aor_map_remove(m, "p", "k"), x);
    assert_int_equal(aor_map_count(m), 0);
    assert_null(aor_map_get(m, "p", "k"));
    free(x);
    aor_map_free(m, free);
}

/* (a, NULL) and (a, "") are one key; ("x", "y") and ("xy", "") are two. */
static void test_key_forms(void **state) {
    aor_map *m = aor_map_new();
    assert_non_null(m);
    item *x = item_new(1, "xy", "");
    item *y = item_new(2, "x", "y");
    assert_int_equal(aor_map_put(m, x->a, NULL, x, NULL), 0);
    assert_int_equal(aor_map_put(m, y->a, y->b, y, NULL), 0);
    assert_int_equal(aor_map_count(m), 2);
    assert_ptr_equal(aor_map_get(m, "xy", ""), x);
    assert_ptr_equal(aor_map_get(m, "xy", NULL), x);
    assert_ptr_equal(aor_map_get(m, "x", "y"), y);
    aor_map_free(m, free);
}

/* Replacing swaps the value and the borrowed key pointers: the old value may then be
 * freed without leaving dangling keys. */
static void test_replace(void **state) {
    aor_map *m = aor_map_new();
    assert_non_null(m);
    item *x = item_new(1, "p", "k");
    item *y = item_new(2, "p", "k");
    void *old = NULL;
    assert_int_equal(aor_map_put(m, x->a, x->b, x, NULL), 0);
    assert_int_equal(aor_map_put(m, y->a, y->b, y, &old), 0);
    assert_ptr_equal(old, x);
    memset(x, 'Z', sizeof *x); /* would break lookups if the map still used x's keys */
    free(x);
    assert_int_equal(aor_map_count(m), 1);
    assert_ptr_equal(aor_map_get(m, "p", "k"), y);
    aor_map_free(m, free);
}

static void test_einval(void **state) {
    aor_map *m = aor_map_new();
    assert_non_null(m);
    errno = 0;
    assert_int_equal(aor_map_put(m, "a", "b", NULL, NULL), -1);
    assert_int_equal(errno, EINVAL);
    errno = 0;
    assert_int_equal(aor_map_put(m, NULL, "b", m, NULL), -1);
    assert_int_equal(errno, EINVAL);
    assert_int_equal(aor_map_count(m), 0);
    aor_map_free(m, NULL);
}

static int is_odd(const char *a, const char *b, void *val, void *arg) {
    int *calls = arg;
    (*calls)++;
    return ((item *)val)->id % 2;
}

static void sum_ids(const char *a, const char *b, void *val, void *arg) {
    long *sum = arg;
    const item *it = val;
    assert_string_equal(a, it->a);
    assert_string_equal(b, it->b);
    *sum += it->id;
}

/* Many entries through growth, removals mixed in, remove_if visiting each once, and
 * every survivor still reachable (backward-shift deletion keeps probe chains intact). */
static void test_many_entries(void **state) {
    enum { N = 20000 };
    aor_map *m = aor_map_new();
    assert_non_null(m);
    char a[24], b[24];
    for (int i = 0; i < N; i++) {
        snprintf(a, sizeof a, "prov%d", i % 13);
        snprintf(b, sizeof b, "key%d", i);
        item *it = item_new(i, a, b);
        assert_int_equal(aor_map_put(m, it->a, it->b, it, NULL), 0);
    }
    assert_int_equal(aor_map_count(m), N);
    /* Remove every multiple of 3 one by one. */
    for (int i = 0; i < N; i += 3) {
        snprintf(a, sizeof a, "prov%d", i % 13);
        snprintf(b, sizeof b, "key%d", i);
        item *it = aor_map_remove(m, a, b);
        assert_non_null(it);
        assert_int_equal(it->id, i);
        free(it);
    }
    size_t left = aor_map_count(m);
    assert_int_equal(left, N - (N + 2) / 3);
    int calls = 0;
    size_t removed = aor_map_remove_if(m, is_odd, &calls, free);
    assert_int_equal(calls, (int)left);
    for (int i = 0; i < N; i++) {
        snprintf(a, sizeof a, "prov%d", i % 13);
        snprintf(b, sizeof b, "key%d", i);
        item *it = aor_map_get(m, a, b);
        if (i % 3 == 0 || i % 2 == 1) {
            assert_null(it);
        } else {
            assert_non_null(it);
            assert_int_equal(it->id, i);
        }
    }
    assert_int_equal(aor_map_count(m), left - removed);
    long sum = 0, expected = 0;
    for (int i = 0; i < N; i++)
        if (i % 3 != 0 && i % 2 == 0)
            expected += i;
    aor_map_foreach(m, sum_ids, &sum);
    assert_int_equal(sum, expected);
    aor_map_free(m, free);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_put_get_remove), cmocka_unit_test(test_key_forms),
        cmocka_unit_test(test_replace),        cmocka_unit_test(test_einval),
        cmocka_unit_test(test_many_entries),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
