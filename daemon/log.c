#include "log.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdarg.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static FILE *log_file;
static aor_log_level min_level = AOR_LOG_INFO;

int aor_log_open(const char *path) {
    /* 0600 whatever the umask: the log names keys, providers and clients' hosts. */
    int fd = open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0600);
    if (fd < 0)
        return -1;
    FILE *f = fdopen(fd, "a");
    if (!f) {
        int e = errno;
        close(fd);
        errno = e;
        return -1;
    }
    setvbuf(f, NULL, _IOLBF, 0);
    if (log_file)
        fclose(log_file);
    log_file = f;
    return 0;
}

void aor_log_set_level(aor_log_level level) {
    min_level = level;
}

static const char *const names[] = {"debug", "info", "warn", "error"};

static unsigned long stderr_lost; /* lines not written to stderr since the last one */

/* 1 when a log line can go to stderr without waiting: a pipe or socket whose reader
 * stopped reading would otherwise stop aord's one event loop at the next line, SIGTERM
 * included (QA: `aord 2>&1 | cmd` with cmd stuck). A line is at most ~1 KiB, under
 * PIPE_BUF: room for it is what POLLOUT says. Files and terminals are always ready; a
 * reader that is gone (POLLERR) gets the write, whose EPIPE is ignored. */
static int stderr_ready(void) {
    struct pollfd p = {.fd = STDERR_FILENO, .events = POLLOUT};
    return poll(&p, 1, 0) == 1 && (p.revents & (POLLOUT | POLLERR | POLLHUP)) &&
           !(p.revents & POLLNVAL);
}

static void to_file(aor_log_level level, const char *msg) {
    if (log_file) {
        char ts[32];
        time_t t = time(NULL);
        struct tm tm;
        gmtime_r(&t, &tm);
        strftime(ts, sizeof ts, "%Y-%m-%dT%H:%M:%SZ", &tm);
        fprintf(log_file, "%s %s: %s\n", ts, names[level], msg);
    }
}

void aor_log(aor_log_level level, const char *fmt, ...) {
    if (level < min_level)
        return;
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap); /* truncation is fine for a log line */
    va_end(ap);
    if (stderr_ready()) {
        if (stderr_lost) {
            fprintf(stderr,
                    "aord: warn: %lu log line%s not written here: this stderr was not being "
                    "read (aord.log has them)\n",
                    stderr_lost, stderr_lost == 1 ? " was" : "s were");
            stderr_lost = 0;
        }
        fprintf(stderr, "aord: %s: %s\n", names[level], msg);
    } else {
        stderr_lost++;
    }
    to_file(level, msg);
}

void aor_log_file_only(aor_log_level level, const char *fmt, ...) {
    if (level < min_level || !log_file)
        return;
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    to_file(level, msg);
}

void aor_log_close(void) {
    if (log_file)
        fclose(log_file);
    log_file = NULL;
}
