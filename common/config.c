/* Configuration loader: reads the file, runs the INI parser (config_parse.c), applies
 * the whole-file rules of spec §3.1 (1-5) with every error reported at once as
 * FILE:LINE, resolves secrets from the environment / env_file (§3.2), falls back to the
 * embedded default (§3.3, config_env.c), and answers lookups on a loaded config.
 * Reference: docs/config.md. */
#include "builtin_hosts.h"
#include "config_int.h"
#include "paths.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* ---- whole-file checks (§3.1 rules 1-5) --------------------------------------------------- */

extern char **environ;

/* A set, non-empty environment variable whose name is close to name (a typo in `env =`)
 * and that no key of cfg names already, copied into buf (cap bytes); NULL when none is,
 * or out of memory. Names only: a value is never looked at beyond its first byte. */
static const char *near_env_name(const aor_config *cfg, const char *name, char *buf, size_t cap) {
    size_t n = 0;
    for (char **e = environ; e && *e; e++)
        n++;
    const char **names = calloc(n ? n : 1, sizeof *names);
    char *store = NULL;
    size_t total = 0;
    for (size_t i = 0; i < n; i++)
        total += strlen(environ[i]) + 1;
    store = malloc(total ? total : 1);
    const char *hint = NULL;
    if (!names || !store)
        goto out;
    size_t k = 0, off = 0;
    for (size_t i = 0; i < n; i++) {
        const char *eq = strchr(environ[i], '=');
        if (!eq || eq == environ[i] || !eq[1])
            continue; /* no name, or empty */
        size_t l = (size_t)(eq - environ[i]);
        memcpy(store + off, environ[i], l);
        store[off + l] = '\0';
        int taken = 0;
        for (size_t j = 0; j < cfg->nkeys && !taken; j++)
            taken = cfg->keys[j].env && strcmp(cfg->keys[j].env, store + off) == 0;
        if (taken)
            continue; /* another key's: "did you mean" it would only make a second error */
        names[k++] = store + off;
        off += l + 1;
    }
    hint = aor_cfg_suggest(name, names, k);
    if (hint && strcmp(hint, name) != 0 && strlen(hint) < cap) {
        snprintf(buf, cap, "%s", hint);
        hint = buf;
    } else {
        hint = NULL;
    }
out:
    free(names);
    free(store);
    return hint;
}

/* ef: the env_file's variables, or NULL (none, or ef_failed: it has errors of its own). */
static void check_keys(aor_cfg_parse_ctx *c, const aor_cfg_envfile *ef, int ef_failed) {
    aor_config *cfg = c->cfg;
    char b[AOR_CFG_SHOWBUF];
    for (size_t i = 0; i < cfg->nkeys; i++) {
        aor_key_cfg *k = &cfg->keys[i];
        const aor_cfg_section *s = &c->secs[c->kinfo[i].sec];
        size_t env_line = s->seen[K_ENV];
        if (!k->env) {
            if (!env_line) /* an invalid env = was reported at its line */
                aor_cfg_err(c->errs, s->line,
                            "%s has no env option: add env = VARIABLE, the environment variable "
                            "that holds its secret",
                            aor_cfg_sec_label(s, b, sizeof b));
            continue;
        }
        int dup = 0;
        for (size_t j = 0; j < i && !dup; j++) {
            if (cfg->keys[j].env && strcmp(cfg->keys[j].env, k->env) == 0) {
                aor_cfg_err(c->errs, env_line,
                            "key \"%s\": env = %s is already used by key \"%s\" (line %zu); "
                            "each key needs its own variable",
                            k->name, k->env, cfg->keys[j].name,
                            c->secs[c->kinfo[j].sec].seen[K_ENV]);
                dup = 1;
            }
        }
        if (dup)
            continue;
        const char *val = getenv(k->env);
        size_t ef_line = 0; /* the env_file line the value came from; 0: the environment */
        if (aor_cfg_blank(val))
            val = ef ? aor_cfg_envfile_get(ef, k->env, &ef_line) : NULL;
        if (aor_cfg_blank(val) && cfg->secrets_optional)
            continue;
        if (aor_cfg_blank(val) && ef_failed) {
            /* Perhaps it is in the file: say so instead of "add it". */
            aor_cfg_err(c->errs, env_line,
                        "key \"%s\": environment variable %s is not set, and env_file %s "
                        "could not be used (its own error is listed with its path; fix that "
                        "and this one goes too)",
                        k->name, k->env, cfg->env_file);
            continue;
        }
        if (aor_cfg_blank(val)) {
            char nbuf[256];
            const char *near = near_env_name(cfg, k->env, nbuf, sizeof nbuf);
            aor_cfg_err(c->errs, env_line,
                        "key \"%s\": environment variable %s is not set or empty%s%s%s (aord "
                        "reads it from its own environment when it starts: export it before "
                        "starting aord, or %s env_file)",
                        k->name, k->env, near ? "; did you mean " : "", near ? near : "",
                        near ? ", which is set?" : "",
                        cfg->env_file ? "add it to" : "put it in a file named by");
            continue;
        }
        k->secret = strdup(val);
        if (!k->secret) {
            c->errs->oom = 1;
            continue;
        }
        const char *why = NULL;
        if (aor_cfg_clean_secret(k->secret, &why) != 0) {
            if (ef_line)
                aor_cfg_err_in(c->errs, cfg->env_file, ef_line,
                               "the value of %s (the secret of key \"%s\") %s; fix it on this "
                               "line (the value is not shown)",
                               k->env, k->name, why);
            else
                aor_cfg_err(c->errs, env_line,
                            "key \"%s\": the value of %s in the environment %s (the value "
                            "is not shown)",
                            k->name, k->env, why);
        }
    }
}

