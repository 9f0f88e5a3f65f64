/* The environment side of the configuration: the known providers and the embedded
 * default (spec §3.3), env_file (§3.2) and the default paths of [daemon] (§9).
 * Source: spec §2 (built-in hosts), §3.2, §3.3, §9; docs/config.md. */
#include "config_int.h"
#include "paths.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* Order = priority of the embedded default. */
static const aor_cfg_known known[] = {
    {"openai", AOR_DIALECT_OPENAI, "https://api.openai.com", {"OPENAI_API_KEY", NULL}},
    {"anthropic", AOR_DIALECT_ANTHROPIC, "https://api.anthropic.com", {"ANTHROPIC_API_KEY", NULL}},
    {"gemini",
     AOR_DIALECT_GEMINI,
     "https://generativelanguage.googleapis.com",
     {"GEMINI_API_KEY", "GOOGLE_API_KEY"}},
    {"openrouter", AOR_DIALECT_OPENAI, "https://openrouter.ai/api", {"OPENROUTER_API_KEY", NULL}},
    {"mistral", AOR_DIALECT_OPENAI, "https://api.mistral.ai", {"MISTRAL_API_KEY", NULL}},
    {"groq", AOR_DIALECT_OPENAI, "https://api.groq.com/openai", {"GROQ_API_KEY", NULL}},
    {"deepseek", AOR_DIALECT_OPENAI, "https://api.deepseek.com", {"DEEPSEEK_API_KEY", NULL}},
    {"xai", AOR_DIALECT_OPENAI, "https://api.x.ai", {"XAI_API_KEY", NULL}},
    {"together", AOR_DIALECT_OPENAI, "https://api.together.xyz", {"TOGETHER_API_KEY", NULL}},
    {"fireworks",
     AOR_DIALECT_OPENAI,
     "https://api.fireworks.ai/inference",
     {"FIREWORKS_API_KEY", NULL}},
};

#define NKNOWN (sizeof known / sizeof known[0])
#define SIBLING_MAX 99 /* VAR_2 .. VAR_99 */

const aor_cfg_known *aor_cfg_known_find(const char *name) {
    for (size_t i = 0; i < NKNOWN; i++)
        if (strcmp(known[i].name, name) == 0)
            return &known[i];
    return NULL;
}

/* ---- env_file ------------------------------------------------------------------------ */

void aor_cfg_envfile_free(aor_cfg_envfile *ef) {
    for (size_t i = 0; i < ef->n; i++) {
        free(ef->names[i]);
        if (ef->values[i]) {
            explicit_bzero(ef->values[i], strlen(ef->values[i]));
            free(ef->values[i]);
        }
    }
    free(ef->names);
    free(ef->values);
    free(ef->lines);
    memset(ef, 0, sizeof *ef);
}

const char *aor_cfg_envfile_get(const aor_cfg_envfile *ef, const char *name, size_t *line) {
    const char *found = NULL;
    if (line)
        *line = 0;
    for (size_t i = 0; i < ef->n; i++) { /* the last assignment wins, as in a shell */
        if (strcmp(ef->names[i], name) == 0) {
            found = ef->values[i];
            if (line)
                *line = ef->lines[i];
        }
    }
    return found;
}

static int envfile_add(aor_cfg_envfile *ef, size_t lineno, const char *name, size_t nlen,
                       const char *val, size_t vlen) {
    char **nn = realloc(ef->names, (ef->n + 1) * sizeof *nn);
    if (!nn)
        return -1;
    ef->names = nn;
    char **nv = realloc(ef->values, (ef->n + 1) * sizeof *nv);
    if (!nv)
        return -1;
    ef->values = nv;
    size_t *nl = realloc(ef->lines, (ef->n + 1) * sizeof *nl);
    if (!nl)
        return -1;
    ef->lines = nl;
    char *n = strndup(name, nlen);
    char *v = strndup(val, vlen);
    if (!n || !v) {
        free(n);
        if (v) {
            explicit_bzero(v, vlen);
            free(v);
        }
        return -1;
    }
    ef->names[ef->n] = n;
    ef->values[ef->n] = v;
    ef->lines[ef->n] = lineno;
    ef->n++;
    return 0;
}

