/* aor, the command line (spec §1, §2 "Trust" and last bullet, §9). Internal to the
 * daemon/cli*.c files; see docs/cli.md for the user's view.
 *
 * Exit codes of every command: AOR_CLI_OK, AOR_CLI_FAIL, AOR_CLI_USAGE (usage or
 * configuration error). `aor run` returns the program's own code once it has exec'd.
 * Nothing here prints a secret: keys appear by name only. */
#ifndef AOR_CLI_H
#define AOR_CLI_H

#include "config.h"

#include <stddef.h>
#include <stdio.h>
#include <sys/types.h>

#define AOR_CLI_OK 0
#define AOR_CLI_FAIL 1
#define AOR_CLI_USAGE 2

#define AOR_CLI_FILE_MAX (16 * 1024 * 1024) /* bytes read from a CA/bundle file at most */
#define AOR_CLI_START_WAIT_S 5              /* seconds `aor run` waits for a new aord */
/* aord's exit status when another aord holds its state file's lock (main.c): `aor run`
 * then waits for that one's socket instead of reporting a failure (two starters at once). */
#define AORD_EXIT_RUNNING 3
/* Seconds a stopping aord (SIGTERM) leaves answers in flight to finish (main.c); `aor
 * run` waits that long at most for a stopping one's state file. */
#define AORD_DRAIN_S 10
#define AOR_CLI_HTTP_TIMEOUT_S 10 /* admin request timeout, seconds */
#define AOR_CLI_HTTP_BODY_MAX                                                                      \
    (64 * 1024 * 1024) /* admin answer cap, bytes (100,000 sticky rows: ~15 MiB) */

/* What every command gets: argv[0] of aor and the --config value given before the
 * command (NULL: $AOR_CONFIG, else the default file). */
typedef struct {
    const char *argv0;
    const char *config_arg;
} aor_cli;

/* ---- commands -----------------------------------------------------------------------
 * Each takes the arguments after the command name, parses its own options (--config
 * included, via aor_cli_take_config), prints its output and returns an exit code
 * (AOR_CLI_*). aor_cli_cmd_run does not return on success: it execs the program.
 * Behaviour of each: docs/cli.md. */

int aor_cli_cmd_run(aor_cli *c, int argc, char **argv);             /* cli_run.c */
int aor_cli_cmd_env(aor_cli *c, int argc, char **argv);             /* cli_run.c */
int aor_cli_cmd_status(aor_cli *c, int argc, char **argv);          /* cli_admin.c */
int aor_cli_cmd_backoff(aor_cli *c, int argc, char **argv);         /* cli_admin.c */
int aor_cli_cmd_doctor(aor_cli *c, int argc, char **argv);          /* cli_doctor.c */
int aor_cli_cmd_install_service(aor_cli *c, int argc, char **argv); /* cli_service.c */

/* ---- helpers (cli_util.c) -------------------------------------------------------- */

/* Takes "--config FILE" / "--config=FILE" at argv[*i] into c->config_arg and advances *i
 * past it. Returns 1 when consumed, 0 when argv[*i] is not --config, -1 (message printed)
 * when the value is missing. */
int aor_cli_take_config(aor_cli *c, int argc, char **argv, int *i);

/* Loads the configuration (c->config_arg, else $AOR_CONFIG, else the default). On
 * errors (a relative socket path included: aor_cli_check_socket with full 0) prints "aor:
 * configuration errors:" and the file:line list on stderr and returns NULL; when a key variable is
 * not set, notes follow: the service's env file (aor_cli_service_env_file) when it exists, and that
 * aord needs the variable in its own environment (a running aord never sees one exported later:
 * restart it with the variable set, or use env_file). Free with aor_config_free. */
aor_config *aor_cli_load_config(const aor_cli *c);

/* aor_cli_load_config with everything aord's start would refuse about the socket
 * (AOR_CONFIG_CHECK_SOCKET), for `aor check-config`: a socket problem is one more error
 * of the list, in line order, whatever the other errors are (spec §3.1: all errors at
 * once). */
aor_config *aor_cli_load_config_full(const aor_cli *c);

/* aor_cli_load_config for commands that need no secret (`aor run`, `aor env`): a key
 * whose variable is not in this process's environment is no error (its secret is NULL;
 * AOR_CONFIG_SECRETS_OPTIONAL), since the daemon may have it from its own. */
aor_config *aor_cli_load_config_no_secrets(const aor_cli *c);

