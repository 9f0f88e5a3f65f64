/* The state store (spec §4.5): SQLite tables backoff / breakers / sticky plus the
 * write-ahead state_events log, and the replay + compaction run at start.
 * See docs/store.md for the schema and the durability argument. */
#include "store.h"

#include <sqlite3.h>

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* 2 since 2026-12-03: the `sticky_drop` event, which an aord of version 1 cannot replay
 * (it says "schema version 2 is newer" rather than "bad or unknown event"). The tables
 * are the same: a file of version 1 is raised to 2 when opened. */
#define STORE_SCHEMA_VERSION 3
#define AOR_STR_(x) #x
#define AOR_STR(x) AOR_STR_(x)

struct aor_store {
    sqlite3 *db;
    sqlite3_stmt *ins_event; /* the one INSERT every log_* call uses */
    unsigned long writes;
    char *path;
    char err[512];
    int have_id; /* a file path whose identity was taken at open (dev, ino) */
    dev_t dev;
    ino_t ino;
};

/* Columns of state_events after id, in the order ins_event binds them. */
enum {
    EV_AT = 1,
    EV_TYPE,
    EV_PROVIDER,
    EV_KEY,
    EV_MODEL,
    EV_CLIENT,
    EV_UNTIL,
    EV_WINDOW,
    EV_FAILURES,
    EV_KIND,
    EV_STREAK
};

static const char schema_sql[] =
    "CREATE TABLE IF NOT EXISTS backoff("
    " provider TEXT NOT NULL, \"key\" TEXT NOT NULL, until REAL NOT NULL,"
    " window_s REAL NOT NULL, failure_count INTEGER NOT NULL,"
    " last_error_kind TEXT NOT NULL, last_failure REAL NOT NULL,"
    " PRIMARY KEY(provider, \"key\"));"
    "CREATE TABLE IF NOT EXISTS sticky("
    " client TEXT NOT NULL, model TEXT NOT NULL, provider TEXT NOT NULL,"
    " \"key\" TEXT NOT NULL, last_success REAL NOT NULL, streak INTEGER NOT NULL DEFAULT 1,"
    " PRIMARY KEY(client, model));"
    "CREATE TABLE IF NOT EXISTS breakers("
    " provider TEXT NOT NULL, model TEXT NOT NULL, until REAL NOT NULL,"
    " PRIMARY KEY(provider, model));"
    "CREATE TABLE IF NOT EXISTS state_events("
    " id INTEGER PRIMARY KEY, at REAL NOT NULL, type TEXT NOT NULL,"
    " provider TEXT, \"key\" TEXT, model TEXT, client TEXT, until REAL, window_s REAL,"
    " failure_count INTEGER, kind TEXT, streak INTEGER);"
    /* Version 3 (2026-12-03): the fingerprints of the keys' secrets. */
    "CREATE TABLE IF NOT EXISTS key_secrets("
    " \"key\" TEXT PRIMARY KEY, fingerprint TEXT NOT NULL);";

static const char insert_event_sql[] =
    "INSERT INTO state_events(at, type, provider, \"key\", model, client, until, window_s,"
    " failure_count, kind, streak) VALUES(?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11)";

static void set_err(aor_store *st, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void set_err(aor_store *st, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    if (vsnprintf(st->err, sizeof st->err, fmt, ap) < 0)
        st->err[0] = '\0';
    va_end(ap);
}

/* Records "state store PATH: WHAT: <sqlite message>". */
static void set_sql_err(aor_store *st, const char *what) {
    set_err(st, "state store %s: %s: %s", st->path, what,
            st->db != NULL ? sqlite3_errmsg(st->db) : "no database");
}

/* 1 when path names a real file (not ":memory:", not an SQLite URI or empty). */
static int is_file_path(const char *path) {
    return path[0] != '\0' && strcmp(path, ":memory:") != 0 && strncmp(path, "file:", 5) != 0;
}

/* mkdir -p of the directory part of path, each created level with mode 0700.
 * Returns 0, or -1 with a message in err. */
static int make_parent_dirs(const char *path, char *err, size_t errlen) {
    const char *slash = strrchr(path, '/');
    if (slash == NULL || slash == path)
        return 0;
    size_t dlen = (size_t)(slash - path);
    char *dir = malloc(dlen + 1);
    if (dir == NULL) {
        snprintf(err, errlen, "state store %s: out of memory", path);
        return -1;
    }
    memcpy(dir, path, dlen);
    dir[dlen] = '\0';
    for (size_t i = 1; i <= dlen; i++) {
        if (dir[i] != '/' && dir[i] != '\0')
            continue;
        char saved = dir[i];
        dir[i] = '\0';
        struct stat sb;
        if (mkdir(dir, 0700) != 0 && errno != EEXIST) {
            snprintf(err, errlen, "state store %s: cannot create directory %s: %s", path, dir,
                     strerror(errno));
            goto fail_dir;
        }
        if (stat(dir, &sb) != 0 || !S_ISDIR(sb.st_mode)) {
            snprintf(err, errlen, "state store %s: %s is not a directory", path, dir);
            goto fail_dir;
        }
        dir[i] = saved;
    }
    free(dir);
    return 0;
fail_dir:
    free(dir);
    return -1;
}

/* Creates the database file with mode 0600 before SQLite does (SQLite would use 0644 and
 * its -wal/-shm files copy the database file's mode). */
static int precreate_file(const char *path, char *err, size_t errlen) {
    int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC | O_NOCTTY, 0600);
    if (fd < 0) {
        snprintf(err, errlen, "state store %s: cannot open: %s", path, strerror(errno));
        return -1;
    }
    close(fd);
    return 0;
}

