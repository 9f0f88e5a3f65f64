/* libFuzzer target: the configuration loader (common/config.h, spec §3): INI parsing
 * (inih), validation, env_file, secrets from the environment.
 * Input: the text of an aor.ini. It is written to one temp file (reused, removed at exit)
 * under $TMPDIR, next to two env files the input may name (`env_file = fuzz.env` or
 * `bad.env`). Known secrets are set in the environment first.
 * Checks, beside memory safety and leaks: a load gives a config or an error text, never
 * both; error texts never contain a secret (§3.2): neither a value of the environment
 * unless the input itself holds it, nor a word of the input that the loader itself calls
 * a secret (aor_cfg_looks_secret); a loaded config has its documented invariants (key
 * indexes in range, ports, names). */
#include "fuzz_util.h"
#include "config.h"
#include "config_int.h" /* aor_cfg_looks_secret: what the loader itself calls a secret */

#include <errno.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#define MAX_INPUT (256 * 1024) /* longer inputs only test the read path */

static const char *const secrets[] = {
    "sk-fuzz-openai-SECRET-0001", "sk-ant-fuzz-SECRET-0002",  "AIzaFuzzSECRET0003",
    "sk-or-fuzz-SECRET-0004",     "sk-fuzz-file-SECRET-0005", "sk-fuzz-badfile-SECRET-0006",
    "sk-fuzz-spaced SECRET-0007",
};
static const char *const secret_vars[] = {
    "OPENAI_API_KEY",  "ANTHROPIC_API_KEY", "GEMINI_API_KEY", "OPENROUTER_API_KEY", NULL, NULL,
    "FUZZ_SPACED_KEY",
};
#define NSECRETS (sizeof secrets / sizeof secrets[0])

static char dir[4096];
static char cfg_path[4096 + 32];
static char env_path[4096 + 32];
static char bad_env_path[4096 + 32];
static int cfg_fd = -1;

static void cleanup(void) {
    if (cfg_fd >= 0)
        close(cfg_fd);
    unlink(cfg_path);
    unlink(env_path);
    unlink(bad_env_path);
    rmdir(dir);
}

static void write_file(const char *path, const char *text) {
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    FUZZ_CHECK(fd >= 0, "create an env file");
    size_t n = strlen(text);
    FUZZ_CHECK(write(fd, text, n) == (ssize_t)n, "write an env file");
    close(fd);
}

static void path_in_dir(char *out, size_t cap, const char *name) {
    int w = snprintf(out, cap, "%s/%s", dir, name);
    FUZZ_CHECK(w > 0 && (size_t)w < cap, "temp path fits");
}

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    const char *tmp = getenv("TMPDIR");
    int w = snprintf(dir, sizeof dir, "%s/aor-fuzz-config-XXXXXX", tmp && *tmp ? tmp : "/tmp");
    FUZZ_CHECK(w > 0 && (size_t)w < sizeof dir, "temp dir name fits");
    FUZZ_CHECK(mkdtemp(dir) != NULL, "mkdtemp");
    path_in_dir(cfg_path, sizeof cfg_path, "aor.ini");
    path_in_dir(env_path, sizeof env_path, "fuzz.env");
    path_in_dir(bad_env_path, sizeof bad_env_path, "bad.env");
    atexit(cleanup);
    cfg_fd = open(cfg_path, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    FUZZ_CHECK(cfg_fd >= 0, "create the temp config");

    char text[512];
    w = snprintf(text, sizeof text,
                 "# fuzz env file\nFUZZ_FILE_KEY=%s\nexport OPENAI_API_KEY_2=%s\n", secrets[4],
                 secrets[4]);
    FUZZ_CHECK(w > 0 && (size_t)w < sizeof text, "env file text fits");
    write_file(env_path, text);
    w = snprintf(text, sizeof text, "FUZZ_OK=1\nthis line has %s and no equals\n", secrets[5]);
    FUZZ_CHECK(w > 0 && (size_t)w < sizeof text, "env file text fits");
    write_file(bad_env_path, text);

    for (size_t i = 0; i < NSECRETS; i++)
        if (secret_vars[i])
            FUZZ_CHECK(setenv(secret_vars[i], secrets[i], 1) == 0, "setenv");
    FUZZ_CHECK(setenv("FUZZ_KEY_A", "sk-fuzz-a-0123456789", 1) == 0, "setenv");
    FUZZ_CHECK(setenv("FUZZ_EMPTY", "", 1) == 0, "setenv");
    FUZZ_CHECK(setenv("HOME", dir, 1) == 0, "setenv");
    FUZZ_CHECK(setenv("XDG_RUNTIME_DIR", dir, 1) == 0, "setenv");
    FUZZ_CHECK(setenv("XDG_STATE_HOME", dir, 1) == 0, "setenv");
    FUZZ_CHECK(setenv("XDG_CONFIG_HOME", dir, 1) == 0, "setenv");
    unsetenv("AOR_CONFIG");
    unsetenv("AOR_SOCKET");
    return 0;
}

