/* Daemon logging: one line per event to stderr and, when opened, to the log file
 * ($XDG_STATE_HOME/aor/aord.log, spec §9). Never pass a secret. */
#ifndef AOR_LOG_H
#define AOR_LOG_H

#include <stdio.h>

typedef enum { AOR_LOG_DEBUG = 0, AOR_LOG_INFO, AOR_LOG_WARN, AOR_LOG_ERROR } aor_log_level;

/* Opens (appends to) the log file at path, created 0600 whatever the umask; 0 or -1 with
 * errno (stderr logging goes on). */
int aor_log_open(const char *path);

/* Sets the minimum level written (default INFO; AOR_DEBUG=1 -> DEBUG). */
void aor_log_set_level(aor_log_level level);

/* Writes one line "aord: LEVEL: message" with a timestamp to the file. printf format. */
void aor_log(aor_log_level level, const char *fmt, ...) __attribute__((format(printf, 2, 3), cold));

/* As aor_log, but to the log file only (nothing when none is open): for what was already
 * said on stderr in another form (configuration errors at start). */
void aor_log_file_only(aor_log_level level, const char *fmt, ...)
    __attribute__((format(printf, 2, 3), cold));

/* Closes the log file. */
void aor_log_close(void);

#define aor_debug(...) aor_log(AOR_LOG_DEBUG, __VA_ARGS__)
#define aor_info(...) aor_log(AOR_LOG_INFO, __VA_ARGS__)
#define aor_warn(...) aor_log(AOR_LOG_WARN, __VA_ARGS__)
#define aor_error(...) aor_log(AOR_LOG_ERROR, __VA_ARGS__)

#endif
