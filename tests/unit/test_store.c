/* Unit tests for common/store.c: event log, replay, compaction (spec §4.5). */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <errno.h>
#include <signal.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "backoff.h"
#include "breaker.h"
#include "sticky.h"
#include "store.h"

#define NOW 1700000000.0

static const aor_backoff_params bo_params = {5, 86400, 120, 120};
static const aor_breaker_params br_params = {3, 60, 30};

typedef struct {
    char dir[256];  /* temporary directory of this test */
    char path[320]; /* dir/state/nested/aor.db (parents do not exist yet) */
} fixture;

static int setup(void **state) {
    fixture *f = calloc(1, sizeof *f);
    if (f == NULL)
        return -1;
    snprintf(f->dir, sizeof f->dir, "/tmp/aor-test-store-XXXXXX");
    if (mkdtemp(f->dir) == NULL) {
        free(f);
        return -1;
    }
    snprintf(f->path, sizeof f->path, "%s/state/nested/aor.db", f->dir);
    *state = f;
    return 0;
}

static int teardown(void **state) {
    fixture *f = *state;
    char cmd[400];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", f->dir);
    if (system(cmd) != 0)
        fprintf(stderr, "could not remove %s\n", f->dir);
    free(f);
    return 0;
}

/* Fresh in-memory tables, as aord has them at start. */
typedef struct {
    aor_backoff *b;
    aor_breaker *br;
    aor_sticky *s;
} tables;

static void tables_new(tables *t) {
    t->b = aor_backoff_new(&bo_params);
    t->br = aor_breaker_new(&br_params);
    t->s = aor_sticky_new();
    assert_non_null(t->b);
    assert_non_null(t->br);
    assert_non_null(t->s);
}

static void tables_free(tables *t) {
    aor_backoff_free(t->b);
    aor_breaker_free(t->br);
    aor_sticky_free(t->s);
}

static aor_store *open_ok(const char *path) {
    char err[512] = "";
    aor_store *st = aor_store_open(path, err, sizeof err);
    if (st == NULL)
        fail_msg("open %s: %s", path, err);
    return st;
}

/* Opens path, replays into fresh tables t at now, closes. */
static void reopen_replay(const char *path, tables *t, double now) {
    aor_store *st = open_ok(path);
    tables_new(t);
    if (aor_store_replay(st, t->b, t->br, t->s, now, NULL) != 0)
        fail_msg("replay: %s", aor_store_errmsg(st));
    assert_int_equal(aor_store_writes(st), 0); /* replay is not an event */
    aor_store_close(st);
}

/* Counts rows of a table with a separate SQLite connection (as `aor status` would). */
static long count_rows(const char *path, const char *table) {
    sqlite3 *db = NULL;
    sqlite3_stmt *q = NULL;
    char sql[128];
    long n = -1;
    snprintf(sql, sizeof sql, "SELECT count(*) FROM %s", table);
    assert_int_equal(sqlite3_open_v2(path, &db, SQLITE_OPEN_READONLY, NULL), SQLITE_OK);
    assert_int_equal(sqlite3_prepare_v2(db, sql, -1, &q, NULL), SQLITE_OK);
    if (sqlite3_step(q) == SQLITE_ROW)
        n = sqlite3_column_int64(q, 0);
    sqlite3_finalize(q);
    sqlite3_close(db);
    return n;
}

static void exec_raw(const char *path, const char *sql) {
    sqlite3 *db = NULL;
    assert_int_equal(sqlite3_open(path, &db), SQLITE_OK);
    char *msg = NULL;
    if (sqlite3_exec(db, sql, NULL, NULL, &msg) != SQLITE_OK)
        fail_msg("%s: %s", sql, msg);
    sqlite3_close(db);
}

static aor_backoff_row bo_row(const char *p, const char *k, double until, double window, int n,
                              aor_kind kind, double last) {
    aor_backoff_row r = {p, k, until, window, n, kind, last};
    return r;
}

static aor_sticky_row st_row(const char *c, const char *m, const char *p, const char *k,
                             double last, int streak) {
    aor_sticky_row r = {c, m, p, k, last, streak};
    return r;
}

static void assert_backoff(const tables *t, const char *p, const char *k, double until,
                           double window, int n, aor_kind kind, double last) {
    aor_backoff_row r;
    if (!aor_backoff_get(t->b, p, k, &r))
        fail_msg("no backoff row for %s/%s", p, k);
    assert_true(r.until == until);
    assert_true(r.window_s == window);
    assert_int_equal(r.failure_count, n);
    assert_int_equal(r.last_error_kind, kind);
    assert_true(r.last_failure == last);
}

static void assert_no_backoff(const tables *t, const char *p, const char *k) {
    aor_backoff_row r;
    if (aor_backoff_get(t->b, p, k, &r))
        fail_msg("unexpected backoff row for %s/%s", p, k);
}

static void assert_sticky(const tables *t, const char *c, const char *m, const char *p,
                          const char *k, double last, int streak) {
    aor_sticky_row r;
    if (!aor_sticky_get(t->s, c, m, &r))
        fail_msg("no sticky for %s/%s", c, m);
    assert_string_equal(r.provider, p);
    assert_string_equal(r.key, k);
    assert_true(r.last_success == last);
    assert_int_equal(r.streak, streak);
}

static void assert_open_until(tables *t, const char *p, const char *m, double until, double now) {
    aor_breaker_row r;
    if (!aor_breaker_get(t->br, p, m, now, &r))
        fail_msg("no circuit for %s/%s", p, m);
    assert_int_equal(r.state, AOR_BREAKER_OPEN);
    assert_true(r.until == until);
    assert_int_equal(aor_breaker_allow(t->br, p, m, now), 0);
}

