/* aor doctor: one line per check, "ok: ...", "warn: ..." or "fail: ..." (spec §1, §2
 * "Trust": which client will not trust aor and why). Exit 1 when any check failed.
 * Never prints a secret: the config is reported by counts, files by path and mode. */
#include "cli.h"
#include "envflag.h"
#include "paths.h"
#include "sysca.h"
#include "trust.h" /* the shim's AOR_TRUST_FILE_MAX (shim/trust.h): only the limit */

#include <curl/curl.h>
#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/x509.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sqlite3.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

typedef enum { OK, WARN, FAIL } level;

typedef struct {
    int fails, warns;
} tally;

static void say(tally *t, level l, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

static void say(tally *t, level l, const char *fmt, ...) {
    static const char *const tag[] = {"ok", "warn", "fail"};
    printf("%s: ", tag[l]);
    va_list ap;
    va_start(ap, fmt);
    vprintf(fmt, ap);
    va_end(ap);
    putchar('\n');
    t->fails += l == FAIL;
    t->warns += l == WARN;
}

/* Keys whose variable is not set in this shell (cfg loaded with
 * AOR_CONFIG_SECRETS_OPTIONAL): a warning each, not a failure, since aord may have them
 * from its own environment (the service's env file). */
static void warn_unset_keys(const aor_config *cfg, tally *t) {
    char *envf = aor_cli_service_env_file();
    char *dir = envf ? NULL : aor_path_config_dir();
    for (size_t i = 0; i < cfg->nkeys; i++) {
        const aor_key_cfg *k = &cfg->keys[i];
        if (k->secret || !k->env)
            continue;
        if (envf)
            say(t, WARN,
                "key \"%s\": %s is not set in this shell; %s exists (the service's "
                "EnvironmentFile): aord run as a service gets it from there if it is in that "
                "file, aord started from this shell (`aord`, `aor run`) does not",
                k->name, k->env, envf);
        else
            say(t, WARN,
                "key \"%s\": %s is not set in this shell; aord needs it in its own "
                "environment: export it before starting aord (an aord already running never "
                "sees it: restart it with the variable set), put it in env_file in [daemon], "
                "or in %s/env for the service",
                k->name, k->env, dir ? dir : "$XDG_CONFIG_HOME/aor");
    }
    free(dir);
    free(envf);
}

/* The embedded default without any key (no key variable set here): every provider is
 * pass-through (spec §3.3), so aor routes with the clients' own credentials and has no
 * key of its own to rotate to. Worth a warning: it is what a forgotten export looks
 * like. */
static void warn_no_keys(const aor_config *cfg, tally *t) {
    if (!cfg->embedded || cfg->nkeys)
        return;
    char *envf = aor_cli_service_env_file();
    say(t, WARN,
        "no key variable is set in this shell (OPENAI_API_KEY, ANTHROPIC_API_KEY, "
        "GEMINI_API_KEY, ... docs/config.md \"Embedded default\"): pass-through only, the "
        "clients' own credentials are used and aor has no key to rotate to; export one before "
        "starting aord%s%s%s, or write a config file",
        envf ? ", or put it in " : "", envf ? envf : "", envf ? " for the service" : "");
    free(envf);
}

static aor_config *check_config(aor_cli *c, tally *t) {
    char *errors = NULL;
    aor_config *cfg = aor_config_load(c->config_arg, &errors);
    if (!cfg) {
        /* Only unset key variables? Then the file is valid and aord may have them. */
        cfg = aor_config_load_flags(c->config_arg, AOR_CONFIG_SECRETS_OPTIONAL, NULL);
        if (cfg) {
            free(errors);
            errors = NULL;
        }
    }
    if (!cfg) {
        say(t, FAIL, "configuration has errors (fix them; `aor check-config` lists them too):");
        /* file:line messages; they never contain a secret (config.h). */
        for (char *line = errors; line && *line;) {
            char *nl = strchr(line, '\n');
            size_t n = nl ? (size_t)(nl - line) : strlen(line);
            printf("    %.*s\n", (int)n, line);
            line = nl ? nl + 1 : line + n;
        }
        free(errors);
        return NULL;
    }
    size_t nk = cfg->nkeys; /* distinct keys (one may serve several providers) */
    const char *ps = aor_config_count_providers(cfg) == 1 ? "" : "s", *ks = nk == 1 ? "" : "s";
    if (cfg->source)
        say(t, OK, "config %s is valid (%zu provider%s, %zu key%s)", cfg->source,
            aor_config_count_providers(cfg), ps, nk, ks);
    else
        say(t, OK,
            "no config file: embedded default from the environment (%zu provider%s, %zu key%s)",
            aor_config_count_providers(cfg), ps, nk, ks);
    warn_unset_keys(cfg, t);
    warn_no_keys(cfg, t);
    /* Valid but almost surely a mistake (config.h); file:line messages, no secret. */
    for (size_t i = 0; i < cfg->nwarnings; i++)
        say(t, WARN, "%s", cfg->warnings[i]);
    return cfg;
}

static size_t discard(char *p, size_t s, size_t n, void *ud) {
    return s * n;
}

/* The places aord checks before it starts (spec §7; daemon/listen.c, daemon/main.c,
 * daemon/tls_ca.c): a refused start only leaves aord's exit status behind, so each
 * problem is a failure with aord's own explanation. Returns the number of failures. */
static int check_places(const aor_config *cfg, tally *t) {
    int fails = t->fails;
    char *why = NULL, *fallback = NULL;
    const char *sock = cfg ? cfg->socket_path : (fallback = aor_path_socket());
    if (!sock) {
        say(t, FAIL, "cannot work out the daemon socket path: %s", strerror(errno));
    } else if (aor_path_config_socket_problem(sock, cfg ? cfg->source : NULL, 1, &why) < 0) {
        say(t, FAIL, "%s (aord refuses to start)", why ? why : "out of memory");
    } else {
        say(t, OK,
            "socket %s: nothing aord's start would refuse (its directory is yours, closed to "
            "others or created 0700)",
            sock);
    }
    free(why);
    free(fallback);
    static const struct {
        const char *label;
        const char *holds;
        char *(*dir)(void);
    } dirs[] = {
        {"state directory", "admin.token, aord.log, aor.db", aor_path_state_dir},
        {"data directory", "the CA and its key", aor_path_data_dir},
    };
    for (size_t i = 0; i < sizeof dirs / sizeof dirs[0]; i++) {
        char *dir = dirs[i].dir();
        if (!dir) {
            say(t, FAIL, "cannot find the %s (set HOME or its XDG variable): %s", dirs[i].label,
                strerror(errno));
            continue;
        }
        why = NULL;
        int r = aor_path_dir_problem(dir, dirs[i].label, NULL, "chmod 700 it", &why);
        if (r < 0)
            say(t, FAIL, "%s (aord refuses to start: it keeps %s there)",
                why ? why : "out of memory", dirs[i].holds);
        else if (r > 0)
            say(t, OK, "%s %s does not exist yet (aord creates it, mode 0700)", dirs[i].label, dir);
        else
            say(t, OK, "%s %s: yours, not writable by group or others", dirs[i].label, dir);
        free(why);
        free(dir);
    }
    return t->fails - fails;
}

/* With aord up: the admin token `aor status` and `aor backoff` read (QA: a removed one
 * failed them while doctor said all was well). aord writes it when it starts. */
static void check_admin_token(tally *t) {
    char *dir = aor_path_state_dir();
    char *path = dir ? aor_path_join(dir, "admin.token") : NULL;
    if (path && access(path, R_OK) != 0)
        say(t, FAIL,
            "admin token %s: %s: `aor status` and `aor backoff` cannot ask aord (aord writes "
            "it when it starts: restart aord, or check that XDG_STATE_HOME is the one aord "
            "has)",
            path, strerror(errno));
    else if (path)
        say(t, OK, "admin token %s is readable", path);
    free(path);
    free(dir);
}

/* "file:" URI of path for sqlite3_open_v2 with SQLITE_OPEN_URI, with immutable=1: every
 * byte outside [A-Za-z0-9/._-~] percent-encoded. Caller frees; NULL on ENOMEM. */
static char *immutable_uri(const char *path) {
    static const char tail[] = "?immutable=1";
    size_t n = strlen(path);
    char *u = n < (SIZE_MAX - 5 - sizeof tail) / 3 ? malloc(5 + 3 * n + sizeof tail) : NULL;
    if (!u)
        return NULL;
    char *o = u;
    memcpy(o, "file:", 5);
    o += 5;
    for (const unsigned char *p = (const unsigned char *)path; *p; p++) {
        if ((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9') ||
            strchr("/._-~", *p))
            *o++ = (char)*p;
        else {
            static const char hex[] = "0123456789ABCDEF";
            *o++ = '%';
            *o++ = hex[*p >> 4];
            *o++ = hex[*p & 15];
        }
    }
    memcpy(o, tail, sizeof tail);
    return u;
}

/* 1 when the file at path is empty or starts with SQLite's header ("SQLite format 3\0",
 * then the page size, a power of two from 512 to 65536, 1 for 65536) and is a whole
 * number of pages long (sqlite.org "Database File Format" §1.3): what can be told of a
 * database whose newest pages are in its -wal. */
static int sqlite_header_ok(const char *path) {
    unsigned char h[18];
    struct stat st;
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
    if (fd < 0)
        return 0;
    int ok = 0;
    if (fstat(fd, &st) != 0)
        ok = 0;
    else if (st.st_size == 0)
        ok = 1;
    else if (read(fd, h, sizeof h) == (ssize_t)sizeof h && memcmp(h, "SQLite format 3", 16) == 0) {
        unsigned ps = (unsigned)h[16] << 8 | h[17];
        if (ps == 1)
            ps = 65536;
        ok = ps >= 512 && (ps & (ps - 1)) == 0 && st.st_size % ps == 0;
    }
    close(fd);
    return ok;
}

/* With aord down: a state file aord would refuse at start (QA: a damaged aor.db kept
 * aord from starting while doctor only said "start it"). SQLite's own check, opened
 * immutable (aord is down: nothing changes the file), so doctor creates no -wal or -shm
 * file: a read-only open made them, with the database's mode (0400 after a chmod), and
 * aord then could not write them (QA). Also what aord needs to write: the file, its -wal
 * and -shm files, and its directory (for them). */
static void check_state_file(const aor_config *cfg, tally *t) {
    struct stat st;
    if (!cfg || !cfg->state_path || stat(cfg->state_path, &st) != 0)
        return; /* none yet: aord creates it */
    const char *path = cfg->state_path;
    int bad = 0, pending = 0;
    static const char *const side[] = {"", "-wal", "-shm"};
    for (size_t i = 0; i < sizeof side / sizeof side[0]; i++) {
        char f[4096];
        struct stat fs;
        if (snprintf(f, sizeof f, "%s%s", path, side[i]) >= (int)sizeof f)
            continue;
        /* A non-empty -wal: changes a killed aord did not fold in (below). */
        if (i == 1 && stat(f, &fs) == 0 && fs.st_size > 0)
            pending = 1;
        if (access(f, F_OK) == 0 && access(f, R_OK | W_OK) != 0) {
            say(t, FAIL,
                "state file %s: %s: aord cannot write it and will not start (chmod 600 it, as "
                "the user aord runs as)",
                f, strerror(errno));
            bad = 1;
        }
    }
    char *dir = strdup(path);
    char *slash = dir ? strrchr(dir, '/') : NULL;
    if (slash) {
        *(slash == dir ? slash + 1 : slash) = '\0';
        if (access(dir, W_OK | X_OK) != 0) {
            say(t, FAIL,
                "state file directory %s: %s: aord cannot make the database's -wal and -shm "
                "files there and will not start (chmod 700 it)",
                dir, strerror(errno));
            bad = 1;
        }
    }
    free(dir);
    /* Opened immutable, SQLite reads the main file alone: with committed pages still in a
     * -wal (aord killed), that file can look damaged, or stale, without being either
     * (review). aord's start replays the -wal; say so instead of checking half a
     * database. */
    if (pending && !sqlite_header_ok(path)) {
        say(t, FAIL,
            "state file %s is damaged (not an SQLite database file): aord will not start with "
            "it; move it aside with its -wal and -shm files (mv '%s' '%s.bad'), then start "
            "aord: backoff and sticky state start empty",
            path, path, path);
        return;
    }
    if (pending) {
        if (!bad)
            say(t, WARN,
                "state file %s: its -wal holds changes aord did not fold in (it did not stop "
                "cleanly); aord's start reads them; the database is not checked here",
                path);
        return;
    }
    sqlite3 *db = NULL;
    char result[160] = "";
    char *uri = immutable_uri(path);
    int rc = uri ? sqlite3_open_v2(uri, &db, SQLITE_OPEN_READONLY | SQLITE_OPEN_URI, NULL)
                 : SQLITE_NOMEM;
    free(uri);
    sqlite3_stmt *q = NULL;
    if (rc == SQLITE_OK)
        rc = sqlite3_prepare_v2(db, "PRAGMA quick_check", -1, &q, NULL);
    if (rc == SQLITE_OK && (rc = sqlite3_step(q)) == SQLITE_ROW) {
        const unsigned char *r = sqlite3_column_text(q, 0);
        snprintf(result, sizeof result, "%s", r ? (const char *)r : "");
        rc = SQLITE_OK;
    }
    if (rc != SQLITE_OK && rc != SQLITE_DONE)
        snprintf(result, sizeof result, "%s", db ? sqlite3_errmsg(db) : sqlite3_errstr(rc));
    sqlite3_finalize(q);
    sqlite3_close(db);
    if (strcmp(result, "ok") == 0) {
        if (!bad)
            say(t, OK, "state file %s reads as a sound SQLite database", path);
    } else {
        say(t, FAIL,
            "state file %s is damaged (%s): aord will not start with it; move it aside "
            "(mv '%s' '%s.bad'), then start aord: backoff and sticky state start empty",
            path, result[0] ? result : "unreadable", path, path);
    }
}

static void check_daemon(const aor_config *cfg, tally *t, int refused) {
    const char *sock = cfg ? cfg->socket_path : NULL;
    char *fallback = NULL;
    if (!sock)
        sock = fallback = aor_path_socket();
    if (!sock) {
        say(t, FAIL, "cannot work out the daemon socket path: %s", strerror(errno));
        return;
    }
    pid_t pid = 0;
    int up = aor_cli_socket_answers(sock, &pid);
    if (up)
        say(t, OK, "aord answers on %s (pid %ld)", sock, (long)pid);
    else if (refused)
        say(t, WARN,
            "aord is not running (nothing answers on %s): programs connect directly; it "
            "cannot start until the failure%s above %s fixed",
            sock, refused == 1 ? "" : "s", refused == 1 ? "is" : "are");
    else
        say(t, WARN,
            "aord is not running (nothing answers on %s): programs connect directly; start it "
            "with `aord`, `aor run CMD` or `aor install-service`",
            sock);
    free(fallback);
    if (!up)
        check_state_file(cfg, t);
    if (!cfg)
        return;
    if (!cfg->listen) {
        say(t, OK, "sidecar is off (listen = off)");
        return;
    }
    if (!up)
        return;
    char url[300], cerr[CURL_ERROR_SIZE] = "";
    snprintf(url, sizeof url, "http://%s/healthz", cfg->listen);
    curl_global_init(CURL_GLOBAL_DEFAULT);
    CURL *h = curl_easy_init();
    long status = 0;
    CURLcode rc = CURLE_FAILED_INIT;
    if (h) {
        curl_easy_setopt(h, CURLOPT_URL, url);
        curl_easy_setopt(h, CURLOPT_NOPROXY, "*");
        curl_easy_setopt(h, CURLOPT_TIMEOUT, 5L);
        curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
        curl_easy_setopt(h, CURLOPT_ERRORBUFFER, cerr);
        curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, discard);
        rc = curl_easy_perform(h);
        curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &status);
        curl_easy_cleanup(h);
    }
    curl_global_cleanup();
    if (rc == CURLE_OK && status == 200) {
        say(t, OK, "sidecar %s answers", url);
        check_admin_token(t);
    } else if (rc == CURLE_OK)
        say(t, FAIL, "sidecar %s answered HTTP %ld", url, status);
    else
        say(t, FAIL, "sidecar %s does not answer: %s", url,
            cerr[0] ? cerr : curl_easy_strerror(rc));
}

