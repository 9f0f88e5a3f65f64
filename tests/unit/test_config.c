/* Unit tests for common/config.c (spec §3 file format, §3.1 validation, §3.2 secrets,
 * §3.3 embedded default). Each test writes a real file and sets real environment
 * variables, then checks what a user would see: the loaded values or the error text,
 * which must name FILE:LINE and must never contain a secret. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "config.h"

static char tmpdir[64];
static int file_no;

static const char *const provider_vars[] = {
    "OPENAI_API_KEY",     "ANTHROPIC_API_KEY", "GEMINI_API_KEY",   "GOOGLE_API_KEY",
    "OPENROUTER_API_KEY", "MISTRAL_API_KEY",   "GROQ_API_KEY",     "DEEPSEEK_API_KEY",
    "XAI_API_KEY",        "TOGETHER_API_KEY",  "FIREWORKS_API_KEY"};
#define NVARS (sizeof provider_vars / sizeof provider_vars[0])

static void clear_env(void) {
    char name[64];
    for (size_t i = 0; i < NVARS; i++) {
        unsetenv(provider_vars[i]);
        for (int n = 1; n <= 99; n++) {
            snprintf(name, sizeof name, "%s_%d", provider_vars[i], n);
            unsetenv(name);
        }
    }
    unsetenv("AOR_SOCKET");
    unsetenv("AOR_CONFIG");
    unsetenv("TEST_KEY_A");
    unsetenv("TEST_KEY_B");
}

/* Every test runs in a fresh directory that the XDG variables point into. */
static int setup(void **state) {
    snprintf(tmpdir, sizeof tmpdir, "/tmp/aor-test-config-XXXXXX");
    if (!mkdtemp(tmpdir))
        return -1;
    clear_env();
    char buf[128];
    snprintf(buf, sizeof buf, "%s/run", tmpdir);
    setenv("XDG_RUNTIME_DIR", buf, 1);
    snprintf(buf, sizeof buf, "%s/state", tmpdir);
    setenv("XDG_STATE_HOME", buf, 1);
    snprintf(buf, sizeof buf, "%s/config", tmpdir); /* holds no aor/aor.ini */
    setenv("XDG_CONFIG_HOME", buf, 1);
    setenv("HOME", tmpdir, 1);
    return 0;
}

static int teardown(void **state) {
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmpdir);
    clear_env();
    return system(cmd) == 0 ? 0 : -1;
}

/* Writes text to a new file in tmpdir (mkstemp); returns a malloc'd path. */
static char *write_file(const char *text, mode_t mode) {
    char *path = NULL;
    assert_true(asprintf(&path, "%s/cfg%d-XXXXXX", tmpdir, file_no++) > 0);
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    size_t len = strlen(text);
    assert_int_equal(write(fd, text, len), (ssize_t)len);
    assert_int_equal(fchmod(fd, mode), 0);
    close(fd);
    return path;
}

static aor_config *load_ok(const char *text, char **path_out) {
    char *path = write_file(text, 0644);
    char *errs = NULL;
    aor_config *cfg = aor_config_load(path, &errs);
    if (!cfg)
        fprintf(stderr, "unexpected errors:\n%s", errs ? errs : "(none)\n");
    assert_non_null(cfg);
    assert_null(errs);
    if (path_out)
        *path_out = path;
    else
        free(path);
    return cfg;
}

/* Loads text that must fail; returns the error text and the path it was written to. */
static char *load_err(const char *text, char **path_out) {
    char *path = write_file(text, 0644);
    char *errs = NULL;
    aor_config *cfg = aor_config_load(path, &errs);
    assert_null(cfg);
    assert_non_null(errs);
    *path_out = path;
    return errs;
}

/* Asserts that errs has a line "PATH:LINE: ..." containing needle. */
static void assert_err(const char *errs, const char *path, int line, const char *needle) {
    char prefix[256];
    snprintf(prefix, sizeof prefix, "%s:%d: ", path, line);
    const char *p = errs;
    while (p && *p) {
        const char *nl = strchr(p, '\n');
        size_t len = nl ? (size_t)(nl - p) : strlen(p);
        if (strncmp(p, prefix, strlen(prefix)) == 0) {
            char *l = strndup(p, len);
            int hit = strstr(l, needle) != NULL;
            free(l);
            if (hit)
                return;
        }
        p = nl ? nl + 1 : NULL;
    }
    fail_msg("no error \"%s...%s\" in:\n%s", prefix, needle, errs);
}

static int count_lines(const char *s) {
    int n = 0;
    for (; *s; s++)
        n += *s == '\n';
    return n;
}

static const char *const minimal = "[key \"a\"]\n"
                                   "env = TEST_KEY_A\n"
                                   "[provider \"p\"]\n"
                                   "dialect = openai\n"
                                   "base_url = https://api.example.com\n"
                                   "keys = a\n"
                                   "models = *\n";

/* ---- the spec's example and defaults ------------------------------------------------- */

static void test_spec_example_parses(void **state) {
    char *ca = write_file("-----BEGIN CERTIFICATE-----\nnot parsed here\n"
                          "-----END CERTIFICATE-----\n",
                          0644);
    char *text = NULL;
    assert_true(
        asprintf(&text,
                 "[daemon]\n"
                 "socket = %s/s.sock            ; default $XDG_RUNTIME_DIR/aor/aor.sock\n"
                 "listen = 127.0.0.1:8787 ; sidecar + admin; \"off\" disables\n"
                 "state  = %s/aor.db            ; SQLite file\n"
                 "\n"
                 "[routing]\n"
                 "auto_fallback = true\n"
                 "max_opaque_retries = unlimited   ; or N >= 0 (0 = first attempt only)\n"
                 "provider_priority_cache_threshold = 0\n"
                 "key_priority_cache_threshold = 0\n"
                 "strategy = priority              ; or round-robin (§5.5)\n"
                 "\n"
                 "[key \"openai-main\"]\n"
                 "env = OPENAI_API_KEY     ; the secret is read from this variable\n"
                 "priority = 0             ; lower is preferred\n"
                 "name = Main account      ; optional friendly name\n"
                 "\n"
                 "[key \"openai-backup\"]\n"
                 "env = OPENAI_API_KEY_2\n"
                 "priority = 1\n"
                 "\n"
                 "[provider \"openai\"]\n"
                 "dialect = openai         ; openai | anthropic | gemini\n"
                 "base_url = https://api.openai.com\n"
                 "keys = openai-main, openai-backup\n"
                 "models = gpt-4o, gpt-4o-mini, fast=gpt-4o-mini   ; canonical[=upstream id]\n"
                 "priority = 0\n"
                 "retry_after = honor      ; or ignore (§4.3)\n"
                 "intercept = api.openai.com   ; extra host names that mean this provider\n"
                 "ca_file = %s            ; optional extra CA for upstream TLS (tests,\n"
                 "                         ; corporate proxies); HTTPS_PROXY is honoured\n"
                 "\n"
                 "[model \"gpt-4o\"]\n"
                 "max_opaque_retries = 2   ; per-model override\n",
                 tmpdir, tmpdir, ca) > 0);
    setenv("OPENAI_API_KEY", "sk-test-main-0123456789", 1);
    setenv("OPENAI_API_KEY_2", "sk-test-backup-0123456789", 1);
    char *path = NULL;
    aor_config *cfg = load_ok(text, &path);

    assert_string_equal(cfg->source, path);
    assert_int_equal(cfg->embedded, 0);
    assert_string_equal(cfg->listen, "127.0.0.1:8787");
    char want[256];
    snprintf(want, sizeof want, "%s/s.sock", tmpdir);
    assert_string_equal(cfg->socket_path, want);
    snprintf(want, sizeof want, "%s/aor.db", tmpdir);
    assert_string_equal(cfg->state_path, want);
    assert_int_equal(cfg->auto_fallback, 1);
    assert_int_equal(cfg->max_opaque_retries, AOR_RETRIES_UNLIMITED);
    assert_int_equal(cfg->strategy, AOR_STRATEGY_PRIORITY);

    assert_int_equal(cfg->nkeys, 2);
    assert_string_equal(cfg->keys[0].name, "openai-main");
    assert_string_equal(cfg->keys[0].env, "OPENAI_API_KEY");
    assert_string_equal(cfg->keys[0].secret, "sk-test-main-0123456789");
    assert_string_equal(cfg->keys[0].friendly, "Main account");
    assert_int_equal(cfg->keys[1].priority, 1);
    assert_string_equal(cfg->keys[1].secret, "sk-test-backup-0123456789");

    assert_int_equal(aor_config_count_providers(cfg), 1);
    const aor_provider_cfg *p = &cfg->providers[0];
    assert_string_equal(p->name, "openai");
    assert_false(p->implicit);
    assert_int_equal(p->dialect, AOR_DIALECT_OPENAI);
    assert_string_equal(p->base_url, "https://api.openai.com");
    assert_string_equal(p->host, "api.openai.com");
    assert_int_equal(p->port, 443);
    assert_int_equal(p->nkeys, 2);
    assert_int_equal(p->key_idx[0], 0);
    assert_int_equal(p->key_idx[1], 1);
    assert_int_equal(p->nmodels, 3);
    assert_int_equal(p->models_any, 0);
    assert_string_equal(p->models[2].canonical, "fast");
    assert_string_equal(p->models[2].upstream, "gpt-4o-mini");
    assert_int_equal(p->retry_after_ignore, 0);
    assert_int_equal(p->nintercept, 1);
    assert_string_equal(p->intercept[0], "api.openai.com");
    assert_string_equal(p->ca_file, ca);
    assert_int_equal(p->passthrough, 0);

    assert_int_equal(cfg->nmodels, 1);
    assert_int_equal(aor_config_retries_for(cfg, "gpt-4o"), 2);
    assert_int_equal(aor_config_retries_for(cfg, "gpt-4o-mini"), AOR_RETRIES_UNLIMITED);
    aor_config_free(cfg);
    free(path);
    free(text);
    free(ca);
}

static void test_defaults_of_every_option(void **state) {
    setenv("TEST_KEY_A", "secret-a", 1);
    aor_config *cfg = load_ok(minimal, NULL);
    char want[256];
    snprintf(want, sizeof want, "%s/run/aor/aor.sock", tmpdir);
    assert_string_equal(cfg->socket_path, want);
    snprintf(want, sizeof want, "%s/state/aor/aor.db", tmpdir);
    assert_string_equal(cfg->state_path, want);
    assert_string_equal(cfg->listen, "127.0.0.1:8787");
    assert_null(cfg->env_file);
    assert_int_equal(cfg->body_max, 32L * 1024 * 1024);
    assert_int_equal(cfg->auto_fallback, 1);
    assert_int_equal(cfg->max_opaque_retries, AOR_RETRIES_UNLIMITED);
    assert_int_equal(cfg->provider_priority_cache_threshold, 0);
    assert_int_equal(cfg->key_priority_cache_threshold, 0);
    assert_int_equal(cfg->strategy, AOR_STRATEGY_PRIORITY);
    assert_true(cfg->backoff_initial_s == 5);
    assert_true(cfg->backoff_max_s == 86400);
    assert_true(cfg->quota_cooldown_s == 120);
    assert_true(cfg->auth_cooldown_s == 120);
    assert_int_equal(cfg->breaker_failures, 3);
    assert_true(cfg->breaker_window_s == 60);
    assert_true(cfg->breaker_open_s == 30);
    assert_int_equal(cfg->keys[0].priority, 0);
    assert_null(cfg->keys[0].friendly);
    const aor_provider_cfg *p = &cfg->providers[0];
    assert_int_equal(p->priority, 0);
    assert_int_equal(p->retry_after_ignore, 0);
    assert_int_equal(p->nintercept, 0);
    assert_null(p->ca_file);
    assert_int_equal(p->models_any, 1);
    assert_int_equal(p->nmodels, 0);
    assert_int_equal(cfg->nmodels, 0);
    aor_config_free(cfg);
}

static void test_default_paths_without_xdg(void **state) {
    setenv("TEST_KEY_A", "secret-a", 1);
    unsetenv("XDG_RUNTIME_DIR");
    unsetenv("XDG_STATE_HOME");
    aor_config *cfg = load_ok(minimal, NULL);
    char want[256];
    snprintf(want, sizeof want, "/tmp/aor-%lu/aor.sock", (unsigned long)getuid());
    assert_string_equal(cfg->socket_path, want);
    snprintf(want, sizeof want, "%s/.local/state/aor/aor.db", tmpdir);
    assert_string_equal(cfg->state_path, want);
    aor_config_free(cfg);
}