static int exec_sql(aor_store *st, const char *sql, const char *what) {
    if (sqlite3_exec(st->db, sql, NULL, NULL, NULL) != SQLITE_OK) {
        set_sql_err(st, what);
        return -1;
    }
    return 0;
}

/* Reads the integer a PRAGMA query (sql) answers into *out; what names it in an error. */
static int pragma_int(aor_store *st, const char *sql, const char *what, long long *out) {
    sqlite3_stmt *q = NULL;
    if (sqlite3_prepare_v2(st->db, sql, -1, &q, NULL) != SQLITE_OK ||
        sqlite3_step(q) != SQLITE_ROW) {
        set_sql_err(st, what);
        sqlite3_finalize(q);
        return -1;
    }
    *out = sqlite3_column_int64(q, 0);
    sqlite3_finalize(q);
    return 0;
}

/* Reads PRAGMA user_version into *out. */
static int read_user_version(aor_store *st, int *out) {
    long long v = 0;
    if (pragma_int(st, "PRAGMA user_version", "reading schema version", &v) != 0)
        return -1;
    *out = (int)v;
    return 0;
}

/* 0 when the database is aor's or empty, or of a newer aor (refused after, by its
 * version); -1 (message set) when it holds a table aor never makes: another program's
 * SQLite file named as aor's state (QA: aord added its tables to it, and switched it to
 * WAL, silently), whatever its user_version (review: many programs set 1). */
static int refuse_foreign(aor_store *st) {
    static const char sql[] =
        "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%' AND "
        "name NOT IN ('backoff', 'sticky', 'breakers', 'state_events', 'key_secrets') LIMIT 1";
    int version = 0;
    if (read_user_version(st, &version) != 0)
        return -1;
    if (version > STORE_SCHEMA_VERSION)
        return 0;
    sqlite3_stmt *q = NULL;
    if (sqlite3_prepare_v2(st->db, sql, -1, &q, NULL) != SQLITE_OK) {
        set_sql_err(st, "reading the tables");
        return -1;
    }
    int rc = 0;
    if (sqlite3_step(q) == SQLITE_ROW) {
        const unsigned char *name = sqlite3_column_text(q, 0);
        set_err(st,
                "state store %s: not an aor state file (it holds the table '%.64s' of another "
                "program); give aord its own state file (the [daemon] state option, or "
                "XDG_STATE_HOME)",
                st->path, name ? (const char *)name : "?");
        rc = -1;
    }
    sqlite3_finalize(q);
    return rc;
}

static int setup_schema(aor_store *st) {
    int version = 0;
    /* WAL: readers (aor status) never block the writer; commits append to the -wal file.
     * synchronous=NORMAL: a commit has been write()n to the WAL before sqlite3_step
     * returns, so kill -9 of aord loses nothing committed; only an OS crash / power loss
     * can drop the newest commits (never corrupts). See docs/store.md. */
    if (sqlite3_busy_timeout(st->db, 5000) != SQLITE_OK) { /* first: the PRAGMAs may wait */
        set_sql_err(st, "setting busy timeout");
        return -1;
    }
    if (refuse_foreign(st) != 0)
        return -1; /* before the PRAGMAs: they would change another program's file */
    if (exec_sql(st, "PRAGMA journal_mode=WAL", "enabling WAL") != 0 ||
        exec_sql(st, "PRAGMA synchronous=NORMAL", "setting synchronous") != 0)
        return -1;
    if (read_user_version(st, &version) != 0)
        return -1;
    if (version > STORE_SCHEMA_VERSION) {
        set_err(st, "state store %s: schema version %d is newer than this aor (%d)", st->path,
                version, STORE_SCHEMA_VERSION);
        return -1;
    }
    if (exec_sql(st, "BEGIN IMMEDIATE", "creating schema") != 0)
        return -1;
    if (exec_sql(st, schema_sql, "creating schema") != 0 ||
        exec_sql(st, "PRAGMA user_version=" AOR_STR(STORE_SCHEMA_VERSION),
                 "setting schema version") != 0 ||
        exec_sql(st, "COMMIT", "creating schema") != 0) {
        sqlite3_exec(st->db, "ROLLBACK", NULL, NULL, NULL);
        return -1;
    }
    return 0;
}

