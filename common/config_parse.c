/* The INI structure of the configuration (spec §3): a line reader for inih that
 * counts lines and parses git-style section headers ([provider "x"]) itself, and the
 * option handler that checks each value and fills the aor_config. Whole-file rules
 * (§3.1 1-5), loading and the embedded default live in config.c / config_env.c.
 *
 * Why our own reader: Debian's libinih has no line numbers in the handler, a 200-byte
 * line buffer and no callback on section headers. inih still splits `name = value`,
 * strips inline `; comments` and whitespace, and calls on_option() right after the
 * reader returned the line, so c->lineno is the option's line.
 * Reference: docs/config.md. */
#include "breaker.h"
#include "config_int.h"
#include "utf8.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <ini.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static const char *const sec_names[] = {"daemon", "routing", "key", "provider", "model"};
#define NSEC_NAMES (sizeof sec_names / sizeof sec_names[0])

static const char *const daemon_opts[] = {"socket", "listen", "state", "env_file", "body_max"};

static const char *const routing_opts[] = {"auto_fallback",
                                           "max_opaque_retries",
                                           "provider_priority_cache_threshold",
                                           "key_priority_cache_threshold",
                                           "strategy",
                                           "backoff_initial_s",
                                           "backoff_max_s",
                                           "quota_cooldown_s",
                                           "auth_cooldown_s",
                                           "breaker_failures",
                                           "breaker_window_s",
                                           "breaker_open_s"};

static const char *const key_opts[] = {"env", "priority", "name"};

static const char *const provider_opts[] = {"dialect",  "base_url",    "keys",      "models",
                                            "priority", "retry_after", "intercept", "ca_file"};

static const char *const model_opts[] = {"max_opaque_retries"};

static const struct {
    const char *const *names;
    size_t n;
} sec_opts[] = {
    [SEC_DAEMON] = {daemon_opts, sizeof daemon_opts / sizeof daemon_opts[0]},
    [SEC_ROUTING] = {routing_opts, sizeof routing_opts / sizeof routing_opts[0]},
    [SEC_KEY] = {key_opts, sizeof key_opts / sizeof key_opts[0]},
    [SEC_PROVIDER] = {provider_opts, sizeof provider_opts / sizeof provider_opts[0]},
    [SEC_MODEL] = {model_opts, sizeof model_opts / sizeof model_opts[0]},
};

static const char *const dialect_names[] = {"openai", "anthropic", "gemini"};
static const char *const strategy_names[] = {"priority", "round-robin"};
static const char *const retry_after_names[] = {"honor", "ignore"};

/* ---- small helpers -------------------------------------------------------------------- */

const char *aor_cfg_sec_label(const aor_cfg_section *s, char *buf, size_t cap) {
    const char *t = s->type >= SEC_DAEMON && s->type <= SEC_MODEL ? sec_names[s->type - 1] : "?";
    if (s->name)
        snprintf(buf, cap, "[%s \"%s\"]", t, s->name);
    else
        snprintf(buf, cap, "[%s]", t);
    return buf;
}

static int find_opt(aor_cfg_sec_type t, const char *name) {
    for (size_t i = 0; i < sec_opts[t].n; i++)
        if (aor_cfg_ieq(name, sec_opts[t].names[i]))
            return (int)i;
    return -1;
}

static void *grow(void *ptr, size_t n, size_t size) {
    if (n > SIZE_MAX / size)
        return NULL;
    return realloc(ptr, n * size);
}

/* Upper-case [A-Z0-9_] form of a name, for suggesting a variable. */
static void env_form(const char *name, char *buf, size_t cap) {
    size_t o = 0;
    for (size_t i = 0; name[i] && o + 1 < cap; i++) {
        unsigned char ch = (unsigned char)name[i];
        buf[o++] = isalnum(ch) ? (char)toupper(ch) : '_';
    }
    buf[o] = '\0';
}

/* The provider whose key a secret's prefix shows (sk-ant-: Anthropic, AIza: Gemini, ...),
 * for the example of err_inline_secret: its variable of the embedded default and a key
 * name; OpenAI's when the prefix says nothing. text may be NULL. */
static void example_for(const char *text, char *var, size_t vcap, char *key, size_t kcap) {
    static const struct {
        const char *prefix, *var, *key;
    } known[] = {{"sk-ant-", "ANTHROPIC_API_KEY", "anthropic-main"},
                 {"AIza", "GEMINI_API_KEY", "gemini-main"},
                 {"sk-or-", "OPENROUTER_API_KEY", "openrouter-main"},
                 {"gsk_", "GROQ_API_KEY", "groq-main"},
                 {"xai-", "XAI_API_KEY", "xai-main"},
                 {"fw_", "FIREWORKS_API_KEY", "fireworks-main"}};
    size_t pick = sizeof known / sizeof known[0];
    for (size_t i = 0;
         text && i < sizeof known / sizeof known[0] && pick == sizeof known / sizeof known[0]; i++)
        if (strstr(text, known[i].prefix))
            pick = i;
    snprintf(var, vcap, "%s",
             pick < sizeof known / sizeof known[0] ? known[pick].var : "OPENAI_API_KEY");
    snprintf(key, kcap, "%s",
             pick < sizeof known / sizeof known[0] ? known[pick].key : "openai-main");
}

/* §3.1 rule 6: the error shows the [key] / env form and never the value. text: what
 * holds the secret (a value, a name or the line), for the example's provider. */
static void err_inline_secret(aor_cfg_parse_ctx *c, size_t line, const aor_cfg_section *s,
                              const char *what, const char *text) {
    char var[80], key[80], prov[80] = "";
    example_for(text, var, sizeof var, key, sizeof key);
    /* A skipped section has no entry in cfg->keys / cfg->providers and its name may be a
     * secret: use the example. A duplicate's name is valid and its idx is the first
     * section's entry: name it. */
    if (s && s->skip && !s->dup)
        s = NULL;
    if (s && s->type == SEC_PROVIDER && s->name && aor_cfg_valid_name(s->name)) {
        char up[64];
        env_form(s->name, up, sizeof up);
        snprintf(var, sizeof var, "%s_API_KEY", up);
        snprintf(key, sizeof key, "%s-main", s->name);
        snprintf(prov, sizeof prov, "%s", s->name);
    } else if (s && s->type == SEC_KEY && s->name && aor_cfg_valid_name(s->name)) {
        const aor_key_cfg *k = &c->cfg->keys[s->idx];
        if (k->env) {
            snprintf(var, sizeof var, "%s", k->env);
        } else {
            char up[64];
            env_form(s->name, up, sizeof up);
            snprintf(var, sizeof var, "%s%s", up, strstr(up, "KEY") ? "" : "_API_KEY");
        }
        snprintf(key, sizeof key, "%s", s->name);
    }
    /* Never suggest a name that itself looks like a secret ("sk_x-main" from a provider
     * "sk_x"): it would be refused in turn. */
    if (aor_cfg_looks_secret(var) || aor_cfg_looks_secret(key))
        example_for(text, var, sizeof var, key, sizeof key);
    aor_cfg_err(c->errs, line,
                "%s looks like a secret written into the file; aor reads secrets only from the "
                "environment: export %s=<the secret> (or put it in env_file), then declare "
                "[key \"%s\"] with the line env = %s%s%s%s (the value is not shown)",
                what, var, key, var, prov[0] ? " and list it in [provider \"" : "", prov,
                prov[0] ? "\"] as keys = ..." : "");
}