/* Logs a fixed scenario: the state after it is checked by check_scenario. */
static void log_scenario(aor_store *st) {
    aor_backoff_row r;
    r = bo_row("openai", "k1", NOW + 5, 5, 1, AOR_KIND_RATE, NOW);
    assert_int_equal(aor_store_log_backoff(st, &r), 0);
    r = bo_row("openai", "k1", NOW + 20, 10, 2, AOR_KIND_TRANSIENT, NOW + 10); /* newest wins */
    assert_int_equal(aor_store_log_backoff(st, &r), 0);
    r = bo_row("openai", "k2", NOW + 120, 120, 1, AOR_KIND_QUOTA, NOW + 1);
    assert_int_equal(aor_store_log_backoff(st, &r), 0);
    assert_int_equal(aor_store_log_success(st, "openai", "k2", NOW + 2), 0); /* removes k2 */
    r = bo_row("anthropic", "a1", NOW + 100, 120, 1, AOR_KIND_AUTH, NOW - 20);
    assert_int_equal(aor_store_log_backoff(st, &r), 0);
    assert_int_equal(aor_store_log_breaker_open(st, "openai", "gpt-4o", NOW + 30, NOW), 0);
    assert_int_equal(aor_store_log_breaker_open(st, "anthropic", "claude", NOW + 30, NOW), 0);
    assert_int_equal(aor_store_log_breaker_close(st, "anthropic", "claude", NOW + 1), 0);
    aor_sticky_row s = st_row("c0ffee", "gpt-4o", "openai", "k2", NOW + 3, 1);
    assert_int_equal(aor_store_log_sticky(st, &s), 0);
    s = st_row("c0ffee", "gpt-4o", "openai", "k1", NOW + 4, 2); /* newest wins */
    assert_int_equal(aor_store_log_sticky(st, &s), 0);
    s = st_row("beef", "", "anthropic", "a1", NOW + 5, 1); /* request without a model */
    assert_int_equal(aor_store_log_sticky(st, &s), 0);
}

static void check_scenario(tables *t, double now) {
    assert_backoff(t, "openai", "k1", NOW + 20, 10, 2, AOR_KIND_TRANSIENT, NOW + 10);
    assert_no_backoff(t, "openai", "k2");
    assert_backoff(t, "anthropic", "a1", NOW + 100, 120, 1, AOR_KIND_AUTH, NOW - 20);
    assert_open_until(t, "openai", "gpt-4o", NOW + 30, now);
    assert_int_equal(aor_breaker_get(t->br, "anthropic", "claude", now, NULL), 0);
    assert_int_equal(aor_sticky_count(t->s), 2);
    assert_sticky(t, "c0ffee", "gpt-4o", "openai", "k1", NOW + 4, 2);
    assert_sticky(t, "beef", "", "anthropic", "a1", NOW + 5, 1);
}

/* Parent dirs are created 0700, the file 0600, WAL is on, the schema is there. */
static void test_open_creates_dirs_and_schema(void **state) {
    fixture *f = *state;
    aor_store *st = open_ok(f->path);
    struct stat sb;
    char dir[400];

    snprintf(dir, sizeof dir, "%s/state/nested", f->dir);
    assert_int_equal(stat(dir, &sb), 0);
    assert_true(S_ISDIR(sb.st_mode));
    assert_int_equal(sb.st_mode & 0777, 0700);
    snprintf(dir, sizeof dir, "%s/state", f->dir);
    assert_int_equal(stat(dir, &sb), 0);
    assert_int_equal(sb.st_mode & 0777, 0700);
    assert_int_equal(stat(f->path, &sb), 0);
    assert_int_equal(sb.st_mode & 0777, 0600);

    sqlite3 *db = NULL;
    sqlite3_stmt *q = NULL;
    assert_int_equal(sqlite3_open(f->path, &db), SQLITE_OK);
    assert_int_equal(sqlite3_prepare_v2(db, "PRAGMA journal_mode", -1, &q, NULL), SQLITE_OK);
    assert_int_equal(sqlite3_step(q), SQLITE_ROW);
    assert_string_equal((const char *)sqlite3_column_text(q, 0), "wal");
    sqlite3_finalize(q);
    sqlite3_close(db);
    assert_int_equal(count_rows(f->path, "backoff"), 0);
    assert_int_equal(count_rows(f->path, "sticky"), 0);
    assert_int_equal(count_rows(f->path, "breakers"), 0);
    assert_int_equal(count_rows(f->path, "state_events"), 0);
    aor_store_close(st);
}

/* Each log_* call is one committed event; failed calls do not count. */
static void test_writes_counter(void **state) {
    fixture *f = *state;
    aor_store *st = open_ok(f->path);
    assert_int_equal(aor_store_writes(st), 0);
    log_scenario(st);
    assert_int_equal(aor_store_writes(st), 11);
    /* Committed, visible to another connection while the store is still open. */
    assert_int_equal(count_rows(f->path, "state_events"), 11);
    assert_int_equal(aor_store_log_success(st, NULL, "k", NOW), -1);
    assert_int_equal(errno, EINVAL);
    assert_non_null(strstr(aor_store_errmsg(st), "provider"));
    assert_int_equal(aor_store_log_reset(st, NULL, NOW), 0);
    assert_int_equal(aor_store_writes(st), 12);
    aor_store_close(st);
    assert_int_equal(aor_store_writes(NULL), 0);
}