aor_store *aor_store_open(const char *path, char *err, size_t errlen) {
    aor_store *st;
    int code, damaged;
    if (path == NULL) {
        snprintf(err, errlen, "state store: no path given");
        errno = EINVAL;
        return NULL;
    }
    st = calloc(1, sizeof *st);
    if (st == NULL)
        goto fail_oom;
    st->path = strdup(path);
    if (st->path == NULL)
        goto fail_store;
    if (is_file_path(path) &&
        (make_parent_dirs(path, err, errlen) != 0 || precreate_file(path, err, errlen) != 0))
        goto fail_path;
    if (sqlite3_open_v2(path, &st->db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_URI,
                        NULL) != SQLITE_OK) {
        set_sql_err(st, "open");
        goto fail_db;
    }
    if (setup_schema(st) != 0)
        goto fail_db;
    if (sqlite3_prepare_v3(st->db, insert_event_sql, -1, SQLITE_PREPARE_PERSISTENT, &st->ins_event,
                           NULL) != SQLITE_OK) {
        set_sql_err(st, "preparing event insert");
        goto fail_db;
    }
    struct stat sb;
    if (is_file_path(path) && stat(path, &sb) == 0) {
        st->have_id = 1;
        st->dev = sb.st_dev;
        st->ino = sb.st_ino;
    }
    return st;

fail_db:
    /* A damaged file (random bytes, garbage after the header) cannot be opened: say what
     * to do, since aord will not start until it is moved (docs/store.md). The code may be
     * gone after a ROLLBACK, the message is not. */
    code = st->db ? sqlite3_errcode(st->db) : SQLITE_OK;
    damaged = code == SQLITE_NOTADB || code == SQLITE_CORRUPT ||
              strstr(st->err, sqlite3_errstr(SQLITE_NOTADB)) != NULL ||
              strstr(st->err, sqlite3_errstr(SQLITE_CORRUPT)) != NULL;
    if (damaged && is_file_path(path))
        snprintf(err, errlen,
                 "%s; %s is damaged or not an aor state file: move it aside (with its -wal and "
                 "-shm files, if any) and aord starts with empty state, forgetting only "
                 "backoff, open circuits and sticky routes",
                 st->err, path);
    else
        snprintf(err, errlen, "%s", st->err);
    sqlite3_close(st->db);
    errno = EIO;
fail_path:
    free(st->path);
    free(st);
    return NULL;
fail_store:
    free(st);
fail_oom:
    snprintf(err, errlen, "state store %s: out of memory", path);
    errno = ENOMEM;
    return NULL;
}

void aor_store_close(aor_store *st) {
    if (st == NULL)
        return;
    sqlite3_finalize(st->ins_event);
    sqlite3_close(st->db);
    free(st->path);
    free(st);
}

int aor_store_file_changed(const aor_store *st) {
    if (st == NULL || !st->have_id)
        return 0;
    struct stat sb;
    if (stat(st->path, &sb) != 0)
        return errno == ENOENT || errno == ENOTDIR;
    return sb.st_dev != st->dev || sb.st_ino != st->ino;
}

int aor_store_set_busy_timeout(aor_store *st, int ms) {
    if (st == NULL || sqlite3_busy_timeout(st->db, ms) != SQLITE_OK)
        return -1;
    return 0;
}

const char *aor_store_path(const aor_store *st) {
    return st != NULL ? st->path : NULL;
}

unsigned long aor_store_writes(const aor_store *st) {
    return st != NULL ? st->writes : 0;
}

const char *aor_store_errmsg(const aor_store *st) {
    if (st == NULL)
        return "state store: not open";
    return st->err;
}

/* --- event log ----------------------------------------------------------------------- */

/* One event, unset fields NULL / not set. */
typedef struct {
    double at;
    const char *type;
    const char *provider, *key, *model, *client;
    int has_until, has_window, has_failures, has_streak;
    double until, window_s;
    int failure_count, streak;
    const char *kind;
} store_event;

static int bind_text(sqlite3_stmt *q, int idx, const char *s) {
    if (s == NULL)
        return sqlite3_bind_null(q, idx);
    return sqlite3_bind_text(q, idx, s, -1, SQLITE_STATIC);
}

/* Appends ev as one autocommitted INSERT. */
static int append_event(aor_store *st, const store_event *ev) {
    sqlite3_stmt *q = st->ins_event;
    int rc = SQLITE_OK;
    if (rc == SQLITE_OK)
        rc = sqlite3_bind_double(q, EV_AT, ev->at);
    if (rc == SQLITE_OK)
        rc = bind_text(q, EV_TYPE, ev->type);
    if (rc == SQLITE_OK)
        rc = bind_text(q, EV_PROVIDER, ev->provider);
    if (rc == SQLITE_OK)
        rc = bind_text(q, EV_KEY, ev->key);
    if (rc == SQLITE_OK)
        rc = bind_text(q, EV_MODEL, ev->model);
    if (rc == SQLITE_OK)
        rc = bind_text(q, EV_CLIENT, ev->client);
    if (rc == SQLITE_OK)
        rc = ev->has_until ? sqlite3_bind_double(q, EV_UNTIL, ev->until)
                           : sqlite3_bind_null(q, EV_UNTIL);
    if (rc == SQLITE_OK)
        rc = ev->has_window ? sqlite3_bind_double(q, EV_WINDOW, ev->window_s)
                            : sqlite3_bind_null(q, EV_WINDOW);
    if (rc == SQLITE_OK)
        rc = ev->has_failures ? sqlite3_bind_int(q, EV_FAILURES, ev->failure_count)
                              : sqlite3_bind_null(q, EV_FAILURES);
    if (rc == SQLITE_OK)
        rc = bind_text(q, EV_KIND, ev->kind);
    if (rc == SQLITE_OK)
        rc = ev->has_streak ? sqlite3_bind_int(q, EV_STREAK, ev->streak)
                            : sqlite3_bind_null(q, EV_STREAK);
    if (rc == SQLITE_OK)
        rc = sqlite3_step(q) == SQLITE_DONE ? SQLITE_OK : SQLITE_ERROR;
    if (rc != SQLITE_OK)
        set_sql_err(st, "appending event");
    sqlite3_reset(q);
    sqlite3_clear_bindings(q);
    if (rc != SQLITE_OK)
        return -1;
    st->writes++;
    return 0;
}

static int bad_arg(aor_store *st, const char *what) {
    if (st != NULL)
        set_err(st, "state store %s: %s", st->path, what);
    errno = EINVAL;
    return -1;
}

