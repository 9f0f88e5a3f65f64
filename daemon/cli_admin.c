/* aor status / aor backoff: the daemon's admin API (spec §8) over loopback HTTP with
 * libcurl, shown as tables. Keys appear by name only; the admin token is sent, never
 * printed. */
#include "cli.h"
#include "paths.h"

#include <cjson/cJSON.h>
#include <curl/curl.h>
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define TOKEN_LEN 64 /* hex characters of admin.token */
#define DEFAULT_LISTEN "127.0.0.1:8787"

/* Where the daemon is, from the config (or the defaults when the config has errors). */
typedef struct {
    char *socket_path;
    char *listen; /* NULL: listen = off */
    char *state;  /* the state file, or NULL when unknown (a config with errors) */
    char token[TOKEN_LEN + 1];
    char token_err[512]; /* why the token could not be read ("" when it was) */
} target;

typedef struct {
    long status;
    char *body;
    size_t len;
    size_t cap; /* bytes allocated at body */
    int too_big;
} answer;

static void target_free(target *t) {
    free(t->socket_path);
    free(t->listen);
    free(t->state);
    memset(t, 0, sizeof *t);
}

static void read_token(target *t) {
    char *dir = aor_path_state_dir();
    char *path = dir ? aor_path_join(dir, "admin.token") : NULL;
    char *buf = NULL;
    size_t len = 0;
    if (!path) {
        snprintf(t->token_err, sizeof t->token_err, "cannot find the state directory: %s",
                 strerror(errno));
        goto out;
    }
    if (aor_cli_read_file(path, 4096, &buf, &len) < 0) {
        snprintf(t->token_err, sizeof t->token_err, "cannot read the admin token %s: %s", path,
                 strerror(errno));
        goto out;
    }
    while (len > 0 && (buf[len - 1] == '\n' || buf[len - 1] == '\r'))
        len--;
    int ok = len == TOKEN_LEN;
    for (size_t i = 0; ok && i < len; i++)
        ok = strchr("0123456789abcdefABCDEF", buf[i]) != NULL;
    if (!ok) {
        snprintf(t->token_err, sizeof t->token_err,
                 "%s does not hold an admin token (64 hex digits)", path);
        goto out;
    }
    memcpy(t->token, buf, TOKEN_LEN);
    t->token[TOKEN_LEN] = '\0';
out:
    free(buf);
    free(path);
    free(dir);
}

/* Says on f that nothing answers where the config says aord is. When an aord holds the
 * config's state file all the same, it runs, started with another socket or listen
 * address (a SIGHUP moves neither; QA: status said "down" and `aor run` then started
 * another aord): that is said instead. */
static void say_down(FILE *f, const target *t) {
    const char *lp = t->listen ? " or http://" : "", *lv = t->listen ? t->listen : "";
    if (aor_cli_state_locked(t->state)) {
        fprintf(f,
                "aord: running, but not where the config says: nothing answers on %s%s%s, and "
                "an aord holds the state file %s\n"
                "  it was started with another [daemon] socket or listen (or AOR_SOCKET); "
                "aord keeps them until it restarts, also after a SIGHUP: restart it\n",
                t->socket_path, lp, lv, t->state);
        return;
    }
    fprintf(f,
            "aord: down: nothing answers on %s%s%s\n"
            "  start it with `aord`, `aor run CMD` or `aor install-service`\n",
            t->socket_path, lp, lv);
}

/* Says on f why the admin API at t->listen did not answer (err: the transfer's error):
 * aord is up on its socket but keeps another listen address, or it is down (say_down).
 * For status and backoff alike (QA: backoff printed only the transfer's error, "aord is
 * not reachable", with aord up). */
