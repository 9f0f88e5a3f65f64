/* Configuration: the INI file of spec §3, its validation (§3.1), secrets from the
 * environment (§3.2) and the embedded default built from the environment (§3.3).
 *
 * A loaded aor_config is immutable and owned by the caller (aor_config_free). The
 * struct is public read-only data: the daemon reads fields directly; nothing but
 * this module writes them. */
#ifndef AOR_CONFIG_H
#define AOR_CONFIG_H

#include "types.h"

#include <stddef.h>

#define AOR_RETRIES_UNLIMITED (-1L) /* max_opaque_retries = unlimited */
#define AOR_RETRIES_UNSET (-2L)     /* [model] without max_opaque_retries */

typedef enum { AOR_STRATEGY_PRIORITY = 0, AOR_STRATEGY_ROUND_ROBIN } aor_strategy;

/* One [key "NAME"] section. */
typedef struct {
    char *name;     /* section name, e.g. "openai-main"; in the embedded default the
                     * variable name, e.g. "OPENAI_API_KEY_2" (docs/config.md) */
    char *env;      /* environment variable holding the secret */
    char *secret;   /* value of env (or env_file) at load time, trimmed; NEVER log it */
    char *friendly; /* `name =` option, or NULL */
    int priority;   /* lower is preferred; embedded default: 0, 1, 2 in number order */
} aor_key_cfg;

/* One entry of a provider's `models` list: canonical[=upstream]. */
typedef struct {
    char *canonical;
    char *upstream; /* equal to (a copy of) canonical when no '=' was given */
} aor_model_map;

/* One [provider "NAME"] section. */
typedef struct {
    char *name;
    aor_dialect dialect;
    char *base_url;  /* e.g. "https://api.openai.com", no trailing slash */
    char *host;      /* host part of base_url, lower case (IPv6 without brackets) */
    int port;        /* port of base_url (443/80 when not written) */
    size_t *key_idx; /* indexes into aor_config.keys, in the order written */
    size_t nkeys;
    aor_model_map *models;
    size_t nmodels;
    int models_any;         /* `models = *` (may come with canonical=upstream entries) */
    int priority;           /* lower is preferred */
    int retry_after_ignore; /* retry_after = ignore */
    char **intercept;       /* extra host names, lower case */
    size_t nintercept;
    char *ca_file;   /* extra CA for upstream TLS, or NULL */
    int passthrough; /* no configured key: the client's own credential goes upstream */
    int implicit;    /* not from a [provider] section: a known provider whose host no
                      * section owns, added keyless (passthrough) so that the shim's
                      * built-in hosts keep working (docs/config.md "Known providers
                      * without a section"); it serves its own host only, and on the
                      * sidecar its dialect only when no section speaks that dialect */
} aor_provider_cfg;

/* One [model "NAME"] section. */
typedef struct {
    char *name;
    long max_opaque_retries; /* AOR_RETRIES_UNLIMITED, AOR_RETRIES_UNSET or >= 0 */
} aor_model_cfg;

typedef struct {
    /* [daemon] */
    char *socket_path; /* resolved default: $XDG_RUNTIME_DIR/aor/aor.sock */
    char *listen;      /* "127.0.0.1:8787", or NULL when "off" */
    char *state_path;  /* resolved default: $XDG_STATE_HOME/aor/aor.db */
    char *env_file;    /* optional file of VAR=value lines (mode 0600), or NULL */
    long body_max;     /* request body cap in bytes (default 32 MiB); 413 beyond */

    /* [routing] */
    int auto_fallback;                     /* default 1 */
    long max_opaque_retries;               /* AOR_RETRIES_UNLIMITED (default) or >= 0 */
    int provider_priority_cache_threshold; /* default 0 */
    int key_priority_cache_threshold;      /* default 0 */
    aor_strategy strategy;
    double backoff_initial_s; /* 5 */
    double backoff_max_s;     /* 86400 */
    double quota_cooldown_s;  /* 120 */
    double auth_cooldown_s;   /* 120 */
    int breaker_failures;     /* 3 */
    double breaker_window_s;  /* 60 */
    double breaker_open_s;    /* 30 */

    aor_key_cfg *keys;
    size_t nkeys;
    aor_provider_cfg *providers;
    size_t nproviders;
    aor_model_cfg *models;
    size_t nmodels;

    char *source;         /* path of the file read, or NULL when there was no file */
    int embedded;         /* 1 when the providers and keys were built from the environment
                           * (§3.3): no file, or a file without [provider]/[key] sections */
    int secrets_optional; /* loaded with AOR_CONFIG_SECRETS_OPTIONAL: a key whose
                           * variable is unset has secret NULL */
    char **warnings;      /* what is valid but almost surely a mistake (a base_url that
                           * ends in the API version the clients' paths start with): each
                           * "FILE:LINE: message" (no newline, no secret), in line order */
    size_t nwarnings;
} aor_config;

/* Loads the configuration (reference: docs/config.md).
 * path: the file to read; NULL means "find it": $AOR_CONFIG, else
 *   $XDG_CONFIG_HOME/aor/aor.ini (~/.config when unset); when that file does not exist
 *   the embedded default of §3.3 is built from the environment. An explicit path
 *   (argument or $AOR_CONFIG) that does not exist is an error. A file without any
 *   [provider] and [key] section keeps its [daemon]/[routing] settings and takes the
 *   providers from the environment as in §3.3.
 * Precedence: $AOR_SOCKET wins over `socket =`; a variable set in the process
 *   environment wins over the same name in env_file.
 * Not thread-safe (sets libinih's global options): call from one thread at a time.
 * errors: on failure set to a malloc'd text of all errors, one per line, each
 *   "FILE:LINE: message" (§3.1, all reported at once); caller frees. NULL on success.
 *   Lines without a line number read "FILE: message"; the embedded default uses
 *   "<environment>" as FILE. errors may be NULL.
 * Returns a new config (free with aor_config_free) or NULL with errno=EINVAL (the text
 * says what; "out of memory" on ENOMEM). Secrets are read from the environment at load
 * time and never appear in *errors. */