/* $AOR_SOCKET wins over the default and over `socket =` in the file. */
static void test_aor_socket_wins(void **state) {
    setenv("TEST_KEY_A", "secret-a", 1);
    setenv("AOR_SOCKET", "/tmp/from-env.sock", 1);
    aor_config *cfg = load_ok(minimal, NULL);
    assert_string_equal(cfg->socket_path, "/tmp/from-env.sock");
    aor_config_free(cfg);
    char *text = NULL;
    assert_true(asprintf(&text, "[daemon]\nsocket = /tmp/from-file.sock\n%s", minimal) > 0);
    cfg = load_ok(text, NULL);
    assert_string_equal(cfg->socket_path, "/tmp/from-env.sock");
    aor_config_free(cfg);
    unsetenv("AOR_SOCKET");
    cfg = load_ok(text, NULL);
    assert_string_equal(cfg->socket_path, "/tmp/from-file.sock");
    aor_config_free(cfg);
    free(text);
}

/* A socket path too long for a Unix socket address that came from the environment is
 * reported against the variable, not the configuration file that did not set it (QA). */
static void test_long_socket_from_env_names_the_variable(void **state) {
    setenv("TEST_KEY_A", "secret-a", 1);
    char longp[200];
    memset(longp, 'x', sizeof longp - 1);
    memcpy(longp, "/tmp/", 5);
    longp[sizeof longp - 1] = '\0';
    setenv("AOR_SOCKET", longp, 1);
    char *path = NULL;
    char *errs = load_err(minimal, &path);
    char want[300];
    snprintf(want, sizeof want, "AOR_SOCKET: socket path %s is longer than 107 bytes", longp);
    assert_non_null(strstr(errs, want));
    assert_null(strstr(errs, path));
    free(errs);
    free(path);
    unsetenv("AOR_SOCKET");
    const char *old = getenv("XDG_RUNTIME_DIR");
    char *saved = old ? strdup(old) : NULL;
    setenv("XDG_RUNTIME_DIR", longp, 1);
    errs = load_err(minimal, &path);
    snprintf(want, sizeof want, "XDG_RUNTIME_DIR: socket path %s/aor/aor.sock is longer", longp);
    assert_non_null(strstr(errs, want));
    free(errs);
    free(path);
    if (saved)
        setenv("XDG_RUNTIME_DIR", saved, 1);
    else
        unsetenv("XDG_RUNTIME_DIR");
    free(saved);
}

static void test_every_option_set(void **state) {
    setenv("TEST_KEY_A", "secret-a", 1);
    setenv("TEST_KEY_B", "secret-b", 1);
    const char *text = "[daemon]\n"
                       "listen = off\n"
                       "state = ~/db/aor.db\n"
                       "body_max = 8M\n"
                       "[routing]\n"
                       "auto_fallback = no\n"
                       "max_opaque_retries = 0\n"
                       "provider_priority_cache_threshold = 4\n"
                       "key_priority_cache_threshold = 7\n"
                       "strategy = round-robin\n"
                       "backoff_initial_s = 0.5\n"
                       "backoff_max_s = 600\n"
                       "quota_cooldown_s = 0\n"
                       "auth_cooldown_s = 30\n"
                       "breaker_failures = 5\n"
                       "breaker_window_s = 10\n"
                       "breaker_open_s = 2.5\n"
                       "[key \"a\"]\n"
                       "env = TEST_KEY_A\n"
                       "priority = 2\n"
                       "[key \"b\"]\n"
                       "env = TEST_KEY_B\n"
                       "priority = -1\n"
                       "name = Backup (team)\n"
                       "[provider \"p\"]\n"
                       "dialect = anthropic\n"
                       "base_url = http://127.0.0.1:9999/mock/\n"
                       "keys = b, a\n"
                       "models = claude, *\n"
                       "priority = 3\n"
                       "retry_after = ignore\n"
                       "intercept = API.Example.com, other.example.org, Localhost.\n";
    aor_config *cfg = load_ok(text, NULL);
    assert_null(cfg->listen);
    char want[256];
    snprintf(want, sizeof want, "%s/db/aor.db", tmpdir);
    assert_string_equal(cfg->state_path, want);
    assert_int_equal(cfg->body_max, 8L * 1024 * 1024);
    assert_int_equal(cfg->auto_fallback, 0);
    assert_int_equal(cfg->max_opaque_retries, 0);
    assert_int_equal(cfg->provider_priority_cache_threshold, 4);
    assert_int_equal(cfg->key_priority_cache_threshold, 7);
    assert_int_equal(cfg->strategy, AOR_STRATEGY_ROUND_ROBIN);
    assert_true(cfg->backoff_initial_s == 0.5);
    assert_true(cfg->backoff_max_s == 600);
    assert_true(cfg->quota_cooldown_s == 0);
    assert_true(cfg->auth_cooldown_s == 30);
    assert_int_equal(cfg->breaker_failures, 5);
    assert_true(cfg->breaker_window_s == 10);
    assert_true(cfg->breaker_open_s == 2.5);
    assert_int_equal(cfg->keys[0].priority, 2);
    assert_int_equal(cfg->keys[1].priority, -1);
    assert_string_equal(cfg->keys[1].friendly, "Backup (team)");
    const aor_provider_cfg *p = &cfg->providers[0];
    assert_int_equal(p->dialect, AOR_DIALECT_ANTHROPIC);
    assert_string_equal(p->base_url, "http://127.0.0.1:9999/mock");
    assert_string_equal(p->host, "127.0.0.1");
    assert_int_equal(p->port, 9999);
    assert_int_equal(p->nkeys, 2);
    assert_string_equal(cfg->keys[p->key_idx[0]].name, "b"); /* order as written */
    assert_string_equal(cfg->keys[p->key_idx[1]].name, "a");
    assert_int_equal(p->models_any, 1);
    assert_int_equal(p->nmodels, 1);
    assert_int_equal(p->priority, 3);
    assert_int_equal(p->retry_after_ignore, 1);
    assert_int_equal(p->nintercept, 3);
    assert_string_equal(p->intercept[0], "api.example.com");
    /* Stored as the name it means: aord resolves "localhost." against no /etc/hosts
     * line, so curl-like clients that resolve it themselves were not intercepted (QA). */
    assert_string_equal(p->intercept[2], "localhost");
    assert_true(aor_config_provider_owns_host(p, "127.0.0.1"));
    assert_true(aor_config_provider_owns_host(p, "other.example.org"));
    assert_true(aor_config_provider_owns_host(p, "API.EXAMPLE.COM."));
    assert_false(aor_config_provider_owns_host(p, "example.com"));
    aor_config_free(cfg);
}

/* ---- value syntax ------------------------------------------------------------------------ */

static void test_base_url_normalised(void **state) {
    setenv("TEST_KEY_A", "secret-a", 1);
    const char *text = "[key \"a\"]\nenv = TEST_KEY_A\n"
                       "[provider \"one\"]\ndialect = openai\n"
                       "base_url = HTTPS://Example.COM:8443/Api/V1//\nkeys = a\nmodels = *\n"
                       "[provider \"two\"]\ndialect = openai\n"
                       "base_url = http://Mock.Local\nkeys = a\nmodels = *\n"
                       "[provider \"three\"]\ndialect = gemini\n"
                       "base_url = https://[::1]:8443\nkeys = a\nmodels = *\n"
                       "[provider \"openrouter\"]\nkeys = a\nmodels = *\n";
    aor_config *cfg = load_ok(text, NULL);
    assert_string_equal(cfg->providers[0].base_url, "https://example.com:8443/Api/V1");
    assert_string_equal(cfg->providers[0].host, "example.com");
    assert_int_equal(cfg->providers[0].port, 8443);
    assert_string_equal(cfg->providers[1].base_url, "http://mock.local");
    assert_int_equal(cfg->providers[1].port, 80);
    assert_string_equal(cfg->providers[2].base_url, "https://[::1]:8443");
    assert_string_equal(cfg->providers[2].host, "::1");
    /* A known provider name supplies dialect and base_url (with its path prefix). */
    assert_string_equal(cfg->providers[3].base_url, "https://openrouter.ai/api");
    assert_string_equal(cfg->providers[3].host, "openrouter.ai");
    assert_int_equal(cfg->providers[3].dialect, AOR_DIALECT_OPENAI);
    assert_int_equal(aor_config_provider_index(cfg, "three"), 2);
    assert_int_equal(aor_config_provider_index(cfg, "four"), -1);
    aor_config_free(cfg);
}

static void test_listen_forms(void **state) {
    setenv("TEST_KEY_A", "secret-a", 1);
    static const struct {
        const char *in, *out;
    } ok[] = {{"127.0.0.1:9000", "127.0.0.1:9000"},
              {"127.1.2.3:1", "127.1.2.3:1"},
              {"localhost:8787", "127.0.0.1:8787"},
              {"[::1]:8787", "[::1]:8787"}};
    for (size_t i = 0; i < sizeof ok / sizeof ok[0]; i++) {
        char *text = NULL;
        assert_true(asprintf(&text, "[daemon]\nlisten = %s\n%s", ok[i].in, minimal) > 0);
        aor_config *cfg = load_ok(text, NULL);
        assert_string_equal(cfg->listen, ok[i].out);
        aor_config_free(cfg);
        free(text);
    }
    static const char *const bad[] = {"0.0.0.0:8787", "192.168.1.2:80", "[::]:8787",
                                      "127.0.0.1",    "127.0.0.1:0",    "127.0.0.1:70000",
                                      "::1:8787",     "example.com:80"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        char *text = NULL, *path = NULL;
        assert_true(asprintf(&text, "[daemon]\nlisten = %s\n%s", bad[i], minimal) > 0);
        char *errs = load_err(text, &path);
        assert_err(errs, path, 2, "listen = ");
        assert_int_equal(count_lines(errs), 1);
        free(errs);
        free(path);
        free(text);
    }
    /* QA: "127.1" is loopback; it was refused as "only loopback addresses". */
    char *path = NULL;
    char *errs = load_err("[daemon]\nlisten = 127.1:8787\n", &path);
    assert_err(errs, path, 2, "is a short form of a loopback address; write all four parts");
    free(errs);
    free(path);
}

static void test_bad_values_each_reported(void **state) {
    setenv("TEST_KEY_A", "secret-a", 1);
    const char *text = "[daemon]\n"                             /* 1 */
                       "body_max = lots\n"                      /* 2 */
                       "socket = \n"                            /* 3 */
                       "[routing]\n"                            /* 4 */
                       "auto_fallback = maybe\n"                /* 5 */
                       "max_opaque_retries = -1\n"              /* 6 */
                       "key_priority_cache_threshold = x\n"     /* 7 */
                       "strategy = round_robin\n"               /* 8 */
                       "backoff_initial_s = 0\n"                /* 9 */
                       "breaker_failures = 0\n"                 /* 10 */
                       "quota_cooldown_s = -5\n"                /* 11 */
                       "breaker_window_s = 1e3\n"               /* 12 */
                       "[key \"a\"]\n"                          /* 13 */
                       "env = TEST_KEY_A\n"                     /* 14 */
                       "priority = high\n"                      /* 15 */
                       "[provider \"p\"]\n"                     /* 16 */
                       "dialect = openia\n"                     /* 17 */
                       "base_url = ftp://x.example\n"           /* 18 */
                       "keys = a, , a\n"                        /* 19 */
                       "models = gpt-4o, ,gpt-4o, *=x, f=*\n"   /* 20 */
                       "retry_after = always\n"                 /* 21 */
                       "intercept = https://x.example, 127.1\n" /* 22 */
                       "ca_file = /nonexistent/ca.pem\n"        /* 23 */
                       "[model \"gpt-4o\"]\n"                   /* 24 */
                       "max_opaque_retries = lots\n";           /* 25 */
    char *path = NULL;
    char *errs = load_err(text, &path);
    assert_err(errs, path, 2, "body_max = lots");
    assert_err(errs, path, 3, "socket has an empty value");
    assert_err(errs, path, 5, "auto_fallback = maybe: expected true or false");
    assert_err(errs, path, 6, "max_opaque_retries = -1");
    assert_err(errs, path, 7, "key_priority_cache_threshold = x");
    assert_err(errs, path, 8, "did you mean round-robin?");
    assert_err(errs, path, 9, "backoff_initial_s = 0");
    assert_err(errs, path, 10, "breaker_failures = 0");
    assert_err(errs, path, 11, "quota_cooldown_s = -5");
    assert_err(errs, path, 12, "breaker_window_s = 1e3");
    assert_err(errs, path, 15, "priority = high");
    assert_err(errs, path, 17, "did you mean openai?");
    assert_err(errs, path, 18, "base_url must start with https:// or http://");
    assert_err(errs, path, 19, "keys: empty item");
    assert_err(errs, path, 19, "keys: \"a\" is listed twice");
    assert_err(errs, path, 20, "models: empty item");
    assert_err(errs, path, 20, "\"gpt-4o\" is listed twice");
    assert_err(errs, path, 20, "models: \"*=x\": '*' (every model of the dialect");
    assert_err(errs, path, 20, "models: \"f=*\": '*' (every model of the dialect");
    assert_err(errs, path, 21, "retry_after = always: expected honor or ignore");
    assert_err(errs, path, 22, "intercept: \"https://x.example\" is not a host name");
    assert_err(errs, path, 22, "intercept: \"127.1\" is an IP address, not a host name");
    assert_err(errs, path, 23, "ca_file /nonexistent/ca.pem cannot be read");
    assert_err(errs, path, 25, "max_opaque_retries = lots");
    free(errs);
    free(path);
}