static void say_unreachable(FILE *f, const target *t, const char *err) {
    pid_t pid = 0;
    if (!aor_cli_socket_answers(t->socket_path, &pid)) {
        say_down(f, t);
        return;
    }
    char pidtxt[48] = "";
    if (pid > 0)
        snprintf(pidtxt, sizeof pidtxt, " (pid %ld)", (long)pid);
    fprintf(f,
            "aord: up%s, socket %s, but its admin API at http://%s does not answer: %s\n"
            "  (aor takes that address from the config file; aord keeps the one it started "
            "with until it restarts, also after a SIGHUP: if [daemon] listen changed since, "
            "restart aord)\n",
            pidtxt, t->socket_path, t->listen, err);
}

/* 0; AOR_CLI_USAGE after printing when the chosen configuration file cannot be read or
 * the socket path is relative (configuration errors: the defaults could reach another
 * aord); -1 after printing (out of memory). The keys' variables need not be set here (no
 * secret is used; aord may have them from a service's env file). */
static int target_open(aor_cli *c, target *t) {
    memset(t, 0, sizeof *t);
    if (aor_cli_check_chosen_config(c) < 0)
        return AOR_CLI_USAGE;
    char *errors = NULL;
    aor_config *cfg = aor_config_load_flags(c->config_arg, AOR_CONFIG_SECRETS_OPTIONAL, &errors);
    if (cfg && aor_cli_check_socket(cfg, 0) < 0) {
        aor_config_free(cfg);
        return AOR_CLI_USAGE;
    }
    if (cfg) {
        t->socket_path = strdup(cfg->socket_path);
        t->listen = cfg->listen ? strdup(cfg->listen) : NULL;
        t->state = cfg->state_path ? strdup(cfg->state_path) : NULL;
        if (!t->socket_path || (cfg->listen && !t->listen) || (cfg->state_path && !t->state))
            goto fail_oom;
        aor_config_free(cfg);
    } else {
        free(errors);
        if (aor_config_daemon_addrs(c->config_arg, &t->socket_path, &t->listen) < 0)
            goto fail_oom;
        char *why = NULL;
        if (aor_path_config_socket_problem(t->socket_path, aor_cli_chosen_config(c), 0, &why) < 0) {
            fprintf(stderr, "aor: configuration errors:\n%s\n", why ? why : "out of memory");
            free(why);
            target_free(t);
            return AOR_CLI_USAGE;
        }
        /* Say which values are used: the file's [daemon] ones, or the defaults when there
         * is no file (a chosen file that cannot be read was refused above). */
        const char *file = aor_cli_chosen_config(c);
        char *def = NULL;
        if (!file) {
            char *dir = aor_path_config_dir();
            file = def = dir ? aor_path_join(dir, "aor.ini") : NULL;
            free(dir);
        }
        int readable = file && access(file, R_OK) == 0;
        int err = errno;
        const char *lp = t->listen ? "http://" : "", *lv = t->listen ? t->listen : "listen = off";
        if (readable)
            fprintf(stderr,
                    "aor: warning: the configuration has errors (see `aor check-config`); "
                    "using socket %s and %s%s from its [daemon] section (defaults where unset)\n",
                    t->socket_path, lp, lv);
        else if (file && err != ENOENT)
            fprintf(stderr,
                    "aor: warning: cannot read the configuration file %s (%s); using the "
                    "default socket %s and %s%s\n",
                    file, strerror(err), t->socket_path, lp, lv);
        else /* no file: the embedded default from the environment has errors */
            fprintf(stderr,
                    "aor: warning: the configuration has errors (see `aor check-config`); "
                    "using the default socket %s and %s%s\n",
                    t->socket_path, lp, lv);
        free(def);
    }
    read_token(t);
    return 0;
fail_oom:
    aor_config_free(cfg);
    target_free(t);
    fprintf(stderr, "aor: out of memory\n");
    return -1;
}