/* Checks one CA file; returns 1 when it exists. */
static int check_file(tally *t, const char *path, const char *what, mode_t forbidden,
                      const char *fix) {
    struct stat st;
    if (stat(path, &st) < 0) {
        say(t, errno == ENOENT ? WARN : FAIL, "%s %s: %s%s", what, path, strerror(errno),
            errno == ENOENT ? " (aord creates it on its first start)" : "");
        return 0;
    }
    unsigned mode = (unsigned)(st.st_mode & 07777);
    if (!S_ISREG(st.st_mode))
        say(t, FAIL, "%s %s is not a regular file", what, path);
    else if (st.st_uid != getuid())
        say(t, FAIL, "%s %s belongs to uid %lu, not to you", what, path, (unsigned long)st.st_uid);
    else if (st.st_mode & forbidden)
        say(t, FAIL, "%s %s has mode %04o (%s)", what, path, mode, fix);
    else
        say(t, OK, "%s %s (mode %04o)", what, path, mode);
    return 1;
}

static int no_passphrase(char *buf, int size, int rwflag, void *u) {
    (void)buf, (void)size, (void)rwflag, (void)u;
    return -1;
}

/* The CA aord loads at start (daemon/tls_ca.c): ca.pem a PEM certificate, ca.key an
 * unencrypted PEM private key of that certificate; otherwise aord will not start (QA:
 * a garbage ca.key got "ok" for its mode alone). Nothing when either file is missing
 * (check_file said so) or unreadable. */
