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

/* 100,000 clients, each with a sticky (a new table's maximum): all found, lookups by
 * content. */
static void test_hundred_thousand_rows(void **state) {
    aor_sticky *s = *state;
    char client[65], key[16];
    assert_int_equal(aor_sticky_max(s), 100000);
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

static int has(const aor_sticky *s, const char *client, const char *model) {
    return aor_sticky_get(s, client, model, NULL);
}

/* A full table: a new row drops the least recently used one, where a use is a success
 * that created, moved or refreshed the row (touch or success), or a restore; a lookup
 * is not. aor_sticky_victim names that row beforehand, and nothing for a row that
 * exists or while there is room. */
static void test_full_table_drops_least_recently_used(void **state) {
    aor_sticky *s = *state;
    aor_sticky_set_max(s, 3);
    assert_int_equal(aor_sticky_max(s), 3);
    assert_int_equal(aor_sticky_success(s, C1, "a", "p", "k", 10), 1);
    assert_int_equal(aor_sticky_success(s, C1, "b", "p", "k", 11), 1);
    assert_int_equal(aor_sticky_victim(s, C1, "c", NULL), 0); /* room for one more */
    assert_int_equal(aor_sticky_success(s, C2, "c", "p", "k", 12), 1);
    assert_int_equal(aor_sticky_count(s), 3);

    aor_sticky_row v;
    assert_int_equal(aor_sticky_victim(s, C1, "a", &v), 0); /* exists: nothing dropped */
    assert_int_equal(aor_sticky_victim(s, C2, "d", &v), 1);
    assert_string_equal(v.client, C1);
    assert_string_equal(v.model, "a");

    /* A lookup is not a use; a refresh of "a" (touch) is: "b" is now the oldest. */
    assert_int_equal(aor_sticky_get(s, C1, "b", NULL), 1);
    assert_int_equal(aor_sticky_touch(s, C1, "a", "p", "k", 13), 1);
    assert_int_equal(aor_sticky_victim(s, C2, "d", &v), 1);
    assert_string_equal(v.model, "b");
    /* A move of "b" to another key is a use too: "c" is the oldest. */
    assert_int_equal(aor_sticky_success(s, C1, "b", "p", "k2", 14), 1);
    assert_int_equal(aor_sticky_victim(s, C2, "d", &v), 1);
    assert_string_equal(v.model, "c");

    /* Without asking first, a new row drops the oldest by itself. */
    assert_int_equal(aor_sticky_success(s, C2, "d", "p", "k", 15), 1);
    assert_int_equal(aor_sticky_count(s), 3);
    assert_false(has(s, C2, "c"));
    assert_true(has(s, C1, "a") && has(s, C1, "b") && has(s, C2, "d"));
    /* Its provider/key strings still live (interned): a row read before stays valid. */
    aor_sticky_row b;
    assert_int_equal(aor_sticky_get(s, C1, "b", &b), 1);
    assert_string_equal(b.key, "k2");
    assert_int_equal(aor_sticky_success(s, C2, "e", "p", "k", 16), 1); /* drops "a" */
    assert_false(has(s, C1, "a"));
    assert_string_equal(b.key, "k2");
    assert_int_equal(aor_sticky_count(s), 3);
}

/* aor_sticky_remove drops one row (its own strings may be the arguments); lowering the
 * maximum drops the oldest rows at once; restore counts as a use. */
static void test_remove_and_lower_max(void **state) {
    aor_sticky *s = *state;
    for (int i = 0; i < 5; i++) {
        char m[16];
        snprintf(m, sizeof m, "m%d", i);
        assert_int_equal(aor_sticky_success(s, C1, m, "p", "k", 100 + i), 1);
    }
    aor_sticky_row r;
    assert_int_equal(aor_sticky_get(s, C1, "m2", &r), 1);
    assert_int_equal(aor_sticky_remove(s, r.client, r.model), 1);
    assert_int_equal(aor_sticky_remove(s, C1, "m2"), 0);
    assert_int_equal(aor_sticky_remove(s, NULL, "m2"), 0);
    assert_int_equal(aor_sticky_count(s), 4);

    /* m0 restored as it was: now the most recently used. */
    assert_int_equal(aor_sticky_get(s, C1, "m0", &r), 1);
    aor_sticky_row copy = r;
    assert_int_equal(aor_sticky_restore(s, &copy), 0);
    aor_sticky_set_max(s, 2);
    assert_int_equal(aor_sticky_count(s), 2);
    assert_true(has(s, C1, "m0") && has(s, C1, "m4"));
    assert_false(has(s, C1, "m1") || has(s, C1, "m3"));

    aor_sticky_set_max(s, 0); /* taken as 1 */
    assert_int_equal(aor_sticky_max(s), 1);
    assert_int_equal(aor_sticky_count(s), 1);
    assert_true(has(s, C1, "m0"));
    /* Every row removed, then the list works again from empty. */
    assert_int_equal(aor_sticky_remove(s, C1, "m0"), 1);
    assert_int_equal(aor_sticky_count(s), 0);
    assert_int_equal(aor_sticky_victim(s, C1, "x", NULL), 0);
    assert_int_equal(aor_sticky_success(s, C1, "x", "p", "k", 200), 1);
    assert_int_equal(aor_sticky_success(s, C1, "y", "p", "k", 201), 1);
    assert_int_equal(aor_sticky_count(s), 1);
    assert_true(has(s, C1, "y"));
}

/* With many rows and a random mix of uses, the table never holds more than its maximum
 * and always drops exactly the row unused longest (checked against a model). */
static void test_drop_order_matches_a_model(void **state) {
    aor_sticky *s = *state;
    enum { MAXR = 50, NAMES = 200, STEPS = 20000 };
    aor_sticky_set_max(s, MAXR);
    long last_use[NAMES];
    for (int i = 0; i < NAMES; i++)
        last_use[i] = -1; /* not in the table */
    unsigned x = 12345;
    for (long step = 0; step < STEPS; step++) {
        x = x * 1103515245u + 12345u;
        int i = (int)((x >> 8) % NAMES);
        char m[24];
        snprintf(m, sizeof m, "model-%d", i);
        if (last_use[i] < 0) {
            int count = 0, oldest = -1;
            for (int j = 0; j < NAMES; j++) {
                if (last_use[j] < 0)
                    continue;
                count++;
                if (oldest < 0 || last_use[j] < last_use[oldest])
                    oldest = j;
            }
            aor_sticky_row v;
            int full = aor_sticky_victim(s, C1, m, &v);
            assert_int_equal(full, count == MAXR);
            if (full) {
                char want[24];
                snprintf(want, sizeof want, "model-%d", oldest);
                assert_string_equal(v.model, want);
                last_use[oldest] = -1;
            }
        }
        assert_true(aor_sticky_success(s, C1, m, "p", (x >> 20) % 3 ? "k" : "k2", (double)step) >=
                    0);
        last_use[i] = step;
        assert_true(aor_sticky_count(s) <= MAXR);
    }
    for (int i = 0; i < NAMES; i++) {
        char m[24];
        snprintf(m, sizeof m, "model-%d", i);
        assert_int_equal(has(s, C1, m), last_use[i] >= 0);
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
        cmocka_unit_test_setup_teardown(test_full_table_drops_least_recently_used, setup, teardown),
        cmocka_unit_test_setup_teardown(test_remove_and_lower_max, setup, teardown),
        cmocka_unit_test_setup_teardown(test_drop_order_matches_a_model, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