static size_t on_body(char *ptr, size_t size, size_t nmemb, void *ud) {
    answer *a = ud;
    size_t n = size * nmemb;
    if (a->len + n > AOR_CLI_HTTP_BODY_MAX) {
        a->too_big = 1;
        return 0; /* aborts the transfer */
    }
    if (a->len + n + 1 > a->cap) {
        /* Doubling: growing by each read's size copied the whole answer each time (a
         * state of 100,000 sticky rows, 15 MB, took 12 s under AddressSanitizer, whose
         * realloc always moves, and ran into the timeout). */
        size_t cap = a->cap ? a->cap : 16384;
        while (cap < a->len + n + 1)
            cap *= 2;
        char *nb = realloc(a->body, cap);
        if (!nb)
            return 0;
        a->body = nb;
        a->cap = cap;
    }
    memcpy(a->body + a->len, ptr, n);
    a->len += n;
    a->body[a->len] = '\0';
    return n;
}

/* One request to http://<listen><path>. Returns 0 with a->status/body (free a->body), or
 * -1 with a one-line reason in err (connection refused, timeout, ...). */
static int request(const target *t, const char *method, const char *path, answer *a, char *err,
                   size_t errlen) {
    memset(a, 0, sizeof *a);
    char url[512], auth[128];
    if (snprintf(url, sizeof url, "http://%s%s", t->listen, path) >= (int)sizeof url) {
        snprintf(err, errlen, "URL too long");
        return -1;
    }
    CURL *h = curl_easy_init();
    if (!h) {
        snprintf(err, errlen, "cannot initialise libcurl");
        return -1;
    }
    struct curl_slist *hdrs = NULL;
    if (t->token[0]) {
        snprintf(auth, sizeof auth, "Authorization: Bearer %s", t->token);
        hdrs = curl_slist_append(hdrs, auth);
        memset(auth, 0, sizeof auth);
    }
    char cerr[CURL_ERROR_SIZE] = "";
    curl_easy_setopt(h, CURLOPT_URL, url);
    curl_easy_setopt(h, CURLOPT_NOPROXY, "*"); /* loopback: never through HTTP(S)_PROXY */
    curl_easy_setopt(h, CURLOPT_PROTOCOLS_STR, "http");
    curl_easy_setopt(h, CURLOPT_TIMEOUT, (long)AOR_CLI_HTTP_TIMEOUT_S);
    curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(h, CURLOPT_ERRORBUFFER, cerr);
    curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, on_body);
    curl_easy_setopt(h, CURLOPT_WRITEDATA, a);
    if (hdrs)
        curl_easy_setopt(h, CURLOPT_HTTPHEADER, hdrs);
    if (strcmp(method, "POST") == 0) {
        curl_easy_setopt(h, CURLOPT_POST, 1L);
        curl_easy_setopt(h, CURLOPT_POSTFIELDS, "");
        curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE, 0L);
    }
    CURLcode rc = curl_easy_perform(h);
    curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &a->status);
    curl_slist_free_all(hdrs);
    curl_easy_cleanup(h);
    if (rc != CURLE_OK) {
        snprintf(err, errlen, "%s",
                 a->too_big ? "answer larger than the limit"
                 : cerr[0]  ? cerr
                            : curl_easy_strerror(rc));
        free(a->body);
        a->body = NULL;
        return -1;
    }
    return 0;
}

/* The "error.message" of an admin error answer, else a short generic text. */
static void print_http_error(const char *what, const answer *a) {
    cJSON *j = a->body ? cJSON_ParseWithLength(a->body, a->len) : NULL;
    const cJSON *e = cJSON_GetObjectItemCaseSensitive(j, "error");
    const cJSON *m = cJSON_GetObjectItemCaseSensitive(e, "message");
    if (cJSON_IsString(m))
        fprintf(stderr, "aor: %s: HTTP %ld: %s\n", what, a->status, m->valuestring);
    else /* fresh-user pass: a web server on port 8787 gave a bare "HTTP 404" */
        fprintf(stderr,
                "aor: %s: HTTP %ld, not an answer of aord's (another program may hold the "
                "listen address while aord is down: `aor doctor` says whether aord runs)\n",
                what, a->status);
    cJSON_Delete(j);
}

/* ---- tables ------------------------------------------------------------------------ */

typedef struct {
    size_t ncol, nrow;
    char **cells; /* nrow * ncol */
} table;