/* Events logged, store closed, reopened: replay rebuilds the state, compacts the log into
 * the tables, and a second replay from the compacted tables gives the same state. */
static void test_replay_and_compaction(void **state) {
    fixture *f = *state;
    tables t;
    aor_store *st = open_ok(f->path);
    log_scenario(st);
    aor_store_close(st);

    reopen_replay(f->path, &t, NOW + 6);
    check_scenario(&t, NOW + 6);
    tables_free(&t);
    assert_int_equal(count_rows(f->path, "state_events"), 0);
    assert_int_equal(count_rows(f->path, "backoff"), 2);
    assert_int_equal(count_rows(f->path, "breakers"), 1);
    assert_int_equal(count_rows(f->path, "sticky"), 2);

    reopen_replay(f->path, &t, NOW + 6);
    check_scenario(&t, NOW + 6);
    tables_free(&t);
}

/* New events after a compaction apply on top of the compacted tables. */
static void test_events_after_compaction(void **state) {
    fixture *f = *state;
    tables t;
    aor_store *st = open_ok(f->path);
    log_scenario(st);
    aor_store_close(st);
    reopen_replay(f->path, &t, NOW + 6);
    tables_free(&t);

    st = open_ok(f->path);
    assert_int_equal(aor_store_log_success(st, "openai", "k1", NOW + 7), 0);
    aor_backoff_row r = bo_row("openai", "k3", NOW + 12, 5, 1, AOR_KIND_RATE, NOW + 7);
    assert_int_equal(aor_store_log_backoff(st, &r), 0);
    assert_int_equal(aor_store_log_breaker_close(st, "openai", "gpt-4o", NOW + 7), 0);
    aor_sticky_row s = st_row("c0ffee", "gpt-4o", "openai", "k3", NOW + 8, 1);
    assert_int_equal(aor_store_log_sticky(st, &s), 0);
    aor_store_close(st);

    reopen_replay(f->path, &t, NOW + 9);
    assert_no_backoff(&t, "openai", "k1");
    assert_backoff(&t, "openai", "k3", NOW + 12, 5, 1, AOR_KIND_RATE, NOW + 7);
    assert_backoff(&t, "anthropic", "a1", NOW + 100, 120, 1, AOR_KIND_AUTH, NOW - 20);
    assert_int_equal(aor_breaker_allow(t.br, "openai", "gpt-4o", NOW + 9), 1);
    assert_sticky(&t, "c0ffee", "gpt-4o", "openai", "k3", NOW + 8, 1);
    assert_sticky(&t, "beef", "", "anthropic", "a1", NOW + 5, 1);
    tables_free(&t);
    assert_int_equal(count_rows(f->path, "breakers"), 0);
}

/* kill -9 right after the events were acknowledged (never closed, never compacted):
 * nothing is lost. */
static void test_replay_after_kill9(void **state) {
    fixture *f = *state;
    tables t;
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        char err[512];
        aor_store *st = aor_store_open(f->path, err, sizeof err);
        if (st == NULL)
            _exit(2);
        log_scenario(st);
        raise(SIGKILL);
        _exit(3);
    }
    int status = 0;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    assert_true(WIFSIGNALED(status));
    assert_int_equal(WTERMSIG(status), SIGKILL);

    reopen_replay(f->path, &t, NOW + 6);
    check_scenario(&t, NOW + 6);
    tables_free(&t);
    assert_int_equal(count_rows(f->path, "state_events"), 0);
}

/* A circuit whose open time passed is dropped at replay; a backoff row whose window
 * expired is kept (it carries the curve level, §4.2) but does not block. */
static void test_expired_entries(void **state) {
    fixture *f = *state;
    tables t;
    aor_store *st = open_ok(f->path);
    assert_int_equal(aor_store_log_breaker_open(st, "openai", "gpt-4o", NOW + 30, NOW), 0);
    assert_int_equal(aor_store_log_breaker_open(st, "openai", "gpt-4o-mini", NOW + 30.5, NOW), 0);
    aor_backoff_row r = bo_row("openai", "k1", NOW + 5, 5, 3, AOR_KIND_RATE, NOW);
    assert_int_equal(aor_store_log_backoff(st, &r), 0);
    aor_store_close(st);

    double later = NOW + 30; /* until == now counts as expired */
    reopen_replay(f->path, &t, later);
    assert_int_equal(aor_breaker_get(t.br, "openai", "gpt-4o", later, NULL), 0);
    assert_int_equal(aor_breaker_allow(t.br, "openai", "gpt-4o", later), 1);
    assert_open_until(&t, "openai", "gpt-4o-mini", NOW + 30.5, later);
    assert_backoff(&t, "openai", "k1", NOW + 5, 5, 3, AOR_KIND_RATE, NOW);
    assert_int_equal(aor_backoff_blocked(t.b, "openai", "k1", later, NULL), 0);
    tables_free(&t);
    assert_int_equal(count_rows(f->path, "breakers"), 1);
    assert_int_equal(count_rows(f->path, "backoff"), 1);

    /* The next failure escalates from the kept level (3 -> 4: 5 * 2^3 = 40 s). */
    reopen_replay(f->path, &t, later);
    aor_backoff_row out;
    assert_int_equal(aor_backoff_fail(t.b, "openai", "k1", AOR_KIND_RATE, -1, later, &out), 0);
    assert_int_equal(out.failure_count, 4);
    assert_true(out.window_s == 40);
    tables_free(&t);
}