/* backoff_initial_s over the cap: at the line set, saying which side to move, and that
 * the cap is the default when only backoff_initial_s was written (fresh-user pass). */
static void test_backoff_initial_over_max(void **state) {
    char *path = NULL;
    char *errs = load_err("[routing]\nbackoff_initial_s = 90000\n", &path);
    assert_err(errs, path, 2,
               "backoff_max_s (86400 s, the default) is smaller than backoff_initial_s (90000)");
    assert_err(errs, path, 2, "or set backoff_max_s");
    free(errs);
    free(path);
    errs = load_err("[routing]\nbackoff_initial_s = 60\nbackoff_max_s = 30\n", &path);
    assert_err(errs, path, 3, "backoff_max_s (30) is smaller than backoff_initial_s (60)");
    assert_err(errs, path, 3, "or raise backoff_max_s");
    free(errs);
    free(path);
}

/* The messages name what is wrong (fresh-user pass, 2026-12-03): a number over the
 * limit said "> 0"; a models item with an empty side was shown as "" or cut at '='. */
static void test_messages_name_the_real_problem(void **state) {
    char *path = NULL;
    char *errs =
        load_err("[routing]\nbackoff_max_s = 99999999999\nquota_cooldown_s = 1e5\n", &path);
    assert_err(errs, path, 2, "at most 1000000000");
    assert_err(errs, path, 3, "from 0 to 1000000000");
    free(errs);
    free(path);
    setenv("TEST_KEY_A", "secret-a", 1);
    errs = load_err("[key \"a\"]\nenv = TEST_KEY_A\n"
                    "[provider \"p\"]\ndialect = openai\nbase_url = https://api.example.com\n"
                    "keys = a\n"
                    "models = gpt-4o, =x, y=, a b=c\n",
                    &path);
    assert_err(errs, path, 7, "\"=x\": the canonical name (before '=') is empty");
    assert_err(errs, path, 7, "\"y=\": the upstream name (after '=') is empty");
    assert_err(errs, path, 7, "\"a b=c\": \"a b\" is not a model name");
    free(errs);
    free(path);
    /* QA: a Gemini alias to an id that cannot be a path segment passed check-config and
     * was never applied (the canonical name went upstream). An OpenAI one may have '/'. */
    errs = load_err("[key \"a\"]\nenv = TEST_KEY_A\n"
                    "[provider \"g\"]\ndialect = gemini\n"
                    "base_url = https://generativelanguage.googleapis.com\nkeys = a\n"
                    "models = t=tunedModels/my-tuned, f=gemini-2.0-flash\n"
                    "[provider \"o\"]\ndialect = openai\nbase_url = https://api.example.com\n"
                    "keys = a\nmodels = x=accounts/fireworks/models/y\n",
                    &path);
    assert_err(errs, path, 7, "upstream id \"tunedModels/my-tuned\" cannot be a Gemini model");
    assert_null(strstr(errs, "gemini-2.0-flash"));
    assert_null(strstr(errs, "accounts/fireworks"));
    free(errs);
    free(path);
}

static void test_base_url_rejects_credentials_without_echo(void **state) {
    setenv("TEST_KEY_A", "secret-a", 1);
    const char *text = "[key \"a\"]\nenv = TEST_KEY_A\n"
                       "[provider \"p\"]\ndialect = openai\n"
                       "base_url = https://user:hunter2@api.example.com\n"
                       "keys = a\nmodels = *\n"
                       "[provider \"q\"]\ndialect = openai\n"
                       "base_url = https://api.example.com/v1?x=1\n"
                       "keys = a\nmodels = *\n";
    char *path = NULL;
    char *errs = load_err(text, &path);
    assert_err(errs, path, 5, "must not contain credentials");
    assert_err(errs, path, 10, "must not contain a query");
    assert_null(strstr(errs, "hunter2"));
    free(errs);
    free(path);
}

static void test_models_mapping(void **state) {
    setenv("TEST_KEY_A", "secret-a", 1);
    const char *text = "[key \"a\"]\nenv = TEST_KEY_A\n"
                       "[provider \"list\"]\ndialect = openai\nbase_url = https://a.example\n"
                       "keys = a\nmodels = gpt-4o, fast = gpt-4o-mini,smart=o3\n"
                       "[provider \"any\"]\ndialect = openai\nbase_url = https://b.example\n"
                       "keys = a\nmodels = *, fast=llama-3-8b\n";
    aor_config *cfg = load_ok(text, NULL);
    const aor_provider_cfg *l = &cfg->providers[0], *a = &cfg->providers[1];
    int listed = -1;
    assert_string_equal(aor_config_upstream_model(l, "gpt-4o", &listed), "gpt-4o");
    assert_int_equal(listed, 1);
    assert_string_equal(aor_config_upstream_model(l, "fast", &listed), "gpt-4o-mini");
    assert_int_equal(listed, 1);
    assert_string_equal(aor_config_upstream_model(l, "smart", &listed), "o3");
    assert_string_equal(aor_config_upstream_model(l, "claude", &listed), "claude");
    assert_int_equal(listed, 0);
    assert_string_equal(aor_config_upstream_model(a, "claude", &listed), "claude");
    assert_int_equal(listed, 1);
    assert_string_equal(aor_config_upstream_model(a, "fast", &listed), "llama-3-8b");
    assert_string_equal(aor_config_upstream_model(a, "x", NULL), "x");
    aor_config_free(cfg);
}

/* ---- §3.1 rules ------------------------------------------------------------------------- */

/* A typo in `env =` names the set variable it probably meant (QA), by name only. */
static void test_rule1_env_typo_hint(void **state) {
    setenv("QA_OPENAI_KEY", "sk-typo-hint-secret-0123456789", 1);
    const char *text = "[key \"a\"]\n"
                       "env = QA_OPENAI_KYE\n"
                       "[provider \"p\"]\ndialect = openai\nbase_url = https://x.example\n"
                       "keys = a\nmodels = *\n";
    char *path = NULL;
    char *errs = load_err(text, &path);
    assert_err(errs, path, 2,
               "QA_OPENAI_KYE is not set or empty; did you mean QA_OPENAI_KEY, "
               "which is set?");
    assert_null(strstr(errs, "sk-typo-hint-secret"));
    free(errs);
    free(path);
    /* A variable another key names is no hint: that would be a second error. */
    const char *two = "[key \"a\"]\nenv = QA_OPENAI_KEY\n[key \"b\"]\nenv = QA_OPENAI_KEZ\n"
                      "[provider \"p\"]\ndialect = openai\nbase_url = https://x.example\n"
                      "keys = a, b\nmodels = *\n";
    errs = load_err(two, &path);
    assert_err(errs, path, 4, "QA_OPENAI_KEZ is not set or empty (aord");
    free(errs);
    free(path);
    unsetenv("QA_OPENAI_KEY");
}

/* env must be a variable's name. A wrong one is shown when that helps, not when it may
 * be the secret pasted in its place (QA: a base64 key with '/' was echoed). */
static void test_env_must_be_a_name(void **state) {
    const char *aws = "wJalrXUtnFEMI/K7MDENG/"
                      "bPxRfiCYEXAMPLEKEY"; /* fake, split */
    char *text = NULL;
    assert_true(asprintf(&text,
                         "[key \"a\"]\nenv = ENVK # comment\n"
                         "[key \"b\"]\nenv = %s\n"
                         "[key \"c\"]\nenv = PATH\n"
                         "[provider \"p\"]\ndialect = openai\nbase_url = https://x.example\n"
                         "keys = a, b, c\nmodels = *\n",
                         aws) > 0);
    char *path = NULL;
    char *errs = load_err(text, &path);
    assert_err(errs, path, 2, "env = ENVK # comment: expected the NAME of an environment variable");
    assert_err(errs, path, 4, "env = (not shown: it may be the secret itself): expected the NAME");
    assert_null(strstr(errs, "bPxRfiCY"));
    /* QA: env = PATH was taken, and $PATH went upstream as the key. */
    assert_err(errs, path, 6, "env = PATH names a variable the system sets");
    free(errs);
    free(path);
    free(text);
}

/* ca_file must hold a PEM certificate (QA: /etc/passwd was accepted, and every request
 * then failed its TLS set-up and backed off every key as transient). */
static void test_ca_file_must_hold_a_certificate(void **state) {
    setenv("TEST_KEY_A", "secret-a", 1);
    char *junk = write_file("root:x:0:0:root:/root:/bin/bash\n", 0644);
    char *text = NULL;
    assert_true(asprintf(&text,
                         "[key \"a\"]\nenv = TEST_KEY_A\n"
                         "[provider \"p\"]\ndialect = openai\nbase_url = https://x.example\n"
                         "keys = a\nmodels = *\nca_file = %s\n",
                         junk) > 0);
    char *path = NULL;
    char *errs = load_err(text, &path);
    assert_err(errs, path, 8, "holds no PEM certificate");
    free(errs);
    free(path);
    free(text);
    unlink(junk);
    free(junk);
}

static void test_rule1_env_not_set(void **state) {
    setenv("TEST_KEY_B", " \t ", 1); /* only white space: empty once trimmed (QA) */
    const char *text = "[key \"a\"]\n"
                       "env = TEST_KEY_A\n"
                       "[key \"b\"]\n"
                       "env = TEST_KEY_B\n"
                       "[key \"c\"]\n"
                       "name = no env here\n"
                       "[provider \"p\"]\ndialect = openai\nbase_url = https://x.example\n"
                       "keys = a, b, c\nmodels = *\n";
    char *path = NULL;
    char *errs = load_err(text, &path);
    assert_err(errs, path, 2, "TEST_KEY_A is not set or empty");
    assert_err(errs, path, 4, "TEST_KEY_B is not set or empty");
    assert_err(errs, path, 5, "[key \"c\"] has no env option");
    assert_int_equal(count_lines(errs), 3);
    free(errs);
    free(path);
}

/* The client commands load with AOR_CONFIG_SECRETS_OPTIONAL: an unset variable is no
 * error (secret NULL), a set one is read, a malformed one is still refused. */
static void test_secrets_optional_for_clients(void **state) {
    setenv("TEST_KEY_B", "secret-b", 1);
    const char *text = "[key \"a\"]\n"
                       "env = TEST_KEY_A\n"
                       "[key \"b\"]\n"
                       "env = TEST_KEY_B\n"
                       "[provider \"p\"]\ndialect = openai\nbase_url = https://x.example\n"
                       "keys = a, b\nmodels = *\n";
    char *path = write_file(text, 0644);
    char *errs = NULL;
    aor_config *cfg = aor_config_load_flags(path, AOR_CONFIG_SECRETS_OPTIONAL, &errs);
    assert_null(errs);
    assert_non_null(cfg);
    assert_int_equal(cfg->nkeys, 2);
    assert_null(cfg->keys[0].secret);
    assert_string_equal(cfg->keys[1].secret, "secret-b");
    aor_config_free(cfg);
    /* Without the flag: the same file is refused. */
    cfg = aor_config_load_flags(path, 0, &errs);
    assert_null(cfg);
    assert_err(errs, path, 2, "TEST_KEY_A is not set or empty");
    free(errs);
    errs = NULL;
    setenv("TEST_KEY_A", "two words", 1);
    cfg = aor_config_load_flags(path, AOR_CONFIG_SECRETS_OPTIONAL, &errs);
    assert_null(cfg);
    assert_err(errs, path, 2, "contains a space");
    free(errs);
    free(path);
}

/* Spec §2: interception is by name. An address in any form getaddrinfo reads is none
 * (127.0.0.1 in an intercept list was accepted and never intercepted, QA); localhost is
 * published when an intercept list names it, not as a base_url host, with or without
 * its trailing dot (http://localhost.:8080 was published, QA). */
static void test_host_published(void **state) {
    (void)state;
    const char *addrs[] = {"127.0.0.1", "::1", "127.1", "2130706433", "0x7f.1", "10.0.0.1"};
    for (size_t i = 0; i < sizeof addrs / sizeof *addrs; i++) {
        assert_true(aor_config_host_is_address(addrs[i]));
        assert_false(aor_config_host_published(addrs[i], 1));
        assert_false(aor_config_host_published(addrs[i], 0));
    }
    assert_false(aor_config_host_is_address("api.openai.com"));
    assert_false(aor_config_host_is_address("1password.example"));
    assert_false(aor_config_host_is_address(NULL));
    assert_true(aor_config_host_published("api.openai.com", 0));
    assert_true(aor_config_host_published("localhost", 1));
    assert_false(aor_config_host_published("localhost", 0));
    assert_false(aor_config_host_published("localhost.", 0));
    assert_false(aor_config_host_published("LOCALHOST", 0));
    assert_false(aor_config_host_published("", 1));
    assert_false(aor_config_host_published(NULL, 1));
}