int aor_store_log_backoff(aor_store *st, const aor_backoff_row *row) {
    if (st == NULL || row == NULL || row->provider == NULL || row->key == NULL)
        return bad_arg(st, "backoff event without provider or key");
    store_event ev = {.at = row->last_failure,
                      .type = "backoff",
                      .provider = row->provider,
                      .key = row->key,
                      .has_until = 1,
                      .until = row->until,
                      .has_window = 1,
                      .window_s = row->window_s,
                      .has_failures = 1,
                      .failure_count = row->failure_count,
                      .kind = aor_kind_name(row->last_error_kind)};
    return append_event(st, &ev);
}

int aor_store_log_success(aor_store *st, const char *provider, const char *key, double now) {
    if (st == NULL || provider == NULL || key == NULL)
        return bad_arg(st, "success event without provider or key");
    store_event ev = {.at = now, .type = "success", .provider = provider, .key = key};
    return append_event(st, &ev);
}

int aor_store_log_breaker_open(aor_store *st, const char *provider, const char *model, double until,
                               double now) {
    if (st == NULL || provider == NULL || model == NULL)
        return bad_arg(st, "breaker event without provider or model");
    store_event ev = {.at = now,
                      .type = "breaker_open",
                      .provider = provider,
                      .model = model,
                      .has_until = 1,
                      .until = until};
    return append_event(st, &ev);
}

int aor_store_log_breaker_close(aor_store *st, const char *provider, const char *model,
                                double now) {
    if (st == NULL || provider == NULL || model == NULL)
        return bad_arg(st, "breaker event without provider or model");
    store_event ev = {.at = now, .type = "breaker_close", .provider = provider, .model = model};
    return append_event(st, &ev);
}

int aor_store_log_sticky(aor_store *st, const aor_sticky_row *row) {
    if (st == NULL || row == NULL || row->client == NULL || row->model == NULL ||
        row->provider == NULL || row->key == NULL)
        return bad_arg(st, "sticky event without client, model, provider or key");
    store_event ev = {.at = row->last_success,
                      .type = "sticky",
                      .provider = row->provider,
                      .key = row->key,
                      .model = row->model,
                      .client = row->client,
                      .has_streak = 1,
                      .streak = row->streak};
    return append_event(st, &ev);
}

int aor_store_log_sticky_drop(aor_store *st, const char *client, const char *model, double now) {
    if (st == NULL || client == NULL || model == NULL)
        return bad_arg(st, "sticky drop event without client or model");
    store_event ev = {.at = now, .type = "sticky_drop", .model = model, .client = client};
    return append_event(st, &ev);
}

int aor_store_log_reset(aor_store *st, const char *provider, double now) {
    if (st == NULL)
        return bad_arg(st, "no store");
    store_event ev = {.at = now, .type = "reset", .provider = provider};
    return append_event(st, &ev);
}

int aor_store_log_reset_key(aor_store *st, const char *provider, const char *key, double now) {
    if (st == NULL || key == NULL)
        return bad_arg(st, "key reset event without key");
    store_event ev = {.at = now, .type = "reset", .provider = provider, .key = key};
    return append_event(st, &ev);
}

/* --- key fingerprints ---------------------------------------------------------------- */

int aor_store_key_fingerprint(aor_store *st, const char *key, char *out, size_t outlen) {
    if (st == NULL || key == NULL || out == NULL || outlen == 0)
        return bad_arg(st, "key fingerprint lookup without key");
    sqlite3_stmt *q = NULL;
    if (sqlite3_prepare_v2(st->db, "SELECT fingerprint FROM key_secrets WHERE \"key\" = ?1", -1, &q,
                           NULL) != SQLITE_OK ||
        sqlite3_bind_text(q, 1, key, -1, SQLITE_STATIC) != SQLITE_OK) {
        set_sql_err(st, "reading a key fingerprint");
        sqlite3_finalize(q);
        return -1;
    }
    int rc = sqlite3_step(q);
    if (rc == SQLITE_DONE) {
        sqlite3_finalize(q);
        return 0;
    }
    const unsigned char *v = rc == SQLITE_ROW ? sqlite3_column_text(q, 0) : NULL;
    if (!v) {
        set_sql_err(st, "reading a key fingerprint");
        sqlite3_finalize(q);
        return -1;
    }
    snprintf(out, outlen, "%s", (const char *)v);
    sqlite3_finalize(q);
    return 1;
}

int aor_store_set_key_fingerprint(aor_store *st, const char *key, const char *fingerprint) {
    if (st == NULL || key == NULL || fingerprint == NULL)
        return bad_arg(st, "key fingerprint without key");
    sqlite3_stmt *q = NULL;
    if (sqlite3_prepare_v2(st->db,
                           "INSERT INTO key_secrets(\"key\", fingerprint) VALUES(?1, ?2)"
                           " ON CONFLICT(\"key\") DO UPDATE SET fingerprint = excluded.fingerprint",
                           -1, &q, NULL) != SQLITE_OK ||
        sqlite3_bind_text(q, 1, key, -1, SQLITE_STATIC) != SQLITE_OK ||
        sqlite3_bind_text(q, 2, fingerprint, -1, SQLITE_STATIC) != SQLITE_OK ||
        sqlite3_step(q) != SQLITE_DONE) {
        set_sql_err(st, "writing a key fingerprint");
        sqlite3_finalize(q);
        return -1;
    }
    sqlite3_finalize(q);
    st->writes++;
    return 0;
}

/* --- replay -------------------------------------------------------------------------- */

/* Circuits being rebuilt (few: providers x models), applied to aor_breaker at the end so
 * that expired ones can be dropped. */
typedef struct {
    char *provider;
    char *model;
    double until;
} circuit;