/* ---- sections ------------------------------------------------------------------------- */

/* Parses `[type]` or `[type "name"]` (s, n: the trimmed line). Returns 0 and sets
 * *type_out (malloc'd, lower case as written) and *name_out (malloc'd or NULL). */
static int parse_header(const char *s, size_t n, char **type_out, char **name_out,
                        const char **why) {
    size_t i = 1;
    *type_out = *name_out = NULL;
    while (i < n && (s[i] == ' ' || s[i] == '\t'))
        i++;
    size_t ts = i;
    while (i < n && (isalnum((unsigned char)s[i]) || s[i] == '_' || s[i] == '-' || s[i] == '.'))
        i++;
    size_t te = i;
    while (i < n && (s[i] == ' ' || s[i] == '\t'))
        i++;
    char *name = NULL;
    if (i < n && s[i] == '"') {
        size_t cap = n, o = 0;
        name = malloc(cap + 1);
        if (!name) {
            *why = "out of memory";
            return -1;
        }
        i++;
        while (i < n && s[i] != '"') {
            if (s[i] == '\\' && i + 1 < n && (s[i + 1] == '"' || s[i + 1] == '\\'))
                i++;
            name[o++] = s[i++];
        }
        name[o] = '\0';
        if (i >= n) {
            free(name);
            *why = "the section name has no closing quote";
            return -1;
        }
        i++;
        while (i < n && (s[i] == ' ' || s[i] == '\t'))
            i++;
    }
    if (i >= n || s[i] != ']') {
        free(name);
        *why = "expected [section] or [section \"name\"]";
        return -1;
    }
    i++;
    while (i < n && (s[i] == ' ' || s[i] == '\t'))
        i++;
    if (i < n && s[i] != ';' && s[i] != '#') {
        free(name);
        *why = "unexpected text after ']'";
        return -1;
    }
    if (te == ts) {
        free(name);
        *why = "the section has no type; expected [section] or [section \"name\"]";
        return -1;
    }
    *type_out = strndup(s + ts, te - ts);
    if (!*type_out) {
        free(name);
        *why = "out of memory";
        return -1;
    }
    *name_out = name;
    return 0;
}

/* Adds the entry a new valid [key] / [provider] / [model] section describes. */
static int add_entry(aor_cfg_parse_ctx *c, aor_cfg_section *s, size_t sec_index) {
    aor_config *cfg = c->cfg;
    char *name = strdup(s->name);
    if (!name)
        return -1;
    if (s->type == SEC_KEY) {
        aor_key_cfg *nk = grow(cfg->keys, cfg->nkeys + 1, sizeof *nk);
        if (nk)
            cfg->keys = nk;
        aor_cfg_key_info *ki = grow(c->kinfo, cfg->nkeys + 1, sizeof *ki);
        if (ki)
            c->kinfo = ki;
        if (!nk || !ki)
            goto fail_name;
        memset(&cfg->keys[cfg->nkeys], 0, sizeof cfg->keys[0]);
        cfg->keys[cfg->nkeys].name = name;
        c->kinfo[cfg->nkeys].sec = sec_index;
        s->idx = cfg->nkeys++;
    } else if (s->type == SEC_PROVIDER) {
        aor_provider_cfg *np = grow(cfg->providers, cfg->nproviders + 1, sizeof *np);
        if (np)
            cfg->providers = np;
        aor_cfg_prov_info *pi = grow(c->pinfo, cfg->nproviders + 1, sizeof *pi);
        if (pi)
            c->pinfo = pi;
        if (!np || !pi)
            goto fail_name;
        memset(&cfg->providers[cfg->nproviders], 0, sizeof cfg->providers[0]);
        memset(&c->pinfo[cfg->nproviders], 0, sizeof c->pinfo[0]);
        cfg->providers[cfg->nproviders].name = name;
        c->pinfo[cfg->nproviders].sec = sec_index;
        s->idx = cfg->nproviders++;
    } else {
        aor_model_cfg *nm = grow(cfg->models, cfg->nmodels + 1, sizeof *nm);
        if (nm)
            cfg->models = nm;
        size_t *mi = grow(c->minfo, cfg->nmodels + 1, sizeof *mi);
        if (mi)
            c->minfo = mi;
        if (!nm || !mi)
            goto fail_name;
        cfg->models[cfg->nmodels].name = name;
        cfg->models[cfg->nmodels].max_opaque_retries = AOR_RETRIES_UNSET;
        c->minfo[cfg->nmodels] = sec_index;
        s->idx = cfg->nmodels++;
    }
    return 0;

fail_name:
    free(name);
    return -1;
}

