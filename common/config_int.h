/* Internal helpers of the configuration loader (common/config*.c). Not for other
 * modules: the public contract is config.h. config.c loads and applies the whole-file
 * rules, config_parse.c reads the INI structure, config_util.c holds value syntax,
 * secret detection and error text, config_env.c the environment side.
 * Source: spec §3, §3.1, §3.2, §3.3; docs/config.md. */
#ifndef AOR_CONFIG_INT_H
#define AOR_CONFIG_INT_H

#include "config.h"

#include <stddef.h>

#define AOR_CFG_FILE_MAX (1024 * 1024) /* bytes of a config file or env_file */
#define AOR_CFG_LINE_MAX 4096          /* characters of one line */
#define AOR_CFG_NAME_MAX 64            /* key / provider names */
#define AOR_CFG_MODEL_MAX 200          /* model names */
#define AOR_CFG_SECRET_MAX 4096        /* bytes of one secret */
#define AOR_CFG_STR_(x) #x
#define AOR_CFG_STR(x) AOR_CFG_STR_(x) /* a number macro as a string literal */
#define AOR_CFG_SUN_PATH 108           /* sizeof sun_path: socket path < this */
#define AOR_CFG_ENV_NAME "<environment>"
#define AOR_CFG_SHOWBUF 96 /* buffer for aor_cfg_show / aor_cfg_sec_label */

/* ---- error list (config_util.c) ------------------------------------------------ */

typedef struct {
    const char *file; /* display name; NULL: the list's main file */
    size_t line;      /* 0: no line ("FILE: message") */
    size_t seq;       /* discovery order, for a stable sort */
    char *text;
} aor_cfg_err_line;

typedef struct {
    const char *file; /* main file's display name (borrowed) */
    aor_cfg_err_line *v;
    size_t n, cap;
    int oom; /* an allocation failed while recording an error */
} aor_cfg_errs;

/* Records one error "message" for line `line` (0: none) of the main file. Never pass a
 * secret in the arguments. Can't fail: on ENOMEM sets errs->oom. */