static void check_ca_pair(tally *t, const char *ca, const char *key) {
    FILE *fc = fopen(ca, "r"), *fk = fopen(key, "r");
    X509 *cert = fc ? PEM_read_X509(fc, NULL, no_passphrase, NULL) : NULL;
    EVP_PKEY *pk = fk ? PEM_read_PrivateKey(fk, NULL, no_passphrase, NULL) : NULL;
    ERR_clear_error();
    const char *fix = "aord will not start; move ca.pem and ca.key aside and start aord: it "
                      "makes a new CA (clients trust it through bundle.pem; a CA you imported "
                      "elsewhere must be imported again)";
    if (fc && !cert)
        say(t, FAIL, "CA certificate %s is not a PEM certificate: %s", ca, fix);
    else if (fk && !pk)
        say(t, FAIL, "CA key %s is not an unencrypted PEM private key: %s", key, fix);
    else if (cert && pk && X509_check_private_key(cert, pk) != 1)
        say(t, FAIL, "CA key %s is not the key of %s: %s", key, ca, fix);
    else if (cert && pk)
        say(t, OK, "CA key %s is the key of the CA certificate", key);
    ERR_clear_error();
    X509_free(cert);
    EVP_PKEY_free(pk);
    if (fc)
        fclose(fc);
    if (fk)
        fclose(fk);
}