/* A [key] that no provider lists is never used: a warning at its section (a typo in a
 * keys list has its own error; then, and with a keys list that did not parse, nothing is
 * said here). */
static void warn_unused_keys(aor_cfg_parse_ctx *c) {
    aor_config *cfg = c->cfg;
    if (!c->warns || cfg->nproviders == 0 || cfg->nkeys == 0)
        return;
    unsigned char *used = calloc(cfg->nkeys, 1);
    if (!used)
        return; /* a warning is not worth failing the load */
    for (size_t i = 0; i < cfg->nproviders; i++) {
        const aor_provider_cfg *p = &cfg->providers[i];
        if (c->pinfo[i].keys_bad || p->nkeys < c->pinfo[i].nkey_names)
            goto out; /* a keys list with an error: it may have meant this key */
        for (size_t j = 0; j < p->nkeys; j++)
            used[p->key_idx[j]] = 1;
    }
    for (size_t k = 0; k < cfg->nkeys; k++) {
        if (!used[k])
            aor_cfg_err(c->warns, c->secs[c->kinfo[k].sec].line,
                        "[key \"%s\"] is in no provider's keys list, so no request uses it; "
                        "add it to a provider's keys = ... or remove the section",
                        cfg->keys[k].name);
    }
out:
    free(used);
}

/* 1 when id is what aor_dialect_path_set_model puts in a Gemini path: [A-Za-z0-9._~-]+. */
static int gemini_segment_ok(const char *id) {
    if (!*id)
        return 0;
    for (const char *q = id; *q; q++)
        if (!((*q >= 'a' && *q <= 'z') || (*q >= 'A' && *q <= 'Z') || (*q >= '0' && *q <= '9') ||
              strchr("._~-", *q)))
            return 0;
    return 1;
}