/* A configuration file the user chose (--config, $AOR_CONFIG) must exist: a missing or
 * unreadable one is an error for every command (docs/config.md), never a reason to fall
 * back to the defaults (which may name another aord). Returns 0 when none was chosen or
 * it can be opened as a regular file, else -1 after printing "aor: configuration file
 * FILE (named by --config|AOR_CONFIG): why" on stderr (the caller exits
 * AOR_CLI_USAGE). */
int aor_cli_check_chosen_config(const aor_cli *c);

/* The socket check of aor_path_config_socket_problem (common/paths.h) on a loaded
 * configuration: full 0 refuses a relative socket path only (every load does), full 1
 * also what aord's start would refuse about the socket directory, the path and the hosts
 * file next to it (check-config, install-service). Returns 0, or -1 after printing
 * "aor: configuration errors:" and the problem (naming AOR_SOCKET or FILE:LINE) on
 * stderr. */
int aor_cli_check_socket(const aor_config *cfg, int full);

/* The configuration file the user chose: c->config_arg, else $AOR_CONFIG (non-empty),
 * else NULL (none chosen: the default file or the embedded default, found by aord itself).
 * Returns a pointer into c or the environment; never malloc'd. */
const char *aor_cli_chosen_config(const aor_cli *c);

/* The env file of the user service (install-service's EnvironmentFile, `NAME=value`
 * lines): ~/.config/aor/env (the unit's default), else $XDG_CONFIG_HOME/aor/env (the
 * one install-service names when XDG_CONFIG_HOME is elsewhere), the first that exists
 * as a regular file. malloc'd path, or
 * NULL when neither exists (or ENOMEM). The file is not read: aor never loads its
 * secrets. */
char *aor_cli_service_env_file(void);

/* Absolute directory of the running aor binary (/proc/self/exe, else argv0 resolved
 * through PATH). malloc'd, or NULL when it cannot be found. */
char *aor_cli_self_dir(const char *argv0);

/* libaor.so to preload: $AOR_LIB when set (must exist), else <self_dir>/libaor.so (build
 * layout), else <self_dir>/../lib/libaor.so (installed layout). Returns a malloc'd
 * absolute path (symbolic links resolved, except when the resolved path has a space or
 * colon, which LD_PRELOAD cannot carry, and the name it was found by has neither: then
 * that name, e.g. the link AOR_LIB names), or NULL after printing on stderr where it
 * looked. quiet: do not print. */
char *aor_cli_find_lib(const char *self_dir, int quiet);

/* aord to start: <self_dir>/aord when executable, else the first `aord` on PATH.
 * malloc'd absolute path, or NULL when there is none. */
char *aor_cli_find_aord(const char *self_dir);

/* First executable regular file named `cmd` on $PATH (cmd itself when it contains a
 * '/'), like execvp looks it up. malloc'd, or NULL when there is none. */
char *aor_cli_which(const char *cmd);

/* cmd as aor_cli_which looks it up ('/' in it: cmd itself; else each $PATH directory,
 * an empty entry meaning "."), taking the first candidate accept() says 1 for.
 * malloc'd path, or NULL (none, "" or out of memory). */
char *aor_cli_path_find(const char *cmd, int (*accept)(const char *path));

/* 1 when cmd names something aor_cli_which did not take but a shell would report as
 * "not executable" (126): cmd itself when it has a '/' (a file without execute
 * permission, a directory), else a regular file of that name on $PATH. "" names
 * nothing. */
int aor_cli_exists_not_runnable(const char *cmd);

/* 1 when some process holds the single-instance lock on the state file at path (aord's
 * flock, daemon/main.c): an aord runs on that state, whatever socket it serves. 0 when
 * none does, or path is NULL, not a regular file or cannot be opened. The lock is taken
 * for a moment only when free, and given back at once. Source: spec §4.5, §9. */
int aor_cli_state_locked(const char *path);

/* 1 when something accepts a connection on the Unix socket `path` (aord is up), else 0.
 * pid: when not NULL, receives the peer's pid (SO_PEERCRED) or 0 when unknown. */
int aor_cli_socket_answers(const char *path, pid_t *pid);

/* Reads a whole regular file of at most max bytes into a malloc'd NUL-terminated buffer.
 * Opens without blocking (a FIFO never hangs the caller). Returns 0, or -1 with errno
 * (EFBIG when larger than max, EISDIR for a directory, EINVAL for another file that is not
 * regular, or open's). */
int aor_cli_read_file(const char *path, size_t max, char **out, size_t *len);