/* What the clamped callback saw. */
typedef struct {
    int n;
    char seen[8][96]; /* "what provider/name old->new back" */
} clamps;

static void on_clamp(const aor_store_clamp *c, void *arg) {
    clamps *cl = arg;
    if (cl->n < 8)
        snprintf(cl->seen[cl->n], sizeof cl->seen[0], "%s %s/%s %.0f->%.0f%s", c->what, c->provider,
                 c->name, c->until, c->new_until, c->clock_back ? " back" : "");
    cl->n++;
}

static int clamps_has(const clamps *cl, const char *line) {
    for (int i = 0; i < cl->n && i < 8; i++)
        if (strcmp(cl->seen[i], line) == 0)
            return 1;
    return 0;
}

/* QA: a row written while the clock was far ahead (AOR_FAKE_CLOCK=4000000000, a VM
 * restore, no RTC) blocked its key for decades after a restart. Replay with limits:
 * no backoff window ends later than now + backoff_max_s, no circuit later than now +
 * open_s; a row whose last failure lies after now is taken as failing now, with what was
 * left of its window; rows within the limits are untouched; the fixed rows are what the
 * compaction stores (a second replay changes nothing). */
static void test_replay_limits(void **state) {
    fixture *f = *state;
    const double ahead = 4000000000.0;
    aor_store *st = open_ok(f->path);
    aor_backoff_row r;
    /* Failed at a clock 2.3e9 s ahead: transient, 5 s window. */
    r = bo_row("openai", "ahead", ahead + 5, 5, 1, AOR_KIND_TRANSIENT, ahead);
    assert_int_equal(aor_store_log_backoff(st, &r), 0);
    /* Failed in the past (by our clock) but ends far ahead: a damaged or huge until. */
    r = bo_row("openai", "long", NOW + 1e9, 86400, 20, AOR_KIND_RATE, NOW - 10);
    assert_int_equal(aor_store_log_backoff(st, &r), 0);
    /* Failed ahead with a window longer than the limit: cut to the limit. */
    r = bo_row("openai", "aheadlong", ahead + 5e6, 5e6, 9, AOR_KIND_RATE, ahead);
    assert_int_equal(aor_store_log_backoff(st, &r), 0);
    /* Within the limits: untouched. */
    r = bo_row("openai", "fine", NOW + 100, 120, 1, AOR_KIND_QUOTA, NOW - 20);
    assert_int_equal(aor_store_log_backoff(st, &r), 0);
    assert_int_equal(aor_store_log_breaker_open(st, "openai", "gpt-4o", ahead + 30, ahead), 0);
    assert_int_equal(aor_store_log_breaker_open(st, "openai", "gpt-4o-mini", NOW + 20, NOW - 10),
                     0);
    aor_store_close(st);
    /* And rows of the compacted table, not only events: one more from the future. */
    exec_raw(f->path, "INSERT INTO backoff VALUES('router', 'tab', 4000000060, 60, 4, 'rate',"
                      " 4000000000)");
    exec_raw(f->path, "INSERT INTO breakers VALUES('router', 'm', 4000000030)");

    clamps cl = {0};
    aor_store_limits lim = {86400, 30, on_clamp, &cl};
    tables t;
    st = open_ok(f->path);
    tables_new(&t);
    assert_int_equal(aor_store_replay(st, t.b, t.br, t.s, NOW, &lim), 0);
    aor_store_close(st);
    assert_backoff(&t, "openai", "ahead", NOW + 5, 5, 1, AOR_KIND_TRANSIENT, NOW);
    assert_backoff(&t, "openai", "long", NOW + 86400, 86400, 20, AOR_KIND_RATE, NOW - 10);
    assert_backoff(&t, "openai", "aheadlong", NOW + 86400, 86400, 9, AOR_KIND_RATE, NOW);
    assert_backoff(&t, "openai", "fine", NOW + 100, 120, 1, AOR_KIND_QUOTA, NOW - 20);
    assert_backoff(&t, "router", "tab", NOW + 60, 60, 4, AOR_KIND_RATE, NOW);
    assert_open_until(&t, "openai", "gpt-4o", NOW + 30, NOW);
    assert_open_until(&t, "openai", "gpt-4o-mini", NOW + 20, NOW);
    assert_open_until(&t, "router", "m", NOW + 30, NOW);
    assert_int_equal(cl.n, 6);
    assert_true(clamps_has(&cl, "backoff openai/ahead 4000000005->1700000005 back"));
    assert_true(clamps_has(&cl, "backoff openai/long 2700000000->1700086400"));
    assert_true(clamps_has(&cl, "circuit openai/gpt-4o 4000000030->1700000030"));
    assert_true(clamps_has(&cl, "circuit router/m 4000000030->1700000030"));
    tables_free(&t);

    /* Stored as fixed: a replay without limits sees the same rows. */
    reopen_replay(f->path, &t, NOW);
    assert_backoff(&t, "openai", "ahead", NOW + 5, 5, 1, AOR_KIND_TRANSIENT, NOW);
    assert_backoff(&t, "router", "tab", NOW + 60, 60, 4, AOR_KIND_RATE, NOW);
    assert_open_until(&t, "router", "m", NOW + 30, NOW);
    tables_free(&t);

    /* Infinite times (a damaged file) are limited too; last_failure +inf is taken as now. */
    exec_raw(f->path, "UPDATE backoff SET until = 9e999 WHERE \"key\" = 'fine';"
                      "UPDATE backoff SET until = 9e999, last_failure = 9e999 WHERE \"key\" = "
                      "'tab'; UPDATE breakers SET until = 9e999 WHERE model = 'm'");
    cl.n = 0;
    st = open_ok(f->path);
    tables_new(&t);
    assert_int_equal(aor_store_replay(st, t.b, t.br, t.s, NOW, &lim), 0);
    aor_store_close(st);
    assert_int_equal(cl.n, 3);
    assert_backoff(&t, "openai", "fine", NOW + 86400, 120, 1, AOR_KIND_QUOTA, NOW - 20);
    assert_backoff(&t, "router", "tab", NOW, 60, 4, AOR_KIND_RATE, NOW);
    assert_int_equal(aor_backoff_blocked(t.b, "router", "tab", NOW, NULL), 0);
    assert_open_until(&t, "router", "m", NOW + 30, NOW);
    tables_free(&t);
}

