/* Per-user file places of spec §7 and §9, resolved from the environment: the daemon
 * socket, and the aor directories under the XDG base directories. Shared by aord and
 * aor so both agree on where things are. No I/O beyond getenv/getpwuid_r.
 *
 * XDG rule (XDG Base Directory Specification): a variable that is unset, empty or not
 * an absolute path is ignored, and the home-relative default applies.
 *
 * Every function returns a malloc'd string the caller frees, or NULL with errno set
 * (ENOMEM; ENOENT when no home directory is known and the XDG variable is not set). */
#ifndef AOR_PATHS_H
#define AOR_PATHS_H

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

#endif