static void begin_section(aor_cfg_parse_ctx *c, const char *line, size_t n) {
    aor_cfg_section *ns = grow(c->secs, c->nsecs + 1, sizeof *ns);
    if (!ns) {
        c->errs->oom = 1;
        c->cur = -1;
        return;
    }
    c->secs = ns;
    aor_cfg_section *s = &c->secs[c->nsecs];
    memset(s, 0, sizeof *s);
    s->type = SEC_BAD;
    s->skip = 1;
    s->line = c->lineno;
    c->cur = (long)c->nsecs++;

    char *type = NULL, *name = NULL;
    const char *why = NULL;
    char b1[AOR_CFG_SHOWBUF], b2[AOR_CFG_SHOWBUF];
    if (parse_header(line, n, &type, &name, &why) != 0) {
        aor_cfg_err(c->errs, c->lineno,
                    "malformed section header: %s (the options up to the next section header "
                    "are not checked until it is fixed)",
                    why);
        return;
    }
    s->name = name;
    size_t ti = NSEC_NAMES;
    for (size_t i = 0; i < NSEC_NAMES; i++)
        if (aor_cfg_ieq(type, sec_names[i]))
            ti = i;
    if (ti == NSEC_NAMES) {
        const char *hint = aor_cfg_suggest(type, sec_names, NSEC_NAMES);
        aor_cfg_err(c->errs, c->lineno,
                    "unknown section [%s]%s%s%s; sections are [daemon], [routing], [key \"NAME\"], "
                    "[provider \"NAME\"] and [model \"NAME\"]",
                    aor_cfg_show(type, b1, sizeof b1), hint ? " (did you mean [" : "",
                    hint ? hint : "", hint ? "]?)" : "");
        goto done;
    }
    s->type = (aor_cfg_sec_type)(ti + 1);
    if (s->type == SEC_KEY || s->type == SEC_PROVIDER)
        c->saw_key_or_prov = 1;
    if (s->type == SEC_DAEMON || s->type == SEC_ROUTING) {
        if (name) {
            aor_cfg_err(c->errs, c->lineno, "[%s] takes no name; write [%s]", sec_names[ti],
                        sec_names[ti]);
            goto done;
        }
    } else if (!name) {
        aor_cfg_err(c->errs, c->lineno, "[%s] needs a name: [%s \"NAME\"]", sec_names[ti],
                    sec_names[ti]);
        goto done;
    } else if (aor_cfg_looks_secret(name)) {
        err_inline_secret(c, c->lineno, NULL, "the section name", name);
        goto done;
    } else if (s->type != SEC_MODEL && !aor_cfg_valid_name(name)) {
        aor_cfg_err(c->errs, c->lineno,
                    "invalid %s name \"%s\": use 1 to %d letters, digits and . _ @ + -",
                    sec_names[ti], aor_cfg_show(name, b1, sizeof b1), AOR_CFG_NAME_MAX);
        goto done;
    } else if (s->type == SEC_MODEL && !aor_cfg_valid_model(name)) {
        aor_cfg_err(c->errs, c->lineno,
                    "invalid model name \"%s\": 1 to %d characters without spaces, ',', '=', "
                    "';' or '\"'",
                    aor_cfg_show(name, b1, sizeof b1), AOR_CFG_MODEL_MAX);
        goto done;
    }
    for (size_t i = 0; i + 1 < c->nsecs; i++) {
        const aor_cfg_section *o = &c->secs[i];
        if (o->type == s->type &&
            ((!o->name && !s->name) || (o->name && s->name && strcmp(o->name, s->name) == 0))) {
            aor_cfg_err(c->errs, c->lineno,
                        "duplicate section %s (first on line %zu); merge the two, its options "
                        "are ignored",
                        aor_cfg_sec_label(s, b2, sizeof b2), o->line);
            s->dup = 1;
            s->idx = o->idx; /* its options are not applied; messages name the first's entry */
            goto done;
        }
    }
    if (s->type != SEC_DAEMON && s->type != SEC_ROUTING && add_entry(c, s, (size_t)c->cur) != 0) {
        c->errs->oom = 1;
        goto done;
    }
    s->skip = 0;
done:
    free(type);
}

/* ---- options ---------------------------------------------------------------------------- */

/* Returns 0 and the enumeration index, or reports an error with a hint. */
static int parse_enum(aor_cfg_parse_ctx *c, size_t line, const char *opt, const char *v,
                      const char *const *names, size_t n, int *out) {
    for (size_t i = 0; i < n; i++) {
        if (aor_cfg_ieq(v, names[i])) {
            *out = (int)i;
            return 0;
        }
    }
    char b[AOR_CFG_SHOWBUF], list[128] = "";
    size_t o = 0;
    for (size_t i = 0; i < n && o < sizeof list; i++) {
        int w = snprintf(list + o, sizeof list - o, "%s%s", i ? (i + 1 == n ? " or " : ", ") : "",
                         names[i]);
        if (w < 0)
            break;
        o += (size_t)w;
    }
    const char *hint = aor_cfg_suggest(v, names, n);
    aor_cfg_err(c->errs, line, "%s = %s: expected %s%s%s%s", opt, aor_cfg_show(v, b, sizeof b),
                list, hint ? "; did you mean " : "", hint ? hint : "", hint ? "?" : "");
    return -1;
}

static void set_path(aor_cfg_parse_ctx *c, size_t line, const char *opt, const char *v,
                     char **dst) {
    char *p = aor_cfg_resolve_path(v, c->dir);
    if (!p) {
        if (errno == ENOMEM)
            c->errs->oom = 1;
        else
            aor_cfg_err(c->errs, line, "%s: cannot expand ~ (HOME is not set)", opt);
        return;
    }
    free(*dst);
    *dst = p;
}

static void opt_daemon(aor_cfg_parse_ctx *c, size_t line, int id, const char *v) {
    aor_config *cfg = c->cfg;
    const char *why = NULL;
    char b[AOR_CFG_SHOWBUF];
    switch (id) {
    case D_SOCKET:
        set_path(c, line, "socket", v, &cfg->socket_path);
        if (cfg->socket_path && strlen(cfg->socket_path) >= AOR_CFG_SUN_PATH)
            aor_cfg_err(c->errs, line,
                        "socket path is longer than %d bytes, the limit of a Unix socket "
                        "address",
                        AOR_CFG_SUN_PATH - 1);
        break;
    case D_LISTEN: {
        char *l = NULL;
        if (aor_cfg_parse_listen(v, &l, &why) != 0) {
            aor_cfg_err(c->errs, line, "listen = %s: %s", aor_cfg_show(v, b, sizeof b), why);
            break;
        }
        free(cfg->listen);
        cfg->listen = l;
        break;
    }
    case D_STATE:
        set_path(c, line, "state", v, &cfg->state_path);
        break;
    case D_ENV_FILE:
        set_path(c, line, "env_file", v, &cfg->env_file);
        break;
    case D_BODY_MAX:
        if (aor_cfg_parse_bytes(v, 1024, 1024L * 1024 * 1024, &cfg->body_max) != 0)
            aor_cfg_err(c->errs, line,
                        "body_max = %s: expected a size in bytes from 1024 to 1 GiB, optionally "
                        "with K, M or G (e.g. 32M)",
                        aor_cfg_show(v, b, sizeof b));
        break;
    }
}

static void err_number(aor_cfg_parse_ctx *c, size_t line, const char *opt, const char *v,
                       const char *what) {
    char b[AOR_CFG_SHOWBUF];
    aor_cfg_err(c->errs, line, "%s = %s: expected %s", opt, aor_cfg_show(v, b, sizeof b), what);
}