/* More intercepted (host, port) entries than a shim keeps (AOR_HOSTS_MAX) is refused,
 * naming the provider that goes past it (QA: the shim dropped the rest silently). */
static void test_too_many_intercept_hosts(void **state) {
    setenv("TEST_KEY_A", "secret-a", 1);
    char *text = NULL;
    size_t len = 0;
    FILE *m = open_memstream(&text, &len);
    assert_non_null(m);
    fprintf(m, "[key \"a\"]\nenv = TEST_KEY_A\n");
    for (int p = 0; p < 2; p++) {
        fprintf(m,
                "[provider \"p%d\"]\ndialect = openai\nbase_url = https://p%d.example:8443\n"
                "keys = a\nmodels = *\nintercept = ",
                p, p);
        for (int h = 0; h < 100; h++)
            fprintf(m, "%sh%d-%d.example", h ? ", " : "", p, h);
        fprintf(m, "\n");
    }
    fclose(m);
    /* p0: 10 built-in + 1 + 100 x 2 ports = 211, fine; p1 brings it to 412. */
    char *path = NULL;
    char *errs = load_err(text, &path);
    assert_err(errs, path, 9, "[provider \"p1\"]");
    assert_non_null(strstr(errs, "more than 256 (host, port) entries"));
    assert_int_equal(count_lines(errs), 1);
    free(errs);
    free(path);
    free(text);
}

static void test_rule2_same_env_twice(void **state) {
    setenv("TEST_KEY_A", "secret-a", 1);
    const char *text = "[key \"a\"]\n"
                       "env = TEST_KEY_A\n"
                       "[key \"b\"]\n"
                       "env = TEST_KEY_A\n"
                       "[provider \"p\"]\ndialect = openai\nbase_url = https://x.example\n"
                       "keys = a, b\nmodels = *\n";
    char *path = NULL;
    char *errs = load_err(text, &path);
    assert_err(errs, path, 4, "env = TEST_KEY_A is already used by key \"a\" (line 2)");
    assert_int_equal(count_lines(errs), 1);
    free(errs);
    free(path);
}

static void test_rule3_undeclared_key(void **state) {
    setenv("TEST_KEY_A", "secret-a", 1);
    const char *text = "[key \"openai-main\"]\n"
                       "env = TEST_KEY_A\n"
                       "[provider \"p\"]\n"
                       "dialect = openai\n"
                       "base_url = https://x.example\n"
                       "keys = openai-main, openai-mian, nothing-like-it\n"
                       "models = *\n";
    char *path = NULL;
    char *errs = load_err(text, &path);
    assert_err(errs, path, 6, "key \"openai-mian\" is not declared");
    assert_err(errs, path, 6, "did you mean \"openai-main\"?");
    assert_err(errs, path, 6, "key \"nothing-like-it\" is not declared");
    assert_int_equal(count_lines(errs), 2);
    free(errs);
    free(path);
}

static void test_rule4_provider_needs_keys_and_models(void **state) {
    setenv("TEST_KEY_A", "secret-a", 1);
    const char *text = "[key \"a\"]\n"
                       "env = TEST_KEY_A\n"
                       "[provider \"nokeys\"]\n"
                       "dialect = openai\n"
                       "base_url = https://x.example\n"
                       "models = *\n"
                       "[provider \"nomodels\"]\n"
                       "dialect = openai\n"
                       "base_url = https://y.example\n"
                       "keys = a\n"
                       "[provider \"bare\"]\n";
    char *path = NULL;
    char *errs = load_err(text, &path);
    assert_err(errs, path, 3, "[provider \"nokeys\"] has no keys");
    assert_err(errs, path, 7, "[provider \"nomodels\"] has no models");
    assert_err(errs, path, 11, "[provider \"bare\"] has no dialect");
    assert_err(errs, path, 11, "[provider \"bare\"] has no base_url");
    assert_err(errs, path, 11, "[provider \"bare\"] has no keys");
    assert_err(errs, path, 11, "[provider \"bare\"] has no models");
    assert_int_equal(count_lines(errs), 6);
    free(errs);
    free(path);
}

static void test_rule5_model_not_served(void **state) {
    setenv("TEST_KEY_A", "secret-a", 1);
    const char *text = "[key \"a\"]\n"
                       "env = TEST_KEY_A\n"
                       "[provider \"p\"]\n"
                       "dialect = openai\n"
                       "base_url = https://x.example\n"
                       "keys = a\n"
                       "models = gpt-4o, fast=gpt-4o-mini\n"
                       "[model \"gpt-4o\"]\n"
                       "max_opaque_retries = 1\n"
                       "[model \"fast\"]\n"
                       "[model \"gpt-40\"]\n"
                       "max_opaque_retries = 1\n";
    char *path = NULL;
    char *errs = load_err(text, &path);
    assert_err(errs, path, 11, "[model \"gpt-40\"] names a model no provider serves");
    assert_err(errs, path, 11, "did you mean \"gpt-4o\"?");
    assert_int_equal(count_lines(errs), 1);
    free(errs);
    free(path);

    /* models = * serves every model. */
    const char *any = "[key \"a\"]\nenv = TEST_KEY_A\n"
                      "[provider \"p\"]\ndialect = openai\nbase_url = https://x.example\n"
                      "keys = a\nmodels = *\n"
                      "[model \"whatever\"]\nmax_opaque_retries = 4\n";
    aor_config *cfg = load_ok(any, NULL);
    assert_int_equal(aor_config_retries_for(cfg, "whatever"), 4);
    assert_int_equal(cfg->models[0].max_opaque_retries, 4);
    aor_config_free(cfg);
}

static void test_rule6_inline_secrets_rejected_without_echo(void **state) {
    setenv("TEST_KEY_A", "secret-a", 1);
    const char *openai = "sk-"
                         "proj-Ab3dEf6hIj9kLm2nOp5qRs8tUv1wXy4z"; /* fake, split */
    const char *anthropic = "sk-"
                            "ant-api03-Zz9yXx8wWv7uUt6sSr5qQp4oOn3mM"; /* fake */
    const char *google = "AIza"
                         "SyD1a2B3c4D5e6F7g8H9i0J1k2L3m4N5o6P"; /* fake */
    const char *random = "q8Jd93KfLs02Mx7Nv5Bc1Zr4Ty6Wp0Qa9Ue3Io";
    char *text = NULL;
    assert_true(asprintf(&text,
                         "[key \"a\"]\n"                      /* 1 */
                         "env = TEST_KEY_A\n"                 /* 2 */
                         "[provider \"openai\"]\n"            /* 3 */
                         "keys = a\n"                         /* 4 */
                         "models = *\n"                       /* 5 */
                         "api_key = %s\n"                     /* 6 */
                         "[key \"b\"]\n"                      /* 7 */
                         "env = %s\n"                         /* 8 */
                         "name = %s\n"                        /* 9 */
                         "[routing]\n"                        /* 10 */
                         "token = %s\n"                       /* 11 */
                         "%s\n"                               /* 12: a bare secret line */
                         "[daemon]\n"                         /* 13 */
                         "openai_api_key = OPENAI_API_KEY\n", /* 14: the name says it */
                         openai, anthropic, random, google, anthropic) > 0);
    char *path = NULL;
    char *errs = load_err(text, &path);
    assert_err(errs, path, 6, "option api_key looks like a secret");
    assert_err(errs, path, 6, "[key \"openai-main\"] with the line env = OPENAI_API_KEY");
    assert_err(errs, path, 8, "the value of env looks like a secret");
    assert_err(errs, path, 8, "[key \"b\"] with the line env = B_API_KEY");
    assert_err(errs, path, 9, "the value of name looks like a secret");
    assert_err(errs, path, 11, "option token looks like a secret");
    /* Outside a [key]/[provider], the example is the provider the key's prefix shows
     * (QA: a Google key got "export OPENAI_API_KEY=..."). */
    assert_err(errs, path, 11, "export GEMINI_API_KEY=<the secret>");
    assert_err(errs, path, 11, "[key \"gemini-main\"] with the line env = GEMINI_API_KEY");
    assert_err(errs, path, 12, "looks like a secret");
    assert_err(errs, path, 12, "export ANTHROPIC_API_KEY=<the secret>");
    assert_err(errs, path, 14, "option openai_api_key looks like a secret");
    assert_null(strstr(errs, openai));
    assert_null(strstr(errs, anthropic));
    assert_null(strstr(errs, google));
    assert_null(strstr(errs, random));
    assert_null(strstr(errs, "Ab3dEf6h")); /* not even a piece of it */
    free(errs);
    free(path);
    free(text);
}

/* Long names that are not secrets stay accepted. */
static void test_rule6_no_false_positives(void **state) {
    setenv("TEST_KEY_A", "secret-a", 1);
    const char *text = "[key \"a\"]\nenv = TEST_KEY_A\nname = Team account for the nightly batch\n"
                       "[provider \"p\"]\ndialect = openai\nbase_url = https://x.example\n"
                       "keys = a\n"
                       "models = meta-llama-3-70b-instruct-turbo-free-edition, "
                       "accounts/fireworks/models/llama-v3p1-405b-instruct, "
                       "claude-3-5-sonnet-20241022, gemini-2.0-flash-thinking-exp-01-21\n";
    aor_config *cfg = load_ok(text, NULL);
    assert_int_equal(cfg->providers[0].nmodels, 4);
    aor_config_free(cfg);
}

static void test_rule7_unknown_sections_and_options(void **state) {
    setenv("TEST_KEY_A", "secret-a", 1);
    const char *text = "[deamon]\n"                     /* 1 */
                       "listen = off\n"                 /* 2: ignored with its section */
                       "[routing]\n"                    /* 3 */
                       "stratgy = priority\n"           /* 4 */
                       "base_url = x\n"                 /* 5 */
                       "[key \"a\"]\n"                  /* 6 */
                       "env = TEST_KEY_A\n"             /* 7 */
                       "[provider \"p\"]\n"             /* 8 */
                       "dialect = openai\n"             /* 9 */
                       "base_url = https://x.example\n" /* 10 */
                       "key = a\n"                      /* 11 */
                       "keys = a\n"                     /* 12 */
                       "models = *\n"                   /* 13 */
                       "colour = blue\n"                /* 14 */
                       "[providers \"q\"]\n"            /* 15 */
                       "[frobnicate]\n";                /* 16 */
    char *path = NULL;
    char *errs = load_err(text, &path);
    assert_err(errs, path, 1, "unknown section [deamon] (did you mean [daemon]?)");
    assert_err(errs, path, 4, "unknown option stratgy in [routing]; did you mean strategy?");
    assert_err(errs, path, 5, "base_url belongs in [provider \"NAME\"]");
    assert_err(errs, path, 11, "unknown option key in [provider \"p\"]; did you mean keys?");
    assert_err(errs, path, 14, "unknown option colour in [provider \"p\"]");
    assert_err(errs, path, 15, "unknown section [providers] (did you mean [provider]?)");
    assert_err(errs, path, 16, "unknown section [frobnicate]");
    assert_int_equal(count_lines(errs), 7);
    free(errs);
    free(path);
}

/* QA: base_url = https://api.example.com/v1 (the OPENAI_BASE_URL form) was taken
 * silently and every request went to .../v1/v1/...: valid, so a warning naming the line
 * and the fix; a path prefix that is not a version is no warning. */
static void test_versioned_base_url_warns(void **state) {
    (void)state;
    setenv("TEST_KEY_A", "secret-a", 1);
    const char *text = "[key \"a\"]\n"                               /* 1 */
                       "env = TEST_KEY_A\n"                          /* 2 */
                       "[provider \"o\"]\n"                          /* 3 */
                       "dialect = openai\n"                          /* 4 */
                       "base_url = https://api.example.com/v1/\n"    /* 5 */
                       "keys = a\n"                                  /* 6 */
                       "models = m\n"                                /* 7 */
                       "[provider \"g\"]\n"                          /* 8 */
                       "dialect = gemini\n"                          /* 9 */
                       "base_url = https://g.example.com/v1beta\n"   /* 10 */
                       "keys = a\n"                                  /* 11 */
                       "models = n\n"                                /* 12 */
                       "[provider \"r\"]\n"                          /* 13 */
                       "dialect = openai\n"                          /* 14 */
                       "base_url = https://openrouter.example/api\n" /* 15 */
                       "keys = a\n"                                  /* 16 */
                       "models = k\n";                               /* 17 */
    char *path = NULL;
    aor_config *cfg = load_ok(text, &path);
    assert_int_equal(cfg->nwarnings, 2);
    assert_err(cfg->warnings[0], path, 5,
               "base_url https://api.example.com/v1 ends in /v1, but clients send paths that "
               "start with /v1 already and aor appends them (https://api.example.com/v1/v1/...); "
               "did you mean base_url = https://api.example.com?");
    assert_null(strchr(cfg->warnings[0], '\n'));
    assert_err(cfg->warnings[1], path, 10, "did you mean base_url = https://g.example.com?");
    aor_config_free(cfg);
    free(path);
    cfg = load_ok(minimal, NULL);
    assert_int_equal(cfg->nwarnings, 0);
    assert_null(cfg->warnings);
    aor_config_free(cfg);
}