/* ca.pem, ca.key, bundle.pem. Returns 1 when ca.pem exists (trust checks can run). */
static int check_ca(tally *t, const char *data) {
    char *ca = aor_path_join(data, "ca.pem");
    char *key = aor_path_join(data, "ca.key");
    char *bundle = aor_path_join(data, "bundle.pem");
    int have_ca = 0;
    if (!ca || !key || !bundle) {
        say(t, FAIL, "out of memory");
        goto out;
    }
    have_ca =
        check_file(t, ca, "CA certificate", S_IWGRP | S_IWOTH, "writable by others: chmod 644 it");
    if (check_file(t, key, "CA key", S_IRWXG | S_IRWXO,
                   "other users can read your CA key: chmod 600 it") &&
        have_ca)
        check_ca_pair(t, ca, key);
    struct stat st;
    if (!have_ca || stat(bundle, &st) < 0) {
        check_file(t, bundle, "CA bundle", S_IWGRP | S_IWOTH, "writable by others");
        goto out;
    }
    int has = aor_cli_file_has_ca(bundle, ca);
    if (has == 1)
        say(t, OK, "CA bundle %s contains the aor CA", bundle);
    else if (has == 0)
        say(t, FAIL, "CA bundle %s does not contain the aor CA (restart aord to rewrite it)",
            bundle);
    else
        say(t, FAIL, "cannot read %s or %s: %s", bundle, ca, strerror(errno));
out:
    free(ca);
    free(key);
    free(bundle);
    return have_ca;
}