static void opt_routing(aor_cfg_parse_ctx *c, size_t line, int id, const char *v) {
    aor_config *cfg = c->cfg;
    const char *opt = routing_opts[id];
    long n;
    double *sec = NULL;
    int sec_positive = 1;
    char b[AOR_CFG_SHOWBUF];
    switch (id) {
    case R_AUTO_FALLBACK:
        if (aor_cfg_parse_bool(v, &cfg->auto_fallback) != 0)
            aor_cfg_err(c->errs, line,
                        "auto_fallback = %s: expected true or false (also yes/no, on/off, 1/0)",
                        aor_cfg_show(v, b, sizeof b));
        return;
    case R_MAX_RETRIES:
        if (aor_cfg_parse_retries(v, &cfg->max_opaque_retries) != 0)
            err_number(c, line, opt, v, "unlimited or a whole number from 0 to 1000000");
        return;
    case R_PROVIDER_PCT:
    case R_KEY_PCT:
        if (aor_cfg_parse_long(v, 0, INT_MAX, &n) != 0) {
            err_number(c, line, opt, v, "a whole number from 0 to 2147483647");
            return;
        }
        if (id == R_PROVIDER_PCT)
            cfg->provider_priority_cache_threshold = (int)n;
        else
            cfg->key_priority_cache_threshold = (int)n;
        return;
    case R_STRATEGY: {
        int s;
        if (parse_enum(c, line, opt, v, strategy_names, 2, &s) == 0)
            cfg->strategy = s ? AOR_STRATEGY_ROUND_ROBIN : AOR_STRATEGY_PRIORITY;
        return;
    }
    case R_BREAKER_FAILURES:
        if (aor_cfg_parse_long(v, 1, AOR_BREAKER_FAILURES_MAX, &n) != 0)
            err_number(c, line, opt, v, "a whole number from 1 to 1000");
        else
            cfg->breaker_failures = (int)n;
        return;
    case R_BACKOFF_INITIAL:
        sec = &cfg->backoff_initial_s;
        break;
    case R_BACKOFF_MAX:
        sec = &cfg->backoff_max_s;
        break;
    case R_QUOTA_COOLDOWN:
        sec = &cfg->quota_cooldown_s;
        sec_positive = 0;
        break;
    case R_AUTH_COOLDOWN:
        sec = &cfg->auth_cooldown_s;
        sec_positive = 0;
        break;
    case R_BREAKER_WINDOW:
        sec = &cfg->breaker_window_s;
        break;
    case R_BREAKER_OPEN:
        sec = &cfg->breaker_open_s;
        break;
    default:
        return;
    }
    double d;
    if (aor_cfg_parse_seconds(v, &d) != 0 || (sec_positive && d <= 0))
        err_number(c, line, opt, v,
                   sec_positive
                       ? "a plain number of seconds > 0 and at most 1000000000 (e.g. 5 or 0.5)"
                       : "a plain number of seconds from 0 to 1000000000 (e.g. 120)");
    else
        *sec = d;
}

/* 1 when the regular file at path holds a PEM certificate ("-----BEGIN CERTIFICATE-----"),
 * 0 when it does not, -1 (errno) when it cannot be read. Read in blocks (a bundle may be
 * large); opened without blocking (the caller checked it is a regular file). */
static int holds_pem_cert(const char *path) {
    static const char tag[] = "-----BEGIN CERTIFICATE-----";
    enum { TAGLEN = sizeof tag - 1, BLOCK = 65536 };
    int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0)
        return -1;
    char *buf = malloc(BLOCK + TAGLEN);
    if (!buf) {
        close(fd);
        errno = ENOMEM;
        return -1;
    }
    size_t keep = 0;
    int found = 0;
    for (;;) {
        ssize_t n = read(fd, buf + keep, BLOCK);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0) {
            found = n < 0 ? -1 : 0;
            break;
        }
        size_t have = keep + (size_t)n;
        if (memmem(buf, have, tag, TAGLEN)) {
            found = 1;
            break;
        }
        keep = have < TAGLEN - 1 ? have : TAGLEN - 1; /* a tag cut across two blocks */
        memmove(buf, buf + have - keep, keep);
    }
    int e = errno;
    free(buf);
    close(fd);
    errno = e;
    return found;
}

static void opt_key(aor_cfg_parse_ctx *c, size_t line, const aor_cfg_section *s, int id,
                    const char *v) {
    aor_key_cfg *k = &c->cfg->keys[s->idx];
    char b[AOR_CFG_SHOWBUF];
    long n;
    switch (id) {
    case K_ENV:
        if (!aor_cfg_valid_env_name(v)) {
            /* The value is shown when it helps (`ENVK # comment`, `my-var`), not when it
             * may be the secret pasted in its place: one long word, of whatever alphabet
             * (a base64 key with '/' escapes the secret patterns of rule 6; QA). */
            int word = strcspn(v, " \t") == strlen(v) && strlen(v) >= 20;
            aor_cfg_err(c->errs, line,
                        "env = %s: expected the NAME of an environment variable (letters, "
                        "digits, _), e.g. env = OPENAI_API_KEY; the secret itself goes into "
                        "that variable",
                        word ? "(not shown: it may be the secret itself)"
                             : aor_cfg_show(v, b, sizeof b));
            return;
        }
        static const char *const system_vars[] = {"PATH",   "HOME",   "USER",    "LOGNAME",
                                                  "SHELL",  "PWD",    "LANG",    "TERM",
                                                  "TMPDIR", "OLDPWD", "HOSTNAME"};
        for (size_t i = 0; i < sizeof system_vars / sizeof system_vars[0]; i++) {
            if (strcmp(v, system_vars[i]) == 0) {
                /* QA: env = PATH was accepted, and $PATH went upstream as the key. */
                aor_cfg_err(c->errs, line,
                            "env = %s names a variable the system sets, not one that holds a "
                            "secret: export the key in a variable of its own (e.g. "
                            "OPENAI_API_KEY) and name that",
                            v);
                return;
            }
        }
        k->env = strdup(v);
        if (!k->env)
            c->errs->oom = 1;
        return;
    case K_PRIORITY:
        if (aor_cfg_parse_long(v, -1000000, 1000000, &n) != 0)
            err_number(c, line, "priority", v,
                       "a whole number from -1000000 to 1000000 (lower is preferred)");
        else
            k->priority = (int)n;
        return;
    case K_NAME:
        if (strlen(v) > 200) {
            aor_cfg_err(c->errs, line, "name is longer than 200 characters");
            return;
        }
        /* `aor status` prints it and the admin API sends it as JSON: UTF-8 text with no
         * character that drives a terminal (C0 such as ESC or tab, DEL, C1). */
        for (size_t i = 0, vn = strlen(v); i < vn;) {
            unsigned cp = 0;
            size_t l = aor_utf8_seq(v + i, vn - i, &cp);
            if (l == 0) {
                aor_cfg_err(c->errs, line,
                            "name = %s: name is not UTF-8 text (byte 0x%02x); save the file "
                            "as UTF-8",
                            aor_cfg_show(v, b, sizeof b), (unsigned)(unsigned char)v[i]);
                return;
            }
            if (cp < 0x20 || (cp >= 0x7f && cp <= 0x9f)) {
                aor_cfg_err(c->errs, line,
                            "name = %s: name contains control characters (U+%04X); "
                            "use printable text",
                            aor_cfg_show(v, b, sizeof b), cp);
                return;
            }
            i += l;
        }
        k->friendly = strdup(v);
        if (!k->friendly)
            c->errs->oom = 1;
        return;
    }
}