/* A [key] no provider lists is never used: a warning at its section, none when every key
 * is listed, and none when a keys list has an error (it may have meant that key). */
static void test_unused_key_warns(void **state) {
    (void)state;
    setenv("TEST_KEY_A", "secret-a", 1);
    setenv("TEST_KEY_B", "secret-b", 1);
    const char *text = "[key \"a\"]\n"                  /* 1 */
                       "env = TEST_KEY_A\n"             /* 2 */
                       "[key \"spare\"]\n"              /* 3 */
                       "env = TEST_KEY_B\n"             /* 4 */
                       "[provider \"o\"]\n"             /* 5 */
                       "base_url = https://o.example\n" /* 6 */
                       "dialect = openai\n"             /* 7 */
                       "keys = a\n"                     /* 8 */
                       "models = m\n";                  /* 9 */
    char *path = NULL;
    aor_config *cfg = load_ok(text, &path);
    assert_int_equal(cfg->nwarnings, 1);
    assert_err(cfg->warnings[0], path, 3,
               "[key \"spare\"] is in no provider's keys list, so no request uses it; add it to "
               "a provider's keys = ... or remove the section");
    aor_config_free(cfg);
    free(path);
    /* Listed: no warning. */
    const char *listed = "[key \"a\"]\nenv = TEST_KEY_A\n[key \"spare\"]\nenv = TEST_KEY_B\n"
                         "[provider \"o\"]\nbase_url = https://o.example\ndialect = openai\n"
                         "keys = a, spare\nmodels = m\n";
    cfg = load_ok(listed, NULL);
    assert_int_equal(cfg->nwarnings, 0);
    aor_config_free(cfg);
    /* A keys list with a typo: its error, not also this warning. */
    const char *typo = "[key \"a\"]\nenv = TEST_KEY_A\n[key \"spare\"]\nenv = TEST_KEY_B\n"
                       "[provider \"o\"]\nbase_url = https://o.example\ndialect = openai\n"
                       "keys = a, spar\nmodels = m\n";
    char *errs = load_err(typo, &path);
    assert_non_null(strstr(errs, "key \"spar\" is not declared"));
    assert_null(strstr(errs, "no request uses it"));
    free(errs);
    free(path);
}

/* QA: an option that two other sections take got a hint naming only the first. */
static void test_rule7_hint_names_every_home(void **state) {
    (void)state;
    setenv("TEST_KEY_A", "secret-a", 1);
    const char *text = "[key \"a\"]\n"                  /* 1 */
                       "env = TEST_KEY_A\n"             /* 2 */
                       "[provider \"p\"]\n"             /* 3 */
                       "dialect = openai\n"             /* 4 */
                       "base_url = https://x.example\n" /* 5 */
                       "keys = a\n"                     /* 6 */
                       "models = m\n"                   /* 7 */
                       "max_opaque_retries = 1\n"       /* 8 */
                       "[model \"m\"]\n"                /* 9 */
                       "priority = 2\n"                 /* 10 */
                       "[provider \"q\"]\n"             /* 11 */
                       "stratgy = priority\n";          /* 12 */
    char *path = NULL;
    char *errs = load_err(text, &path);
    assert_err(errs, path, 8,
               "unknown option max_opaque_retries in [provider \"p\"] (max_opaque_retries "
               "belongs in [routing] or [model \"NAME\"])");
    assert_err(errs, path, 10,
               "unknown option priority in [model \"m\"] (priority belongs in [key \"NAME\"] or "
               "[provider \"NAME\"])");
    /* A misspelt option of another section: the hint and where it belongs (fresh-user). */
    assert_err(errs, path, 12,
               "unknown option stratgy in [provider \"q\"]; did you mean strategy? (strategy "
               "belongs in [routing])");
    free(errs);
    free(path);
}

/* The error line "PATH:LINE: ..." of errs (malloc'd), or a failed test when there is none. */
static char *err_line(const char *errs, const char *path, int line) {
    char prefix[256];
    snprintf(prefix, sizeof prefix, "%s:%d: ", path, line);
    for (const char *p = errs; p && *p;) {
        const char *nl = strchr(p, '\n');
        size_t len = nl ? (size_t)(nl - p) : strlen(p);
        if (strncmp(p, prefix, strlen(prefix)) == 0)
            return strndup(p, len);
        p = nl ? nl + 1 : NULL;
    }
    fail_msg("no error at %s in:\n%s", prefix, errs);
    return NULL;
}

/* Rule 7 hints also match word by word (docs/config.md): a plural or a missing word
 * still finds the option; a word that fits two options gets no guess. */
static void test_rule7_hints_by_words(void **state) {
    setenv("TEST_KEY_A", "secret-a", 1);
    const char *text = "[routing]\n"                    /* 1 */
                       "max_retries = 3\n"              /* 2 */
                       "retry = 3\n"                    /* 3 */
                       "cooldown = 3\n"                 /* 4: quota_ or auth_: no guess */
                       "[key \"a\"]\n"                  /* 5 */
                       "env = TEST_KEY_A\n"             /* 6 */
                       "[provider \"p\"]\n"             /* 7 */
                       "dialect = openai\n"             /* 8 */
                       "base_url = https://x.example\n" /* 9 */
                       "keys = a\n"                     /* 10 */
                       "models = gpt-4o\n"              /* 11 */
                       "retry = ignore\n"               /* 12 */
                       "[model \"gpt-4o\"]\n"           /* 13 */
                       "max_opaque_retry = 1\n"         /* 14 */
                       "retry = 1\n"                    /* 15 */
                       "opaque_count = 1\n";            /* 16: "count" matches nothing */
    char *path = NULL;
    char *errs = load_err(text, &path);
    assert_err(errs, path, 2,
               "unknown option max_retries in [routing]; did you mean max_opaque_retries?");
    assert_err(errs, path, 3,
               "unknown option retry in [routing]; did you mean max_opaque_retries?");
    assert_err(errs, path, 12,
               "unknown option retry in [provider \"p\"]; did you mean retry_after?");
    assert_err(errs, path, 14,
               "unknown option max_opaque_retry in [model \"gpt-4o\"]; did you mean "
               "max_opaque_retries?");
    assert_err(errs, path, 15,
               "unknown option retry in [model \"gpt-4o\"]; did you mean max_opaque_retries?");
    const int no_hint[] = {4, 16};
    for (size_t i = 0; i < 2; i++) {
        char *l = err_line(errs, path, no_hint[i]);
        assert_non_null(strstr(l, "unknown option"));
        if (strstr(l, "did you mean"))
            fail_msg("unexpected hint: %s", l);
        free(l);
    }
    assert_int_equal(count_lines(errs), 7);
    free(errs);
    free(path);
}

/* A key's friendly name is printed by `aor status`: control characters (ESC would
 * drive the terminal) are an error at their line, and the value is not echoed raw. */
static void test_key_name_control_characters(void **state) {
    setenv("TEST_KEY_A", "secret-a", 1);
    setenv("TEST_KEY_B", "secret-b", 1);
    const char *text = "[key \"a\"]\n"                  /* 1 */
                       "env = TEST_KEY_A\n"             /* 2 */
                       "name = evil\x1b[2Jname\n"       /* 3 */
                       "[key \"b\"]\n"                  /* 4 */
                       "env = TEST_KEY_B\n"             /* 5 */
                       "name = bell\x07\n"              /* 6 */
                       "[provider \"p\"]\n"             /* 7 */
                       "dialect = openai\n"             /* 8 */
                       "base_url = https://x.example\n" /* 9 */
                       "keys = a, b\n"                  /* 10 */
                       "models = *\n";                  /* 11 */
    char *path = NULL;
    char *errs = load_err(text, &path);
    assert_err(errs, path, 3, "name contains control characters");
    assert_err(errs, path, 6, "name contains control characters");
    assert_null(strchr(errs, '\x1b'));
    assert_null(strchr(errs, '\x07'));
    fprintf(stderr, "ERRS[%s]\n", errs);
    assert_int_equal(count_lines(errs), 2);
    free(errs);
    free(path);
    /* Printable UTF-8 stays fine. */
    aor_config *cfg = load_ok("[key \"a\"]\nenv = TEST_KEY_A\nname = Équipe nuit\n"
                              "[provider \"p\"]\ndialect = openai\nbase_url = https://x.example\n"
                              "keys = a\nmodels = *\n",
                              NULL);
    assert_string_equal(cfg->keys[0].friendly, "Équipe nuit");
    aor_config_free(cfg);
    /* Not UTF-8 (a Latin-1 file), or a C1 control: the admin API sends names as JSON,
     * which must be UTF-8 (QA: a Latin-1 name made /admin/api/state invalid JSON). */
    text = "[key \"a\"]\n"         /* 1 */
           "env = TEST_KEY_A\n"    /* 2 */
           "name = caf\xe9 nuit\n" /* 3 */
           "[key \"b\"]\n"         /* 4 */
           "env = TEST_KEY_B\n"    /* 5 */
           "name = csi\xc2\x9b"
           "2J\n"                           /* 6 */
           "[provider \"p\"]\n"             /* 7 */
           "dialect = openai\n"             /* 8 */
           "base_url = https://x.example\n" /* 9 */
           "keys = a, b\n"                  /* 10 */
           "models = *\n";                  /* 11 */
    errs = load_err(text, &path);
    assert_err(errs, path, 3, "name is not UTF-8 text (byte 0xe9)");
    assert_err(errs, path, 6, "name contains control characters (U+009B)");
    assert_null(strchr(errs, '\xe9'));
    assert_null(strstr(errs, "\xc2\x9b"));
    fprintf(stderr, "ERRS[%s]\n", errs);
    assert_int_equal(count_lines(errs), 2);
    free(errs);
    free(path);
}

static void test_structure_errors(void **state) {
    setenv("TEST_KEY_A", "secret-a", 1);
    const char *text = "orphan = 1\n"                   /* 1 */
                       "[key \"a\"]\n"                  /* 2 */
                       "env = TEST_KEY_A\n"             /* 3 */
                       "env = TEST_KEY_A\n"             /* 4 */
                       "[key \"a\"]\n"                  /* 5 */
                       "env = OTHER\n"                  /* 6: ignored */
                       "[provider \"p\"]\n"             /* 7 */
                       "dialect = openai\n"             /* 8 */
                       "base_url = https://x.example\n" /* 9 */
                       "keys = a\n"                     /* 10 */
                       "models = *\n"                   /* 11 */
                       "just some words\n"              /* 12 */
                       "[key]\n"                        /* 13 */
                       "[daemon \"x\"]\n"               /* 14 */
                       "[key \"bad name!\"]\n"          /* 15 */
                       "[provider \"unterminated]\n"    /* 16 */
                       "[routing\n"                     /* 17 */
                       "= value\n";                     /* 18 */
    char *path = NULL;
    char *errs = load_err(text, &path);
    assert_err(errs, path, 1, "option orphan is outside of any section");
    assert_err(errs, path, 4, "env is set twice in [key \"a\"] (first on line 3)");
    assert_err(errs, path, 5, "duplicate section [key \"a\"] (first on line 2)");
    assert_err(errs, path, 12, "expected `name = value`");
    assert_err(errs, path, 13, "[key] needs a name");
    assert_err(errs, path, 14, "[daemon] takes no name");
    assert_err(errs, path, 15, "invalid key name \"bad name!\"");
    assert_err(errs, path, 16, "malformed section header");
    assert_err(errs, path, 17, "malformed section header");
    assert_err(errs, path, 17, "the options up to the next section header are not checked");
    assert_err(errs, path, 18, "missing option name");
    assert_int_equal(count_lines(errs), 10);
    free(errs);
    free(path);
}

/* Options of a skipped section are not applied, but one run still shows every error
 * (§3.1): an inline secret in any section, an unknown option in a duplicate one (QA: a
 * duplicate section hid the secret written inside it). */