typedef struct {
    const char *var;
    const char *who;  /* clients that read it */
    const char *what; /* what aor points it at */
} trust_var;

static const trust_var trust_vars[] = {
    {"NODE_EXTRA_CA_CERTS", "Node clients", "ca.pem"},
    /* Not curl: it reads CURL_CA_BUNDLE first, which aor sets unless it names another
     * bundle (then that line names curl). QA: curl was named here and worked. */
    {"SSL_CERT_FILE", "OpenSSL-based clients (Python, Ruby, Rust)", "bundle.pem"},
    {"REQUESTS_CA_BUNDLE", "Python requests", "bundle.pem"},
    {"CURL_CA_BUNDLE", "curl", "bundle.pem"},
};

/* NODE_EXTRA_CA_CERTS names a file without the aor CA: what the shim (shim/trust.c)
 * and `aor run` do with it, and whether Node will then trust aor (spec §2 "Trust":
 * merged with any the user set). */
static void check_node_merge(tally *t, const char *data, const char *val) {
    struct stat st;
    const char *why = NULL;
    if (stat(val, &st) < 0)
        why = strerror(errno);
    else if (!S_ISREG(st.st_mode))
        why = "not a regular file";
    else if (access(val, R_OK) < 0)
        why = strerror(errno);
    if (why) { /* Node would ignore it too */
        say(t, OK,
            "NODE_EXTRA_CA_CERTS points to %s, which cannot be read (%s): the shim and `aor "
            "run` point Node at aor's ca.pem instead",
            val, why);
        return;
    }
    if (st.st_size > AOR_TRUST_FILE_MAX) {
        say(t, WARN,
            "NODE_EXTRA_CA_CERTS points to %s (%lld bytes): over the shim's %d-byte limit, so "
            "Node clients started with LD_PRELOAD alone will not trust aor; `aor run` merges "
            "it, or append %s/ca.pem to that file",
            val, (long long)st.st_size, AOR_TRUST_FILE_MAX, data);
        return;
    }
    if (access(data, W_OK) < 0) {
        say(t, WARN,
            "NODE_EXTRA_CA_CERTS points to %s, which lacks the aor CA, and %s is not writable "
            "(%s): the merged file cannot be made, Node clients will not trust aor",
            val, data, strerror(errno));
        return;
    }
    say(t, OK,
        "NODE_EXTRA_CA_CERTS points to %s, which lacks the aor CA: the shim and `aor run` "
        "merge it with ca.pem into a file in %s and point Node at that",
        val, data);
}