static void opt_models(aor_cfg_parse_ctx *c, size_t line, aor_provider_cfg *p, const char *v) {
    char **items = NULL;
    long n = aor_cfg_split_list(v, &items);
    char b[AOR_CFG_SHOWBUF];
    if (n < 0) {
        c->errs->oom = 1;
        return;
    }
    p->models = calloc((size_t)n, sizeof *p->models);
    if (!p->models) {
        c->errs->oom = 1;
        goto done;
    }
    for (long i = 0; i < n; i++) {
        char *it = items[i];
        if (strcmp(it, "*") == 0) {
            p->models_any = 1;
            continue;
        }
        if (!*it) {
            aor_cfg_err(c->errs, line, "models: empty item in the list (stray comma?)");
            continue;
        }
        char *eq = strchr(it, '=');
        char *canon = it, *up = it;
        if (eq) {
            *eq = '\0';
            up = eq + 1;
            while (*up == ' ' || *up == '\t')
                up++;
            for (char *e = eq; e > canon && (e[-1] == ' ' || e[-1] == '\t'); e--)
                e[-1] = '\0';
        }
        if (strlen(canon) > AOR_CFG_MODEL_MAX || strlen(up) > AOR_CFG_MODEL_MAX) {
            aor_cfg_err(c->errs, line, "models: \"%s\" is longer than %d characters",
                        aor_cfg_show(strlen(canon) > AOR_CFG_MODEL_MAX ? canon : up, b, sizeof b),
                        AOR_CFG_MODEL_MAX);
            continue;
        }
        if (eq && (strcmp(canon, "*") == 0 || strcmp(up, "*") == 0)) {
            /* "*=x" read as a model named "*" sent as x: only a request for model "*"
             * would match, silently (QA). "*" stands alone. */
            char b2[AOR_CFG_SHOWBUF];
            aor_cfg_err(c->errs, line,
                        "models: \"%s=%s\": '*' (every model of the dialect, sent as the client "
                        "names it) takes no upstream id; write * without =, and "
                        "canonical=upstream pairs beside it (models = *, fast=gpt-4o-mini)",
                        aor_cfg_show(canon, b, sizeof b), aor_cfg_show(up, b2, sizeof b2));
            continue;
        }
        if (!aor_cfg_valid_model(canon) || !aor_cfg_valid_model(up)) {
            /* Named as written (items[i] was cut at '='), and which side is wrong. */
            const char *bad = aor_cfg_valid_model(canon) ? up : canon;
            char b2[AOR_CFG_SHOWBUF], b3[AOR_CFG_SHOWBUF];
            if (!eq)
                aor_cfg_err(c->errs, line,
                            "models: \"%s\" is not canonical or canonical=upstream (model names "
                            "have no spaces, ',', '=' or ';')",
                            aor_cfg_show(canon, b, sizeof b));
            else if (!*bad)
                aor_cfg_err(c->errs, line, "models: \"%s=%s\": the %s name (%s '=') is empty",
                            aor_cfg_show(canon, b, sizeof b), aor_cfg_show(up, b2, sizeof b2),
                            bad == canon ? "canonical" : "upstream",
                            bad == canon ? "before" : "after");
            else
                aor_cfg_err(c->errs, line,
                            "models: \"%s=%s\": \"%s\" is not a model name (model names have "
                            "no spaces, ',', '=' or ';')",
                            aor_cfg_show(canon, b, sizeof b), aor_cfg_show(up, b2, sizeof b2),
                            aor_cfg_show(bad, b3, sizeof b3));
            continue;
        }
        int dup = 0;
        for (size_t j = 0; j < p->nmodels; j++)
            dup |= strcmp(p->models[j].canonical, canon) == 0;
        if (dup) {
            aor_cfg_err(c->errs, line, "models: \"%s\" is listed twice",
                        aor_cfg_show(canon, b, sizeof b));
            continue;
        }
        aor_model_map *m = &p->models[p->nmodels];
        m->canonical = strdup(canon);
        m->upstream = strdup(up);
        if (!m->canonical || !m->upstream) {
            free(m->canonical);
            free(m->upstream);
            c->errs->oom = 1;
            goto done;
        }
        p->nmodels++;
    }
done:
    aor_cfg_list_free(items, (size_t)n);
}

/* A base_url whose path ends in the API version (".../v1", ".../v1beta"), the form of
 * OPENAI_BASE_URL and the SDKs' base URLs: clients send paths that start with the version
 * already and aor appends them to base_url (".../v1/v1/chat/completions": 404 upstream).
 * Valid (a path prefix is), so a warning, not an error. base is normalised (no trailing
 * slash) and holds no secret (credentials are refused). */
static void warn_versioned_base(aor_cfg_parse_ctx *c, size_t line, const char *base) {
    static const char *const versions[] = {"/v1", "/v1beta"};
    const char *auth = strstr(base, "://");
    const char *path = auth ? strchr(auth + 3, '/') : NULL;
    if (!c->warns || !path)
        return;
    size_t plen = strlen(path);
    for (size_t i = 0; i < sizeof versions / sizeof versions[0]; i++) {
        size_t vlen = strlen(versions[i]);
        if (plen >= vlen && strcmp(path + plen - vlen, versions[i]) == 0) {
            int keep = (int)(strlen(base) - vlen);
            aor_cfg_err(c->warns, line,
                        "base_url %s ends in %s, but clients send paths that start with %s "
                        "already and aor appends them (%s%s/...); did you mean base_url = %.*s?",
                        base, versions[i], versions[i], base, versions[i], keep, base);
            return;
        }
    }
}