/* Reads the whole file (<= AOR_CFG_FILE_MAX) after the permission checks. */
static char *envfile_read(const char *path, size_t opt_line, aor_cfg_errs *errs, size_t *len) {
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK); /* a FIFO: no hang */
    if (fd < 0) {
        aor_cfg_err(errs, opt_line, "env_file %s cannot be opened: %s", path, strerror(errno));
        return NULL;
    }
    struct stat st;
    char *buf = NULL;
    if (fstat(fd, &st) != 0) {
        aor_cfg_err(errs, opt_line, "env_file %s: %s", path, strerror(errno));
        goto fail_fd;
    }
    if (!S_ISREG(st.st_mode)) {
        aor_cfg_err(errs, opt_line, "env_file %s is not a regular file", path);
        goto fail_fd;
    }
    if (st.st_uid != getuid()) {
        aor_cfg_err(errs, opt_line,
                    "env_file %s belongs to another user (uid %ld); it must be "
                    "yours",
                    path, (long)st.st_uid);
        goto fail_fd;
    }
    if (st.st_mode & 077) {
        aor_cfg_err(errs, opt_line,
                    "env_file %s has mode %04o, open to group or others; it holds secrets and must "
                    "be 0600 or stricter: chmod 600 %s",
                    path, (unsigned)(st.st_mode & 07777), path);
        goto fail_fd;
    }
    if (st.st_size > AOR_CFG_FILE_MAX) {
        aor_cfg_err(errs, opt_line, "env_file %s is larger than %d bytes", path, AOR_CFG_FILE_MAX);
        goto fail_fd;
    }
    if (aor_cfg_read_fd(fd, (size_t)st.st_size, &buf, len) != 0) {
        if (errno == ENOMEM)
            errs->oom = 1;
        else
            aor_cfg_err(errs, opt_line, "env_file %s cannot be read: %s", path, strerror(errno));
        buf = NULL;
        goto fail_fd;
    }
    close(fd);
    return buf;

fail_fd:
    close(fd);
    return NULL;
}

static int is_blank(char c) {
    return c == ' ' || c == '\t' || c == '\r';
}

int aor_cfg_envfile_load(const char *path, size_t opt_line, aor_cfg_errs *errs,
                         aor_cfg_envfile *out) {
    memset(out, 0, sizeof *out);
    size_t len = 0;
    char *buf = envfile_read(path, opt_line, errs, &len);
    if (!buf)
        return -1;
    int bad = 0;
    size_t lineno = 0;
    char *start = buf;
    if (len >= 3 && memcmp(buf, "\xEF\xBB\xBF", 3) == 0)
        start += 3; /* a UTF-8 BOM, as some editors write (aor.ini accepts one too) */
    for (char *p = start; p < buf + len;) {
        char *nl = memchr(p, '\n', (size_t)(buf + len - p));
        char *e = nl ? nl : buf + len;
        char *next = nl ? nl + 1 : buf + len;
        lineno++;
        while (p < e && is_blank(*p))
            p++;
        while (e > p && is_blank(e[-1]))
            e--;
        if (p == e || *p == '#') {
            p = next;
            continue;
        }
        if ((size_t)(e - p) > 7 && strncmp(p, "export", 6) == 0 && is_blank(p[6])) {
            p += 7;
            while (p < e && is_blank(*p))
                p++;
        }
        char *eq = memchr(p, '=', (size_t)(e - p));
        if (memchr(p, '\0', (size_t)(e - p))) {
            aor_cfg_err_in(errs, path, lineno, "contains a NUL byte");
            bad = 1;
            p = next;
            continue;
        }
        char *ne = eq;
        while (ne && ne > p && is_blank(ne[-1]))
            ne--;
        char name[130];
        size_t nlen = ne ? (size_t)(ne - p) : 0;
        if (!eq || nlen == 0 || nlen >= sizeof name) {
            aor_cfg_err_in(errs, path, lineno,
                           "expected VARIABLE=value (the line is not shown: "
                           "it may hold a secret)");
            bad = 1;
            p = next;
            continue;
        }
        memcpy(name, p, nlen);
        name[nlen] = '\0';
        if (!aor_cfg_valid_env_name(name)) {
            aor_cfg_err_in(errs, path, lineno,
                           "expected VARIABLE=value: the name before '=' is not a valid "
                           "environment variable name");
            bad = 1;
            p = next;
            continue;
        }
        char *v = eq + 1;
        while (v < e && is_blank(*v))
            v++;
        if (e - v >= 2 && (*v == '"' || *v == '\'') && e[-1] == *v) {
            v++;
            e--;
        }
        if (envfile_add(out, lineno, name, nlen, v, (size_t)(e - v)) != 0) {
            errs->oom = 1;
            bad = 1;
            break;
        }
        p = next;
    }
    explicit_bzero(buf, len);
    free(buf);
    if (bad) {
        aor_cfg_envfile_free(out);
        return -1;
    }
    return 0;
}