typedef struct {
    circuit *items;
    size_t n, cap;
} circuit_list;

static void circuits_free(circuit_list *cl) {
    for (size_t i = 0; i < cl->n; i++) {
        free(cl->items[i].provider);
        free(cl->items[i].model);
    }
    free(cl->items);
}

static void circuits_remove_at(circuit_list *cl, size_t i) {
    free(cl->items[i].provider);
    free(cl->items[i].model);
    cl->items[i] = cl->items[--cl->n];
}

/* Sets (provider, model) open until `until` (newest wins). 0 or -1 ENOMEM. */
static int circuits_set(circuit_list *cl, const char *provider, const char *model, double until) {
    for (size_t i = 0; i < cl->n; i++) {
        if (strcmp(cl->items[i].provider, provider) == 0 &&
            strcmp(cl->items[i].model, model) == 0) {
            cl->items[i].until = until;
            return 0;
        }
    }
    if (cl->n == cl->cap) {
        size_t ncap = cl->cap ? cl->cap * 2 : 8;
        circuit *ni = realloc(cl->items, ncap * sizeof *ni);
        if (ni == NULL)
            return -1;
        cl->items = ni;
        cl->cap = ncap;
    }
    circuit *c = &cl->items[cl->n];
    c->provider = strdup(provider);
    c->model = strdup(model);
    if (c->provider == NULL || c->model == NULL) {
        free(c->provider);
        free(c->model);
        return -1;
    }
    c->until = until;
    cl->n++;
    return 0;
}

/* Removes circuits of provider+model; model NULL: every circuit of provider; provider NULL:
 * all. */
static void circuits_remove(circuit_list *cl, const char *provider, const char *model) {
    for (size_t i = cl->n; i-- > 0;) {
        if (provider != NULL && strcmp(cl->items[i].provider, provider) != 0)
            continue;
        if (model != NULL && strcmp(cl->items[i].model, model) != 0)
            continue;
        circuits_remove_at(cl, i);
    }
}

typedef struct {
    aor_store *st;
    aor_backoff *b;
    aor_breaker *br;
    aor_sticky *s;
    circuit_list circuits;
} replay_ctx;

static const char *col_text(sqlite3_stmt *q, int col) {
    return (const char *)sqlite3_column_text(q, col);
}

static int oom(aor_store *st, const char *what) {
    set_err(st, "state store %s: out of memory %s", st->path, what);
    errno = ENOMEM;
    return -1;
}

/* Puts a backoff row as it is (replaces any existing row of the pair). */
static int put_backoff(replay_ctx *rc, const aor_backoff_row *row) {
    aor_backoff_success(rc->b, row->provider, row->key);
    if (aor_backoff_restore(rc->b, row) != 0)
        return oom(rc->st, "restoring a backoff row");
    return 0;
}

static int load_tables(replay_ctx *rc) {
    aor_store *st = rc->st;
    sqlite3_stmt *q = NULL;
    int step;

    if (sqlite3_prepare_v2(st->db,
                           "SELECT provider, \"key\", until, window_s, failure_count,"
                           " last_error_kind, last_failure FROM backoff",
                           -1, &q, NULL) != SQLITE_OK)
        goto fail_sql;
    while ((step = sqlite3_step(q)) == SQLITE_ROW) {
        aor_backoff_row row = {.provider = col_text(q, 0),
                               .key = col_text(q, 1),
                               .until = sqlite3_column_double(q, 2),
                               .window_s = sqlite3_column_double(q, 3),
                               .failure_count = sqlite3_column_int(q, 4),
                               .last_failure = sqlite3_column_double(q, 6)};
        const char *kind = col_text(q, 5);
        if (row.provider == NULL || row.key == NULL || kind == NULL ||
            aor_kind_parse(kind, &row.last_error_kind) != 0) {
            set_err(st, "state store %s: backoff row with bad provider/key/kind (%s)", st->path,
                    kind != NULL ? kind : "NULL");
            goto fail_stmt;
        }
        if (put_backoff(rc, &row) != 0)
            goto fail_stmt;
    }
    if (step != SQLITE_DONE)
        goto fail_sql;
    sqlite3_finalize(q);

    if (sqlite3_prepare_v2(st->db, "SELECT provider, model, until FROM breakers", -1, &q, NULL) !=
        SQLITE_OK)
        goto fail_sql;
    while ((step = sqlite3_step(q)) == SQLITE_ROW) {
        const char *p = col_text(q, 0), *m = col_text(q, 1);
        if (p == NULL || m == NULL) {
            set_err(st, "state store %s: breakers row without provider or model", st->path);
            goto fail_stmt;
        }
        if (circuits_set(&rc->circuits, p, m, sqlite3_column_double(q, 2)) != 0) {
            oom(st, "loading breakers");
            goto fail_stmt;
        }
    }
    if (step != SQLITE_DONE)
        goto fail_sql;
    sqlite3_finalize(q);

    /* Oldest first: each restored row becomes the most recently used, so the table's
     * recency order (which row a full table drops first) follows last_success. */
    if (sqlite3_prepare_v2(st->db,
                           "SELECT client, model, provider, \"key\", last_success, streak"
                           " FROM sticky ORDER BY last_success",
                           -1, &q, NULL) != SQLITE_OK)
        goto fail_sql;
    while ((step = sqlite3_step(q)) == SQLITE_ROW) {
        aor_sticky_row row = {.client = col_text(q, 0),
                              .model = col_text(q, 1),
                              .provider = col_text(q, 2),
                              .key = col_text(q, 3),
                              .last_success = sqlite3_column_double(q, 4),
                              .streak = sqlite3_column_int(q, 5)};
        if (row.client == NULL || row.model == NULL || row.provider == NULL || row.key == NULL) {
            set_err(st, "state store %s: sticky row with a NULL column", st->path);
            goto fail_stmt;
        }
        if (aor_sticky_restore(rc->s, &row) != 0) {
            oom(st, "restoring a sticky row");
            goto fail_stmt;
        }
    }
    if (step != SQLITE_DONE)
        goto fail_sql;
    sqlite3_finalize(q);
    return 0;

fail_sql:
    set_sql_err(st, "loading state tables");
fail_stmt:
    sqlite3_finalize(q);
    return -1;
}