static void opt_provider(aor_cfg_parse_ctx *c, size_t line, const aor_cfg_section *s, int id,
                         const char *v) {
    aor_provider_cfg *p = &c->cfg->providers[s->idx];
    aor_cfg_prov_info *pi = &c->pinfo[s->idx];
    char b[AOR_CFG_SHOWBUF];
    const char *why = NULL;
    long n;
    int e, r;
    switch (id) {
    case P_DIALECT:
        if (parse_enum(c, line, "dialect", v, dialect_names, 3, &e) == 0)
            p->dialect = (aor_dialect)e;
        return;
    case P_BASE_URL: {
        aor_cfg_url u;
        if (aor_cfg_parse_url(v, &u, &why) != 0) {
            aor_cfg_err(c->errs, line, "base_url %s (e.g. https://api.openai.com)", why);
            return;
        }
        p->base_url = u.base;
        p->host = u.host;
        p->port = u.port;
        warn_versioned_base(c, line, u.base);
        return;
    }
    case P_KEYS: {
        char **items = NULL;
        long k = aor_cfg_split_list(v, &items);
        if (k < 0) {
            c->errs->oom = 1;
            return;
        }
        int bad = 0;
        for (long i = 0; i < k; i++) {
            if (!*items[i]) {
                aor_cfg_err(c->errs, line, "keys: empty item in the list (stray comma?)");
                bad = 1;
            } else if (!aor_cfg_valid_name(items[i])) {
                aor_cfg_err(c->errs, line, "keys: \"%s\" is not a key name",
                            aor_cfg_show(items[i], b, sizeof b));
                bad = 1;
            } else {
                for (long j = 0; j < i; j++) {
                    if (strcmp(items[i], items[j]) == 0) {
                        aor_cfg_err(c->errs, line, "keys: \"%s\" is listed twice", items[i]);
                        bad = 1;
                    }
                }
            }
        }
        pi->key_names = items;
        pi->nkey_names = (size_t)k;
        pi->keys_bad = bad; /* reported here; no "undeclared" noise later */
        return;
    }
    case P_MODELS:
        opt_models(c, line, p, v);
        return;
    case P_PRIORITY:
        if (aor_cfg_parse_long(v, -1000000, 1000000, &n) != 0)
            err_number(c, line, "priority", v,
                       "a whole number from -1000000 to 1000000 (lower is preferred)");
        else
            p->priority = (int)n;
        return;
    case P_RETRY_AFTER:
        if (parse_enum(c, line, "retry_after", v, retry_after_names, 2, &e) == 0)
            p->retry_after_ignore = e == 1;
        return;
    case P_INTERCEPT: {
        char **items = NULL;
        long k = aor_cfg_split_list(v, &items);
        if (k < 0) {
            c->errs->oom = 1;
            return;
        }
        p->intercept = calloc((size_t)k, sizeof *p->intercept);
        if (!p->intercept) {
            c->errs->oom = 1;
            aor_cfg_list_free(items, (size_t)k);
            return;
        }
        for (long i = 0; i < k; i++) {
            for (char *q = items[i]; *q; q++)
                *q = (char)tolower((unsigned char)*q);
            size_t len = strlen(items[i]);
            if (len > 1 && items[i][len - 1] == '.')
                items[i][len - 1] = '\0'; /* FQDN form: stored as the name it means */
            const char *bad = NULL;
            if (aor_config_host_is_address(items[i]))
                bad = "is an IP address, not a host name (aor intercepts by name; connections "
                      "to an address go direct)";
            else if (!aor_cfg_valid_host(items[i]))
                bad = "is not a host name (letters, digits, '-' and '.', no scheme or port)";
            if (bad) {
                aor_cfg_err(c->errs, line, "intercept: \"%s\" %s",
                            aor_cfg_show(items[i], b, sizeof b), bad);
                free(items[i]);
                continue;
            }
            p->intercept[p->nintercept++] = items[i];
        }
        free(items);
        return;
    }
    case P_CA_FILE:
        set_path(c, line, "ca_file", v, &p->ca_file);
        if (p->ca_file) {
            struct stat st;
            /* stat, not open: a FIFO must not hang the load (OpenSSL would block in it
             * on the first request). */
            if (access(p->ca_file, R_OK) != 0)
                aor_cfg_err(c->errs, line, "ca_file %s cannot be read: %s", p->ca_file,
                            strerror(errno));
            else if (stat(p->ca_file, &st) != 0 || !S_ISREG(st.st_mode))
                aor_cfg_err(c->errs, line, "ca_file %s is not a regular file (a PEM bundle)",
                            p->ca_file);
            else if ((r = holds_pem_cert(p->ca_file)) <= 0)
                /* QA: /etc/passwd was accepted; every request then failed its TLS set-up
                 * and backed off every key as transient. */
                aor_cfg_err(c->errs, line, "ca_file %s %s", p->ca_file,
                            r < 0 ? strerror(errno)
                                  : "holds no PEM certificate (no \"-----BEGIN CERTIFICATE-----\" "
                                    "line): name the CA's certificate file (PEM)");
        }
        return;
    }
}

static void opt_model(aor_cfg_parse_ctx *c, size_t line, const aor_cfg_section *s, const char *v) {
    if (aor_cfg_parse_retries(v, &c->cfg->models[s->idx].max_opaque_retries) != 0)
        err_number(c, line, "max_opaque_retries", v,
                   "unlimited or a whole number from 0 to 1000000");
}

/* The section types (other than t) where an option of this name exists. */
/* Writes " (NAME belongs in [a] or [b \"NAME\"])" into buf (cap bytes, truncated)
 * naming every other section that takes option name, or "" when none does. */
static void other_homes(aor_cfg_sec_type t, const char *name, char *buf, size_t cap) {
    size_t homes[NSEC_NAMES], n = 0;
    for (size_t i = 0; i < NSEC_NAMES; i++)
        if ((aor_cfg_sec_type)(i + 1) != t && find_opt((aor_cfg_sec_type)(i + 1), name) >= 0)
            homes[n++] = i;
    buf[0] = '\0';
    if (n == 0)
        return;
    size_t off = 0;
    int w = snprintf(buf, cap, " (%s belongs in ", name);
    for (size_t k = 0; k < n && w >= 0 && (off += (size_t)w) < cap; k++) {
        const char *sec = sec_names[homes[k]];
        w = snprintf(buf + off, cap - off, "%s[%s%s]",
                     k == 0       ? ""
                     : k + 1 == n ? " or "
                                  : ", ",
                     sec, strcmp(sec, "daemon") && strcmp(sec, "routing") ? " \"NAME\"" : "");
    }
    if (w >= 0 && (off += (size_t)w) < cap)
        snprintf(buf + off, cap - off, ")");
}

/* inih handler: called right after the reader returned the line, so c->lineno is the
 * line of this option. Always returns 1 (errors are collected, parsing goes on). */