/* ---- embedded default -------------------------------------------------------------- */

static int add_key(aor_config *cfg, const char *var, char *secret) {
    aor_key_cfg *nk = realloc(cfg->keys, (cfg->nkeys + 1) * sizeof *nk);
    if (!nk)
        return -1;
    cfg->keys = nk;
    aor_key_cfg *k = &cfg->keys[cfg->nkeys];
    memset(k, 0, sizeof *k);
    k->name = strdup(var);
    k->env = strdup(var);
    if (!k->name || !k->env) {
        free(k->name);
        free(k->env);
        return -1;
    }
    k->secret = secret;
    k->priority = 0;
    cfg->nkeys++;
    return 0;
}

/* Adds the keys of one variable family (VAR, VAR_1, VAR_2 .. VAR_99) to provider p, each
 * from the environment, else from the env_file (ef, may be NULL). */
static int add_family(aor_config *cfg, aor_provider_cfg *p, const char *var,
                      const aor_cfg_envfile *ef, aor_cfg_errs *errs) {
    for (int i = 0; i <= SIBLING_MAX; i++) {
        char name[160];
        int w = i == 0 ? snprintf(name, sizeof name, "%s", var)
                       : snprintf(name, sizeof name, "%s_%d", var, i);
        if (w < 0 || (size_t)w >= sizeof name)
            return -1;
        const char *val = getenv(name);
        const char *from = AOR_CFG_ENV_NAME;
        size_t from_line = 0;
        if (aor_cfg_blank(val) && ef) {
            val = aor_cfg_envfile_get(ef, name, &from_line);
            from = cfg->env_file;
        }
        if (aor_cfg_blank(val))
            continue; /* unset, empty or only whitespace: no key (§3.3 "set and non-empty") */
        char *secret = strdup(val);
        if (!secret)
            return -1;
        const char *why = NULL;
        if (aor_cfg_clean_secret(secret, &why) != 0) {
            aor_cfg_err_in(errs, from, from_line,
                           "the value of %s %s; fix the variable (its value is not shown)", name,
                           why);
            explicit_bzero(secret, strlen(secret));
            free(secret);
            continue;
        }
        int dup = 0; /* GEMINI_API_KEY and GOOGLE_API_KEY often hold the same key */
        for (size_t k = 0; k < p->nkeys; k++)
            if (strcmp(cfg->keys[p->key_idx[k]].secret, secret) == 0)
                dup = 1;
        if (dup) {
            explicit_bzero(secret, strlen(secret));
            free(secret);
            continue;
        }
        size_t *ni = realloc(p->key_idx, (p->nkeys + 1) * sizeof *ni);
        if (!ni) {
            explicit_bzero(secret, strlen(secret));
            free(secret);
            return -1;
        }
        p->key_idx = ni;
        if (add_key(cfg, name, secret) != 0) {
            explicit_bzero(secret, strlen(secret));
            free(secret);
            return -1;
        }
        cfg->keys[cfg->nkeys - 1].priority = (int)p->nkeys;
        p->key_idx[p->nkeys++] = cfg->nkeys - 1;
    }
    return 0;
}

int aor_cfg_build_embedded(aor_config *cfg, const aor_cfg_envfile *ef, aor_cfg_errs *errs) {
    cfg->providers = calloc(NKNOWN, sizeof *cfg->providers);
    if (!cfg->providers)
        return -1;
    for (size_t i = 0; i < NKNOWN; i++) {
        const aor_cfg_known *kn = &known[i];
        aor_provider_cfg *p = &cfg->providers[i];
        aor_cfg_url url;
        const char *why = NULL;
        if (aor_cfg_parse_url(kn->base_url, &url, &why) != 0)
            return -1; /* only ENOMEM: the table is valid */
        cfg->nproviders = i + 1;
        p->base_url = url.base;
        p->host = url.host;
        p->port = url.port;
        p->name = strdup(kn->name);
        if (!p->name)
            return -1;
        p->dialect = kn->dialect;
        /* No models list: every model goes to the provider that owns the host the client
         * asked for (§5.2 unlisted models), never across providers: the embedded
         * providers of one dialect do not serve each other's models, and a pass-through
         * credential must only ever reach its own provider. */
        p->models_any = 0;
        p->priority = (int)i;
        for (size_t v = 0; v < 2 && kn->vars[v]; v++)
            if (add_family(cfg, p, kn->vars[v], ef, errs) != 0)
                return -1;
        p->passthrough = p->nkeys == 0;
    }
    return 0;
}