/* Appends a row of t->ncol values (copied; control characters shown as '?'). */
static int table_add(table *t, const char *const *vals) {
    char **nc = realloc(t->cells, (t->nrow + 1) * t->ncol * sizeof *nc);
    if (!nc)
        return -1;
    t->cells = nc;
    for (size_t i = 0; i < t->ncol; i++) {
        char *s = strdup(vals[i] ? vals[i] : "");
        if (!s) {
            for (size_t k = 0; k < i; k++)
                free(t->cells[t->nrow * t->ncol + k]);
            return -1;
        }
        for (char *p = s; *p; p++)
            if ((unsigned char)*p < 0x20 || *p == 0x7f)
                *p = '?';
        t->cells[t->nrow * t->ncol + i] = s;
    }
    t->nrow++;
    return 0;
}

static void table_print(const table *t) {
    size_t w[8] = {0};
    for (size_t r = 0; r < t->nrow; r++)
        for (size_t i = 0; i < t->ncol && i < 8; i++) {
            size_t l = strlen(t->cells[r * t->ncol + i]);
            if (l > w[i])
                w[i] = l;
        }
    for (size_t r = 0; r < t->nrow; r++) {
        size_t last = t->ncol; /* no padding after the last non-empty cell */
        while (last > 1 && !t->cells[r * t->ncol + last - 1][0])
            last--;
        fputs("  ", stdout);
        for (size_t i = 0; i < last; i++) {
            const char *s = t->cells[r * t->ncol + i];
            if (i + 1 < last)
                printf("%-*s  ", (int)w[i < 8 ? i : 7], s);
            else
                fputs(s, stdout);
        }
        putchar('\n');
    }
}

static void table_free(table *t) {
    for (size_t i = 0; i < t->nrow * t->ncol; i++)
        free(t->cells[i]);
    free(t->cells);
    t->cells = NULL;
    t->nrow = 0;
}

static const char *jstr(const cJSON *o, const char *name) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, name);
    return cJSON_IsString(v) && v->valuestring ? v->valuestring : "?";
}

static double jnum(const cJSON *o, const char *name) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, name);
    return cJSON_IsNumber(v) ? v->valuedouble : NAN;
}

static const char *free_in(double until, double now, char *buf, size_t cap) {
    char d[64];
    if (!isfinite(until) || !isfinite(now))
        return "?";
    if (until <= now)
        return "free now";
    snprintf(buf, cap, "free in %s", aor_cli_duration(until - now, d, sizeof d));
    return buf;
}

/* The daemon's clock ("now" in the state; AOR_FAKE_CLOCK moves it), else ours. */
static double state_now(const cJSON *st) {
    double now = jnum(st, "now");
    return isfinite(now) ? now : (double)time(NULL);
}