aor_config *aor_config_load(const char *path, char **errors);

/* Flag of aor_config_load_flags: a key whose variable (and env_file entry) is unset or
 * empty is not an error; its secret is NULL. For the client commands (`aor run`,
 * `aor env`), which need the daemon's places and the provider hosts but no secret: the
 * keys may live only in the daemon's environment (a service's EnvironmentFile). A
 * secret that is set but malformed is still an error. */
#define AOR_CONFIG_SECRETS_OPTIONAL 1u

/* Flag of aor_config_load_flags: what aord's start would refuse about the socket path
 * (aor_path_socket_problem, common/paths.h: a relative path, its directory's owner and
 * mode or a symbolic link, something else than a socket at the path, a foreign hosts
 * file next to it) is one more error of the list, sorted with the others (spec §3.1:
 * all errors at once), at the `socket` line ("FILE:LINE: socket = PATH: why") or, for a
 * path from the environment, as "AOR_SOCKET=PATH: why" (else just why). For aord (start
 * and --check-config) and `aor check-config`. Reads the file system, nothing else. */
#define AOR_CONFIG_CHECK_SOCKET 2u

/* aor_config_load with flags (0 or the AOR_CONFIG_* flags or'ed); the same arguments,
 * returns and errors. */
aor_config *aor_config_load_flags(const char *path, unsigned flags, char **errors);

/* Frees a config and every string it owns. NULL is a no-op. */
void aor_config_free(aor_config *cfg);

/* Index of the provider named `name` (exact, case-sensitive), or -1 (also for NULL). */
int aor_config_provider_index(const aor_config *cfg, const char *name);

/* Upstream model id that provider p uses for canonical model `model`: the mapped id when
 * listed, `model` itself when models=* or unlisted. Returns a pointer into cfg or into
 * `model`; never NULL. Sets *listed (may be NULL) to 1 when p lists the model (or
 * models=*), else 0. Source: spec §3 `models`. */
const char *aor_config_upstream_model(const aor_provider_cfg *p, const char *model, int *listed);

/* Effective max_opaque_retries for a model: the [model] override when set, else the
 * global value (model may be NULL). Returns AOR_RETRIES_UNLIMITED or N >= 0. Can't fail.
 * Source: spec §3 [routing] / [model]. */
long aor_config_retries_for(const aor_config *cfg, const char *model);

/* 1 when host names a and b are the same: ASCII case-insensitive, one trailing dot on
 * either ignored ("API.OpenAI.com." is "api.openai.com"), as aor compares every host
 * (intercept names, SNI, Host headers, published names). Source: RFC 4343, RFC 1034 §3.1.
 * Both non-NULL. */
int aor_config_host_eq(const char *a, const char *b);

/* How many providers the configuration defines: its [provider] sections, or the
 * embedded default's; the implicit known providers (aor_provider_cfg.implicit) are not
 * counted. For summary lines (`aor check-config`, the ready line, `aor doctor`). */
size_t aor_config_count_providers(const aor_config *cfg);

/* 1 when host (no port) is the base_url host or an intercept host of provider p,
 * compared case-insensitively and ignoring one trailing dot; else 0 (also for NULL).
 * Source: spec §2 (hosts to intercept), §3 `intercept`. */
int aor_config_provider_owns_host(const aor_provider_cfg *p, const char *host);

/* 1 when host is an IP address in any form the resolver reads as one: inet_pton's
 * (127.0.0.1, ::1) and the older inet_aton forms getaddrinfo also takes (127.1,
 * 2130706433, 0x7f.1); else 0 (also for NULL). Source: spec §2 (interception is by name:
 * a connection to an address is never intercepted). */
int aor_config_host_is_address(const char *host);

/* 1 when aord publishes host for interception (spec §2): a host name, not an address
 * (aor_config_host_is_address); localhost (one trailing dot ignored) only when named in
 * an intercept list (named 1: every name of the list), not as a base_url host (named 0:
 * a local provider needs no aor before it). 0 otherwise, also for NULL or "". Source:
 * spec §2, §3 `intercept`, `base_url`. */
int aor_config_host_published(const char *host, int named);

/* Splits an http:// or https:// URL (the syntax base_url accepts: no credentials, query
 * or fragment) into its host (lower case, IPv6 without brackets; malloc'd, caller frees),
 * its port (the written one, else 443 / 80) and whether it is https (*tls 1). Returns 0,
 * or -1 with *why a static text (never containing the URL) and *host NULL. Source: spec
 * §3 `base_url`. */
int aor_config_url_split(const char *url, char **host, int *port, int *tls, const char **why);

/* Reads only the [daemon] `socket` and `listen` values of the config file (path as in
 * aor_config_load: argument, $AOR_CONFIG, $XDG_CONFIG_HOME/aor/aor.ini), ignoring every
 * error elsewhere; $AOR_SOCKET overrides the socket; defaults as aor_config_load's.
 * For the `aor` command when the full config does not validate. *socket_path and
 * *listen are malloc'd (caller frees; *listen NULL for "off"). Returns 0, or -1 (ENOMEM). */
int aor_config_daemon_addrs(const char *path, char **socket_path, char **listen);

#endif