/* reset of one provider removes its backoff rows and circuits, not the others'; reset of
 * all removes everything but sticky rows. Later events still apply. */
static void test_reset_events(void **state) {
    fixture *f = *state;
    tables t;
    aor_store *st = open_ok(f->path);
    aor_backoff_row r = bo_row("openai", "k1", NOW + 5, 5, 1, AOR_KIND_RATE, NOW);
    assert_int_equal(aor_store_log_backoff(st, &r), 0);
    r = bo_row("anthropic", "a1", NOW + 5, 5, 1, AOR_KIND_RATE, NOW);
    assert_int_equal(aor_store_log_backoff(st, &r), 0);
    assert_int_equal(aor_store_log_breaker_open(st, "openai", "gpt-4o", NOW + 30, NOW), 0);
    assert_int_equal(aor_store_log_breaker_open(st, "anthropic", "claude", NOW + 30, NOW), 0);
    aor_sticky_row s = st_row("c0ffee", "gpt-4o", "openai", "k1", NOW, 1);
    assert_int_equal(aor_store_log_sticky(st, &s), 0);
    assert_int_equal(aor_store_log_reset(st, "openai", NOW + 1), 0);
    aor_store_close(st);

    reopen_replay(f->path, &t, NOW + 2);
    assert_no_backoff(&t, "openai", "k1");
    assert_backoff(&t, "anthropic", "a1", NOW + 5, 5, 1, AOR_KIND_RATE, NOW);
    assert_int_equal(aor_breaker_allow(t.br, "openai", "gpt-4o", NOW + 2), 1);
    assert_open_until(&t, "anthropic", "claude", NOW + 30, NOW + 2);
    assert_sticky(&t, "c0ffee", "gpt-4o", "openai", "k1", NOW, 1);
    tables_free(&t);

    st = open_ok(f->path);
    assert_int_equal(aor_store_log_reset(st, NULL, NOW + 3), 0);
    r = bo_row("openai", "k9", NOW + 8, 5, 1, AOR_KIND_RATE, NOW + 3);
    assert_int_equal(aor_store_log_backoff(st, &r), 0);
    aor_store_close(st);

    reopen_replay(f->path, &t, NOW + 4);
    assert_no_backoff(&t, "anthropic", "a1");
    assert_backoff(&t, "openai", "k9", NOW + 8, 5, 1, AOR_KIND_RATE, NOW + 3);
    assert_int_equal(aor_breaker_allow(t.br, "anthropic", "claude", NOW + 4), 1);
    assert_int_equal(aor_sticky_count(t.s), 1);
    tables_free(&t);
    assert_int_equal(count_rows(f->path, "breakers"), 0);
}

/* A key reset (one provider's key, or the key with every provider) removes only those
 * backoff rows; circuits and sticky rows stay. */
static void test_key_reset_events(void **state) {
    fixture *f = *state;
    tables t;
    aor_store *st = open_ok(f->path);
    aor_backoff_row r = bo_row("openai", "k1", NOW + 5, 5, 1, AOR_KIND_RATE, NOW);
    assert_int_equal(aor_store_log_backoff(st, &r), 0);
    r = bo_row("openai", "k2", NOW + 5, 5, 1, AOR_KIND_RATE, NOW);
    assert_int_equal(aor_store_log_backoff(st, &r), 0);
    r = bo_row("router", "k1", NOW + 5, 5, 1, AOR_KIND_RATE, NOW);
    assert_int_equal(aor_store_log_backoff(st, &r), 0);
    r = bo_row("other", "k3", NOW + 5, 5, 1, AOR_KIND_RATE, NOW);
    assert_int_equal(aor_store_log_backoff(st, &r), 0);
    assert_int_equal(aor_store_log_breaker_open(st, "openai", "gpt-4o", NOW + 30, NOW), 0);
    aor_sticky_row s = st_row("c0ffee", "gpt-4o", "openai", "k1", NOW, 1);
    assert_int_equal(aor_store_log_sticky(st, &s), 0);
    assert_int_equal(aor_store_log_reset_key(st, "openai", "k2", NOW + 1), 0);
    assert_int_equal(aor_store_log_reset_key(st, NULL, "k1", NOW + 1), 0);
    assert_int_equal(aor_store_log_reset_key(st, "openai", NULL, NOW + 1), -1);
    assert_int_equal(errno, EINVAL);
    aor_store_close(st);

    reopen_replay(f->path, &t, NOW + 2);
    assert_no_backoff(&t, "openai", "k1");
    assert_no_backoff(&t, "openai", "k2");
    assert_no_backoff(&t, "router", "k1");
    assert_backoff(&t, "other", "k3", NOW + 5, 5, 1, AOR_KIND_RATE, NOW);
    assert_open_until(&t, "openai", "gpt-4o", NOW + 30, NOW + 2);
    assert_sticky(&t, "c0ffee", "gpt-4o", "openai", "k1", NOW, 1);
    tables_free(&t);
}