static void option(aor_cfg_parse_ctx *c, const char *name, const char *value) {
    size_t line = c->lineno;
    char b1[AOR_CFG_SHOWBUF], b2[AOR_CFG_SHOWBUF];
    if (!*name) {
        aor_cfg_err(c->errs, line, "missing option name before '='");
        return;
    }
    if (c->cur < 0) {
        if (aor_cfg_secret_option_name(name) || aor_cfg_looks_secret(value))
            err_inline_secret(c, line, NULL, "this line", value);
        else
            aor_cfg_err(c->errs, line,
                        "option %s is outside of any section; put it under [daemon], [routing], "
                        "[key \"NAME\"], [provider \"NAME\"] or [model \"NAME\"]",
                        aor_cfg_show(name, b1, sizeof b1));
        return;
    }
    aor_cfg_section *s = &c->secs[c->cur];
    int id = s->type != SEC_BAD ? find_opt(s->type, name) : -1;
    const char *hint = NULL;
    if (id < 0 && s->type != SEC_BAD)
        hint = aor_cfg_suggest(name, sec_opts[s->type].names, sec_opts[s->type].n);
    if (s->skip) {
        /* Not applied, but §3.1 still reports, so that one run shows every error: an
         * inline secret wherever it stands (rule 6) and, in a duplicate section, an
         * unknown option (rule 7). */
        if (aor_cfg_looks_secret(name) || aor_cfg_looks_secret(value) ||
            (id < 0 && aor_cfg_secret_option_name(name) && !hint))
            err_inline_secret(c, line, s, "this line", value);
        else if (s->dup && id < 0)
            aor_cfg_err(c->errs, line, "unknown option %s in %s%s%s%s",
                        aor_cfg_show(name, b1, sizeof b1), aor_cfg_sec_label(s, b2, sizeof b2),
                        hint ? "; did you mean " : "", hint ? hint : "", hint ? "?" : "");
        return;
    }
    if (id >= 0) {
        if (s->seen[id]) {
            aor_cfg_err(c->errs, line, "%s is set twice in %s (first on line %zu)",
                        sec_opts[s->type].names[id], aor_cfg_sec_label(s, b2, sizeof b2),
                        s->seen[id]);
            return;
        }
        s->seen[id] = line;
    }
    /* Rule 6 first, so that no other message can echo a secret. `key = x` in a
     * [provider] that is just a typo of `keys` stays a rule-7 error. */
    if (aor_cfg_looks_secret(name) || aor_cfg_looks_secret(value) ||
        (id < 0 && aor_cfg_secret_option_name(name) && !hint)) {
        char what[AOR_CFG_SHOWBUF + 16];
        if (aor_cfg_looks_secret(name))
            snprintf(what, sizeof what, "this line");
        else
            snprintf(what, sizeof what, "%s%s", id < 0 ? "option " : "the value of ",
                     aor_cfg_show(name, b1, sizeof b1));
        err_inline_secret(c, line, s, what, aor_cfg_looks_secret(name) ? name : value);
        return;
    }
    if (id < 0) {
        char homebuf[160];
        other_homes(s->type, name, homebuf, sizeof homebuf);
        for (size_t t = 1; !hint && !homebuf[0] && t <= NSEC_NAMES; t++) {
            /* A misspelt option of another section (fresh-user pass: `stratgy` in a
             * [provider] got no hint): suggested with where it belongs. */
            if ((aor_cfg_sec_type)t != s->type && s->type != SEC_BAD &&
                (hint = aor_cfg_suggest(name, sec_opts[t].names, sec_opts[t].n)) != NULL)
                other_homes(s->type, hint, homebuf, sizeof homebuf);
        }
        aor_cfg_err(c->errs, line, "unknown option %s in %s%s%s%s%s",
                    aor_cfg_show(name, b1, sizeof b1), aor_cfg_sec_label(s, b2, sizeof b2),
                    hint ? "; did you mean " : "", hint ? hint : "", hint ? "?" : "", homebuf);
        return;
    }
    const char *opt = sec_opts[s->type].names[id];
    if (!*value) {
        aor_cfg_err(c->errs, line, "%s has an empty value", opt);
        return;
    }
    switch (s->type) {
    case SEC_DAEMON:
        opt_daemon(c, line, id, value);
        break;
    case SEC_ROUTING:
        opt_routing(c, line, id, value);
        break;
    case SEC_KEY:
        opt_key(c, line, s, id, value);
        break;
    case SEC_PROVIDER:
        opt_provider(c, line, s, id, value);
        break;
    case SEC_MODEL:
        opt_model(c, line, s, value);
        break;
    default:
        break;
    }
}

/* inih handler for a value that is not quoted (the reader takes quoted ones). */
static int on_option(void *user, const char *inih_section, const char *name, const char *value) {
    (void)inih_section; /* the reader tracks sections itself (names of any length) */
    option(user, name, value);
    return 1;
}

/* ---- the line reader --------------------------------------------------------------------- */

/* Where an inline comment starts in s (n bytes) as inih finds it: a ';' after a blank;
 * n when there is none. */
static size_t comment_start(const char *s, size_t n) {
    for (size_t i = 1; i < n; i++)
        if (s[i] == ';' && isspace((unsigned char)s[i - 1]))
            return i;
    return n;
}

/* Where the comment after a section header's ']' starts (its ';' or '#'), n when none:
 * the first ']' outside the name's quotes (\" and \\ escaped there), then blanks. */
static size_t header_comment(const char *s, size_t n) {
    int quoted = 0;
    for (size_t i = 0; i < n; i++) {
        if (quoted && s[i] == '\\' && i + 1 < n) {
            i++;
            continue;
        }
        if (s[i] == '"')
            quoted = !quoted;
        else if (!quoted && s[i] == ']') {
            size_t j = i + 1;
            while (j < n && (s[j] == ' ' || s[j] == '\t'))
                j++;
            return j < n && (s[j] == ';' || s[j] == '#') ? j : n;
        }
    }
    return n;
}

/* A comment (from its ';' or '#', n bytes) that holds a key: rule 6 like a value (a key
 * commented out is still a secret in a file that is often 0644 and shared; QA). */
static void check_comment(aor_cfg_parse_ctx *c, const char *s, size_t n) {
    if (aor_cfg_comment_looks_secret(s, n))
        aor_cfg_err(c->errs, c->lineno,
                    "a comment on this line holds what looks like a provider key; a key "
                    "commented out is still a secret written into the file: remove it (aor "
                    "reads secrets only from the environment: env = VARIABLE in a [key] "
                    "section, or env_file) (the comment is not shown)");
}

/* Where what follows a closing quote at q ends: n when only blanks follow, the start
 * of a comment (';' or '#') after blanks, n + 1 when anything else follows. */
static size_t value_end(const char *line, size_t n, const char *q) {
    size_t after = (size_t)(q - line) + 1;
    while (after < n && isblank((unsigned char)line[after]))
        after++;
    return after < n && line[after] != ';' && line[after] != '#' ? n + 1 : after;
}