static int cmp_str(const void *a, const void *b) {
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* Distinct "client" values among the n rows of the state's sticky array: sorted, then
 * counted, O(n log n) (a daemon can hold 100,000 rows: spec §10). -1 on ENOMEM. */
static int count_clients(const cJSON *rows, int n) {
    if (n <= 0)
        return 0;
    const char **v = calloc((size_t)n, sizeof *v);
    if (v == NULL)
        return -1;
    int k = 0;
    const cJSON *r;
    cJSON_ArrayForEach(r, rows) {
        if (k < n)
            v[k++] = jstr(r, "client");
    }
    qsort(v, (size_t)k, sizeof *v, cmp_str);
    int distinct = 0;
    for (int i = 0; i < k; i++)
        distinct += i == 0 || strcmp(v[i], v[i - 1]) != 0;
    free(v);
    return distinct;
}

static int print_backoff(const cJSON *st) {
    const cJSON *rows = cJSON_GetObjectItemCaseSensitive(st, "backoff");
    int n = cJSON_GetArraySize(rows);
    if (n == 0) {
        printf("backoff: none active\n");
        return 0;
    }
    printf("backoff (%d active):\n", n);
    double now = state_now(st);
    table t = {5, 0, NULL};
    const char *hdr[] = {"PROVIDER/KEY", "KIND", "WINDOW", "FAILURES", "FREE"};
    int rc = table_add(&t, hdr);
    const cJSON *r;
    cJSON_ArrayForEach(r, rows) {
        char pk[300], win[64], fails[32], fr[80];
        double c = jnum(r, "failure_count");
        snprintf(pk, sizeof pk, "%s/%s", jstr(r, "provider"), jstr(r, "key"));
        aor_cli_duration(jnum(r, "window_s"), win, sizeof win);
        snprintf(fails, sizeof fails, "%.0f", isfinite(c) ? c : 0.0);
        const char *v[] = {pk, jstr(r, "last_error_kind"), win, fails,
                           free_in(jnum(r, "until"), now, fr, sizeof fr)};
        if (rc == 0)
            rc = table_add(&t, v);
    }
    table_print(&t);
    table_free(&t);
    return rc;
}

/* Keys held back by an exhausted usage window (spec §6): the "usage" array of the state.
 * quiet: print nothing when there is none. */
static int print_usage(const cJSON *st, int quiet) {
    const cJSON *rows = cJSON_GetObjectItemCaseSensitive(st, "usage");
    int n = cJSON_GetArraySize(rows);
    if (n == 0) {
        if (!quiet)
            printf("usage: no key exhausted\n");
        return 0;
    }
    /* §6: a key is skipped until the first of its exhausted windows resets (then the
     * provider's next answer tells again), so KEY FREE is the earliest of its RESETS. */
    printf("usage exhausted (%d window%s; a key is skipped until the first of its windows "
           "resets):\n",
           n, n == 1 ? "" : "s");
    double now = state_now(st);
    table t = {4, 0, NULL};
    const char *hdr[] = {"PROVIDER/KEY", "WINDOW", "RESETS", "KEY FREE"};
    int rc = table_add(&t, hdr);
    const cJSON *r, *o;
    cJSON_ArrayForEach(r, rows) {
        char pk[300], fr[80], kf[80];
        double first = jnum(r, "reset_at");
        cJSON_ArrayForEach(o, rows) {
            double t2 = jnum(o, "reset_at");
            if (strcmp(jstr(o, "provider"), jstr(r, "provider")) == 0 &&
                strcmp(jstr(o, "key"), jstr(r, "key")) == 0 && t2 < first)
                first = t2;
        }
        snprintf(pk, sizeof pk, "%s/%s", jstr(r, "provider"), jstr(r, "key"));
        const char *v[] = {pk, jstr(r, "window"), free_in(jnum(r, "reset_at"), now, fr, sizeof fr),
                           free_in(first, now, kf, sizeof kf)};
        if (rc == 0)
            rc = table_add(&t, v);
    }
    table_print(&t);
    table_free(&t);
    return rc;
}

static int print_state(const cJSON *st) {
    int rc = 0;
    const cJSON *keys = cJSON_GetObjectItemCaseSensitive(st, "keys");
    const cJSON *r;
    printf("keys (%d):\n", cJSON_GetArraySize(keys));
    if (cJSON_GetArraySize(keys) > 0) {
        table t = {4, 0, NULL};
        const char *hdr[] = {"PROVIDER", "KEY", "PRIORITY", "NAME"};
        rc = table_add(&t, hdr);
        cJSON_ArrayForEach(r, keys) {
            char prio[32];
            double p = jnum(r, "priority");
            snprintf(prio, sizeof prio, "%.0f", isfinite(p) ? p : 0.0);
            /* As the daemon gives it: the friendly name, else the key's name. */
            const char *v[] = {jstr(r, "provider"), jstr(r, "key"), prio, jstr(r, "name")};
            if (rc == 0)
                rc = table_add(&t, v);
        }
        table_print(&t);
        table_free(&t);
    }
    if (rc == 0)
        rc = print_backoff(st);
    if (rc == 0)
        rc = print_usage(st, 0);

    const cJSON *br = cJSON_GetObjectItemCaseSensitive(st, "breakers");
    double now = state_now(st);
    table t = {4, 0, NULL};
    const char *hdr[] = {"PROVIDER", "MODEL", "STATE", "FREE"};
    if (rc == 0)
        rc = table_add(&t, hdr);
    cJSON_ArrayForEach(r, br) {
        const char *state = jstr(r, "state");
        if (strcmp(state, "closed") == 0)
            continue;
        char fr[80];
        const char *v[] = {jstr(r, "provider"), jstr(r, "model"), state,
                           free_in(jnum(r, "until"), now, fr, sizeof fr)};
        if (rc == 0)
            rc = table_add(&t, v);
    }
    if (t.nrow <= 1) {
        printf("open circuits: none\n");
    } else {
        printf("open circuits (%zu):\n", t.nrow - 1);
        table_print(&t);
    }
    table_free(&t);

    const cJSON *sticky = cJSON_GetObjectItemCaseSensitive(st, "sticky");
    int ns = cJSON_GetArraySize(sticky);
    int clients = count_clients(sticky, ns);
    if (clients < 0) {
        fprintf(stderr, "aor: out of memory counting sticky clients\n");
        return -1;
    }
    printf("sticky: %d %s (%d %s)\n", ns, ns == 1 ? "entry" : "entries", clients,
           clients == 1 ? "client" : "clients");
    return rc;
}

/* GET /admin/api/state. Returns 0 with *a filled, 1 when the daemon is not reachable
 * (err filled), -1 on an HTTP error (printed). */
static int get_state(const target *t, answer *a, char *err, size_t errlen) {
    if (request(t, "GET", "/admin/api/state", a, err, errlen) < 0)
        return 1;
    if (a->status != 200) {
        print_http_error("GET /admin/api/state", a);
        if (a->status == 401 && t->token_err[0])
            fprintf(stderr, "aor: %s\n", t->token_err);
        free(a->body);
        a->body = NULL;
        return -1;
    }
    return 0;
}

int aor_cli_cmd_status(aor_cli *c, int argc, char **argv) {
    int json = 0;
    for (int i = 0; i < argc; i++) {
        int tk = aor_cli_take_config(c, argc, argv, &i);
        if (tk < 0)
            return AOR_CLI_USAGE;
        if (tk > 0)
            continue;
        if (strcmp(argv[i], "--json") == 0) {
            json = 1;
            continue;
        }
        fprintf(stderr, "aor status: unknown argument '%s'\n", argv[i]);
        return AOR_CLI_USAGE;
    }
    target t;
    int topen = target_open(c, &t);
    if (topen != 0)
        return topen < 0 ? AOR_CLI_FAIL : topen;
    curl_global_init(CURL_GLOBAL_DEFAULT);
    int rc = AOR_CLI_FAIL;
    pid_t pid = 0;
    int sock_up = aor_cli_socket_answers(t.socket_path, &pid);
    char pidtxt[48] = "";
    if (pid > 0)
        snprintf(pidtxt, sizeof pidtxt, " (pid %ld)", (long)pid);
    if (!t.listen) {
        if (!sock_up) {
            say_down(json ? stderr : stdout, &t);
            goto out;
        }
        if (json) {
            fprintf(stderr, "aor: the sidecar is off (listen = off): no admin API\n");
            goto out;
        }
        printf("aord: up%s, socket %s\nsidecar: off (listen = off): no admin API, no "
               "details\n"
               "  (by the config file: an aord started with a listen address keeps serving it "
               "until it restarts, also after a SIGHUP)\n",
               pidtxt, t.socket_path);
        rc = AOR_CLI_OK;
        goto out;
    }
    answer a;
    char err[CURL_ERROR_SIZE + 64];
    int g = get_state(&t, &a, err, sizeof err);
    if (g == 1) {
        say_unreachable(json ? stderr : stdout, &t, err);
        goto out;
    }
    if (g < 0)
        goto out;
    if (json) {
        fwrite(a.body, 1, a.len, stdout);
        if (a.len == 0 || a.body[a.len - 1] != '\n')
            putchar('\n');
        rc = AOR_CLI_OK;
        goto out_body;
    }
    cJSON *st = cJSON_ParseWithLength(a.body, a.len);
    if (!cJSON_IsObject(st)) {
        fprintf(stderr, "aor: GET /admin/api/state: the answer is not a JSON object\n");
        cJSON_Delete(st);
        goto out_body;
    }
    if (sock_up)
        printf("aord: up%s, socket %s\n", pidtxt, t.socket_path);
    else
        printf("aord: up (sidecar answers), but nothing answers on the socket %s: the shim "
               "cannot reach it\n",
               t.socket_path);
    printf("sidecar: http://%s\n", t.listen);
    printf("config: %s\n", jstr(st, "config"));
    if (cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(st, "fake_clock")))
        printf("clock: test clock (AOR_FAKE_CLOCK)\n");
    rc = print_state(st) == 0 ? AOR_CLI_OK : AOR_CLI_FAIL;
    cJSON_Delete(st);
out_body:
    free(a.body);
out:
    fflush(stdout);
    curl_global_cleanup();
    target_free(&t);
    return rc;
}