static void test_skipped_sections_still_report(void **state) {
    setenv("TEST_KEY_A", "secret-a", 1);
    const char *openai = "sk-"
                         "proj-Ab3dEf6hIj9kLm2nOp5qRs8tUv1wXy4z"; /* fake, split */
    char *text = NULL;
    assert_true(asprintf(&text,
                         "[key \"a\"]\n"                  /* 1 */
                         "env = TEST_KEY_A\n"             /* 2 */
                         "[key \"a\"]\n"                  /* 3: duplicate */
                         "api_key = %s\n"                 /* 4 */
                         "envv = OTHER\n"                 /* 5 */
                         "env = OTHER\n"                  /* 6: ignored */
                         "[deamon]\n"                     /* 7: unknown */
                         "foo = bar\n"                    /* 8: ignored */
                         "secret = %s\n"                  /* 9 */
                         "[provider \"p\"]\n"             /* 10 */
                         "dialect = openai\n"             /* 11 */
                         "base_url = https://x.example\n" /* 12 */
                         "keys = a\n"                     /* 13 */
                         "models = *\n",                  /* 14 */
                         openai, openai) > 0);
    char *path = NULL;
    char *errs = load_err(text, &path);
    assert_err(errs, path, 3, "duplicate section [key \"a\"] (first on line 1)");
    assert_err(errs, path, 4, "looks like a secret");
    assert_err(errs, path, 4, "[key \"a\"] with the line env = TEST_KEY_A"); /* its own */
    assert_err(errs, path, 5, "unknown option envv in [key \"a\"]; did you mean env?");
    assert_err(errs, path, 7, "unknown section [deamon]");
    assert_err(errs, path, 9, "looks like a secret");
    assert_int_equal(count_lines(errs), 5);
    assert_null(strstr(errs, "Ab3dEf6h"));
    free(errs);
    free(path);
    free(text);
}

/* A value in double quotes is taken without them, as git config does (QA: `dialect =
 * "openai"` got "did you mean openai?"); a secret in quotes is still refused. */
static void test_quoted_values(void **state) {
    setenv("TEST_KEY_A", "secret-a", 1);
    aor_config *cfg = load_ok("[key \"a\"]\nenv = \"TEST_KEY_A\"\nname = \"Main account\"\n"
                              "[provider \"p\"]\ndialect = 'anthropic'\n"
                              "base_url = \"https://x.example\"\nkeys = \"a\"\n"
                              "models = \"m1, m2\"\n",
                              NULL);
    assert_string_equal(cfg->keys[0].friendly, "Main account");
    assert_string_equal(cfg->keys[0].secret, "secret-a");
    assert_int_equal(cfg->providers[0].dialect, AOR_DIALECT_ANTHROPIC);
    assert_string_equal(cfg->providers[0].base_url, "https://x.example");
    aor_config_free(cfg);
    const char *openai = "sk-"
                         "proj-Ab3dEf6hIj9kLm2nOp5qRs8tUv1wXy4z"; /* fake, split */
    char *text = NULL;
    assert_true(asprintf(&text,
                         "[key \"a\"]\nenv = TEST_KEY_A\nname = \"%s\"\n" /* 3 */
                         "[provider \"p\"]\ndialect = \"\"\n"             /* 5 */
                         "base_url = https://x.example\nkeys = a\nmodels = *\n",
                         openai) > 0);
    char *path = NULL;
    char *errs = load_err(text, &path);
    assert_err(errs, path, 3, "looks like a secret");
    assert_err(errs, path, 5, "dialect has an empty value");
    assert_null(strstr(errs, "Ab3dEf6h"));
    free(errs);
    free(path);
    free(text);
}

/* QA: `name = "Work ; shared"` was cut at the ';' (inih's inline comment) and kept as
 * `"Work`, silently. Inside quotes ';' and '#' are part of the value; a comment may
 * follow the closing quote; a quote inside a value ('Bob's key') is kept; an unclosed
 * quote or text after the closing one is an error at its line. */
static void test_quoted_values_keep_semicolons(void **state) {
    setenv("TEST_KEY_A", "secret-a", 1);
    setenv("TEST_KEY_B", "secret-b", 1);
    setenv("TEST_QK_C", "secret-c", 1);
    setenv("TEST_QK_D", "secret-d", 1);
    aor_config *cfg = load_ok("[key \"a\"]\nenv = TEST_KEY_A\nname = \"Work ; shared # 2\"\n"
                              "[key \"b\"]\nenv = TEST_KEY_B\nname = 'Bob's key' ; it's b\n"
                              "[key \"c\"]\nenv = TEST_QK_C\nname = \"c\" ; \"quoted\" note\n"
                              "[key \"d\"]\nenv = TEST_QK_D\nname = plain ; a comment\n"
                              "[provider \"p\"]\ndialect = openai\n"
                              "base_url = https://x.example\nkeys = a, b, c, d\nmodels = *\n",
                              NULL);
    assert_string_equal(cfg->keys[0].friendly, "Work ; shared # 2");
    assert_string_equal(cfg->keys[1].friendly, "Bob's key");
    assert_string_equal(cfg->keys[2].friendly, "c");
    assert_string_equal(cfg->keys[3].friendly, "plain");
    aor_config_free(cfg);
    unsetenv("TEST_QK_C");
    unsetenv("TEST_QK_D");

    char *path = NULL;
    char *errs = load_err("[key \"a\"]\nenv = TEST_KEY_A\nname = \"Work ; shared\n" /* 3 */
                          "[provider \"p\"]\ndialect = \"openai\" x\n"              /* 5 */
                          "base_url = https://x.example\nkeys = a\nmodels = *\n",
                          &path);
    assert_err(errs, path, 3, "the value starts with a double quote (\") but has no closing one");
    assert_err(errs, path, 5, "text after the closing quote of the value");
    assert_err(errs, path, 4, "has no dialect"); /* its value was refused */
    assert_int_equal(count_lines(errs), 3);
    free(errs);
    free(path);
}

/* QA: a key commented out (a whole-line comment, or after a value, quoted or not) was
 * accepted; it is still a secret in the file (§3.2, rule 6). Only key prefixes count in
 * comments: a commit hash or "sk-..." in prose is fine. */
static void test_secret_in_a_comment(void **state) {
    setenv("TEST_KEY_A", "secret-a", 1);
    const char *k1 = "sk-"
                     "proj-abcdefghijklmnopqrstuvwx"; /* fake, split */
    const char *k2 = "sk-"
                     "ant-api03-abcdefghijklmnopqrstu";
    const char *k3 = "AI"
                     "zaSyA1b2c3d4e5f6g7h8i9j0";
    char *text = NULL;
    assert_true(asprintf(&text,
                         "[key \"a\"]\nenv = TEST_KEY_A\n"
                         "; api_key = %s\n"                                  /* 3 */
                         "# OPENAI_API_KEY=%s\n"                             /* 4 */
                         "name = Main ; old %s\n"                            /* 5 */
                         "[provider \"p\"]\ndialect = \"openai\" ; was %s\n" /* 7 */
                         "base_url = https://x.example\nkeys = a\nmodels = *\n"
                         "; see 3f2a9b8c7d6e5f4a3b2c1d0e9f8a7b6c5d4e3f2a, sk-... keys\n" /* 11 */
                         "; Anthropic keys look like sk-ant-api03-..., OpenRouter's sk-or-v1-...\n"
                         "; keys look like sk-proj-...; model pplx-70b-online is old\n"
                         "# hf_transfer is enabled elsewhere; see platform.openai.com/api-keys\n"
                         "[model \"m\"] ; was %s\n" /* 15 */
                         "[model \"n\"] ; plain note\n",
                         k1, k2, k1, k3, k2) > 0);
    char *path = NULL;
    char *errs = load_err(text, &path);
    for (int line = 3; line <= 7; line += line == 5 ? 2 : 1)
        assert_err(errs, path, line, "a comment on this line holds what looks like a provider key");
    assert_err(errs, path, 15, "a comment on this line holds what looks like a provider key");
    assert_int_equal(count_lines(errs), 5);
    assert_null(strstr(errs, "abcdefgh"));
    assert_null(strstr(errs, "1b2c3d4"));
    free(errs);
    free(path);
    free(text);
}

/* A model name over the limit is named as too long, not as malformed (QA). */
static void test_model_name_too_long(void **state) {
    setenv("TEST_KEY_A", "secret-a", 1);
    char longname[202]; /* 201 bytes: one over the limit (200) */
    memset(longname, 'm', sizeof longname - 1);
    longname[sizeof longname - 1] = '\0';
    char *text = NULL;
    assert_true(asprintf(&text,
                         "[key \"a\"]\nenv = TEST_KEY_A\n[provider \"p\"]\ndialect = openai\n"
                         "base_url = https://x.example\nkeys = a\nmodels = ok, %s\n",
                         longname) > 0);
    char *path = NULL;
    char *errs = load_err(text, &path);
    assert_err(errs, path, 7, "is longer than 200 characters");
    assert_int_equal(count_lines(errs), 1);
    free(errs);
    free(path);
    free(text);
}

/* All errors at once, sorted by line, each "FILE:LINE: message". */
static void test_many_errors_at_once_sorted(void **state) {
    const char *text = "[routing]\n"
                       "strategy = fastest\n"
                       "[key \"a\"]\n"
                       "env = TEST_KEY_A\n"
                       "[provider \"p\"]\n"
                       "dialect = cobol\n"
                       "base_url = https://x.example\n"
                       "keys = a, b\n"
                       "models = *\n"
                       "[model \"m\"]\n"
                       "max_opaque_retries = many\n";
    char *path = NULL;
    char *errs = load_err(text, &path);
    assert_int_equal(count_lines(errs), 5);
    int last = 0;
    char prefix[256];
    snprintf(prefix, sizeof prefix, "%s:", path);
    for (const char *p = errs; *p;) {
        assert_int_equal(strncmp(p, prefix, strlen(prefix)), 0);
        int line = (int)strtol(p + strlen(prefix), NULL, 10);
        assert_true(line >= last);
        last = line;
        p = strchr(p, '\n') + 1;
    }
    assert_err(errs, path, 2, "strategy = fastest");
    assert_err(errs, path, 4, "TEST_KEY_A is not set");
    assert_err(errs, path, 6, "dialect = cobol");
    assert_err(errs, path, 8, "key \"b\" is not declared");
    assert_err(errs, path, 11, "max_opaque_retries = many");
    free(errs);
    free(path);
}

/* inih details: inline comments, indentation, CRLF, BOM, ':' separator, long lines. */
static void test_lexical_details(void **state) {
    setenv("TEST_KEY_A", "secret-a", 1);
    char models[3000];
    size_t o = 0;
    for (int i = 0; i < 150 && o + 20 < sizeof models; i++)
        o += (size_t)snprintf(models + o, sizeof models - o, "%smodel-%d", i ? ", " : "", i);
    char *text = NULL;
    assert_true(asprintf(&text,
                         "\xEF\xBB\xBF# comment\r\n"
                         "  [key \"a\"]   ; trailing comment\r\n"
                         "    env = TEST_KEY_A   ; indented option\r\n"
                         "    name: Main;not-a-comment\r\n"
                         "[Provider \"p\"]\r\n"
                         "dialect=openai\r\n"
                         "Base_URL = https://x.example\r\n"
                         "keys = a\r\n"
                         "models = %s\r\n",
                         models) > 0);
    aor_config *cfg = load_ok(text, NULL);
    assert_string_equal(cfg->keys[0].env, "TEST_KEY_A");
    assert_string_equal(cfg->keys[0].friendly, "Main;not-a-comment");
    assert_int_equal(cfg->providers[0].nmodels, 150);
    assert_string_equal(cfg->providers[0].models[149].canonical, "model-149");
    aor_config_free(cfg);
    free(text);

    char *huge = malloc(5000);
    assert_non_null(huge);
    memset(huge, 'x', 4999);
    huge[4999] = '\0';
    assert_true(asprintf(&text, "%s[routing]\nstrategy = %s\nstrategy2 = 1\n", minimal, huge) > 0);
    char *path = NULL;
    char *errs = load_err(text, &path);
    assert_err(errs, path, 9, "longer than 4096 characters");
    assert_err(errs, path, 10, "unknown option strategy2"); /* line numbers stay right */
    free(errs);
    free(path);
    free(text);
    free(huge);
}

/* ---- secrets from the environment and env_file (§3.2) ------------------------------------ */

static void test_env_secret_trimmed_and_checked(void **state) {
    setenv("TEST_KEY_A", "  secret-a\n", 1);
    aor_config *cfg = load_ok(minimal, NULL);
    assert_string_equal(cfg->keys[0].secret, "secret-a");
    aor_config_free(cfg);

    setenv("TEST_KEY_A", "secret with-space-Xyz", 1);
    char *path = NULL;
    char *errs = load_err(minimal, &path);
    assert_err(errs, path, 2, "TEST_KEY_A in the environment contains a space");
    assert_null(strstr(errs, "with-space-Xyz"));
    free(errs);
    free(path);

    setenv("TEST_KEY_A", "secret\x01ctl-Xyz", 1);
    errs = load_err(minimal, &path);
    assert_err(errs, path, 2, "contains a control character");
    assert_null(strstr(errs, "ctl-Xyz"));
    free(errs);
    free(path);
}

static char *envfile_config(const char *ef_path) {
    char *text = NULL;
    assert_true(asprintf(&text,
                         "[daemon]\n"
                         "env_file = %s\n"
                         "[key \"a\"]\nenv = TEST_KEY_A\n"
                         "[key \"b\"]\nenv = TEST_KEY_B\n"
                         "[provider \"p\"]\ndialect = openai\nbase_url = https://x.example\n"
                         "keys = a, b\nmodels = *\n",
                         ef_path) > 0);
    return text;
}