/* A value in double or single quotes ("openai", as git config allows): taken without
 * them and as written between them, so a ';' or '#' inside is part of the value, not a
 * comment (QA: `name = "Work ; shared"` was cut to `"Work`). line (n bytes, trimmed,
 * with a separator) is `name = "value"` optionally followed by blanks and a comment.
 * Returns 1 when the value was quoted (option() called, or an error reported), 0 when
 * not (inih takes the line). No escapes. */
static int quoted_option(aor_cfg_parse_ctx *c, const char *line, size_t n) {
    size_t sep = 0;
    while (sep < n && line[sep] != '=' && line[sep] != ':')
        sep++;
    size_t v = sep + 1;
    while (v < n && isblank((unsigned char)line[v]))
        v++;
    if (v >= n || (line[v] != '"' && line[v] != '\''))
        return 0;
    /* The first matching quote that only blanks or a comment follow closes the value
     * (so a quote inside stays: 'Bob's key'). */
    const char *close = memchr(line + v + 1, line[v], n - v - 1);
    if (!close) {
        aor_cfg_err(c->errs, c->lineno,
                    "the value starts with %s but has no closing one (a value in quotes ends "
                    "on the same line, with the same quote)",
                    line[v] == '"' ? "a double quote (\")" : "a single quote (')");
        return 1;
    }
    size_t after = value_end(line, n, close);
    while (after > n) {
        close = memchr(close + 1, line[v], n - (size_t)(close + 1 - line));
        if (!close) {
            aor_cfg_err(c->errs, c->lineno,
                        "text after the closing quote of the value; put all of the value in "
                        "the quotes, or start a comment with ';'");
            return 1;
        }
        after = value_end(line, n, close);
    }
    if (after < n)
        check_comment(c, line + after, n - after);
    size_t ne = sep;
    while (ne && isblank((unsigned char)line[ne - 1]))
        ne--;
    char *name = strndup(line, ne);
    char *value = strndup(line + v + 1, (size_t)(close - line) - v - 1);
    if (!name || !value)
        c->errs->oom = 1;
    else
        option(c, name, value);
    free(name);
    if (value) {
        explicit_bzero(value, strlen(value));
        free(value);
    }
    return 1;
}

/* 1 when inih will find '=' or ':' before an inline comment (" ;"), as it splits. */
static int has_separator(const char *s, size_t n) {
    int was_space = 0;
    for (size_t i = 0; i < n; i++) {
        if (s[i] == '=' || s[i] == ':')
            return 1;
        if (was_space && s[i] == ';')
            return 0;
        was_space = isspace((unsigned char)s[i]) != 0;
    }
    return 0;
}

/* ini_reader: hands inih one line at a time, trimmed (so inih never sees indentation
 * and never joins continuation lines); section headers, comments and malformed lines
 * are handled here and reach inih as an empty line. */
static char *cfg_reader(char *str, int num, void *stream) {
    aor_cfg_parse_ctx *c = stream;
    if (c->pos >= c->len || num < 2)
        return NULL;
    const char *line = c->text + c->pos;
    size_t avail = c->len - c->pos;
    const char *nl = memchr(line, '\n', avail);
    size_t n = nl ? (size_t)(nl - line) : avail;
    c->pos += n + (nl != NULL);
    c->lineno++;
    str[0] = '\0';
    if (c->lineno == 1 && n >= 3 && memcmp(line, "\xEF\xBB\xBF", 3) == 0) {
        line += 3;
        n -= 3;
    }
    if (memchr(line, '\0', n)) {
        aor_cfg_err(c->errs, c->lineno, "the line contains a NUL byte");
        return str;
    }
    while (n && isspace((unsigned char)line[0])) {
        line++;
        n--;
    }
    while (n && isspace((unsigned char)line[n - 1]))
        n--;
    if (n == 0)
        return str;
    if (line[0] == ';' || line[0] == '#') {
        check_comment(c, line, n);
        return str;
    }
    if (n > AOR_CFG_LINE_MAX || n + 2 > (size_t)num) {
        aor_cfg_err(c->errs, c->lineno, "the line is longer than %d characters", AOR_CFG_LINE_MAX);
        return str;
    }
    if (line[0] == '[') {
        begin_section(c, line, n);
        size_t hc = header_comment(line, n);
        if (hc < n) /* QA: `[key "k"] ; sk-...` was taken */
            check_comment(c, line + hc, n - hc);
        return str;
    }
    memcpy(str, line, n);
    str[n] = '\0';
    if (!has_separator(line, n)) {
        /* Do not echo the line: it may be a bare secret. */
        if (aor_cfg_looks_secret(str))
            err_inline_secret(c, c->lineno, c->cur >= 0 ? &c->secs[c->cur] : NULL, "this line",
                              str);
        else
            aor_cfg_err(c->errs, c->lineno,
                        "expected `name = value`, a [section] header or a comment");
        explicit_bzero(str, n);
        return str;
    }
    if (quoted_option(c, line, n)) {
        explicit_bzero(str, n);
        str[0] = '\0';
        return str;
    }
    size_t cs = comment_start(line, n);
    if (cs < n)
        check_comment(c, line + cs, n - cs);
    str[n] = '\n';
    str[n + 1] = '\0';
    return str;
}

int aor_cfg_parse(aor_cfg_parse_ctx *c) {
    /* Debian's libinih is built with INI_RUNTIME_OPTIONS: make its behaviour explicit.
     * The reader trims lines, so multi-line continuation never applies anyway; the line
     * buffer (a VLA of ini_max_line bytes) must hold our longest line. */
    ini_allow_multiline = false;
    ini_allow_inline_comments = true;
    ini_stop_on_first_error = false;
    ini_allow_no_value = false;
    if (ini_max_line < AOR_CFG_LINE_MAX + 3)
        ini_max_line = AOR_CFG_LINE_MAX + 3;
    c->cur = -1;
    /* rc > 0 is the first malformed line, already reported by the reader. */
    return ini_parse_stream(cfg_reader, c, on_option, c) < 0 ? -1 : 0;
}

void aor_cfg_parse_free(aor_cfg_parse_ctx *c) {
    for (size_t i = 0; i < c->nsecs; i++)
        free(c->secs[i].name);
    free(c->secs);
    for (size_t i = 0; c->pinfo && i < c->cfg->nproviders; i++)
        aor_cfg_list_free(c->pinfo[i].key_names, c->pinfo[i].nkey_names);
    free(c->kinfo);
    free(c->pinfo);
    free(c->minfo);
    c->secs = NULL;
    c->kinfo = NULL;
    c->pinfo = NULL;
    c->minfo = NULL;
    c->nsecs = 0;
}