int aor_cfg_add_implicit(aor_config *cfg) {
    for (size_t i = 0; i < NKNOWN; i++) {
        const aor_cfg_known *kn = &known[i];
        aor_cfg_url url;
        const char *why = NULL;
        if (aor_cfg_parse_url(kn->base_url, &url, &why) != 0)
            return -1; /* only ENOMEM: the table is valid */
        aor_provider_cfg *named = NULL;
        int owned = 0;
        for (size_t j = 0; j < cfg->nproviders; j++) {
            if (strcmp(cfg->providers[j].name, kn->name) == 0)
                named = &cfg->providers[j];
            owned |= aor_config_provider_owns_host(&cfg->providers[j], url.host);
        }
        if (named && !owned) {
            /* A section named after a known provider, with another base_url, takes its
             * place, its host too, as if it listed it in intercept (docs/config.md: "to
             * send a known host's traffic elsewhere, give it a section"; fresh-user pass:
             * requests to api.openai.com without a model, models.list(), got 404 since
             * nothing owned the host). */
            char *h = strdup(url.host);
            char **ni =
                h ? realloc(named->intercept, (named->nintercept + 1) * sizeof *named->intercept)
                  : NULL;
            if (!ni) {
                free(h);
                aor_cfg_url_free(&url);
                return -1;
            }
            named->intercept = ni;
            named->intercept[named->nintercept++] = h;
        }
        if (named || owned) {
            aor_cfg_url_free(&url);
            continue;
        }
        char *name = strdup(kn->name);
        aor_provider_cfg *np =
            name ? realloc(cfg->providers, (cfg->nproviders + 1) * sizeof *np) : NULL;
        if (!np) {
            aor_cfg_url_free(&url);
            free(name);
            return -1;
        }
        cfg->providers = np;
        aor_provider_cfg *p = &cfg->providers[cfg->nproviders++];
        memset(p, 0, sizeof *p);
        p->name = name;
        p->base_url = url.base;
        p->host = url.host;
        p->port = url.port;
        p->dialect = kn->dialect;
        p->priority = (int)i;
        p->passthrough = 1;
        p->implicit = 1;
    }
    return 0;
}

/* ---- default paths -------------------------------------------------------------------- */

int aor_cfg_default_paths(aor_config *cfg, aor_cfg_errs *errs) {
    const char *env_sock = getenv("AOR_SOCKET");
    if ((env_sock && *env_sock) || !cfg->socket_path) {
        /* $AOR_SOCKET, else $XDG_RUNTIME_DIR/aor/aor.sock, else /tmp/aor-$UID/aor.sock */
        char *sock = aor_path_socket();
        if (!sock)
            return -1;
        free(cfg->socket_path);
        cfg->socket_path = sock;
        /* A `socket =` was checked at its line; this path came from the environment, so
         * the error names the variable, not the configuration file (QA). */
        const char *xdg = getenv("XDG_RUNTIME_DIR");
        const char *from = env_sock && *env_sock ? "AOR_SOCKET"
                           : xdg && *xdg         ? "XDG_RUNTIME_DIR"
                                                 : NULL;
        if (strlen(sock) >= AOR_CFG_SUN_PATH)
            aor_cfg_err_in(errs, from, 0,
                           "socket path %s is longer than %d bytes, the limit of a Unix socket "
                           "address; set AOR_SOCKET or `socket` to a shorter path",
                           sock, AOR_CFG_SUN_PATH - 1);
    }
    if (!cfg->state_path) {
        char *dir = aor_path_state_dir();
        if (!dir) {
            if (errno == ENOMEM)
                return -1;
            aor_cfg_err(errs, 0,
                        "cannot find the home directory for the state file; set HOME or "
                        "XDG_STATE_HOME, or `state` in [daemon]");
            return 0;
        }
        cfg->state_path = aor_path_join(dir, "aor.db");
        free(dir);
        if (!cfg->state_path)
            return -1;
    }
    return 0;
}