static void test_env_file(void **state) {
    char *ef = write_file("# secrets\n"
                          "export TEST_KEY_A=from-file-a\n"
                          "TEST_KEY_B = \"from-file-b\"\n"
                          "\n",
                          0600);
    char *text = envfile_config(ef);
    aor_config *cfg = load_ok(text, NULL);
    assert_string_equal(cfg->env_file, ef);
    assert_string_equal(cfg->keys[0].secret, "from-file-a");
    assert_string_equal(cfg->keys[1].secret, "from-file-b");
    aor_config_free(cfg);

    /* The environment wins over env_file. */
    setenv("TEST_KEY_B", "from-env-b", 1);
    cfg = load_ok(text, NULL);
    assert_string_equal(cfg->keys[0].secret, "from-file-a");
    assert_string_equal(cfg->keys[1].secret, "from-env-b");
    aor_config_free(cfg);
    free(text);
    free(ef);
    unsetenv("TEST_KEY_B");

    /* A UTF-8 BOM before the first line, as some editors write (QA). */
    ef = write_file("\xEF\xBB\xBFTEST_KEY_A=bom-a\r\nTEST_KEY_B=bom-b\r\n", 0600);
    text = envfile_config(ef);
    cfg = load_ok(text, NULL);
    assert_string_equal(cfg->keys[0].secret, "bom-a");
    assert_string_equal(cfg->keys[1].secret, "bom-b");
    aor_config_free(cfg);
    free(text);
    free(ef);
}

static void test_env_file_mode_checked(void **state) {
    char *ef = write_file("TEST_KEY_A=leaky-secret-1\nTEST_KEY_B=leaky-secret-2\n", 0644);
    char *text = envfile_config(ef);
    char *path = NULL;
    char *errs = load_err(text, &path);
    assert_err(errs, path, 2, "has mode 0644, open to group or others");
    assert_err(errs, path, 2, "chmod 600");
    assert_null(strstr(errs, "leaky-secret"));
    free(errs);
    free(path);
    assert_int_equal(chmod(ef, 0400), 0); /* stricter than 0600 is fine */
    aor_config *cfg = load_ok(text, NULL);
    assert_string_equal(cfg->keys[1].secret, "leaky-secret-2");
    aor_config_free(cfg);
    free(text);
    free(ef);
}

static void test_env_file_syntax_errors(void **state) {
    char *ef = write_file("TEST_KEY_A=ok-value\n"
                          "this-is-a-bare-secret-value\n"
                          "1BAD=hidden-value\n",
                          0600);
    char *text = envfile_config(ef);
    char *path = NULL;
    char *errs = load_err(text, &path);
    assert_err(errs, ef, 2, "expected VARIABLE=value");
    assert_err(errs, ef, 3, "not a valid environment variable name");
    assert_null(strstr(errs, "bare-secret"));
    assert_null(strstr(errs, "hidden-value"));
    /* TEST_KEY_A is in the file: no "add it to env_file" for it (QA), but that the file
     * is not used because of its errors (QA: it said "could not be read", though it was). */
    assert_null(strstr(errs, "add it to env_file"));
    assert_non_null(strstr(errs, "TEST_KEY_A is not set, and env_file"));
    assert_non_null(strstr(errs, "could not be used (its own error is listed with its path"));
    free(errs);
    free(path);
    free(text);
    free(ef);
}

/* A bad secret in env_file is reported at its own line there, with what is wrong with it
 * (fresh-user pass: it was reported at the [key]'s env line, with a three-way reason). */
static void test_env_file_bad_secret_line(void **state) {
    char *ef = write_file("# secrets\n"
                          "TEST_KEY_A=ok-value\n"
                          "TEST_KEY_B=sk-two words-Xyz\n",
                          0600);
    char *text = envfile_config(ef);
    char *path = NULL;
    char *errs = load_err(text, &path);
    assert_err(errs, ef, 3, "the value of TEST_KEY_B (the secret of key \"b\") contains a space");
    assert_null(strstr(errs, "words-Xyz"));
    assert_null(strstr(errs, "TEST_KEY_A"));
    free(errs);
    free(path);
    free(text);
    free(ef);
}

/* ---- finding the file and the embedded default (§3.3) ------------------------------------- */

static void test_explicit_missing_file_is_error(void **state) {
    char path[256], *errs = NULL;
    snprintf(path, sizeof path, "%s/nope.ini", tmpdir);
    assert_null(aor_config_load(path, &errs));
    assert_non_null(errs);
    assert_non_null(strstr(errs, path));
    assert_non_null(strstr(errs, "No such file"));
    free(errs);
    setenv("AOR_CONFIG", path, 1);
    assert_null(aor_config_load(NULL, &errs));
    assert_non_null(strstr(errs, path));
    free(errs);
}

static void test_aor_config_and_xdg_path(void **state) {
    setenv("TEST_KEY_A", "secret-a", 1);
    char *file = write_file(minimal, 0644);
    setenv("AOR_CONFIG", file, 1);
    char *errs = NULL;
    aor_config *cfg = aor_config_load(NULL, &errs);
    assert_non_null(cfg);
    assert_string_equal(cfg->source, file);
    aor_config_free(cfg);
    unsetenv("AOR_CONFIG");

    char dir[256], path[300];
    snprintf(dir, sizeof dir, "%s/config/aor", tmpdir);
    snprintf(path, sizeof path, "%s/aor.ini", dir);
    char mk[1024];
    snprintf(mk, sizeof mk, "mkdir -p '%s' && cp '%s' '%s'", dir, file, path);
    assert_int_equal(system(mk), 0);
    cfg = aor_config_load(NULL, &errs);
    assert_non_null(cfg);
    assert_string_equal(cfg->source, path);
    assert_int_equal(cfg->embedded, 0);
    /* A file replaces the embedded default: its keys are not read from the environment;
     * the known providers its sections do not cover are there keyless (implicit). */
    assert_int_equal(aor_config_count_providers(cfg), 1);
    int oi = aor_config_provider_index(cfg, "openai");
    assert_true(oi >= 0);
    assert_true(cfg->providers[oi].implicit && cfg->providers[oi].passthrough);
    assert_int_equal(cfg->providers[oi].nkeys, 0);
    aor_config_free(cfg);
    free(file);
}

static void test_embedded_numbered_siblings_in_order(void **state) {
    setenv("OPENAI_API_KEY", "sk-one", 1);
    setenv("OPENAI_API_KEY_3", "sk-three", 1);
    setenv("OPENAI_API_KEY_2", "sk-two", 1);
    setenv("OPENAI_API_KEY_12", "sk-twelve", 1);
    char *errs = NULL;
    aor_config *cfg = aor_config_load(NULL, &errs);
    assert_null(errs);
    assert_non_null(cfg);
    assert_int_equal(cfg->embedded, 1);
    assert_null(cfg->source);
    int i = aor_config_provider_index(cfg, "openai");
    assert_int_equal(i, 0);
    const aor_provider_cfg *p = &cfg->providers[i];
    assert_int_equal(p->passthrough, 0);
    assert_int_equal(p->models_any, 0); /* no list: models go to the host's owner */
    assert_int_equal(p->nmodels, 0);
    assert_int_equal(p->nkeys, 4);
    static const char *const names[] = {"OPENAI_API_KEY", "OPENAI_API_KEY_2", "OPENAI_API_KEY_3",
                                        "OPENAI_API_KEY_12"};
    static const char *const secrets[] = {"sk-one", "sk-two", "sk-three", "sk-twelve"};
    for (size_t k = 0; k < 4; k++) {
        const aor_key_cfg *key = &cfg->keys[p->key_idx[k]];
        assert_string_equal(key->name, names[k]);
        assert_string_equal(key->env, names[k]);
        assert_string_equal(key->secret, secrets[k]);
        assert_int_equal(key->priority, (int)k);
    }
    aor_config_free(cfg);
}

static void test_embedded_every_provider_passthrough_without_key(void **state) {
    char *errs = NULL;
    aor_config *cfg = aor_config_load(NULL, &errs);
    assert_non_null(cfg);
    assert_int_equal(cfg->nkeys, 0);
    static const struct {
        const char *name, *base, *host;
        aor_dialect d;
    } want[] = {
        {"openai", "https://api.openai.com", "api.openai.com", AOR_DIALECT_OPENAI},
        {"anthropic", "https://api.anthropic.com", "api.anthropic.com", AOR_DIALECT_ANTHROPIC},
        {"gemini", "https://generativelanguage.googleapis.com", "generativelanguage.googleapis.com",
         AOR_DIALECT_GEMINI},
        {"openrouter", "https://openrouter.ai/api", "openrouter.ai", AOR_DIALECT_OPENAI},
        {"mistral", "https://api.mistral.ai", "api.mistral.ai", AOR_DIALECT_OPENAI},
        {"groq", "https://api.groq.com/openai", "api.groq.com", AOR_DIALECT_OPENAI},
        {"deepseek", "https://api.deepseek.com", "api.deepseek.com", AOR_DIALECT_OPENAI},
        {"xai", "https://api.x.ai", "api.x.ai", AOR_DIALECT_OPENAI},
        {"together", "https://api.together.xyz", "api.together.xyz", AOR_DIALECT_OPENAI},
        {"fireworks", "https://api.fireworks.ai/inference", "api.fireworks.ai", AOR_DIALECT_OPENAI},
    };
    assert_int_equal(cfg->nproviders, sizeof want / sizeof want[0]);
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
        int idx = aor_config_provider_index(cfg, want[i].name);
        assert_true(idx >= 0);
        const aor_provider_cfg *p = &cfg->providers[idx];
        assert_string_equal(p->base_url, want[i].base);
        assert_string_equal(p->host, want[i].host);
        assert_int_equal(p->port, 443);
        assert_int_equal(p->dialect, want[i].d);
        assert_int_equal(p->nkeys, 0);
        assert_int_equal(p->passthrough, 1);
        assert_int_equal(p->models_any, 0);
        assert_true(aor_config_provider_owns_host(p, want[i].host));
    }
    aor_config_free(cfg);
}

static void test_embedded_gemini_and_google_keys(void **state) {
    setenv("GEMINI_API_KEY", "AIza-same", 1);
    setenv("GOOGLE_API_KEY", "AIza-same", 1); /* same key twice: counted once */
    setenv("GOOGLE_API_KEY_2", "AIza-other", 1);
    setenv("ANTHROPIC_API_KEY", "sk-ant-x", 1);
    char *errs = NULL;
    aor_config *cfg = aor_config_load(NULL, &errs);
    assert_non_null(cfg);
    const aor_provider_cfg *g = &cfg->providers[aor_config_provider_index(cfg, "gemini")];
    assert_int_equal(g->nkeys, 2);
    assert_string_equal(cfg->keys[g->key_idx[0]].name, "GEMINI_API_KEY");
    assert_string_equal(cfg->keys[g->key_idx[1]].name, "GOOGLE_API_KEY_2");
    const aor_provider_cfg *a = &cfg->providers[aor_config_provider_index(cfg, "anthropic")];
    assert_int_equal(a->nkeys, 1);
    assert_int_equal(a->passthrough, 0);
    const aor_provider_cfg *o = &cfg->providers[aor_config_provider_index(cfg, "openai")];
    assert_int_equal(o->passthrough, 1);
    aor_config_free(cfg);
}

static void test_embedded_bad_variable_reported(void **state) {
    setenv("OPENAI_API_KEY", "sk-good", 1);
    setenv("OPENAI_API_KEY_2", "sk-bad value-Qw8", 1);
    char *errs = NULL;
    assert_null(aor_config_load(NULL, &errs));
    assert_non_null(errs);
    assert_non_null(strstr(errs, "<environment>: the value of OPENAI_API_KEY_2 contains a space"));
    assert_null(strstr(errs, "value-Qw8"));
    free(errs);
    /* Only whitespace is no key, as if unset (QA: it stopped aord with exit 2). */
    setenv("OPENAI_API_KEY_2", " \t", 1);
    aor_config *cfg = aor_config_load(NULL, &errs);
    assert_non_null(cfg);
    const aor_provider_cfg *o = &cfg->providers[aor_config_provider_index(cfg, "openai")];
    assert_int_equal(o->nkeys, 1);
    assert_string_equal(cfg->keys[o->key_idx[0]].name, "OPENAI_API_KEY");
    aor_config_free(cfg);
}

/* The known providers that no [provider] section covers (by name or by owning their
 * host) are added after the sections, keyless: a request the shim intercepted for a
 * built-in host is passed through with the client's credential, not refused. */