/* Writes data to path atomically ("<path>.tmp.<pid>" + rename) with `mode`; skipped when
 * the file already holds exactly these bytes. Returns 0, or -1 with errno. */
int aor_cli_write_file(const char *path, const void *data, size_t len, mode_t mode);

/* mkdir -p with `mode` for the directories created. 0, or -1 with errno. */
int aor_cli_mkdirs(const char *dir, mode_t mode);

/* Writes s to f as one POSIX shell word in single quotes (' becomes '\''). */
void aor_cli_shell_quote(FILE *f, const char *s);

/* Text for a duration in seconds, e.g. "45 s", "3 min 05 s", "2 h 10 min" into buf. */
const char *aor_cli_duration(double s, char *buf, size_t cap);

/* ---- environment plans (cli_trust.c) -------------------------------------------- */

/* Variables `aor run` sets before exec and `aor env` prints, in order. */
typedef struct {
    char *name;
    char *value;
} aor_cli_var;

typedef struct {
    aor_cli_var *v;
    size_t n;
} aor_cli_plan;

/* Appends NAME=value (copied). 0, or -1 on ENOMEM. */
int aor_cli_plan_add(aor_cli_plan *p, const char *name, const char *value);

/* Frees the entries (not p itself). */
void aor_cli_plan_free(aor_cli_plan *p);

/* LD_PRELOAD = lib, prepended to the current $LD_PRELOAD (kept once: a value that
 * already lists lib is left as it is). 0, or -1 on ENOMEM. */
int aor_cli_plan_preload(aor_cli_plan *p, const char *lib);

/* The trust variables of spec §2 "Trust", for the CA in data_dir:
 * SSL_CERT_FILE, REQUESTS_CA_BUNDLE, CURL_CA_BUNDLE -> bundle.pem, unless already set
 * (non-empty) or bundle.pem does not exist; NODE_EXTRA_CA_CERTS -> ca.pem, unless set
 * to a file that already contains the CA; set to another file, the merged file
 * <data_dir>/node-extra-ca.pem (that file + ca.pem, rewritten when different) is used.
 * Nothing when $AOR_NO_TRUST is on. Notes (missing CA, unreadable user file) go to
 * stderr as "aor: ..." lines. Returns 0, or -1 on ENOMEM. */
int aor_cli_plan_trust(aor_cli_plan *p, const char *data_dir);

/* The trap of spec §2 "Trust": SSL_CERT_FILE, REQUESTS_CA_BUNDLE or CURL_CA_BUNDLE set
 * (non-empty) by the user to a file other than data_dir/bundle.pem that does not
 * contain the aor CA (or cannot be read) — aor_cli_plan_trust leaves them alone, so the
 * TLS clients that read them will not trust aor. Writes one line to f: `prefix` (e.g.
 * "aor: ", or "# aor: " for `aor env`), the variables as NAME=value (file paths, never
 * secrets), why, and the fix (unset them, or add data_dir/ca.pem to that bundle; `aor
 * doctor`). Nothing when $AOR_NO_TRUST is on, when ca.pem or bundle.pem does not exist
 * yet, or when no variable is such. Returns the number of variables named. */
int aor_cli_trust_warn(FILE *f, const char *prefix, const char *data_dir);

/* The sidecar base-URL variables for a listen address ("127.0.0.1:8787"), each only
 * when not already set: OPENAI_BASE_URL=http://L/v1, ANTHROPIC_BASE_URL=http://L,
 * GEMINI_BASE_URL and GOOGLE_GEMINI_BASE_URL=http://L (not OPENROUTER_BASE_URL: the
 * sidecar cannot tell OpenRouter's requests from OpenAI's, docs/cli.md). Source: spec §2
 * (static programs fall back to the sidecar). kept (kept_cap bytes, or NULL) receives the
 * names of those already set and left as they are, ", "-separated ("" when none; names
 * that do not fit are left out). Returns 0, or -1 on ENOMEM. */
int aor_cli_plan_sidecar(aor_cli_plan *p, const char *listen, char *kept, size_t kept_cap);

/* Applies the plan with setenv. 0, or -1 with errno. */
int aor_cli_plan_apply(const aor_cli_plan *p);

/* 1 when the PEM file `path` contains the certificate of the PEM file `ca_path`,
 * 0 when it does not, -1 with errno when either cannot be read (EINVAL: ca_path holds
 * no certificate). Reads at most AOR_CLI_FILE_MAX bytes of each. */
int aor_cli_file_has_ca(const char *path, const char *ca_path);

#endif