/* Applies one state_events row (columns as in the SELECT of replay_events). */
static int apply_event(replay_ctx *rc, sqlite3_stmt *q) {
    aor_store *st = rc->st;
    long long id = sqlite3_column_int64(q, 0);
    double at = sqlite3_column_double(q, 1);
    const char *type = col_text(q, 2);
    const char *provider = col_text(q, 3), *key = col_text(q, 4);
    const char *model = col_text(q, 5), *client = col_text(q, 6);
    int has_until = sqlite3_column_type(q, 7) != SQLITE_NULL;
    double until = sqlite3_column_double(q, 7);
    const char *kind = col_text(q, 10);

    if (type == NULL)
        goto fail_bad;
    if (strcmp(type, "backoff") == 0) {
        aor_backoff_row row = {.provider = provider,
                               .key = key,
                               .until = until,
                               .window_s = sqlite3_column_double(q, 8),
                               .failure_count = sqlite3_column_int(q, 9),
                               .last_failure = at};
        if (provider == NULL || key == NULL || !has_until || kind == NULL ||
            aor_kind_parse(kind, &row.last_error_kind) != 0)
            goto fail_bad;
        return put_backoff(rc, &row);
    }
    if (strcmp(type, "success") == 0) {
        if (provider == NULL || key == NULL)
            goto fail_bad;
        aor_backoff_success(rc->b, provider, key);
        return 0;
    }
    if (strcmp(type, "breaker_open") == 0) {
        if (provider == NULL || model == NULL || !has_until)
            goto fail_bad;
        if (circuits_set(&rc->circuits, provider, model, until) != 0)
            return oom(st, "replaying a breaker");
        return 0;
    }
    if (strcmp(type, "breaker_close") == 0) {
        if (provider == NULL || model == NULL)
            goto fail_bad;
        circuits_remove(&rc->circuits, provider, model);
        return 0;
    }
    if (strcmp(type, "sticky") == 0) {
        aor_sticky_row row = {.client = client,
                              .model = model,
                              .provider = provider,
                              .key = key,
                              .last_success = at,
                              .streak = sqlite3_column_int(q, 11)};
        if (client == NULL || model == NULL || provider == NULL || key == NULL)
            goto fail_bad;
        if (aor_sticky_restore(rc->s, &row) != 0)
            return oom(st, "replaying a sticky row");
        return 0;
    }
    if (strcmp(type, "sticky_drop") == 0) {
        if (client == NULL || model == NULL)
            goto fail_bad;
        aor_sticky_remove(rc->s, client, model);
        return 0;
    }
    if (strcmp(type, "reset") == 0) {
        if (key != NULL) { /* one key's backoff rows only (aor_store_log_reset_key) */
            aor_backoff_reset_key(rc->b, provider, key);
            return 0;
        }
        aor_backoff_reset(rc->b, provider);
        circuits_remove(&rc->circuits, provider, NULL);
        return 0;
    }
fail_bad:
    set_err(st, "state store %s: state_events row %lld: bad or unknown event (type %s)", st->path,
            id, type != NULL ? type : "NULL");
    errno = EINVAL;
    return -1;
}

static int replay_events(replay_ctx *rc) {
    aor_store *st = rc->st;
    sqlite3_stmt *q = NULL;
    int step;
    if (sqlite3_prepare_v2(st->db,
                           "SELECT id, at, type, provider, \"key\", model, client, until,"
                           " window_s, failure_count, kind, streak FROM state_events"
                           " ORDER BY id",
                           -1, &q, NULL) != SQLITE_OK) {
        set_sql_err(st, "reading state_events");
        return -1;
    }
    while ((step = sqlite3_step(q)) == SQLITE_ROW) {
        if (apply_event(rc, q) != 0) {
            sqlite3_finalize(q);
            return -1;
        }
    }
    sqlite3_finalize(q);
    if (step != SQLITE_DONE) {
        set_sql_err(st, "reading state_events");
        return -1;
    }
    return 0;
}

/* --- sanity of the loaded rows (aor_store_limits) ---------------------------------- */

/* Row r as the limits allow it at now, in *out (strings shared with r): see
 * aor_store_limits. 1 when its until or last_failure changed (window_s is cut then too),
 * 0 when it stays as it is. Comparisons are written so that NaN fails them. */
static int sane_backoff(const aor_backoff_row *r, double max_s, double now, aor_backoff_row *out) {
    *out = *r;
    if (!(r->last_failure <= now)) {
        /* Written under a clock ahead of ours (or ours went back): the failure is taken
         * as happening now, with what was left of its window when it happened. */
        double left = r->until - r->last_failure;
        if (!(left > 0))
            left = 0;
        out->last_failure = now;
        out->until = now + (left < max_s ? left : max_s);
    } else if (!(r->until <= now + max_s)) {
        out->until = now + max_s;
    } else {
        return 0;
    }
    if (!(out->window_s <= max_s))
        out->window_s = max_s;
    return 1;
}