static int backoff_list(const target *t, int json) {
    answer a;
    char err[CURL_ERROR_SIZE + 64];
    int g = get_state(t, &a, err, sizeof err);
    if (g == 1) {
        say_unreachable(stderr, t, err);
        return AOR_CLI_FAIL;
    }
    if (g < 0)
        return AOR_CLI_FAIL;
    int rc = AOR_CLI_FAIL;
    cJSON *st = cJSON_ParseWithLength(a.body, a.len);
    if (!cJSON_IsObject(st)) {
        fprintf(stderr, "aor: GET /admin/api/state: the answer is not a JSON object\n");
        goto out;
    }
    if (json) {
        char *s = cJSON_Print(cJSON_GetObjectItemCaseSensitive(st, "backoff"));
        if (s)
            printf("%s\n", s);
        rc = s ? AOR_CLI_OK : AOR_CLI_FAIL;
        free(s);
        goto out;
    }
    rc = print_backoff(st) == 0 && print_usage(st, 1) == 0 ? AOR_CLI_OK : AOR_CLI_FAIL;
out:
    cJSON_Delete(st);
    free(a.body);
    return rc;
}

static int backoff_post(const target *t, const char *provider, const char *key) {
    char path[700];
    if (provider) {
        char *esc = curl_easy_escape(NULL, provider, 0);
        char *kesc = key ? curl_easy_escape(NULL, key, 0) : NULL;
        int n = esc && (!key || kesc)
                    ? snprintf(path, sizeof path, "/admin/api/backoff/reset?provider=%s%s%s", esc,
                               key ? "&key=" : "", key ? kesc : "")
                    : -1;
        curl_free(esc);
        curl_free(kesc);
        if (n < 0 || n >= (int)sizeof path) {
            fprintf(stderr, "aor: provider or key name too long\n");
            return AOR_CLI_USAGE;
        }
    } else {
        snprintf(path, sizeof path, "/admin/api/backoff/clear");
    }
    answer a;
    char err[CURL_ERROR_SIZE + 64];
    if (request(t, "POST", path, &a, err, sizeof err) < 0) {
        say_unreachable(stderr, t, err);
        return AOR_CLI_FAIL;
    }
    int rc = AOR_CLI_FAIL;
    cJSON *ej = a.status == 404 && a.body ? cJSON_ParseWithLength(a.body, a.len) : NULL;
    const char *emsg = jstr(cJSON_GetObjectItemCaseSensitive(ej, "error"), "message");
    if (a.status == 404 && provider && key && strstr(emsg, "key")) {
        fprintf(stderr, "aor: provider '%s' of aord has no key named '%s'\n", provider, key);
    } else if (a.status == 404 && provider) {
        fprintf(stderr, "aor: aord has no provider named '%s'\n", provider);
    } else if (a.status != 200) {
        print_http_error(provider ? "backoff reset" : "backoff clear", &a);
        if (a.status == 401 && t->token_err[0])
            fprintf(stderr, "aor: %s\n", t->token_err);
    } else {
        cJSON *j = cJSON_ParseWithLength(a.body, a.len);
        double n = jnum(j, "removed");
        long removed = isfinite(n) ? (long)n : 0;
        double un = jnum(j, "usage_cleared");
        long usage = isfinite(un) ? (long)un : 0;
        char more[80] = "";
        if (usage > 0)
            snprintf(more, sizeof more, "; exhausted usage cleared for %ld key%s", usage,
                     usage == 1 ? "" : "s");
        /* "removed" counts backoff rows and circuit-breaker entries together; a per-key
         * reset removes backoff rows only. */
        if (provider && key)
            printf("backoff reset for %s key %s (%ld backoff %s removed%s)\n", provider, key,
                   removed, removed == 1 ? "row" : "rows", more);
        else if (provider)
            printf("backoff reset for %s (%ld backoff/circuit %s removed%s)\n", provider, removed,
                   removed == 1 ? "entry" : "entries", more);
        else
            printf("backoff cleared (%ld backoff/circuit %s removed%s)\n", removed,
                   removed == 1 ? "entry" : "entries", more);
        cJSON_Delete(j);
        rc = AOR_CLI_OK;
    }
    cJSON_Delete(ej);
    free(a.body);
    return rc;
}

