/* Per-user file places of spec §7 and §9, resolved from the environment: the daemon
 * socket, and the aor directories under the XDG base directories. Shared by aord and
 * aor so both agree on where things are. No I/O beyond getenv/getpwuid_r, except the
 * read-only checks at the end (stat, and reading a file's first bytes).
 *
 * XDG rule (XDG Base Directory Specification): a variable that is unset, empty or not
 * an absolute path is ignored, and the home-relative default applies.
 *
 * Every function returns a malloc'd string the caller frees, or NULL with errno set
 * (ENOMEM; ENOENT when no home directory is known and the XDG variable is not set). */
#ifndef AOR_PATHS_H
#define AOR_PATHS_H

#include <stddef.h>

/* Pure rule for one aor directory: "<xdg>/aor" when xdg is an absolute path, else
 * "<home>/<home_rel>/aor" when home is an absolute path, else NULL with errno ENOENT.
 * home_rel: e.g. ".local/state" (no leading or trailing slash). */
char *aor_path_xdg_dir(const char *xdg, const char *home, const char *home_rel);

/* Pure socket rule of spec §7: aor_socket when non-empty (AOR_SOCKET, taken as is),
 * else "<runtime_dir>/aor/aor.sock" when runtime_dir is absolute, else
 * "/tmp/aor-<uid>/aor.sock". Only fails with ENOMEM. */
char *aor_path_socket_for(const char *aor_socket, const char *runtime_dir, unsigned long uid);

/* The home directory: $HOME when absolute, else the passwd entry of getuid().
 * NULL with errno ENOENT when neither is known. */
char *aor_path_home(void);

/* $XDG_STATE_HOME/aor (default ~/.local/state/aor): aor.db, admin.token, aord.log. */
char *aor_path_state_dir(void);

/* $XDG_DATA_HOME/aor (default ~/.local/share/aor): ca.pem, ca.key, bundle.pem. */
char *aor_path_data_dir(void);

/* $XDG_CONFIG_HOME/aor (default ~/.config/aor): aor.ini. */
char *aor_path_config_dir(void);

/* $XDG_CONFIG_HOME (default ~/.config) itself, without "/aor" (for systemd/user). */
char *aor_path_config_home(void);

/* The daemon socket when no config file sets `socket`: aor_path_socket_for($AOR_SOCKET,
 * $XDG_RUNTIME_DIR, getuid()). A loaded config's socket_path is authoritative. */
char *aor_path_socket(void);

/* "<dir>/<name>" (one slash between them even when dir ends with '/'). ENOMEM only. */
char *aor_path_join(const char *dir, const char *name);

/* ---- read-only checks of the places aord refuses at start (spec §7) ------------------
 * aord refuses to start on a socket directory, state directory or data directory that
 * another user owns or that group or others can write to (whoever can write there can
 * replace the socket, the published hosts file, the admin token or the CA). These
 * functions find the same problems without creating or changing anything, for
 * `aor check-config`, `aord --check-config`, `aor doctor` and aord's own state-directory
 * check, with aord's wording. */

/* Checks that dir is fit to hold aor's private files: a directory (followed through a
 * symbolic link, as aord opens it), owned by the effective uid, not writable by group or
 * others. label: how the message names the directory ("state directory"), or NULL for
 * the path alone. owner_fix, mode_fix: appended after "; " to an owner or a mode
 * problem (NULL: nothing). Returns 0 when fit, 1 when dir does not exist (aord creates
 * it 0700), or -1 with *why a malloc'd message naming dir, e.g. "state directory /s/aor:
 * writable by group or others (mode 0777); chmod 700 it", "... owned by uid 1001, not by
 * you (uid 1000)", "... not a directory", "... cannot stat it: <strerror>"; *why is NULL
 * (errno ENOMEM) when the message could not be made. *why is NULL unless -1. */
int aor_path_dir_problem(const char *dir, const char *label, const char *owner_fix,
                         const char *mode_fix, char **why);

/* 1 when dir is one of aord's default socket directories, the only existing ones it
 * tightens to 0700 instead of refusing: "$XDG_RUNTIME_DIR/aor" (when XDG_RUNTIME_DIR is
 * absolute) or "/tmp/aor-<uid>" (compared as text, as daemon/listen.c does). Else 0. */
int aor_path_is_default_socket_dir(const char *dir);

/* Why aord would refuse the daemon socket path sock at start (daemon/listen.c,
 * daemon/publish.c), found without changing anything:
 *   - sock is not an absolute path (aord would make it, and the published hosts file,
 *     in its own working directory, where programs started elsewhere do not look);
 *   - its directory is owned by another user, or (unless it is a default socket
 *     directory, which aord tightens) writable by group or others: aord's "socket
 *     directory D: ..." messages; a default directory that is a symbolic link;
 *   - something other than a socket is at sock;
 *   - a `hosts` file in the directory that is not aord's published address set (a
 *     regular file starting "aor-hosts ").
 * A directory that does not exist is fine (aord creates it 0700). Returns 0 when there
 * is no problem, or -1 with *why a malloc'd message (the first problem found; NULL with
 * errno ENOMEM when it could not be made). *why is NULL unless -1. */
int aor_path_socket_problem(const char *sock, char **why);

/* The socket check for a loaded configuration, whose socket_path came from $AOR_SOCKET,
 * a `socket =` line of [daemon] in config_file (NULL: no file), or the default. full: 1
 * for every check of aor_path_socket_problem (check-config, doctor), 0 for the absolute
 * path alone (every load: aord and aor refuse a relative one outright). The message
 * says where the path was set: "AOR_SOCKET=<value>: " when that variable is set (it wins
 * over the file), else "<config_file>:<line>: socket = <value>: " when the file sets it,
 * else nothing (the default). Returns 0, or -1 with *why malloc'd (NULL: ENOMEM). */
int aor_path_config_socket_problem(const char *socket_path, const char *config_file, int full,
                                   char **why);

/* Line number (from 1) of the first `key = value` (or `key: value`) line inside a
 * [section] of the INI file at path (names compared without case, as the loader does;
 * a UTF-8 BOM, white space around them, and `;`/`#` comment lines skipped as the
 * configuration loader reads them), for error messages
 * that name the line of a valid configuration (where an option appears once). 0 when
 * there is none, or the file cannot be read (only its first 1 MiB is read). */
size_t aor_path_ini_line(const char *path, const char *section, const char *key);

/* Whether the file at path is a published address set that aord wrote (spec §2, §9: the
 * "hosts" file next to the socket): 1 when it is a regular file, not a symbolic link,
 * whose first bytes are "aor-hosts "; 0 when it is something else (another file, a
 * link, a directory, unreadable); -1 with errno from lstat when nothing can be looked at
 * there (ENOENT: no file). Reads at most 10 bytes; opens without blocking (a FIFO never
 * hangs). Shared by daemon/publish.c (before replacing the file) and the socket checks
 * of aor_path_socket_problem. */
int aor_path_hosts_is_ours(const char *path);

#endif