static void check_providers(aor_cfg_parse_ctx *c) {
    aor_config *cfg = c->cfg;
    char b[AOR_CFG_SHOWBUF];
    const char **key_names = NULL;
    if (cfg->nkeys) {
        key_names = calloc(cfg->nkeys, sizeof *key_names);
        if (!key_names) {
            c->errs->oom = 1;
            return;
        }
        for (size_t i = 0; i < cfg->nkeys; i++)
            key_names[i] = cfg->keys[i].name;
    }
    for (size_t i = 0; i < cfg->nproviders; i++) {
        aor_provider_cfg *p = &cfg->providers[i];
        aor_cfg_prov_info *pi = &c->pinfo[i];
        const aor_cfg_section *s = &c->secs[pi->sec];
        const aor_cfg_known *kn = aor_cfg_known_find(p->name);
        const char *label = aor_cfg_sec_label(s, b, sizeof b);
        if (!s->seen[P_DIALECT]) {
            if (kn)
                p->dialect = kn->dialect;
            else
                aor_cfg_err(c->errs, s->line,
                            "%s has no dialect: add dialect = openai, anthropic or gemini", label);
        }
        if (!s->seen[P_BASE_URL]) {
            aor_cfg_url u;
            const char *why;
            if (kn && aor_cfg_parse_url(kn->base_url, &u, &why) == 0) {
                p->base_url = u.base;
                p->host = u.host;
                p->port = u.port;
            } else if (kn) {
                c->errs->oom = 1;
            } else {
                aor_cfg_err(c->errs, s->line,
                            "%s has no base_url: add base_url = https://... (the API root)", label);
            }
        }
        size_t nk = pi->nkey_names;
        if (!s->seen[P_KEYS]) {
            aor_cfg_err(c->errs, s->line,
                        "%s has no keys: add keys = NAME, ... naming [key \"NAME\"] sections "
                        "(every provider needs at least one key)",
                        label);
        } else if (!pi->keys_bad && nk) {
            p->key_idx = calloc(nk, sizeof *p->key_idx);
            if (!p->key_idx) {
                c->errs->oom = 1;
                continue;
            }
            for (size_t j = 0; j < nk; j++) {
                const char *kname = pi->key_names[j];
                long found = -1;
                for (size_t k = 0; k < cfg->nkeys && found < 0; k++)
                    if (strcmp(cfg->keys[k].name, kname) == 0)
                        found = (long)k;
                if (found < 0) {
                    const char *hint = aor_cfg_suggest(kname, key_names, cfg->nkeys);
                    aor_cfg_err(c->errs, s->seen[P_KEYS],
                                "provider \"%s\": key \"%s\" is not declared; add a [key \"%s\"] "
                                "section%s%s%s",
                                p->name, kname, kname, hint ? " or did you mean \"" : "",
                                hint ? hint : "", hint ? "\"?" : "");
                    continue;
                }
                p->key_idx[p->nkeys++] = (size_t)found;
            }
        }
        if (!s->seen[P_MODELS])
            aor_cfg_err(c->errs, s->line,
                        "%s has no models: add models = * (any model) or a list such as "
                        "models = gpt-4o, fast=gpt-4o-mini",
                        label);
        /* A Gemini model is a path segment (models/{id}:method): an upstream id that is
         * not one cannot be put in the path, and the alias would go unused, the
         * canonical name sent instead (QA: tunedModels/x passed check-config). */
        for (size_t m = 0; p->dialect == AOR_DIALECT_GEMINI && m < p->nmodels; m++) {
            const char *up = p->models[m].upstream;
            if (strcmp(up, p->models[m].canonical) == 0 || gemini_segment_ok(up))
                continue;
            char ub[AOR_CFG_SHOWBUF];
            aor_cfg_err(c->errs, s->seen[P_MODELS],
                        "provider \"%s\": models: upstream id \"%s\" cannot be a Gemini model "
                        "path segment (letters, digits, '.', '_', '~', '-' only; a tuned "
                        "model's tunedModels/... path is not served)",
                        p->name, aor_cfg_show(up, ub, sizeof ub));
        }
    }
    free(key_names);
    warn_unused_keys(c);
}

static int provider_serves(const aor_provider_cfg *p, const char *model) {
    int listed = 0;
    aor_config_upstream_model(p, model, &listed);
    return listed;
}