/* ":memory:" works (tests of other modules use it). */
static void test_memory_store(void **state) {
    tables t;
    aor_store *st = open_ok(":memory:");
    log_scenario(st);
    tables_new(&t);
    assert_int_equal(aor_store_replay(st, t.b, t.br, t.s, NOW + 6, NULL), 0);
    check_scenario(&t, NOW + 6);
    tables_free(&t);
    aor_store_close(st);
    aor_store_close(NULL);
}

/* aor_store_file_changed: the file at the path is still the one opened, until it is
 * removed or another file takes its name (QA: `rm aor.db` under aord). */
static void test_file_changed(void **state) {
    fixture *f = *state;
    aor_store *st = open_ok(f->path);
    assert_string_equal(aor_store_path(st), f->path);
    assert_int_equal(aor_store_file_changed(st), 0);
    log_scenario(st);
    assert_int_equal(aor_store_file_changed(st), 0);
    char other[400];
    snprintf(other, sizeof other, "%s.new", f->path);
    FILE *fp = fopen(other, "w");
    assert_non_null(fp);
    fclose(fp);
    assert_int_equal(rename(other, f->path), 0); /* replaced */
    assert_int_equal(aor_store_file_changed(st), 1);
    assert_int_equal(unlink(f->path), 0); /* removed */
    assert_int_equal(aor_store_file_changed(st), 1);
    aor_store_close(st);
    aor_store *mem = open_ok(":memory:");
    assert_int_equal(aor_store_file_changed(mem), 0);
    aor_store_close(mem);
    assert_int_equal(aor_store_file_changed(NULL), 0);
    assert_null(aor_store_path(NULL));
}

/* Bad locations and bad rows give errors that name what is wrong. */
static void test_errors(void **state) {
    fixture *f = *state;
    char err[512] = "";
    char path[400];

    /* A parent that is a file. */
    snprintf(path, sizeof path, "%s/file", f->dir);
    FILE *fp = fopen(path, "w");
    assert_non_null(fp);
    fclose(fp);
    snprintf(path, sizeof path, "%s/file/aor.db", f->dir);
    assert_null(aor_store_open(path, err, sizeof err));
    assert_non_null(strstr(err, path));
    assert_non_null(strstr(err, "not a directory"));

    /* A database from a newer aor. */
    aor_store *st = open_ok(f->path);
    aor_store_close(st);
    exec_raw(f->path, "PRAGMA user_version=7");
    err[0] = '\0';
    assert_null(aor_store_open(f->path, err, sizeof err));
    assert_non_null(strstr(err, "schema version 7"));
    /* Version 1 (before the sticky_drop event) is raised to 3 at open (2 added the event,
     * 3 the key_secrets table). */
    exec_raw(f->path, "PRAGMA user_version=1");
    aor_store_close(open_ok(f->path));
    sqlite3 *db = NULL;
    sqlite3_stmt *q = NULL;
    assert_int_equal(sqlite3_open(f->path, &db), SQLITE_OK);
    assert_int_equal(sqlite3_prepare_v2(db, "PRAGMA user_version", -1, &q, NULL), SQLITE_OK);
    assert_int_equal(sqlite3_step(q), SQLITE_ROW);
    assert_int_equal(sqlite3_column_int(q, 0), 3);
    sqlite3_finalize(q);
    sqlite3_close(db);

    /* An unknown event type: replay refuses, names the row, keeps the log. */
    exec_raw(f->path, "INSERT INTO state_events(id, at, type) VALUES(42, 1, 'bogus')");
    st = open_ok(f->path);
    tables t;
    tables_new(&t);
    assert_int_equal(aor_store_replay(st, t.b, t.br, t.s, NOW, NULL), -1);
    assert_non_null(strstr(aor_store_errmsg(st), "row 42"));
    assert_non_null(strstr(aor_store_errmsg(st), "bogus"));
    assert_int_equal(aor_store_replay(st, NULL, t.br, t.s, NOW, NULL), -1);
    tables_free(&t);
    aor_store_close(st);
    assert_int_equal(count_rows(f->path, "state_events"), 1);

    assert_null(aor_store_open(NULL, err, sizeof err));
}

/* Writes len bytes (head, then a fixed pseudo-random filler) to path. */
static void write_junk(const char *path, const char *head, size_t hlen, size_t len) {
    FILE *fp = fopen(path, "wb");
    assert_non_null(fp);
    unsigned x = 12345;
    for (size_t i = 0; i < len; i++) {
        x = x * 1103515245u + 12345u;
        fputc(i < hlen ? head[i] : (int)((x >> 16) & 0xff), fp);
    }
    assert_int_equal(fclose(fp), 0);
}

/* QA: a damaged state file stopped aord with SQLite's words alone ("file is not a
 * database", "database disk image is malformed"); the error now names the file and says
 * that moving it aside starts with empty state. */
