/* Sticky routing table per (client, model) (spec §5.4, §5.5). */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include "sticky.h"

#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#define assert_time(actual, expected)                                                              \
    do {                                                                                           \
        double a_ = (actual), e_ = (expected);                                                     \
        if (!(fabs(a_ - e_) <= 1e-9))                                                              \
            fail_msg("%s = %.9g, expected %.9g", #actual, a_, e_);                                 \
    } while (0)

#define C1 "a3f1c2d4e5b6a7980112233445566778899aabbccddeeff00112233445566778"
#define C2 "0000000000000000000000000000000000000000000000000000000000000001"

static int setup(void **state) {
    *state = aor_sticky_new();
    return *state ? 0 : -1;
}

static int teardown(void **state) {
    aor_sticky_free(*state);
    return 0;
}

/* The first success creates the sticky (persist: 1); repeated successes on the same
 * pair only count the streak (0: nothing to persist). */
static void test_create_and_streak(void **state) {
    aor_sticky *s = *state;
    aor_sticky_row row;
    assert_int_equal(aor_sticky_get(s, C1, "gpt-4o", &row), 0);
    assert_int_equal(aor_sticky_success(s, C1, "gpt-4o", "openai", "main", 100), 1);
    assert_int_equal(aor_sticky_get(s, C1, "gpt-4o", &row), 1);
    assert_string_equal(row.client, C1);
    assert_string_equal(row.model, "gpt-4o");
    assert_string_equal(row.provider, "openai");
    assert_string_equal(row.key, "main");
    assert_int_equal(row.streak, 1);
    assert_time(row.last_success, 100);

    assert_int_equal(aor_sticky_success(s, C1, "gpt-4o", "openai", "main", 110), 0);
    assert_int_equal(aor_sticky_success(s, C1, "gpt-4o", "openai", "main", 120), 0);
    assert_int_equal(aor_sticky_get(s, C1, "gpt-4o", &row), 1);
    assert_int_equal(row.streak, 3);
    assert_time(row.last_success, 120);
    assert_int_equal(aor_sticky_count(s), 1);
}

/* aor_sticky_touch refreshes only a sticky that stays: the same result as
 * aor_sticky_success then, and no change at all when the pair differs or is new. */
static void test_touch(void **state) {
    aor_sticky *s = *state;
    aor_sticky_row row;
    assert_int_equal(aor_sticky_touch(s, C1, "m", "openai", "main", 100), 0);
    assert_int_equal(aor_sticky_count(s), 0);
    assert_int_equal(aor_sticky_success(s, C1, "m", "openai", "main", 100), 1);
    assert_int_equal(aor_sticky_touch(s, C1, "m", "openai", "main", 110), 1);
    assert_int_equal(aor_sticky_touch(s, C1, "m", "openai", "main", 120), 1);
    assert_int_equal(aor_sticky_get(s, C1, "m", &row), 1);
    assert_int_equal(row.streak, 3);
    assert_time(row.last_success, 120);
    /* Another key, another provider, another model or client: untouched. */
    assert_int_equal(aor_sticky_touch(s, C1, "m", "openai", "backup", 130), 0);
    assert_int_equal(aor_sticky_touch(s, C1, "m", "anthropic", "main", 130), 0);
    assert_int_equal(aor_sticky_touch(s, C1, "other", "openai", "main", 130), 0);
    assert_int_equal(aor_sticky_touch(s, C2, "m", "openai", "main", 130), 0);
    assert_int_equal(aor_sticky_touch(s, NULL, "m", "openai", "main", 130), 0);
    assert_int_equal(aor_sticky_get(s, C1, "m", &row), 1);
    assert_string_equal(row.key, "main");
    assert_int_equal(row.streak, 3);
    assert_time(row.last_success, 120);
    assert_int_equal(aor_sticky_count(s), 1);
    /* The streak saturates as aor_sticky_success's does. */
    row.streak = INT_MAX;
    assert_int_equal(aor_sticky_restore(s, &row), 0);
    assert_int_equal(aor_sticky_touch(s, C1, "m", "openai", "main", 140), 1);
    assert_int_equal(aor_sticky_get(s, C1, "m", &row), 1);
    assert_int_equal(row.streak, INT_MAX);
}

/* The sticky moves only when another pair succeeds; the streak restarts at 1. */
static void test_moves_on_other_success(void **state) {
    aor_sticky *s = *state;
    aor_sticky_row row;
    assert_int_equal(aor_sticky_success(s, C1, "m", "openai", "main", 1), 1);
    assert_int_equal(aor_sticky_success(s, C1, "m", "openai", "main", 2), 0);
    /* Same provider, other key: moves. */
    assert_int_equal(aor_sticky_success(s, C1, "m", "openai", "backup", 3), 1);
    assert_int_equal(aor_sticky_get(s, C1, "m", &row), 1);
    assert_string_equal(row.provider, "openai");
    assert_string_equal(row.key, "backup");
    assert_int_equal(row.streak, 1);
    assert_time(row.last_success, 3);
    /* Other provider, same key name: moves. */
    assert_int_equal(aor_sticky_success(s, C1, "m", "openrouter", "backup", 4), 1);
    assert_int_equal(aor_sticky_get(s, C1, "m", &row), 1);
    assert_string_equal(row.provider, "openrouter");
    assert_int_equal(row.streak, 1);
    assert_int_equal(aor_sticky_success(s, C1, "m", "openrouter", "backup", 5), 0);
    assert_int_equal(aor_sticky_get(s, C1, "m", &row), 1);
    assert_int_equal(row.streak, 2);
    assert_int_equal(aor_sticky_count(s), 1);
}

/* Rows are per (client, model): other clients and models are independent. */
static void test_per_client_and_model(void **state) {
    aor_sticky *s = *state;
    aor_sticky_row row;
    assert_int_equal(aor_sticky_success(s, C1, "m1", "p", "k1", 1), 1);
    assert_int_equal(aor_sticky_success(s, C1, "m2", "p", "k2", 1), 1);
    assert_int_equal(aor_sticky_success(s, C2, "m1", "p", "k3", 1), 1);
    assert_int_equal(aor_sticky_get(s, C1, "m1", &row), 1);
    assert_string_equal(row.key, "k1");
    assert_int_equal(aor_sticky_get(s, C1, "m2", &row), 1);
    assert_string_equal(row.key, "k2");
    assert_int_equal(aor_sticky_get(s, C2, "m1", &row), 1);
    assert_string_equal(row.key, "k3");
    assert_int_equal(aor_sticky_get(s, C2, "m2", NULL), 0);
    assert_int_equal(aor_sticky_count(s), 3);
}

/* Strings handed out stay valid after the sticky moves (interned pairs). */
static void test_strings_survive_move(void **state) {
    aor_sticky *s = *state;
    aor_sticky_row before, after;
    assert_int_equal(aor_sticky_success(s, C1, "m", "p", "k1", 1), 1);
    assert_int_equal(aor_sticky_get(s, C1, "m", &before), 1);
    assert_int_equal(aor_sticky_success(s, C1, "m", "q", "k2", 2), 1);
    assert_int_equal(aor_sticky_get(s, C1, "m", &after), 1);
    assert_string_equal(before.provider, "p");
    assert_string_equal(before.key, "k1");
    assert_string_equal(after.provider, "q");
    /* Moving back reuses the interned pair. */
    assert_int_equal(aor_sticky_success(s, C1, "m", "p", "k1", 3), 1);
    assert_int_equal(aor_sticky_get(s, C1, "m", &after), 1);
    assert_ptr_equal(after.provider, before.provider);
    assert_ptr_equal(after.key, before.key);
}

/* Preview returns what success would, changes nothing, and points at the arguments. */
static void test_preview(void **state) {
    aor_sticky *s = *state;
    aor_sticky_row pv, row;
    const char *provider = "openai", *key = "main";
    assert_int_equal(aor_sticky_preview_success(s, C1, "m", provider, key, 10, &pv), 1);
    assert_ptr_equal(pv.provider, provider);
    assert_ptr_equal(pv.key, key);
    assert_int_equal(pv.streak, 1);
    assert_time(pv.last_success, 10);
    assert_int_equal(aor_sticky_count(s), 0);
    assert_int_equal(aor_sticky_restore(s, &pv), 0);
    assert_int_equal(aor_sticky_count(s), 1);

    assert_int_equal(aor_sticky_preview_success(s, C1, "m", provider, key, 11, &pv), 0);
    assert_int_equal(pv.streak, 2);
    assert_int_equal(aor_sticky_preview_success(s, C1, "m", "other", key, 11, &pv), 1);
    assert_int_equal(pv.streak, 1);
    assert_int_equal(aor_sticky_get(s, C1, "m", &row), 1);
    assert_string_equal(row.provider, "openai");
    assert_int_equal(row.streak, 1);
    assert_time(row.last_success, 10);

    errno = 0;
    assert_int_equal(aor_sticky_preview_success(s, C1, NULL, provider, key, 11, &pv), -1);
    assert_int_equal(errno, EINVAL);
    assert_int_equal(aor_sticky_success(s, C1, "m", NULL, key, 11), -1);
    assert_int_equal(aor_sticky_count(s), 1);
}

typedef struct {
    int n;
    double sum;
} visit_ctx;

static void count_row(const aor_sticky_row *row, void *arg) {
    visit_ctx *v = arg;
    v->n++;
    v->sum += row->last_success;
}

/* Replay puts rows back; restore overwrites, even from the table's own strings; the
 * streak saturates instead of overflowing. */
static void test_restore_foreach(void **state) {
    aor_sticky *s = *state;
    aor_sticky_row r = {
        .client = C1, .model = "m1", .provider = "p", .key = "k", .last_success = 100, .streak = 1};
    assert_int_equal(aor_sticky_restore(s, &r), 0);
    r.model = "m2";
    r.last_success = 200;
    assert_int_equal(aor_sticky_restore(s, &r), 0);
    visit_ctx v = {0};
    aor_sticky_foreach(s, count_row, &v);
    assert_int_equal(v.n, 2);
    assert_time(v.sum, 300);

    aor_sticky_row row;
    assert_int_equal(aor_sticky_get(s, C1, "m2", &row), 1);
    row.key = "k2";
    row.streak = INT_MAX;
    assert_int_equal(aor_sticky_restore(s, &row), 0);
    assert_int_equal(aor_sticky_get(s, C1, "m2", &row), 1);
    assert_string_equal(row.key, "k2");
    assert_int_equal(aor_sticky_success(s, C1, "m2", "p", "k2", 300), 0);
    assert_int_equal(aor_sticky_get(s, C1, "m2", &row), 1);
    assert_int_equal(row.streak, INT_MAX);
    assert_int_equal(aor_sticky_count(s), 2);

    aor_sticky_row bad = r;
    bad.client = NULL;
    errno = 0;
    assert_int_equal(aor_sticky_restore(s, &bad), -1);
    assert_int_equal(errno, EINVAL);
}

/* 100,000 clients, each with a sticky: all found, lookups by content. */
static void test_hundred_thousand_rows(void **state) {
    aor_sticky *s = *state;
    char client[65], key[16];
    for (int i = 0; i < 100000; i++) {
        int n = snprintf(client, sizeof client, "%064x", (unsigned)i * 2654435761u);
        assert_int_equal(n, 64);
        n = snprintf(key, sizeof key, "k%d", i % 7);
        assert_true(n > 0 && (size_t)n < sizeof key);
        assert_int_equal(aor_sticky_success(s, client, "gpt-4o", "openai", key, i), 1);
    }
    assert_int_equal(aor_sticky_count(s), 100000);
    for (int i = 0; i < 100000; i++) {
        aor_sticky_row row;
        int n = snprintf(client, sizeof client, "%064x", (unsigned)i * 2654435761u);
        assert_int_equal(n, 64);
        assert_int_equal(aor_sticky_get(s, client, "gpt-4o", &row), 1);
        assert_time(row.last_success, i);
        assert_int_equal(row.key[1] - '0', i % 7);
        assert_int_equal(aor_sticky_get(s, client, "gpt-4o-mini", NULL), 0);
    }
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_create_and_streak, setup, teardown),
        cmocka_unit_test_setup_teardown(test_touch, setup, teardown),
        cmocka_unit_test_setup_teardown(test_moves_on_other_success, setup, teardown),
        cmocka_unit_test_setup_teardown(test_per_client_and_model, setup, teardown),
        cmocka_unit_test_setup_teardown(test_strings_survive_move, setup, teardown),
        cmocka_unit_test_setup_teardown(test_preview, setup, teardown),
        cmocka_unit_test_setup_teardown(test_restore_foreach, setup, teardown),
        cmocka_unit_test_setup_teardown(test_hundred_thousand_rows, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