static void check_models(aor_cfg_parse_ctx *c) {
    aor_config *cfg = c->cfg;
    /* Embedded providers have no models list: they serve every model asked of their
     * host (§5.2), so any [model] section names a model they may serve. */
    if (cfg->embedded)
        return;
    size_t ncanon = 0;
    for (size_t i = 0; i < cfg->nproviders; i++)
        ncanon += cfg->providers[i].nmodels;
    const char **canon = ncanon ? calloc(ncanon, sizeof *canon) : NULL;
    if (ncanon && !canon) {
        c->errs->oom = 1;
        return;
    }
    size_t o = 0;
    for (size_t i = 0; i < cfg->nproviders; i++)
        for (size_t j = 0; j < cfg->providers[i].nmodels; j++)
            canon[o++] = cfg->providers[i].models[j].canonical;
    for (size_t i = 0; i < cfg->nmodels; i++) {
        const char *m = cfg->models[i].name;
        int served = 0;
        for (size_t p = 0; p < cfg->nproviders && !served; p++)
            served = provider_serves(&cfg->providers[p], m);
        if (served)
            continue;
        const char *hint = aor_cfg_suggest(m, canon, ncanon);
        aor_cfg_err(c->errs, c->secs[c->minfo[i]].line,
                    "[model \"%s\"] names a model no provider serves; add it to a provider's "
                    "models%s%s%s",
                    m, hint ? " (did you mean \"" : "", hint ? hint : "", hint ? "\"?)" : "");
    }
    free(canon);
}

static void check_routing(aor_cfg_parse_ctx *c) {
    const aor_cfg_section *r = NULL;
    for (size_t i = 0; i < c->nsecs; i++)
        if (c->secs[i].type == SEC_ROUTING && !c->secs[i].skip)
            r = &c->secs[i];
    if (c->cfg->backoff_max_s < c->cfg->backoff_initial_s) {
        size_t line =
            r ? (r->seen[R_BACKOFF_MAX] ? r->seen[R_BACKOFF_MAX] : r->seen[R_BACKOFF_INITIAL]) : 0;
        int max_set = r && r->seen[R_BACKOFF_MAX];
        aor_cfg_err(c->errs, line,
                    "backoff_max_s (%g%s) is smaller than backoff_initial_s (%g): the first "
                    "window must fit under the cap; lower backoff_initial_s or %s backoff_max_s",
                    c->cfg->backoff_max_s, max_set ? "" : " s, the default",
                    c->cfg->backoff_initial_s, max_set ? "raise" : "set");
    }
}

/* ---- loading ---------------------------------------------------------------------------- */

static aor_config *config_new(void) {
    aor_config *cfg = calloc(1, sizeof *cfg);
    if (!cfg)
        return NULL;
    cfg->listen = strdup("127.0.0.1:8787");
    if (!cfg->listen) {
        free(cfg);
        return NULL;
    }
    cfg->body_max = 32L * 1024 * 1024;
    cfg->auto_fallback = 1;
    cfg->max_opaque_retries = AOR_RETRIES_UNLIMITED;
    cfg->strategy = AOR_STRATEGY_PRIORITY;
    cfg->backoff_initial_s = 5;
    cfg->backoff_max_s = 86400;
    cfg->quota_cooldown_s = 120;
    cfg->auth_cooldown_s = 120;
    cfg->breaker_failures = 3;
    cfg->breaker_window_s = 60;
    cfg->breaker_open_s = 30;
    return cfg;
}

/* Reads a whole config file. Returns a malloc'd NUL-terminated text, or NULL with
 * *enoent set when it does not exist (other failures are recorded in errs). */
static char *read_file(const char *path, aor_cfg_errs *errs, size_t *len, int *enoent) {
    *enoent = 0;
    /* O_NONBLOCK: a FIFO must not hang the load until a writer appears (it is then
     * refused as not a regular file); it changes nothing for a regular file. */
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
    if (fd < 0) {
        *enoent = errno == ENOENT;
        aor_cfg_err(errs, 0, "cannot open the configuration: %s", strerror(errno));
        return NULL;
    }
    struct stat st;
    char *buf = NULL;
    if (fstat(fd, &st) != 0) {
        aor_cfg_err(errs, 0, "cannot read the configuration: %s", strerror(errno));
        goto fail_fd;
    }
    if (!S_ISREG(st.st_mode)) {
        aor_cfg_err(errs, 0, "the configuration is not a regular file");
        goto fail_fd;
    }
    if (st.st_size > AOR_CFG_FILE_MAX) {
        aor_cfg_err(errs, 0, "the configuration is larger than %d bytes", AOR_CFG_FILE_MAX);
        goto fail_fd;
    }
    if (aor_cfg_read_fd(fd, (size_t)st.st_size, &buf, len) != 0) {
        if (errno == ENOMEM)
            errs->oom = 1;
        else
            aor_cfg_err(errs, 0, "cannot read the configuration: %s", strerror(errno));
        buf = NULL;
    }
fail_fd:
    close(fd);
    return buf;
}