/* A backoff row to change: the new row (its own copies of the strings) and what it was. */
typedef struct {
    aor_backoff_row row;
    double old_until;
    int clock_back;
} fixed_row;

typedef struct {
    fixed_row *items;
    size_t n, cap;
    double max_s, now;
    int failed; /* out of memory */
} fix_list;

static void fix_list_free(fix_list *fl) {
    for (size_t i = 0; i < fl->n; i++) {
        free((char *)fl->items[i].row.provider);
        free((char *)fl->items[i].row.key);
    }
    free(fl->items);
}

/* aor_backoff_foreach callback: notes the rows sane_backoff changes (the table must not
 * change during the walk). */
static void note_insane(const aor_backoff_row *row, void *arg) {
    fix_list *fl = arg;
    aor_backoff_row out;
    if (fl->failed || !sane_backoff(row, fl->max_s, fl->now, &out))
        return;
    if (fl->n == fl->cap) {
        size_t ncap = fl->cap ? fl->cap * 2 : 8;
        fixed_row *ni = realloc(fl->items, ncap * sizeof *ni);
        if (ni == NULL) {
            fl->failed = 1;
            return;
        }
        fl->items = ni;
        fl->cap = ncap;
    }
    fixed_row *f = &fl->items[fl->n];
    f->row = out;
    f->row.provider = strdup(row->provider);
    f->row.key = strdup(row->key);
    f->old_until = row->until;
    f->clock_back = !(row->last_failure <= fl->now);
    if (f->row.provider == NULL || f->row.key == NULL) {
        free((char *)f->row.provider);
        free((char *)f->row.key);
        fl->failed = 1;
        return;
    }
    fl->n++;
}

/* Applies lim->backoff_max_s to every backoff row in memory (aor_store_limits). */
static int sanitize_backoff(replay_ctx *rc, const aor_store_limits *lim, double now) {
    fix_list fl = {.max_s = lim->backoff_max_s, .now = now};
    int ret = -1;
    if (!(lim->backoff_max_s >= 0))
        return 0; /* not checked */
    aor_backoff_foreach(rc->b, note_insane, &fl);
    if (fl.failed) {
        oom(rc->st, "checking the backoff rows");
        goto done;
    }
    for (size_t i = 0; i < fl.n; i++) {
        const fixed_row *f = &fl.items[i];
        if (aor_backoff_restore(rc->b, &f->row) != 0) { /* overwrites: can't fail */
            oom(rc->st, "restoring a backoff row");
            goto done;
        }
        if (lim->clamped) {
            aor_store_clamp c = {.what = "backoff",
                                 .provider = f->row.provider,
                                 .name = f->row.key,
                                 .until = f->old_until,
                                 .new_until = f->row.until,
                                 .clock_back = f->clock_back};
            lim->clamped(&c, lim->arg);
        }
    }
    ret = 0;
done:
    fix_list_free(&fl);
    return ret;
}

/* Applies lim->circuit_max_s to the circuits being rebuilt (aor_store_limits). */
static void sanitize_circuits(replay_ctx *rc, const aor_store_limits *lim, double now) {
    if (!(lim->circuit_max_s >= 0))
        return; /* not checked */
    for (size_t i = 0; i < rc->circuits.n; i++) {
        circuit *c = &rc->circuits.items[i];
        if (c->until <= now + lim->circuit_max_s)
            continue;
        aor_store_clamp cl = {.what = "circuit",
                              .provider = c->provider,
                              .name = c->model,
                              .until = c->until,
                              .new_until = now + lim->circuit_max_s};
        c->until = cl.new_until;
        if (lim->clamped)
            lim->clamped(&cl, lim->arg);
    }
}

/* Compaction: writing memory back. */
typedef struct {
    aor_store *st;
    sqlite3_stmt *q;
    int failed;
} write_ctx;

static void write_backoff_row(const aor_backoff_row *row, void *arg) {
    write_ctx *w = arg;
    if (w->failed)
        return;
    sqlite3_stmt *q = w->q;
    if (bind_text(q, 1, row->provider) != SQLITE_OK || bind_text(q, 2, row->key) != SQLITE_OK ||
        sqlite3_bind_double(q, 3, row->until) != SQLITE_OK ||
        sqlite3_bind_double(q, 4, row->window_s) != SQLITE_OK ||
        sqlite3_bind_int(q, 5, row->failure_count) != SQLITE_OK ||
        bind_text(q, 6, aor_kind_name(row->last_error_kind)) != SQLITE_OK ||
        sqlite3_bind_double(q, 7, row->last_failure) != SQLITE_OK || sqlite3_step(q) != SQLITE_DONE)
        w->failed = 1;
    sqlite3_reset(q);
}

static void write_breaker_row(const aor_breaker_row *row, void *arg) {
    write_ctx *w = arg;
    if (w->failed || row->state != AOR_BREAKER_OPEN)
        return;
    sqlite3_stmt *q = w->q;
    if (bind_text(q, 1, row->provider) != SQLITE_OK || bind_text(q, 2, row->model) != SQLITE_OK ||
        sqlite3_bind_double(q, 3, row->until) != SQLITE_OK || sqlite3_step(q) != SQLITE_DONE)
        w->failed = 1;
    sqlite3_reset(q);
}