static void check_trust(tally *t, const char *data, int have_ca) {
    if (aor_envflag_on(getenv("AOR_NO_TRUST")))
        say(t, WARN, "AOR_NO_TRUST is set: the shim and `aor run` leave the CA variables alone");
    char *ca = aor_path_join(data, "ca.pem");
    char *bundle = aor_path_join(data, "bundle.pem");
    if (!ca || !bundle) {
        say(t, FAIL, "out of memory");
        goto out;
    }
    for (size_t i = 0; i < sizeof trust_vars / sizeof trust_vars[0]; i++) {
        const trust_var *v = &trust_vars[i];
        const char *val = getenv(v->var);
        int node = i == 0;
        if (!val || !*val) {
            say(t, OK, "%s is not set (`aor run` and the shim point it at %s)", v->var, v->what);
            continue;
        }
        /* A merged node-extra-ca-<hash>.pem contains the CA: reported below. */
        if (strcmp(val, node ? ca : bundle) == 0) {
            say(t, OK, "%s points to aor's %s", v->var, node ? "CA" : "bundle");
            continue;
        }
        if (!node && aor_sysca_is_bundle(val)) {
            say(t, OK,
                "%s points to the system's CA bundle %s (`aor run` and the shim point it at "
                "%s: the same CAs plus aor's)",
                v->var, val, bundle);
            continue;
        }
        if (!have_ca) {
            say(t, WARN, "%s points to %s: cannot check it, there is no aor CA yet", v->var, val);
            continue;
        }
        int has = aor_cli_file_has_ca(val, ca);
        if (has == 1) {
            say(t, OK, "%s points to %s, which contains the aor CA", v->var, val);
        } else if (node) {
            check_node_merge(t, data, val);
        } else {
            say(t, WARN,
                "%s points to %s: %s will not trust aor (unset it so aor points it at %s, or "
                "append %s to that file)%s",
                v->var, val, v->who, bundle, ca, has < 0 ? " [the file cannot be read]" : "");
        }
    }
out:
    free(ca);
    free(bundle);
}

/* The first cap - 1 bytes `path --version` prints on stdout within VERSION_WAIT_MS (NUL-
 * terminated in out), run with no input, stderr discarded and no other descriptor of
 * ours; the program is killed then if it has not ended. Returns the byte count, or -1
 * when it cannot run. */
#define VERSION_WAIT_MS 2000
static ssize_t version_text(const char *path, char *out, size_t cap) {
    int fds[2];
    if (pipe2(fds, O_CLOEXEC) < 0)
        return -1;
    pid_t pid = fork();
    if (pid < 0) {
        close(fds[0]);
        close(fds[1]);
        return -1;
    }
    if (pid == 0) { /* every descriptor of ours is close-on-exec but 0, 1, 2 */
        int null = open("/dev/null", O_RDWR | O_CLOEXEC);
        if (null >= 0) {
            dup2(null, 0);
            dup2(null, 2);
        }
        dup2(fds[1], 1);
        execl(path, path, "--version", (char *)NULL);
        _exit(127);
    }
    close(fds[1]);
    size_t n = 0;
    struct timespec t0, now;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (;;) {
        clock_gettime(CLOCK_MONOTONIC, &now);
        long left = VERSION_WAIT_MS -
                    ((now.tv_sec - t0.tv_sec) * 1000 + (now.tv_nsec - t0.tv_nsec) / 1000000);
        struct pollfd pfd = {.fd = fds[0], .events = POLLIN};
        if (n + 1 >= cap || left <= 0 || poll(&pfd, 1, (int)left) == 0)
            break;
        ssize_t r = read(fds[0], out + n, cap - 1 - n);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            break;
        n += (size_t)r;
    }
    out[n] = '\0';
    close(fds[0]);
    kill(pid, SIGKILL); /* ended already (a zombie: no effect), or taking too long */
    int st;
    while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
        ;
    return (ssize_t)n;
}