static char *dir_of(const char *path) {
    const char *slash = strrchr(path, '/');
    if (!slash)
        return NULL;
    if (slash == path)
        return strdup("/");
    return strndup(path, (size_t)(slash - path));
}

/* The directory of the config file at path, made absolute against the working directory
 * when path is relative ("aor.ini", "./aor.ini"), so that paths in the file relative to
 * it (socket, state, env_file, ca_file) are absolute too: aord refuses a relative socket
 * (QA: `--config ./aor.ini` with `socket = my.sock` was refused). NULL when out of memory
 * or the working directory cannot be named. */
static char *abs_dir_of(const char *path) {
    if (path[0] == '/')
        return dir_of(path);
    char *cwd = getcwd(NULL, 0), *rel = dir_of(path), *out = NULL;
    if (cwd && (rel || !strchr(path, '/')) &&
        asprintf(&out, "%s%s%s", cwd, rel ? "/" : "", rel ? rel : "") < 0)
        out = NULL;
    free(cwd);
    free(rel);
    return out;
}

int aor_config_host_is_address(const char *host) {
    unsigned char ip[16];
    struct in_addr v4;
    return host && (inet_pton(AF_INET, host, ip) == 1 || inet_pton(AF_INET6, host, ip) == 1 ||
                    inet_aton(host, &v4) != 0);
}

int aor_config_host_published(const char *host, int named) {
    return host && *host && !aor_config_host_is_address(host) &&
           (named || !aor_config_host_eq(host, "localhost"));
}

/* Adds (host, port) to a list of distinct pairs (hosts borrowed); named: an intercept
 * name (localhost counts), else a base_url host. 1 when new, 0 when there, -1 out of
 * memory. */
static int pair_add(const char ***hosts, int **ports, size_t *n, size_t *cap, const char *host,
                    int port, int named) {
    /* Counted as daemon/publish.c publishes them. */
    if (!aor_config_host_published(host, named))
        return 0;
    for (size_t i = 0; i < *n; i++)
        if ((*ports)[i] == port && strcmp((*hosts)[i], host) == 0)
            return 0;
    if (*n == *cap) {
        size_t nc = *cap ? *cap * 2 : 64;
        const char **nh = realloc(*hosts, nc * sizeof *nh);
        if (!nh)
            return -1;
        *hosts = nh;
        int *np = realloc(*ports, nc * sizeof *np);
        if (!np)
            return -1;
        *ports = np;
        *cap = nc;
    }
    (*hosts)[*n] = host;
    (*ports)[*n] = port;
    (*n)++;
    return 1;
}

/* The shim keeps AOR_HOSTS_MAX intercepted (host, port) entries: the built-in hosts, each
 * provider's base_url host and port, and each intercept host on 443 and on the base_url's
 * port (as aord publishes them, daemon/publish.c). A config that needs more is refused
 * at the provider that goes past the limit, instead of some hosts silently not being
 * intercepted. */