static void write_sticky_row(const aor_sticky_row *row, void *arg) {
    write_ctx *w = arg;
    if (w->failed)
        return;
    sqlite3_stmt *q = w->q;
    if (bind_text(q, 1, row->client) != SQLITE_OK || bind_text(q, 2, row->model) != SQLITE_OK ||
        bind_text(q, 3, row->provider) != SQLITE_OK || bind_text(q, 4, row->key) != SQLITE_OK ||
        sqlite3_bind_double(q, 5, row->last_success) != SQLITE_OK ||
        sqlite3_bind_int(q, 6, row->streak) != SQLITE_OK || sqlite3_step(q) != SQLITE_DONE)
        w->failed = 1;
    sqlite3_reset(q);
}

static int compact(replay_ctx *rc, double now) {
    aor_store *st = rc->st;
    write_ctx w = {.st = st};

    if (exec_sql(st, "BEGIN IMMEDIATE", "compacting") != 0)
        return -1;
    if (exec_sql(st,
                 "DELETE FROM backoff; DELETE FROM breakers; DELETE FROM sticky;"
                 " DELETE FROM state_events",
                 "compacting") != 0)
        goto fail_tx;

    if (sqlite3_prepare_v2(st->db,
                           "INSERT INTO backoff(provider, \"key\", until, window_s,"
                           " failure_count, last_error_kind, last_failure)"
                           " VALUES(?1, ?2, ?3, ?4, ?5, ?6, ?7)",
                           -1, &w.q, NULL) != SQLITE_OK)
        goto fail_sql;
    aor_backoff_foreach(rc->b, write_backoff_row, &w);
    sqlite3_finalize(w.q);
    if (w.failed)
        goto fail_sql;

    if (sqlite3_prepare_v2(st->db,
                           "INSERT INTO breakers(provider, model, until) VALUES(?1, ?2, ?3)", -1,
                           &w.q, NULL) != SQLITE_OK)
        goto fail_sql;
    aor_breaker_foreach(rc->br, now, write_breaker_row, &w);
    sqlite3_finalize(w.q);
    if (w.failed)
        goto fail_sql;

    if (sqlite3_prepare_v2(st->db,
                           "INSERT INTO sticky(client, model, provider, \"key\", last_success,"
                           " streak) VALUES(?1, ?2, ?3, ?4, ?5, ?6)",
                           -1, &w.q, NULL) != SQLITE_OK)
        goto fail_sql;
    aor_sticky_foreach(rc->s, write_sticky_row, &w);
    sqlite3_finalize(w.q);
    if (w.failed)
        goto fail_sql;

    if (exec_sql(st, "COMMIT", "compacting") != 0)
        goto fail_tx;
    return 0;

fail_sql:
    set_sql_err(st, "compacting");
fail_tx:
    sqlite3_exec(st->db, "ROLLBACK", NULL, NULL, NULL);
    return -1;
}

/* After the start's compaction: a file that is mostly free pages (a long-running aord
 * appended many events; compaction deleted them, SQLite keeps the pages) is rewritten
 * with VACUUM so it shrinks. Only when over VACUUM_MIN_PAGES pages and more than half
 * free; a failure is not an error (the file keeps its size). */
#define VACUUM_MIN_PAGES 1024
static void vacuum_if_sparse(aor_store *st) {
    long long pages = 0, free_pages = 0;
    if (pragma_int(st, "PRAGMA page_count", "reading the page count", &pages) != 0 ||
        pragma_int(st, "PRAGMA freelist_count", "reading the free page count", &free_pages) != 0)
        return;
    if (pages < VACUUM_MIN_PAGES || free_pages * 2 < pages)
        return;
    /* In WAL mode VACUUM writes the new pages to the -wal file; the checkpoint moves
     * them into the database and truncates it, so the file shrinks now, not at close. */
    if (sqlite3_exec(st->db, "VACUUM; PRAGMA wal_checkpoint(TRUNCATE)", NULL, NULL, NULL) !=
        SQLITE_OK)
        set_sql_err(st, "vacuum (the file keeps its size)");
}

int aor_store_replay(aor_store *st, aor_backoff *b, aor_breaker *br, aor_sticky *s, double now,
                     const aor_store_limits *lim) {
    if (st == NULL || b == NULL || br == NULL || s == NULL)
        return bad_arg(st, "replay needs the backoff, breaker and sticky tables");
    replay_ctx rc = {.st = st, .b = b, .br = br, .s = s};
    int ret = -1;

    if (load_tables(&rc) != 0 || replay_events(&rc) != 0)
        goto done;
    if (lim != NULL) {
        if (sanitize_backoff(&rc, lim, now) != 0)
            goto done;
        sanitize_circuits(&rc, lim, now);
    }
    for (size_t i = 0; i < rc.circuits.n; i++) {
        const circuit *c = &rc.circuits.items[i];
        if (!(c->until > now))
            continue; /* expired: the circuit is closed again (§4.5) */
        if (aor_breaker_restore(br, c->provider, c->model, c->until) != 0) {
            oom(st, "restoring a breaker");
            goto done;
        }
    }
    ret = compact(&rc, now);
    if (ret == 0)
        vacuum_if_sparse(st);
done:
    circuits_free(&rc.circuits);
    return ret;
}

int aor_store_compact(aor_store *st, aor_backoff *b, aor_breaker *br, aor_sticky *s, double now) {
    if (st == NULL || b == NULL || br == NULL || s == NULL)
        return bad_arg(st, "compaction needs the backoff, breaker and sticky tables");
    replay_ctx rc = {.st = st, .b = b, .br = br, .s = s};
    return compact(&rc, now);
}