/* The ca_certificate value of the wgetrc at path (wget's command names ignore case, '_'
 * and '-'), malloc'd; NULL when the file has none or cannot be read. */
static char *wgetrc_ca(const char *path) {
    FILE *f = fopen(path, "r");
    if (!f)
        return NULL;
    char *found = NULL, *line = NULL;
    size_t cap = 0;
    while (getline(&line, &cap, f) > 0) {
        char name[32];
        size_t k = 0;
        const char *s = line;
        while (*s == ' ' || *s == '\t')
            s++;
        for (; *s && *s != '=' && *s != '\n'; s++)
            if (*s != '_' && *s != '-' && *s != ' ' && *s != '\t' && k + 1 < sizeof name)
                name[k++] = (char)((*s >= 'A' && *s <= 'Z') ? *s + 32 : *s);
        name[k] = '\0';
        if (*s != '=' || strcmp(name, "cacertificate") != 0)
            continue;
        s++;
        while (*s == ' ' || *s == '\t')
            s++;
        size_t vl = strcspn(s, "\r\n");
        while (vl && (s[vl - 1] == ' ' || s[vl - 1] == '\t'))
            vl--;
        free(found);
        const char *home = getenv("HOME");
        if (vl >= 2 && s[0] == '~' && s[1] == '/' && home && *home) { /* wget expands it */
            size_t hl = strlen(home);
            found = malloc(hl + vl);
            if (found) {
                memcpy(found, home, hl);
                memcpy(found + hl, s + 1, vl - 1);
                found[hl + vl - 1] = '\0';
            }
        } else {
            found = strndup(s, vl); /* the last one counts, as in wget */
        }
    }
    free(line);
    fclose(f);
    return found;
}

/* wget built with GnuTLS (Debian's) reads the system's CA store and its own
 * ca_certificate setting, none of the variables the shim and `aor run` set: it will not
 * trust aor unless its wgetrc ($WGETRC, else ~/.wgetrc) names a file with the aor CA
 * (spec §2 "Trust": doctor names the clients that will not trust aor). */
static void check_wget(tally *t, const char *data) {
    char *wget = aor_cli_which("wget");
    char *ca = aor_path_join(data, "ca.pem");
    char *bundle = aor_path_join(data, "bundle.pem");
    char *rc = NULL, *named = NULL, *sysrc = NULL;
    char ver[4096];
    if (!wget || !ca || !bundle || version_text(wget, ver, sizeof ver) <= 0 ||
        !strstr(ver, "gnutls"))
        goto out; /* none, or OpenSSL's, which reads SSL_CERT_FILE */
    /* wget reads the system's wgetrc, then the user's: the last ca_certificate counts. */
    const char *sys = getenv("SYSTEM_WGETRC");
    const char *env = getenv("WGETRC");
    const char *home = getenv("HOME");
    rc = env && *env ? strdup(env) : home && *home ? aor_path_join(home, ".wgetrc") : NULL;
    sysrc = strdup(sys && *sys ? sys : "/etc/wgetrc");
    const char *from = rc;
    named = rc ? wgetrc_ca(rc) : NULL;
    if (!named && sysrc) {
        from = sysrc;
        named = wgetrc_ca(sysrc);
    }
    if (named && aor_cli_file_has_ca(named, ca) == 1)
        say(t, OK,
            "wget (GnuTLS) takes its CAs from %s (ca_certificate in %s): it contains "
            "the aor CA",
            named, from);
    else
        say(t, WARN,
            "wget %s uses GnuTLS, which reads none of the CA variables: it will not trust aor "
            "(add `ca_certificate = %s` to %s, or pass --ca-certificate=%s)",
            wget, bundle, rc ? rc : "~/.wgetrc", bundle);
out:
    free(sysrc);
    free(named);
    free(rc);
    free(bundle);
    free(ca);
    free(wget);
}

/* Debian's python3-urllib3 (1.26, bookworm) is patched to take its CAs from the system
 * bundle always (ca_certs='/etc/ssl/certs/ca-certificates.crt' in HTTPSConnectionPool):
 * a /usr/bin/python3 program that uses urllib3 itself reads none of the CA variables and
 * will not trust aor (QA; requests passes REQUESTS_CA_BUNDLE to it and works). Said
 * unless that bundle holds the aor CA (added to the system store). The file looked at is
 * the package's, or $AOR_DOCTOR_URLLIB3 (tests). */