static void test_damaged_file(void **state) {
    fixture *f = *state;
    char err[1024];
    aor_store *st = open_ok(f->path); /* creates the directories */
    aor_store_close(st);
    static const char header[] = "SQLite format 3"; /* with its NUL: 16 bytes */
    for (int round = 0; round < 2; round++) {
        unlink(f->path);
        write_junk(f->path, header, round ? sizeof header : 0, 8192);
        err[0] = '\0';
        assert_null(aor_store_open(f->path, err, sizeof err));
        assert_true(strstr(err, "file is not a database") != NULL ||
                    strstr(err, "database disk image is malformed") != NULL);
        assert_non_null(strstr(err, "move it aside"));
        assert_non_null(strstr(err, "empty state"));
        assert_non_null(strstr(strstr(err, "; "), f->path)); /* after SQLite's message */
    }
    /* Moved aside: a fresh store opens. */
    unlink(f->path);
    st = open_ok(f->path);
    aor_store_close(st);
    /* Other errors get no such advice. */
    char path[400];
    snprintf(path, sizeof path, "%s/dir.db", f->dir);
    assert_int_equal(mkdir(path, 0700), 0);
    err[0] = '\0';
    assert_null(aor_store_open(path, err, sizeof err));
    assert_null(strstr(err, "move it aside"));
    /* Another program's SQLite file is refused and left as it was (QA: aord added its
     * tables to it and switched it to WAL). */
    snprintf(path, sizeof path, "%s/other.db", f->dir);
    exec_raw(path, "CREATE TABLE foo(x); INSERT INTO foo VALUES(1)");
    err[0] = '\0';
    assert_null(aor_store_open(path, err, sizeof err));
    assert_non_null(strstr(err, "not an aor state file (it holds the table 'foo'"));
    assert_null(strstr(err, "move it aside"));
    assert_int_equal(count_rows(path, "foo"), 1);
    exec_raw(path, "PRAGMA user_version=1"); /* many programs set it (review) */
    err[0] = '\0';
    assert_null(aor_store_open(path, err, sizeof err));
    assert_non_null(strstr(err, "not an aor state file"));
    sqlite3 *db = NULL;
    assert_int_equal(sqlite3_open(path, &db), SQLITE_OK);
    sqlite3_stmt *q = NULL;
    assert_int_equal(sqlite3_prepare_v2(db, "PRAGMA journal_mode", -1, &q, NULL), SQLITE_OK);
    assert_int_equal(sqlite3_step(q), SQLITE_ROW);
    assert_string_equal((const char *)sqlite3_column_text(q, 0), "delete");
    sqlite3_finalize(q);
    assert_int_equal(sqlite3_prepare_v2(db,
                                        "SELECT count(*) FROM sqlite_master WHERE name = 'backoff'",
                                        -1, &q, NULL),
                     SQLITE_OK);
    assert_int_equal(sqlite3_step(q), SQLITE_ROW);
    assert_int_equal(sqlite3_column_int(q, 0), 0);
    sqlite3_finalize(q);
    sqlite3_close(db);
}

/* Many sticky rows compact in one transaction. */
static void test_many_rows(void **state) {
    fixture *f = *state;
    tables t;
    char client[32];
    aor_store *st = open_ok(f->path);
    for (int i = 0; i < 2000; i++) {
        snprintf(client, sizeof client, "client%04d", i);
        aor_sticky_row s = st_row(client, "gpt-4o", "openai", i % 2 ? "k1" : "k2", NOW + i, 1);
        assert_int_equal(aor_store_log_sticky(st, &s), 0);
    }
    aor_store_close(st);
    reopen_replay(f->path, &t, NOW);
    assert_int_equal(aor_sticky_count(t.s), 2000);
    assert_sticky(&t, "client1999", "gpt-4o", "openai", "k1", NOW + 1999, 1);
    tables_free(&t);
    assert_int_equal(count_rows(f->path, "sticky"), 2000);
    assert_int_equal(count_rows(f->path, "state_events"), 0);
}

/* A sticky_drop event removes its row at replay (the daemon logs one before a full table
 * drops a row); later events for the same (client, model) create it again. A drop
 * without client or model is a bad event, named. */
static void test_sticky_drop_events(void **state) {
    fixture *f = *state;
    tables t;
    aor_store *st = open_ok(f->path);
    aor_sticky_row a = st_row("c0ffee", "m-a", "openai", "k1", NOW, 1);
    aor_sticky_row b = st_row("c0ffee", "m-b", "openai", "k1", NOW + 1, 1);
    aor_sticky_row c = st_row("beef", "m-c", "openai", "k2", NOW + 2, 1);
    assert_int_equal(aor_store_log_sticky(st, &a), 0);
    assert_int_equal(aor_store_log_sticky(st, &b), 0);
    assert_int_equal(aor_store_log_sticky(st, &c), 0);
    assert_int_equal(aor_store_log_sticky_drop(st, "c0ffee", "m-a", NOW + 3), 0);
    assert_int_equal(aor_store_log_sticky_drop(st, "beef", "m-c", NOW + 3), 0);
    aor_sticky_row c2 = st_row("beef", "m-c", "openai", "k1", NOW + 4, 1);
    assert_int_equal(aor_store_log_sticky(st, &c2), 0);
    assert_int_equal(aor_store_log_sticky_drop(st, "nobody", "m-x", NOW + 5), 0); /* no row */
    assert_int_equal(aor_store_log_sticky_drop(st, NULL, "m-a", NOW), -1);
    assert_int_equal(errno, EINVAL);
    aor_store_close(st);

    reopen_replay(f->path, &t, NOW + 6);
    assert_int_equal(aor_sticky_count(t.s), 2);
    assert_int_equal(aor_sticky_get(t.s, "c0ffee", "m-a", NULL), 0);
    assert_sticky(&t, "c0ffee", "m-b", "openai", "k1", NOW + 1, 1);
    assert_sticky(&t, "beef", "m-c", "openai", "k1", NOW + 4, 1);
    tables_free(&t);
    assert_int_equal(count_rows(f->path, "sticky"), 2);

    exec_raw(f->path, "INSERT INTO state_events(at, type, model) VALUES(1, 'sticky_drop', 'm')");
    st = open_ok(f->path);
    tables_new(&t);
    assert_int_equal(aor_store_replay(st, t.b, t.br, t.s, NOW, NULL), -1);
    assert_non_null(strstr(aor_store_errmsg(st), "bad or unknown event (type sticky_drop)"));
    aor_store_close(st);
    tables_free(&t);
}