static void test_implicit_known_providers(void **state) {
    setenv("TEST_KEY_A", "secret-a", 1);
    setenv("ANTHROPIC_API_KEY", "sk-ant-not-read", 1);
    const char *text = "[key \"a\"]\nenv = TEST_KEY_A\n"
                       "[provider \"openai\"]\ndialect = openai\nbase_url = https://gw.example\n"
                       "keys = a\nmodels = gpt-4o\n"
                       "[provider \"or\"]\ndialect = openai\nbase_url = https://x.example\n"
                       "intercept = openrouter.ai\nkeys = a\nmodels = m\n";
    aor_config *cfg = load_ok(text, NULL);
    assert_int_equal(aor_config_count_providers(cfg), 2);
    assert_int_equal(cfg->nproviders, 10); /* openai: name taken; openrouter: host owned */
    assert_int_equal(cfg->nkeys, 1);       /* the environment's keys are not read */
    assert_false(cfg->providers[0].implicit);
    assert_false(cfg->providers[1].implicit);
    /* The section named openai owns api.openai.com, as if it listed it in intercept;
     * "or" intercepts openrouter.ai itself: nothing is added to it. */
    assert_true(aor_config_provider_owns_host(&cfg->providers[0], "api.openai.com"));
    assert_int_equal(cfg->providers[0].nintercept, 1);
    assert_int_equal(cfg->providers[1].nintercept, 1);
    const char *want[] = {"anthropic", "gemini", "mistral",  "groq",
                          "deepseek",  "xai",    "together", "fireworks"};
    for (size_t i = 0; i < 8; i++) {
        const aor_provider_cfg *p = &cfg->providers[2 + i];
        assert_string_equal(p->name, want[i]);
        assert_true(p->implicit && p->passthrough);
        assert_int_equal(p->nkeys, 0);
        assert_int_equal(p->nmodels, 0);
        assert_false(p->models_any);
    }
    assert_string_equal(cfg->providers[2].base_url, "https://api.anthropic.com");
    assert_int_equal(cfg->providers[2].dialect, AOR_DIALECT_ANTHROPIC);
    assert_string_equal(cfg->providers[3].host, "generativelanguage.googleapis.com");
    aor_config_free(cfg);
    /* Another section that intercepts the known host keeps it: the named one gets none. */
    text = "[key \"a\"]\nenv = TEST_KEY_A\n"
           "[provider \"openai\"]\ndialect = openai\nbase_url = https://gw.example\n"
           "keys = a\nmodels = gpt-4o\n"
           "[provider \"mine\"]\ndialect = openai\nbase_url = https://y.example\n"
           "intercept = api.openai.com\nkeys = a\nmodels = m\n";
    cfg = load_ok(text, NULL);
    assert_int_equal(cfg->providers[0].nintercept, 0);
    assert_false(aor_config_provider_owns_host(&cfg->providers[0], "api.openai.com"));
    assert_true(aor_config_provider_owns_host(&cfg->providers[1], "api.openai.com"));
    aor_config_free(cfg);
    unsetenv("ANTHROPIC_API_KEY");
}

/* A file that only tunes [daemon]/[routing] keeps the providers of the environment. */
static void test_file_without_providers_uses_environment(void **state) {
    setenv("ANTHROPIC_API_KEY", "sk-ant-x", 1);
    const char *text = "[daemon]\nlisten = off\n[routing]\nstrategy = round-robin\n"
                       "[model \"claude-x\"]\nmax_opaque_retries = 1\n";
    char *path = NULL;
    aor_config *cfg = load_ok(text, &path);
    assert_string_equal(cfg->source, path);
    assert_int_equal(cfg->embedded, 1);
    assert_null(cfg->listen);
    assert_int_equal(cfg->strategy, AOR_STRATEGY_ROUND_ROBIN);
    assert_int_equal(cfg->nproviders, 10);
    const aor_provider_cfg *a = &cfg->providers[aor_config_provider_index(cfg, "anthropic")];
    assert_int_equal(a->nkeys, 1);
    assert_string_equal(cfg->keys[a->key_idx[0]].secret, "sk-ant-x");
    assert_int_equal(aor_config_retries_for(cfg, "claude-x"), 1);
    aor_config_free(cfg);
    free(path);

    /* Keys without any provider are a mistake, not a request for the default. */
    setenv("TEST_KEY_A", "secret-a", 1);
    char *errs = load_err("[daemon]\nlisten = off\n[key \"a\"]\nenv = TEST_KEY_A\n", &path);
    assert_err(errs, path, 3, "no [provider \"NAME\"] section uses them");
    free(errs);
    free(path);

    /* A [provider] section whose header is refused has its own error; "no [provider]
     * uses them" would only follow from it (fresh-user pass). */
    const char *bad_headers[] = {"[provider \"open ai\"]", "[provder \"p\"]"};
    for (size_t i = 0; i < 2; i++) {
        char *t = NULL;
        assert_true(asprintf(&t, "[key \"a\"]\nenv = TEST_KEY_A\n%s\nkeys = a\nmodels = m\n",
                             bad_headers[i]) > 0);
        errs = load_err(t, &path);
        assert_err(errs, path, 3, i == 0 ? "invalid provider name" : "did you mean [provider]");
        assert_null(strstr(errs, "section uses them"));
        free(errs);
        free(path);
        free(t);
    }
}

/* A file with only [daemon] env_file: the embedded default (no [key]/[provider]) takes
 * its key variables from env_file too, the process environment first (§3.2, §3.3). */
static void test_embedded_default_reads_env_file(void **state) {
    char *ef = write_file("OPENAI_API_KEY=sk-from-file-1\n"
                          "OPENAI_API_KEY_2=sk-from-file-2\n"
                          "ANTHROPIC_API_KEY=sk-ant-from-file\n",
                          0600);
    char *text = NULL;
    assert_true(asprintf(&text, "[daemon]\nenv_file = %s\n", ef) > 0);
    aor_config *cfg = load_ok(text, NULL);
    assert_int_equal(cfg->embedded, 1);
    const aor_provider_cfg *o = &cfg->providers[aor_config_provider_index(cfg, "openai")];
    assert_int_equal(o->nkeys, 2);
    assert_int_equal(o->passthrough, 0);
    assert_string_equal(cfg->keys[o->key_idx[0]].name, "OPENAI_API_KEY");
    assert_string_equal(cfg->keys[o->key_idx[0]].secret, "sk-from-file-1");
    assert_string_equal(cfg->keys[o->key_idx[1]].secret, "sk-from-file-2");
    const aor_provider_cfg *a = &cfg->providers[aor_config_provider_index(cfg, "anthropic")];
    assert_int_equal(a->nkeys, 1);
    assert_string_equal(cfg->keys[a->key_idx[0]].secret, "sk-ant-from-file");
    aor_config_free(cfg);

    /* The environment wins, variable by variable. */
    setenv("OPENAI_API_KEY", "sk-from-env", 1);
    cfg = load_ok(text, NULL);
    o = &cfg->providers[aor_config_provider_index(cfg, "openai")];
    assert_int_equal(o->nkeys, 2);
    assert_string_equal(cfg->keys[o->key_idx[0]].secret, "sk-from-env");
    assert_string_equal(cfg->keys[o->key_idx[1]].secret, "sk-from-file-2");
    aor_config_free(cfg);
    free(text);
    free(ef);

    /* An unusable value in the file is reported under the file's name, without it. */
    ef = write_file("GROQ_API_KEY=gsk bad-value-Zq9\n", 0600);
    assert_true(asprintf(&text, "[daemon]\nenv_file = %s\n", ef) > 0);
    char *path = NULL;
    char *errs = load_err(text, &path);
    char want[512];
    snprintf(want, sizeof want, "%s:1: the value of GROQ_API_KEY contains a space", ef);
    assert_non_null(strstr(errs, want));
    assert_null(strstr(errs, "bad-value-Zq9"));
    free(errs);
    free(path);
    free(text);
    free(ef);
}

/* aor_config_daemon_addrs (`aor status` when the config does not load) reads socket and
 * listen as the loader does: quotes removed, `~/` and paths relative to the file's
 * directory resolved, whatever errors the rest of the file has. */
static void test_daemon_addrs_lenient_like_loader(void **state) {
    char *sock = NULL, *listen = NULL, *path = NULL, want[256];
    path = write_file("[daemon]\n"
                      "socket = run/aor.sock\n"
                      "listen = \"127.0.0.1:47811\"\n"
                      "[key \"a\"]\nenv = UNSET_VARIABLE_X\n"
                      "[provider \"p\"]\nkeys = a, nope\nbogus = 1\n",
                      0644);
    char *errs = NULL;
    assert_null(aor_config_load(path, &errs)); /* the strict load fails */
    free(errs);
    assert_int_equal(aor_config_daemon_addrs(path, &sock, &listen), 0);
    snprintf(want, sizeof want, "%s/run/aor.sock", tmpdir);
    assert_string_equal(sock, want);
    assert_string_equal(listen, "127.0.0.1:47811");
    free(sock);
    free(listen);
    free(path);

    path = write_file("[daemon]\nsocket = '~/s/aor.sock'\nlisten = 'localhost:47812'\n"
                      "[routing]\nstrategy = nope\n",
                      0644);
    assert_int_equal(aor_config_daemon_addrs(path, &sock, &listen), 0);
    snprintf(want, sizeof want, "%s/s/aor.sock", tmpdir); /* HOME is tmpdir */
    assert_string_equal(sock, want);
    assert_string_equal(listen, "127.0.0.1:47812");
    free(sock);
    free(listen);

    /* $AOR_SOCKET wins, as for aord; "off" is no listener. */
    setenv("AOR_SOCKET", "/tmp/from-env.sock", 1);
    assert_int_equal(aor_config_daemon_addrs(path, &sock, &listen), 0);
    assert_string_equal(sock, "/tmp/from-env.sock");
    free(sock);
    free(listen);
    unsetenv("AOR_SOCKET");
    free(path);
    path = write_file("[daemon]\nlisten = \"off\"\n", 0644);
    assert_int_equal(aor_config_daemon_addrs(path, &sock, &listen), 0);
    assert_null(listen);
    snprintf(want, sizeof want, "%s/run/aor/aor.sock", tmpdir); /* the default */
    assert_string_equal(sock, want);
    free(sock);
    free(path);

    /* No file at all: the defaults. */
    snprintf(want, sizeof want, "%s/nope.ini", tmpdir);
    assert_int_equal(aor_config_daemon_addrs(want, &sock, &listen), 0);
    assert_string_equal(listen, "127.0.0.1:8787");
    free(sock);
    free(listen);
}

int main(void) {
    const struct CMUnitTest tests[] = {
#define T(f) cmocka_unit_test_setup_teardown(f, setup, teardown)
        T(test_spec_example_parses),
        T(test_defaults_of_every_option),
        T(test_default_paths_without_xdg),
        T(test_aor_socket_wins),
        T(test_long_socket_from_env_names_the_variable),
        T(test_every_option_set),
        T(test_base_url_normalised),
        T(test_listen_forms),
        T(test_bad_values_each_reported),
        T(test_base_url_rejects_credentials_without_echo),
        T(test_models_mapping),
        T(test_rule1_env_typo_hint),
        T(test_env_must_be_a_name),
        T(test_ca_file_must_hold_a_certificate),
        T(test_rule1_env_not_set),
        T(test_secrets_optional_for_clients),
        T(test_host_published),
        T(test_too_many_intercept_hosts),
        T(test_rule2_same_env_twice),
        T(test_rule3_undeclared_key),
        T(test_rule4_provider_needs_keys_and_models),
        T(test_rule5_model_not_served),
        T(test_rule6_inline_secrets_rejected_without_echo),
        T(test_skipped_sections_still_report),
        T(test_quoted_values),
        T(test_quoted_values_keep_semicolons),
        T(test_secret_in_a_comment),
        T(test_model_name_too_long),
        T(test_rule6_no_false_positives),
        T(test_rule7_unknown_sections_and_options),
        T(test_rule7_hint_names_every_home),
        T(test_versioned_base_url_warns),
        T(test_unused_key_warns),
        T(test_rule7_hints_by_words),
        T(test_key_name_control_characters),
        T(test_structure_errors),
        T(test_many_errors_at_once_sorted),
        T(test_lexical_details),
        T(test_env_secret_trimmed_and_checked),
        T(test_env_file),
        T(test_env_file_mode_checked),
        T(test_env_file_syntax_errors),
        T(test_backoff_initial_over_max),
        T(test_messages_name_the_real_problem),
        T(test_env_file_bad_secret_line),
        T(test_explicit_missing_file_is_error),
        T(test_aor_config_and_xdg_path),
        T(test_embedded_numbered_siblings_in_order),
        T(test_embedded_every_provider_passthrough_without_key),
        T(test_embedded_gemini_and_google_keys),
        T(test_embedded_bad_variable_reported),
        T(test_file_without_providers_uses_environment),
        T(test_implicit_known_providers),
        T(test_embedded_default_reads_env_file),
        T(test_daemon_addrs_lenient_like_loader),
#undef T
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