static void check_debian_urllib3(tally *t, const char *data) {
    static const char sysbundle[] = "/etc/ssl/certs/ca-certificates.crt";
    const char *path = getenv("AOR_DOCTOR_URLLIB3");
    if (!path || !*path)
        path = "/usr/lib/python3/dist-packages/urllib3/connectionpool.py";
    char *text = NULL, *ca = aor_path_join(data, "ca.pem");
    size_t len = 0;
    if (!ca || aor_cli_read_file(path, 1 << 20, &text, &len) != 0)
        goto out; /* not installed */
    if (!strstr(text, "ca_certs='/etc/ssl/certs/ca-certificates.crt'") &&
        !strstr(text, "ca_certs=\"/etc/ssl/certs/ca-certificates.crt\""))
        goto out; /* upstream urllib3: it reads SSL_CERT_FILE through the ssl module */
    if (aor_cli_file_has_ca(sysbundle, ca) == 1)
        say(t, OK,
            "Debian's python3-urllib3 (%s) takes its CAs from %s, which contains the "
            "aor CA",
            path, sysbundle);
    else
        say(t, WARN,
            "Debian's python3-urllib3 (%s) takes its CAs from %s only, none of the CA "
            "variables: Python programs that use urllib3 directly will not trust aor "
            "(requests works: it passes REQUESTS_CA_BUNDLE); pass "
            "ca_certs=os.environ['SSL_CERT_FILE'] to urllib3.PoolManager, or add %s to the "
            "system store (/usr/local/share/ca-certificates/aor.crt, then "
            "update-ca-certificates)",
            path, sysbundle, ca);
out:
    free(text);
    free(ca);
}

int aor_cli_cmd_doctor(aor_cli *c, int argc, char **argv) {
    for (int i = 0; i < argc; i++) {
        int tk = aor_cli_take_config(c, argc, argv, &i);
        if (tk < 0)
            return AOR_CLI_USAGE;
        if (tk > 0)
            continue;
        fprintf(stderr, "aor doctor: unknown argument '%s'\n", argv[i]);
        return AOR_CLI_USAGE;
    }
    if (aor_cli_check_chosen_config(c) < 0)
        return AOR_CLI_USAGE;
    tally t = {0, 0};
    aor_config *cfg = check_config(c, &t);
    int refused = check_places(cfg, &t);
    check_daemon(cfg, &t, refused);

    char *data = aor_path_data_dir();
    int have_ca = 0;
    if (!data)
        say(&t, FAIL, "cannot find the data directory (set HOME or XDG_DATA_HOME): %s",
            strerror(errno));
    else
        have_ca = check_ca(&t, data);

    char *self = aor_cli_self_dir(c->argv0);
    char *lib = aor_cli_find_lib(self, 1);
    if (lib && strpbrk(lib, " :"))
        /* ld.so splits LD_PRELOAD at spaces and colons, no escape (ld.so(8)). */
        say(&t, FAIL,
            "libaor.so: %s has a %s in its path, which LD_PRELOAD cannot carry (ld.so splits "
            "it at spaces and colons): `aor run` cannot preload programs; set AOR_LIB to a "
            "symbolic link to it whose path has neither",
            lib, strchr(lib, ' ') ? "space" : "colon");
    else if (lib)
        say(&t, OK, "libaor.so: %s", lib);
    else
        say(&t, FAIL,
            "libaor.so not found (looked in %s/ and %s/../lib/%s); `aor run` cannot preload "
            "programs",
            self ? self : "?", self ? self : "?", getenv("AOR_LIB") ? " and AOR_LIB" : "");
    char *aord = aor_cli_find_aord(self);
    if (aord)
        say(&t, OK, "aord: %s", aord);
    else
        say(&t, WARN, "aord not found next to aor or on PATH: `aor run` cannot start it");

    if (data)
        check_trust(&t, data, have_ca);
    if (data)
        check_wget(&t, data);
    if (data && have_ca) /* (no CA yet: nothing to trust, said above) */
        check_debian_urllib3(&t, data);
    printf("%d failed, %d warnings\n", t.fails, t.warns);
    free(aord);
    free(lib);
    free(self);
    free(data);
    aor_config_free(cfg);
    fflush(stdout);
    return t.fails ? AOR_CLI_FAIL : AOR_CLI_OK;
}