static void check_intercept_count(aor_cfg_parse_ctx *c) {
    aor_config *cfg = c->cfg;
    const char **hosts = NULL;
    int *ports = NULL;
    size_t n = 0, cap = 0;
    int r = 0;
    for (size_t i = 0; aor_builtin_hosts[i] && r >= 0; i++)
        r = pair_add(&hosts, &ports, &n, &cap, aor_builtin_hosts[i], 443, 1);
    for (size_t i = 0; i < cfg->nproviders && r >= 0; i++) {
        const aor_provider_cfg *p = &cfg->providers[i];
        r = pair_add(&hosts, &ports, &n, &cap, p->host, p->port, 0);
        for (size_t k = 0; k < p->nintercept && r >= 0; k++) {
            r = pair_add(&hosts, &ports, &n, &cap, p->intercept[k], 443, 1);
            if (r >= 0 && p->port != 443)
                r = pair_add(&hosts, &ports, &n, &cap, p->intercept[k], p->port, 1);
        }
        if (r >= 0 && n > AOR_HOSTS_MAX) {
            char b[AOR_CFG_SHOWBUF];
            const aor_cfg_section *s =
                c->pinfo && !cfg->embedded ? &c->secs[c->pinfo[i].sec] : NULL;
            aor_cfg_err(c->errs, s ? s->line : 0,
                        "%s: with it, the intercepted hosts come to more than %d (host, port) "
                        "entries (the built-in hosts, each base_url host and each intercept "
                        "host on 443 and on the base_url's port), the most a shim keeps; "
                        "list fewer intercept hosts",
                        s ? aor_cfg_sec_label(s, b, sizeof b) : p->name, AOR_HOSTS_MAX);
            break;
        }
    }
    if (r < 0)
        c->errs->oom = 1;
    free(hosts);
    free(ports);
}

/* Parses and checks the file text into cfg; errors go to errs, warnings to warns. */
static void load_text(aor_config *cfg, aor_cfg_errs *errs, aor_cfg_errs *warns, const char *text,
                      size_t len, const char *dir) {
    aor_cfg_parse_ctx c = {
        .cfg = cfg, .errs = errs, .warns = warns, .dir = dir, .text = text, .len = len, .cur = -1};
    if (aor_cfg_parse(&c) != 0)
        errs->oom = 1;

    aor_cfg_envfile ef = {0};
    int have_ef = 0;
    if (cfg->env_file) {
        size_t line = 0;
        for (size_t i = 0; i < c.nsecs; i++)
            if (c.secs[i].type == SEC_DAEMON && !c.secs[i].skip)
                line = c.secs[i].seen[D_ENV_FILE];
        have_ef = aor_cfg_envfile_load(cfg->env_file, line, errs, &ef) == 0;
    }
    check_keys(&c, have_ef ? &ef : NULL, cfg->env_file && !have_ef);
    check_providers(&c);
    if (cfg->nproviders == 0 && (cfg->nkeys || !c.saw_key_or_prov)) {
        /* No [provider] section: the providers come from the environment (§3.3), so a
         * file that only tunes [daemon] / [routing] keeps the zero-config behaviour. */
        /* A [provider] section with a bad header, or an unknown section, already has its
         * own error (with a "did you mean"); this one would only follow from it. */
        int bad_prov = 0;
        for (size_t i = 0; i < c.nsecs; i++)
            if (c.secs[i].type == SEC_PROVIDER || c.secs[i].type == SEC_BAD)
                bad_prov = 1;
        if (cfg->nkeys && bad_prov) {
            /* reported */
        } else if (cfg->nkeys) {
            aor_cfg_err(errs, c.secs[c.kinfo[0].sec].line,
                        "keys are declared but no [provider \"NAME\"] section uses them; add "
                        "one with keys = %s (without any [provider] and [key] section the "
                        "providers come from the environment)",
                        cfg->keys[0].name);
        } else {
            /* The embedded default's variables may be in env_file too (§3.2). */
            cfg->embedded = 1;
            if (aor_cfg_build_embedded(cfg, have_ef ? &ef : NULL, errs) != 0)
                errs->oom = 1;
        }
    }
    if (have_ef)
        aor_cfg_envfile_free(&ef);
    check_models(&c);
    check_routing(&c);
    check_intercept_count(&c);

    aor_cfg_parse_free(&c);
    /* Last: the checks above and aor_cfg_parse_free index the sections' providers. */
    if (!cfg->embedded && cfg->nproviders && errs->n == 0 && aor_cfg_add_implicit(cfg) != 0)
        errs->oom = 1;
}

/* The default file: $XDG_CONFIG_HOME/aor/aor.ini or ~/.config/aor/aor.ini. NULL when
 * neither XDG_CONFIG_HOME nor a home directory is known (then: embedded default). */
static char *default_config_path(void) {
    char *dir = aor_path_config_dir();
    if (!dir)
        return NULL;
    char *p = aor_path_join(dir, "aor.ini");
    free(dir);
    return p;
}