static void check_config(const aor_config *cfg) {
    FUZZ_CHECK(cfg->socket_path && cfg->state_path, "default paths are resolved");
    FUZZ_CHECK(cfg->body_max > 0, "body_max is positive");
    FUZZ_CHECK(cfg->strategy == AOR_STRATEGY_PRIORITY || cfg->strategy == AOR_STRATEGY_ROUND_ROBIN,
               "a known strategy");
    FUZZ_CHECK(cfg->max_opaque_retries == AOR_RETRIES_UNLIMITED || cfg->max_opaque_retries >= 0,
               "global retries");
    for (size_t i = 0; i < cfg->nkeys; i++) {
        const aor_key_cfg *k = &cfg->keys[i];
        FUZZ_CHECK(k->name && k->env && k->secret && *k->secret, "a key has name, env, secret");
    }
    for (size_t i = 0; i < cfg->nproviders; i++) {
        const aor_provider_cfg *p = &cfg->providers[i];
        FUZZ_CHECK(p->name && p->base_url && p->host, "a provider has name, base_url, host");
        FUZZ_CHECK(p->port >= 1 && p->port <= 65535, "provider port");
        FUZZ_CHECK(p->dialect == AOR_DIALECT_OPENAI || p->dialect == AOR_DIALECT_ANTHROPIC ||
                       p->dialect == AOR_DIALECT_GEMINI,
                   "a known dialect");
        FUZZ_CHECK(aor_config_provider_index(cfg, p->name) >= 0, "provider found by name");
        FUZZ_CHECK(aor_config_provider_owns_host(p, p->host), "provider owns its host");
        for (size_t k = 0; k < p->nkeys; k++)
            FUZZ_CHECK(p->key_idx[k] < cfg->nkeys, "key index in range");
        for (size_t m = 0; m < p->nmodels; m++) {
            const aor_model_map *mm = &p->models[m];
            FUZZ_CHECK(mm->canonical && mm->upstream, "a model has both names");
            int listed = 0;
            const char *up = aor_config_upstream_model(p, mm->canonical, &listed);
            FUZZ_CHECK(up != NULL && listed, "a listed model maps");
        }
        for (size_t h = 0; h < p->nintercept; h++)
            FUZZ_CHECK(p->intercept[h] && aor_config_provider_owns_host(p, p->intercept[h]),
                       "provider owns its intercept hosts");
    }
    for (size_t i = 0; i < cfg->nmodels; i++) {
        const aor_model_cfg *m = &cfg->models[i];
        FUZZ_CHECK(m->name, "a [model] has a name");
        long r = aor_config_retries_for(cfg, m->name);
        FUZZ_CHECK(r == AOR_RETRIES_UNLIMITED || r >= 0, "per-model retries");
    }
}

/* Aborts when the error text holds a word of the input that the loader itself would call
 * a secret (split as aor_cfg_looks_secret splits values). Words made up by the loader
 * (an example key name such as "sk_x-main" built from a provider name) do not count. */
static void check_no_inline_secret(const uint8_t *data, size_t size, const char *errors) {
    static const char seps[] = " \t\r\n,=;\"'";
    char *text = fuzz_strndup((const uint8_t *)errors, strlen(errors));
    for (char *p = text; *p;) {
        size_t n = strcspn(p, seps);
        if (n == 0) {
            p++;
            continue;
        }
        char save = p[n];
        p[n] = '\0';
        if (aor_cfg_looks_secret(p) && memmem(data, size, p, n)) {
            fprintf(stderr, "secret-looking word \"%s\" shown in errors:\n%s\n", p, errors);
            FUZZ_CHECK(0, "an error text never shows a value that looks like a secret");
        }
        p[n] = save;
        p += n;
    }
    free(text);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size > MAX_INPUT)
        return 0;
    FUZZ_CHECK(ftruncate(cfg_fd, 0) == 0, "truncate the temp config");
    FUZZ_CHECK(pwrite(cfg_fd, data, size, 0) == (ssize_t)size, "write the temp config");

    char *errors = NULL;
    aor_config *cfg = aor_config_load(cfg_path, &errors);
    if (cfg) {
        FUZZ_CHECK(errors == NULL, "no error text with a config");
        check_config(cfg);
        aor_config_free(cfg);
    } else {
        FUZZ_CHECK(errors != NULL && *errors != '\0', "a failed load says why");
        /* Every secret holds "SECRET": finding it in the text means some secret (or part
         * of one) was shown, unless the input itself holds it and was quoted. */
        if (!memmem(data, size, "SECRET", 6) && strstr(errors, "SECRET")) {
            fprintf(stderr, "errors:\n%s\n", errors);
            FUZZ_CHECK(0, "an error text never shows a secret");
        }
        check_no_inline_secret(data, size, errors);
    }
    free(errors);
    return 0;
}