/* A sticky table over the maximum in the file (written by a build without one, or by
 * hand) loads the rows with the newest last_success, whatever the rows' order in the
 * file, and compaction writes back only those. */
static void test_sticky_table_over_the_maximum(void **state) {
    fixture *f = *state;
    tables t;
    aor_store_close(open_ok(f->path));
    /* Row i has last_success NOW + (i * 7919 % N): newest rows spread over the file. */
    char sql[512];
    int n = AOR_STICKY_MAX_DEFAULT + 500;
    snprintf(sql, sizeof sql,
             "WITH RECURSIVE r(i) AS (SELECT 0 UNION ALL SELECT i + 1 FROM r WHERE i < %d)"
             " INSERT INTO sticky(client, model, provider, \"key\", last_success, streak)"
             " SELECT printf('client%%05d', i), 'gpt-4o', 'openai', 'k1',"
             " %f + (i * 7919 %% %d), 1 FROM r",
             n - 1, (double)NOW, n);
    exec_raw(f->path, sql);
    assert_int_equal(count_rows(f->path, "sticky"), n);

    reopen_replay(f->path, &t, NOW + n);
    assert_int_equal(aor_sticky_count(t.s), AOR_STICKY_MAX_DEFAULT);
    int kept = 0, wrong = 0;
    for (int i = 0; i < n; i++) {
        char client[32];
        snprintf(client, sizeof client, "client%05d", i);
        int newest = (i * 7919 % n) >= n - AOR_STICKY_MAX_DEFAULT;
        int has = aor_sticky_get(t.s, client, "gpt-4o", NULL);
        kept += has;
        wrong += has != newest;
    }
    assert_int_equal(kept, AOR_STICKY_MAX_DEFAULT);
    assert_int_equal(wrong, 0);
    tables_free(&t);
    assert_int_equal(count_rows(f->path, "sticky"), AOR_STICKY_MAX_DEFAULT);
}

/* A file left mostly free pages by the start's compaction (a long-running aord appended
 * many events) is rewritten with VACUUM and shrinks (QA: 1M events, 114 MB before and
 * after compaction). */
static void test_vacuum_after_compaction(void **state) {
    fixture *f = *state;
    tables t;
    aor_store *st = open_ok(f->path);
    aor_store_close(st);
    sqlite3 *h = NULL;
    assert_int_equal(sqlite3_open(f->path, &h), SQLITE_OK);
    /* 60,000 failures of one key: ~6 MB of events, one row after compaction. */
    assert_int_equal(
        sqlite3_exec(
            h,
            "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 60000)"
            " INSERT INTO state_events(at, type, provider, \"key\", until, window_s,"
            " failure_count, kind) SELECT 1700000000 + i, 'backoff',"
            " 'a-provider-with-a-long-name-that-fills-pages', 'k', 1700000005 + i, 5,"
            " i, 'rate' FROM n",
            NULL, NULL, NULL),
        SQLITE_OK);
    sqlite3_close(h);
    struct stat before, after;
    assert_int_equal(stat(f->path, &before), 0);
    assert_true(before.st_size > 4 * 1024 * 1024);
    reopen_replay(f->path, &t, NOW);
    tables_free(&t);
    assert_int_equal(count_rows(f->path, "state_events"), 0);
    assert_int_equal(count_rows(f->path, "backoff"), 1);
    assert_int_equal(stat(f->path, &after), 0);
    assert_true(after.st_size < 1024 * 1024);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_key_reset_events, setup, teardown),
        cmocka_unit_test_setup_teardown(test_open_creates_dirs_and_schema, setup, teardown),
        cmocka_unit_test_setup_teardown(test_writes_counter, setup, teardown),
        cmocka_unit_test_setup_teardown(test_file_changed, setup, teardown),
        cmocka_unit_test_setup_teardown(test_replay_and_compaction, setup, teardown),
        cmocka_unit_test_setup_teardown(test_events_after_compaction, setup, teardown),
        cmocka_unit_test_setup_teardown(test_replay_after_kill9, setup, teardown),
        cmocka_unit_test_setup_teardown(test_expired_entries, setup, teardown),
        cmocka_unit_test_setup_teardown(test_replay_limits, setup, teardown),
        cmocka_unit_test_setup_teardown(test_reset_events, setup, teardown),
        cmocka_unit_test(test_memory_store),
        cmocka_unit_test_setup_teardown(test_errors, setup, teardown),
        cmocka_unit_test_setup_teardown(test_damaged_file, setup, teardown),
        cmocka_unit_test_setup_teardown(test_many_rows, setup, teardown),
        cmocka_unit_test_setup_teardown(test_sticky_drop_events, setup, teardown),
        cmocka_unit_test_setup_teardown(test_sticky_table_over_the_maximum, setup, teardown),
        cmocka_unit_test_setup_teardown(test_vacuum_after_compaction, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