/* Sets cfg->warnings to the lines of warns, sorted as errors are. Leaves none on ENOMEM. */
static void take_warnings(aor_config *cfg, const aor_cfg_errs *warns) {
    char *text = aor_cfg_errs_text(warns);
    char **v = text ? calloc(warns->n, sizeof *v) : NULL;
    size_t n = 0;
    for (char *l = v ? text : NULL; l && *l && n < warns->n; n++) {
        char *nl = strchr(l, '\n');
        if (nl)
            *nl = '\0';
        if (!(v[n] = strdup(l)))
            break;
        l = nl ? nl + 1 : l + strlen(l);
    }
    free(text);
    if (v && n == warns->n) {
        cfg->warnings = v;
        cfg->nwarnings = n;
        return;
    }
    for (size_t i = 0; v && i < n; i++)
        free(v[i]);
    free(v);
}

aor_config *aor_config_load(const char *path, char **errors) {
    return aor_config_load_flags(path, 0, errors);
}

/* AOR_CONFIG_CHECK_SOCKET: the socket problem aord would refuse, added to errs. A path
 * too long for a socket address was reported already (config_parse.c, config_env.c). */
static void check_socket(const aor_config *cfg, aor_cfg_errs *errs) {
    if (!cfg->socket_path || strlen(cfg->socket_path) >= AOR_CFG_SUN_PATH)
        return;
    char *what = NULL;
    if (aor_path_socket_problem(cfg->socket_path, &what) == 0)
        return;
    if (!what) {
        errs->oom = 1;
        return;
    }
    const char *env = getenv("AOR_SOCKET");
    size_t line = 0;
    if (env && *env)
        aor_cfg_err_in(errs, "", 0, "AOR_SOCKET=%s: %s", env, what);
    else if (cfg->source && (line = aor_path_ini_line(cfg->source, "daemon", "socket")) > 0)
        aor_cfg_err(errs, line, "socket = %s: %s", cfg->socket_path, what);
    else
        aor_cfg_err_in(errs, "", 0, "%s", what);
    free(what);
}

aor_config *aor_config_load_flags(const char *path, unsigned flags, char **errors) {
    aor_cfg_errs errs = {0}, warns = {0};
    char *auto_path = NULL, *text = NULL, *dir = NULL;
    int explicit_path = 1;
    if (errors)
        *errors = NULL;
    if (!path || !*path) {
        const char *env = getenv("AOR_CONFIG");
        if (env && *env) {
            path = env;
        } else {
            explicit_path = 0;
            auto_path = default_config_path();
            path = auto_path;
        }
    }
    size_t len = 0;
    aor_config *cfg = config_new();
    if (!cfg) {
        errs.oom = 1;
        goto out;
    }
    cfg->secrets_optional = (flags & AOR_CONFIG_SECRETS_OPTIONAL) != 0;
    int enoent = 1;
    if (path) {
        errs.file = warns.file = path;
        text = read_file(path, &errs, &len, &enoent);
    }
    if (!text && enoent && !explicit_path) {
        /* §3.3: no file at all is valid. */
        aor_cfg_errs_free(&errs);
        errs.file = NULL;
        errs.oom = 0;
        cfg->embedded = 1;
        if (aor_cfg_build_embedded(cfg, NULL, &errs) != 0)
            errs.oom = 1;
    } else if (text) {
        cfg->source = strdup(path);
        dir = abs_dir_of(path);
        if (!cfg->source || !dir)
            errs.oom = 1;
        else
            load_text(cfg, &errs, &warns, text, len, dir);
    }
    if (aor_cfg_default_paths(cfg, &errs) != 0)
        errs.oom = 1;
    else if (flags & AOR_CONFIG_CHECK_SOCKET)
        check_socket(cfg, &errs);

out:
    if (text) /* an inline secret may have been written into the file */
        explicit_bzero(text, len);
    free(text);
    free(dir);
    if (errs.n || errs.oom) {
        char *msg = aor_cfg_errs_text(&errs);
        if (errors)
            *errors = msg ? msg : strdup("out of memory while loading the configuration\n");
        else
            free(msg);
        aor_cfg_errs_free(&errs);
        aor_cfg_errs_free(&warns);
        free(auto_path);
        aor_config_free(cfg);
        errno = EINVAL;
        return NULL;
    }
    if (warns.n) /* none on ENOMEM: a warning is not worth failing the load */
        take_warnings(cfg, &warns);
    aor_cfg_errs_free(&warns);
    aor_cfg_errs_free(&errs);
    free(auto_path);
    return cfg;
}