void aor_cfg_err(aor_cfg_errs *errs, size_t line, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* Same for another file (an env_file); `file` must outlive the list. "" as file: the
 * text is shown as it is (it names its own source, e.g. "AOR_SOCKET=..."), after the
 * main file's errors. */
void aor_cfg_err_in(aor_cfg_errs *errs, const char *file, size_t line, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

/* All errors, sorted by file (main file first) then line, one per line:
 * "FILE:LINE: message\n" or "FILE: message\n". Returns a malloc'd string (caller frees),
 * or NULL when there are none or on ENOMEM. */
char *aor_cfg_errs_text(const aor_cfg_errs *errs);

/* Frees the recorded texts (not errs itself). */
void aor_cfg_errs_free(aor_cfg_errs *errs);

/* ---- words and secrets (config_util.c) -------------------------------------------- */

/* 1 when s looks like an API key or other credential (§3.1 rule 6): a known key
 * prefix (sk-, sk-ant-, AIza, gsk_, xai-, ...) followed by a long token, or a token of
 * 32+ characters without spaces, dots, slashes or colons that mixes letters and digits
 * in a long random-looking run. Also checks each item of a comma list. Words end at
 * spaces, commas, '=', ';', quotes and any byte that is not printable ASCII. */
int aor_cfg_looks_secret(const char *s);

/* 1 when the comment text s (n bytes, need not be NUL-terminated) holds a word with a
 * provider key's prefix (sk-, AIza, gsk_, ...) followed by 20 or more key characters
 * with a run of 16+ letters and digits: a key commented out is still a secret in the
 * file (§3.2; QA). Stricter than aor_cfg_looks_secret, so that prose is not one: no
 * long-random-token rule (a commit hash), and placeholders ("sk-ant-api03-...") and
 * names ("pplx-70b-online", "hf_transfer") pass. */
int aor_cfg_comment_looks_secret(const char *s, size_t n);

/* 1 when an option name is one that people use for inline secrets (api_key, key,
 * secret, token, password, ...; case-insensitive). */
int aor_cfg_secret_option_name(const char *name);

/* Writes s into buf (size cap > 0) for an error message: truncated to 48 bytes (never
 * inside a UTF-8 character) with "...", control characters and bytes that are not UTF-8
 * as '?', and "(hidden: looks like a secret)" when
 * aor_cfg_looks_secret(s). Returns buf. */
const char *aor_cfg_show(const char *s, char *buf, size_t cap);

/* The candidate closest to `word` for a "did you mean" hint (case-insensitive):
 * Levenshtein distance <= 2 (1 under 4 letters), else one that is a 3+ letter prefix of
 * the other, else the single candidate whose words (split at '_' / '-') match every word
 * of `word` (the same up to a plural, one typo, or a 3+ letter prefix). Returns a pointer
 * to the candidate, or NULL when none matches or two match equally well. */
const char *aor_cfg_suggest(const char *word, const char *const *cands, size_t n);

/* Case-insensitive ASCII equality. */
int aor_cfg_ieq(const char *a, const char *b);

/* Reads the rest of fd (a regular file of size bytes, size <= AOR_CFG_FILE_MAX) into a
 * malloc'd NUL-terminated buffer: *out (caller frees) and *len (bytes read; less than
 * size when the file shrank meanwhile). Returns 0, or -1 with errno (ENOMEM, or read's);
 * a failed read leaves nothing allocated and the partial bytes wiped (env files hold
 * secrets). Does not close fd. Used for aor.ini and env_file (spec §3, §3.2). */
int aor_cfg_read_fd(int fd, size_t size, char **out, size_t *len);

/* ---- value syntax (config_util.c); all return 0, or -1 when the text is invalid ---- */

/* true/false, yes/no, on/off, 1/0 (case-insensitive). */
int aor_cfg_parse_bool(const char *v, int *out);

/* A decimal integer in [min, max]. */
int aor_cfg_parse_long(const char *v, long min, long max, long *out);

/* "unlimited" -> AOR_RETRIES_UNLIMITED, or an integer 0..1000000. */
int aor_cfg_parse_retries(const char *v, long *out);

/* Seconds: a plain non-negative decimal ("5", "0.25"), at most 1e9. */
int aor_cfg_parse_seconds(const char *v, double *out);

/* Bytes: an integer with an optional binary suffix K, KiB, M, MiB, G, GiB
 * (case-insensitive), in [min, max]. */
int aor_cfg_parse_bytes(const char *v, long min, long max, long *out);

/* Parsed base_url (all malloc'd on success; free with aor_cfg_url_free). */
typedef struct {
    char *base; /* scheme://host[:port][/path], host lower case, no trailing slash */
    char *host; /* lower case; IPv6 without brackets */
    int port;   /* written port, or 443 (https) / 80 (http) */
} aor_cfg_url;

/* Parses an http:// or https:// URL without credentials, query or fragment.
 * On failure *why is a static explanation (never contains the value). */
int aor_cfg_parse_url(const char *v, aor_cfg_url *out, const char **why);
void aor_cfg_url_free(aor_cfg_url *u);

/* `listen`: "off" -> *out = NULL; else a loopback host:port (127.0.0.0/8, [::1],
 * localhost -> 127.0.0.1), port 1..65535; *out is a malloc'd normalised
 * "host:port". On failure *why explains. */
int aor_cfg_parse_listen(const char *v, char **out, const char **why);

/* 1 for a valid environment variable name ([A-Za-z_][A-Za-z0-9_]*, <= 128). */
int aor_cfg_valid_env_name(const char *s);

/* 1 for a valid key/provider name: 1..64 of [A-Za-z0-9._@+-]. */
int aor_cfg_valid_name(const char *s);

/* 1 for a valid model name: 1..200 printable characters, no space, ',', '=' or ';'. */
int aor_cfg_valid_model(const char *s);

/* 1 for a valid host name for `intercept` (letters, digits, '-', '.'; <= 253). */
int aor_cfg_valid_host(const char *s);

/* Splits a comma list into trimmed malloc'd items (empty items are kept as "").
 * Returns the count and sets *items (free with aor_cfg_list_free), or -1 on ENOMEM. */
long aor_cfg_split_list(const char *v, char ***items);
void aor_cfg_list_free(char **items, size_t n);

/* Cleans a secret in place: strips leading/trailing whitespace. Returns 0, or -1 when
 * it is empty, longer than AOR_CFG_SECRET_MAX or holds spaces / control characters; then
 * *why (when why is not NULL) is set to a static phrase naming which, e.g. "contains a
 * space", that never shows the value (§3.2). */
int aor_cfg_clean_secret(char *s, const char **why);

/* 1 when a key variable's value is missing (NULL), empty or only the white space
 * aor_cfg_clean_secret trims (the value then is empty: §3.1 rule 1 "set and non-empty",
 * §3.3). */
int aor_cfg_blank(const char *v);

/* Resolves a path option: "~/" expands to the home directory, a relative path is taken
 * relative to dir (the config file's directory; NULL: the working directory).
 * Returns a malloc'd path, or NULL (errno ENOENT: no home; ENOMEM). */
char *aor_cfg_resolve_path(const char *v, const char *dir);

/* ---- INI structure (config_parse.c) ------------------------------------------------- */

typedef enum {
    SEC_NONE = 0,
    SEC_DAEMON,
    SEC_ROUTING,
    SEC_KEY,
    SEC_PROVIDER,
    SEC_MODEL,
    SEC_BAD /* unknown or malformed: its options are ignored */
} aor_cfg_sec_type;

/* Option ids: indexes into each section type's option-name table. */
enum { D_SOCKET, D_LISTEN, D_STATE, D_ENV_FILE, D_BODY_MAX };
enum {
    R_AUTO_FALLBACK,
    R_MAX_RETRIES,
    R_PROVIDER_PCT,
    R_KEY_PCT,
    R_STRATEGY,
    R_BACKOFF_INITIAL,
    R_BACKOFF_MAX,
    R_QUOTA_COOLDOWN,
    R_AUTH_COOLDOWN,
    R_BREAKER_FAILURES,
    R_BREAKER_WINDOW,
    R_BREAKER_OPEN
};
enum { K_ENV, K_PRIORITY, K_NAME };
enum { P_DIALECT, P_BASE_URL, P_KEYS, P_MODELS, P_PRIORITY, P_RETRY_AFTER, P_INTERCEPT, P_CA_FILE };
enum { M_MAX_RETRIES };

#define AOR_CFG_OPT_MAX 12 /* options of the largest section type */

typedef struct {
    aor_cfg_sec_type type;
    char *name; /* the quoted name, NULL for [daemon] / [routing] */
    size_t line;
    int skip;                     /* options not applied (bad header, duplicate...) */
    int dup;                      /* skipped as a duplicate of an earlier section */
    size_t idx;                   /* index into cfg->keys / providers / models */
    size_t seen[AOR_CFG_OPT_MAX]; /* line where each option was set, 0 = unset */
} aor_cfg_section;

typedef struct {
    size_t sec;
} aor_cfg_key_info;

typedef struct {
    size_t sec;
    char **key_names; /* `keys` as written, resolved after the whole file is read */
    size_t nkey_names;
    int keys_bad; /* `keys` had an error, already reported at its line */
} aor_cfg_prov_info;

/* State of one parse. The caller sets cfg, errs, dir, text and len (the rest zero);
 * after aor_cfg_parse the side tables tell the whole-file checks where things were. */
typedef struct {
    aor_config *cfg;
    aor_cfg_errs *errs;
    aor_cfg_errs *warns; /* valid but suspicious lines (aor_config.warnings); may be NULL */
    const char *dir;     /* directory of the config file, for relative paths (NULL: cwd) */
    /* reader state */
    const char *text;
    size_t len, pos, lineno;
    long cur; /* index into secs of the section being read; -1 before the first */
    aor_cfg_section *secs;
    size_t nsecs;
    aor_cfg_key_info *kinfo;
    aor_cfg_prov_info *pinfo;
    size_t *minfo;       /* section index of each [model] */
    int saw_key_or_prov; /* a [key] or [provider] header, even an invalid one */
} aor_cfg_parse_ctx;

/* Parses c->text (c->len bytes) into c->cfg: sections, options and their values, with
 * errors (syntax, unknown names, bad values, inline secrets) recorded in c->errs at
 * their line. Whole-file rules (§3.1 1-5) are the caller's. Sets libinih's global
 * options (not thread-safe). Returns 0, or -1 when libinih failed (ENOMEM). */
int aor_cfg_parse(aor_cfg_parse_ctx *c);

/* "[type]" or "[type \"name\"]" of a section, into buf (size cap). Returns buf. */
const char *aor_cfg_sec_label(const aor_cfg_section *s, char *buf, size_t cap);

/* Frees what aor_cfg_parse allocated in c (not the config). */
void aor_cfg_parse_free(aor_cfg_parse_ctx *c);

/* ---- environment (config_env.c) ---------------------------------------------------- */

/* A provider aor knows without configuration (§3.3, §2 built-in host list). */
typedef struct {
    const char *name;
    aor_dialect dialect;
    const char *base_url;
    const char *vars[2]; /* secret variables, in order; NULL-terminated */
} aor_cfg_known;

/* The known provider named `name` (exact), or NULL. */
const aor_cfg_known *aor_cfg_known_find(const char *name);

/* Variables read from an env_file. */
typedef struct {
    char **names;
    char **values; /* secrets: wiped on free */
    size_t *lines; /* the 1-based line of each assignment, for error messages */
    size_t n;
} aor_cfg_envfile;

/* Loads an env_file: must be a regular file owned by the user, mode 0600 or stricter,
 * lines `VAR=value` / `export VAR=value` / `# comment`, values optionally quoted.
 * Errors go to errs: permission/open problems at `opt_line` of the main file, syntax
 * errors at their own line of `path` (which must outlive errs). Never echoes a value.
 * Returns 0, or -1 after recording errors. */
int aor_cfg_envfile_load(const char *path, size_t opt_line, aor_cfg_errs *errs,
                         aor_cfg_envfile *out);

/* The value of `name` in the env_file (NULL when absent; the last assignment wins, as in
 * a shell). When line is not NULL it is set to that assignment's 1-based line, 0 when
 * absent. The returned string belongs to ef. */
const char *aor_cfg_envfile_get(const aor_cfg_envfile *ef, const char *name, size_t *line);

/* Wipes and frees the variables (not ef itself). */
void aor_cfg_envfile_free(aor_cfg_envfile *ef);

/* Fills cfg->keys / cfg->providers with the embedded default of §3.3 from the process
 * environment, and for a variable that is unset or blank there from ef (cfg->env_file's
 * variables; NULL: none). Errors ("<environment>: ..." or "ENV_FILE: ...", never a value)
 * go to errs. Returns 0, or -1 on ENOMEM (other problems are recorded in errs and still
 * return 0). */
int aor_cfg_build_embedded(aor_config *cfg, const aor_cfg_envfile *ef, aor_cfg_errs *errs);

/* Appends, after the [provider] sections, a keyless pass-through provider (implicit = 1)
 * for each known provider (§2 built-in host list, §3.3) whose base_url host no provider
 * of cfg owns and whose name none has, so a request to a built-in host that the shim
 * intercepted is forwarded with the client's own credential instead of refused.
 * Call only after every check that indexes the sections' providers. Returns 0, or -1 on
 * ENOMEM (cfg then holds the providers added so far, all complete). */
int aor_cfg_add_implicit(aor_config *cfg);

/* Fills the [daemon] paths left unset, with the rules of paths.h: socket ($AOR_SOCKET
 * wins over everything, then the file, then $XDG_RUNTIME_DIR/aor/aor.sock or
 * /tmp/aor-$UID/aor.sock) and state ($XDG_STATE_HOME/aor/aor.db or
 * ~/.local/state/aor/aor.db). Records errors in errs at line 0. Returns 0, or -1 on
 * ENOMEM. */
int aor_cfg_default_paths(aor_config *cfg, aor_cfg_errs *errs);

#endif