int aor_cli_cmd_backoff(aor_cli *c, int argc, char **argv) {
    const char *words[3] = {NULL, NULL, NULL};
    int nw = 0, json = 0;
    for (int i = 0; i < argc; i++) {
        int tk = aor_cli_take_config(c, argc, argv, &i);
        if (tk < 0)
            return AOR_CLI_USAGE;
        if (tk > 0)
            continue;
        if (strcmp(argv[i], "--json") == 0) {
            json = 1;
            continue;
        }
        if (nw == 0 && argv[i][0] != '-' && strcmp(argv[i], "list") != 0 &&
            strcmp(argv[i], "reset") != 0 && strcmp(argv[i], "clear") != 0) {
            fprintf(stderr, "aor backoff: unknown subcommand '%s'\n", argv[i]);
            goto usage;
        }
        /* The first word is the subcommand; only reset takes more (PROVIDER [KEY]). */
        int max = nw > 0 && strcmp(words[0], "reset") == 0 ? 3 : 1;
        if (argv[i][0] == '-' || nw == max) {
            fprintf(stderr, "aor backoff: unexpected argument '%s'\n", argv[i]);
            goto usage;
        }
        words[nw++] = argv[i];
    }
    int op; /* 0 list, 1 reset, 2 clear */
    if (nw == 0 || strcmp(words[0], "list") == 0) {
        op = 0;
    } else if (strcmp(words[0], "reset") == 0) {
        if (nw < 2 || !words[1][0] || (nw == 3 && !words[2][0])) {
            fprintf(stderr, "aor backoff reset: %s\n",
                    nw < 2 ? "PROVIDER is required" : "an empty name");
            goto usage;
        }
        op = 1;
    } else {
        op = 2; /* clear: the only other word accepted above */
    }
    target t;
    int topen = target_open(c, &t);
    if (topen != 0)
        return topen < 0 ? AOR_CLI_FAIL : topen;
    int rc = AOR_CLI_FAIL;
    if (!t.listen) {
        fprintf(stderr, "aor: the sidecar is off (listen = off): the admin API is not "
                        "available\n");
        goto out;
    }
    curl_global_init(CURL_GLOBAL_DEFAULT);
    rc = op == 0 ? backoff_list(&t, json)
                 : backoff_post(&t, op == 1 ? words[1] : NULL, op == 1 ? words[2] : NULL);
    fflush(stdout);
    curl_global_cleanup();
out:
    target_free(&t);
    return rc;
usage:
    fprintf(stderr, "usage: aor backoff [list] [--json] | aor backoff reset PROVIDER [KEY] | "
                    "aor backoff clear\n");
    return AOR_CLI_USAGE;
}