static void free_secret(char *s) {
    if (s) {
        explicit_bzero(s, strlen(s));
        free(s);
    }
}

void aor_config_free(aor_config *cfg) {
    if (!cfg)
        return;
    for (size_t i = 0; i < cfg->nwarnings; i++)
        free(cfg->warnings[i]);
    free(cfg->warnings);
    free(cfg->socket_path);
    free(cfg->listen);
    free(cfg->state_path);
    free(cfg->env_file);
    for (size_t i = 0; i < cfg->nkeys; i++) {
        free(cfg->keys[i].name);
        free(cfg->keys[i].env);
        free_secret(cfg->keys[i].secret);
        free(cfg->keys[i].friendly);
    }
    free(cfg->keys);
    for (size_t i = 0; i < cfg->nproviders; i++) {
        aor_provider_cfg *p = &cfg->providers[i];
        free(p->name);
        free(p->base_url);
        free(p->host);
        free(p->key_idx);
        for (size_t j = 0; j < p->nmodels; j++) {
            free(p->models[j].canonical);
            free(p->models[j].upstream);
        }
        free(p->models);
        for (size_t j = 0; j < p->nintercept; j++)
            free(p->intercept[j]);
        free(p->intercept);
        free(p->ca_file);
    }
    free(cfg->providers);
    for (size_t i = 0; i < cfg->nmodels; i++)
        free(cfg->models[i].name);
    free(cfg->models);
    free(cfg->source);
    free(cfg);
}

/* ---- lookups ------------------------------------------------------------------------------ */

int aor_config_provider_index(const aor_config *cfg, const char *name) {
    if (!cfg || !name)
        return -1;
    for (size_t i = 0; i < cfg->nproviders; i++)
        if (strcmp(cfg->providers[i].name, name) == 0)
            return (int)i;
    return -1;
}

const char *aor_config_upstream_model(const aor_provider_cfg *p, const char *model, int *listed) {
    if (listed)
        *listed = 0;
    for (size_t i = 0; i < p->nmodels; i++) {
        if (strcmp(p->models[i].canonical, model) == 0) {
            if (listed)
                *listed = 1;
            return p->models[i].upstream;
        }
    }
    if (listed && p->models_any)
        *listed = 1;
    return model;
}

long aor_config_retries_for(const aor_config *cfg, const char *model) {
    if (model) {
        for (size_t i = 0; i < cfg->nmodels; i++)
            if (strcmp(cfg->models[i].name, model) == 0 &&
                cfg->models[i].max_opaque_retries != AOR_RETRIES_UNSET)
                return cfg->models[i].max_opaque_retries;
    }
    return cfg->max_opaque_retries;
}

/* Compares host names ignoring case and one trailing dot (FQDN form). */
int aor_config_host_eq(const char *a, const char *b) {
    size_t la = strlen(a), lb = strlen(b);
    if (la && a[la - 1] == '.')
        la--;
    if (lb && b[lb - 1] == '.')
        lb--;
    return la == lb && strncasecmp(a, b, la) == 0;
}

size_t aor_config_count_providers(const aor_config *cfg) {
    size_t n = 0;
    for (size_t i = 0; i < cfg->nproviders; i++)
        n += !cfg->providers[i].implicit;
    return n;
}

int aor_config_provider_owns_host(const aor_provider_cfg *p, const char *host) {
    if (!p || !host || !*host)
        return 0;
    if (p->host && aor_config_host_eq(p->host, host))
        return 1;
    for (size_t i = 0; i < p->nintercept; i++)
        if (aor_config_host_eq(p->intercept[i], host))
            return 1;
    return 0;
}
