/* aord: the per-user routing daemon (spec §1, §9). */
#include "admin.h"
#include "cli.h"
#include "clock.h"
#include "conn.h"
#include "daemon.h"
#include "listen.h"
#include "log.h"
#include "passthru.h"
#include "paths.h"
#include "proxy.h"
#include "publish.h"
#include "version.h"

#include <errno.h>
#include <event2/event.h>
#include <fcntl.h>
#ifdef __GLIBC__
#include <malloc.h>
#endif
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

static void usage(FILE *f) {
    fprintf(f, "usage: aord [--config FILE] [--check-config] [--version]\n"
               "  Runs the aor routing daemon in the foreground (see docs/config.md).\n");
}

static int mkdirs(const char *path, mode_t mode) {
    char *copy = strdup(path);
    if (!copy)
        return -1;
    for (char *s = copy + 1; *s; s++) {
        if (*s == '/') {
            *s = '\0';
            if (mkdir(copy, 0755) < 0 && errno != EEXIST) {
                free(copy);
                return -1;
            }
            *s = '/';
        }
    }
    int r = mkdir(copy, mode);
    int e = errno;
    free(copy);
    if (r < 0 && e != EEXIST) {
        errno = e;
        return -1;
    }
    return 0;
}

static char *dir_of(const char *path) {
    const char *slash = strrchr(path, '/');
    if (!slash)
        return strdup(".");
    if (slash == path)
        return strdup("/");
    return strndup(path, (size_t)(slash - path));
}

static double mono_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void on_drain_tick(evutil_socket_t fd, short what, void *arg) {
    aor_daemon *d = arg;
    size_t n = aor_conn_busy(d);
    if (n == 0) {
        aor_info("stopping: every answer in flight finished");
        event_base_loopexit(d->base, NULL);
    } else if (mono_now() >= d->drain_until) {
        aor_info("stopping: %zu answer%s still open after %d s, cut", n, n == 1 ? "" : "s",
                 AORD_DRAIN_S);
        event_base_loopexit(d->base, NULL);
    }
}

/* Found by a preloaded libaor.so (dlsym, shim/env.c), which then stays out of the way:
 * the daemon never routes its own upstream connections through itself (spec §2), also
 * when its file has another name (QA: a copy named my-router, started with LD_PRELOAD
 * set, sent its upstream connections to itself, 10,000 times a few seconds). In aord's
 * dynamic symbol table by the Makefile (--export-dynamic-symbol). */
__attribute__((used, visibility("default"))) const int aor_daemon_marker = 1;
/* SIGTERM/SIGINT (spec §9 "stops cleanly"): no new connections (the socket and the
 * published address set are removed at once, so shims connect directly meanwhile),
 * idle connections closed, and answers in flight get up to AORD_DRAIN_S seconds to
 * finish (a `systemctl --user restart` mid-answer); a second signal stops at once. */
static void on_stop(evutil_socket_t sig, short what, void *arg) {
    aor_daemon *d = arg;
    if (d->stopping) {
        aor_info("signal %d again: stopping now", (int)sig);
        event_base_loopexit(d->base, NULL);
        return;
    }
    d->stopping = 1;
    aor_listen_close(d);
    if (d->runtime_dir)
        aor_publish_stop(d->runtime_dir);
    size_t n = aor_conn_drain(d);
    struct timeval tick = {0, 100000};
    if (n == 0 || !(d->drain_ev = event_new(d->base, -1, EV_PERSIST, on_drain_tick, d)) ||
        event_add(d->drain_ev, &tick) != 0) {
        aor_info("signal %d: stopping", (int)sig);
        event_base_loopexit(d->base, NULL);
        return;
    }
    d->drain_until = mono_now() + AORD_DRAIN_S;
    aor_info("signal %d: stopping; no new connections, %zu answer%s in flight may finish "
             "(up to %d s; another signal stops at once)",
             (int)sig, n, n == 1 ? "" : "s", AORD_DRAIN_S);
}

/* Opens (again) $XDG_STATE_HOME/aor/aord.log; at start, and on SIGHUP so a rotated log
 * (logrotate's rename, then `kill -HUP`) is followed by a new file. */
/* libevent's own messages (evdns: "Nameserver 127.0.0.1:53 has failed", ...) go to aord's
 * log like every other line, marked as libevent's, instead of bare "[msg] ..." lines on
 * stderr only (QA). */
static void libevent_log(int severity, const char *msg) {
    aor_log_level lv = severity == EVENT_LOG_DEBUG  ? AOR_LOG_DEBUG
                       : severity == EVENT_LOG_MSG  ? AOR_LOG_INFO
                       : severity == EVENT_LOG_WARN ? AOR_LOG_WARN
                                                    : AOR_LOG_ERROR;
    aor_log(lv, "libevent: %s", msg ? msg : "");
}

static void open_log(const char *state_dir) {
    char *path = NULL;
    if (asprintf(&path, "%s/aord.log", state_dir) < 0) {
        aor_warn("cannot open the log file: out of memory");
        return;
    }
    if (aor_log_open(path) < 0)
        aor_warn("cannot open log file %s: %s", path, strerror(errno));
    free(path);
}

/* A start refused for configuration errors: the errors go to aord.log too (QA: under a
 * launcher that drops stderr, the reason was lost), when the state directory exists and
 * is safe (it is neither created nor fixed here). They name file:line, never a secret. */
static void log_start_errors(const char *errors) {
    char *dir = aor_path_state_dir(), *why = NULL;
    if (dir && aor_path_dir_problem(dir, "state directory", NULL, NULL, &why) == 0) {
        open_log(dir);
        aor_log_file_only(AOR_LOG_ERROR, "not started: configuration errors:");
        for (const char *l = errors ? errors : ""; *l;) {
            size_t n = strcspn(l, "\n");
            if (n)
                aor_log_file_only(AOR_LOG_ERROR, "  %.*s", (int)n, l);
            l += n + (l[n] == '\n');
        }
        aor_log_close();
    }
    free(why);
    free(dir);
}

/* Logs the config's warnings (config.h: valid lines that are almost surely a mistake),
 * one log line each; they name file:line and hold no secret. */
static void log_config_warnings(const aor_config *cfg) {
    for (size_t i = 0; i < cfg->nwarnings; i++)
        aor_warn("config: %s", cfg->warnings[i]);
}

/* SIGHUP reads admin.token again (spec §8): a file removed (or replaced by one that is not
 * a token, or made readable by others) gets a new token, written as at start, so a
 * deleted file is not a lockout until the next start and deleting it rotates the token.
 * When no new file can be written the running token stays. */
static void reload_admin_token(aor_daemon *d) {
    char old[sizeof d->admin_token], err[512];
    memcpy(old, d->admin_token, sizeof old);
    if (aor_admin_token_init(d, err, sizeof err) < 0) {
        memcpy(d->admin_token, old, sizeof old);
        aor_warn("SIGHUP: admin token: %s; the running token stays in use", err);
    } else if (strcmp(old, d->admin_token) != 0) {
        aor_info("SIGHUP: a new admin token is in %s/admin.token (the old one no longer "
                 "opens the admin routes)",
                 d->state_dir);
    }
}

static void on_reload(evutil_socket_t sig, short what, void *arg) {
    aor_daemon *d = arg;
    open_log(d->state_dir);
    reload_admin_token(d);
    char *errors = NULL;
    aor_config *cfg = aor_config_load(d->config_arg, &errors);
    if (!cfg) {
        size_t n = errors ? strlen(errors) : 0;
        while (n > 0 && errors[n - 1] == '\n')
            errors[--n] = '\0'; /* aor_error ends the line itself */
        aor_error("SIGHUP: config has errors, keeping the running one:\n%s",
                  n ? errors : "(unknown error)");
        free(errors);
        return;
    }
    /* Compared with what is in use (the places aord started with), not with the last
     * reload: a change that is reverted is no change. */
    if ((cfg->listen == NULL) != (d->boot_listen == NULL) ||
        (cfg->listen && strcmp(cfg->listen, d->boot_listen) != 0) ||
        strcmp(cfg->socket_path, d->socket_path) != 0 ||
        strcmp(cfg->state_path, d->boot_state) != 0)
        aor_warn("SIGHUP: [daemon] listen/socket/state changes take effect at the next start; "
                 "still on %s and %s",
                 d->boot_listen ? d->boot_listen : "listen off", d->socket_path);
    if (!cfg->source && d->cfg->source)
        aor_warn("SIGHUP: the config file %s is gone; the embedded default now applies "
                 "(providers and keys from the environment)",
                 d->cfg->source);
    else if (cfg->embedded && !d->cfg->embedded)
        aor_warn("SIGHUP: the config file has no providers now; using the embedded default "
                 "(keys from the environment)");
    /* The routing state compares the old keys with the new ones (rotated secrets): the
     * old config is held until then, and freed after unless a request still holds it. */
    const aor_config *old = aor_cfgref_hold(d->cfgs);
    if (aor_cfgref_replace(d->cfgs, cfg) < 0) {
        aor_cfgref_release(d->cfgs, old);
        aor_error("SIGHUP: out of memory, keeping the running config");
        aor_config_free(cfg);
        return;
    }
    d->cfg = cfg;
    aor_rstate_set_config(d->rs, cfg, aor_clock_now()); /* logs what it could not apply */
    aor_cfgref_release(d->cfgs, old);
    aor_publish_update(cfg);
    aor_upstream_reload_trust(d->up);
    char err[512];
    if (aor_tls_reload_config(d->tls, cfg, err, sizeof err) < 0)
        aor_warn("TLS: %s (the running CA stays in use)", err);
    else if (aor_tls_warning(d->tls))
        aor_warn("TLS: %s", aor_tls_warning(d->tls));
    log_config_warnings(cfg);
    size_t nk = cfg->nkeys; /* distinct keys, as in the start-up line */
    aor_info("SIGHUP: config reloaded from %s: %zu provider%s, %zu key%s",
             cfg->source ? cfg->source : "the environment", aor_config_count_providers(cfg),
             aor_config_count_providers(cfg) == 1 ? "" : "s", nk, nk == 1 ? "" : "s");
}

/* glibc returns free memory at the top of the heap to the kernel once more than 128 KiB
 * are free, and serves blocks from 128 KiB up with mmap. Request bodies of tens of KiB at
 * a few dozen concurrent requests then made the heap shrink and grow all the time: every
 * request paid page faults and page zeroing (a third of aord's CPU with 64 KiB bodies at
 * 64 connections; docs/performance.md). Keep up to 8 MiB and heap-allocate below 4 MiB. */
/* Each stream holds two descriptors (client and upstream); a systemd user service, and
 * many shells, start with a soft limit of 1,024, below the 1,000 concurrent streams of
 * spec §10. The soft limit goes up to the hard one (an unprivileged process may). */
static void raise_fd_limit(void) {
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) != 0 || rl.rlim_cur >= rl.rlim_max)
        return;
    rlim_t want = rl.rlim_max == RLIM_INFINITY ? 1048576 : rl.rlim_max;
    if (want <= rl.rlim_cur)
        return;
    rl.rlim_cur = want;
    if (setrlimit(RLIMIT_NOFILE, &rl) != 0)
        aor_debug("cannot raise the file descriptor limit: %s", strerror(errno));
}

static void tune_malloc(void) {
#ifdef __GLIBC__
    mallopt(M_TRIM_THRESHOLD, 8 * 1024 * 1024);
    mallopt(M_MMAP_THRESHOLD, 4 * 1024 * 1024);
#endif
}

/* tune_malloc keeps up to 8 MiB of freed heap for the next burst; once aord has no client
 * connection left (looked at every 30 s), that memory goes back to the system, so an
 * aord idle after a busy hour is as small as at start (§10 "RSS ≤ 10 MiB idle"). Also
 * with connections open when more than TRIM_FREE_MAX of the heap is free: a burst of
 * large uploads left 68 MiB resident for as long as one keep-alive client stayed (QA;
 * 0.7 MB of it in use). Only after activity since the last trim: an idle aord does
 * nothing. */
#define TRIM_EVERY_S 30
#define TRIM_FREE_MAX (8u * 1024 * 1024) /* what tune_malloc keeps */
static unsigned long trimmed_at = 0;     /* d->m.proxied + connections at the last trim */

static void on_trim_tick(evutil_socket_t fd, short what, void *arg) {
    aor_daemon *d = arg;
    unsigned long seen = d->m.requests + d->m.connections;
    if (seen == trimmed_at)
        return;
#ifdef __GLIBC__
    if (d->conns) { /* looked at again at every tick until a trim with none open */
        if (mallinfo2().fordblks > TRIM_FREE_MAX)
            malloc_trim(0);
        return;
    }
    trimmed_at = seen;
    malloc_trim(0);
#else
    if (!d->conns)
        trimmed_at = seen;
#endif
}

/* Takes the single-instance lock: flock(2) on the state file itself, kept open for the
 * process's life (created 0600 when missing: SQLite takes an empty file as a new
 * database). The database's own inode, so a symbolic or hard link to it is the same
 * lock; SQLite's locks are fcntl(2) ones, which flock does not touch. Returns the fd; -2
 * with err set ("another aord is running with the state file ...") when another process
 * holds it; -1 with err set when the file could not be opened or locked. */
static int instance_lock(const char *state_path, char *err, size_t errlen) {
    int fd = open(state_path, O_RDWR | O_CREAT | O_CLOEXEC | O_NOCTTY, 0600);
    if (fd < 0) {
        snprintf(err, errlen, "cannot open the state file %s: %s", state_path, strerror(errno));
        return -1;
    }
    /* What SQLite would only call "disk I/O error" or "readonly database" (QA): a path
     * that is not a regular file (a FIFO, /dev/null), a directory it cannot add its -wal
     * and -shm files to. */
    struct stat st;
    if (fstat(fd, &st) == 0 && !S_ISREG(st.st_mode)) {
        snprintf(err, errlen,
                 "the state file %s is not a regular file (%s); give aord a file path "
                 "([daemon] state, or XDG_STATE_HOME)",
                 state_path,
                 S_ISFIFO(st.st_mode)   ? "a FIFO"
                 : S_ISCHR(st.st_mode)  ? "a character device"
                 : S_ISBLK(st.st_mode)  ? "a block device"
                 : S_ISSOCK(st.st_mode) ? "a socket"
                                        : "not a file");
        close(fd);
        return -1;
    }
    char *sdir = dir_of(state_path);
    if (sdir && access(sdir, W_OK) != 0) {
        snprintf(err, errlen,
                 "cannot write in %s, the directory of the state file (%s): SQLite makes "
                 "its -wal and -shm files beside it",
                 sdir, strerror(errno));
        free(sdir);
        close(fd);
        return -1;
    }
    free(sdir);
    /* A file that group or others can read or write (one made by hand, a copy) is made
     * 0600 as aord makes its own: its -wal and -shm copy its mode (QA). */
    if (fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && st.st_uid == geteuid() &&
        (st.st_mode & 077) && fchmod(fd, st.st_mode & 0700) == 0)
        aor_info("state file %s was mode %04o: made 0%o", state_path,
                 (unsigned)(st.st_mode & 07777), (unsigned)(st.st_mode & 0700));
    /* and SQLite's files beside it, left from such a file (QA) */
    static const char *const side[] = {"-wal", "-shm"};
    for (size_t i = 0; i < 2; i++) {
        char *f = NULL;
        struct stat sst;
        if (asprintf(&f, "%s%s", state_path, side[i]) >= 0 && lstat(f, &sst) == 0 &&
            S_ISREG(sst.st_mode) && sst.st_uid == geteuid() && (sst.st_mode & 077))
            (void)chmod(f, sst.st_mode & 0700);
        free(f);
    }
    if (flock(fd, LOCK_EX | LOCK_NB) != 0) {
        int e = errno;
        if (e == EWOULDBLOCK)
            snprintf(err, errlen,
                     "another aord is running with the state file %s (it holds its lock); "
                     "stop it first, or give this one its own state (XDG_STATE_HOME or "
                     "[daemon] state)",
                     state_path);
        else
            snprintf(err, errlen, "cannot lock the state file %s: %s", state_path, strerror(e));
        close(fd);
        return e == EWOULDBLOCK ? -2 : -1;
    }
    return fd;
}

/* aor_rstate_set_relock's function: takes the lock on the state file at path (its
 * directory made again when it was removed, as at start), then lets go of the old one
 * (arg: the int holding the lock fd). A lock already held on that very file (an earlier
 * attempt that took it, then failed to open the store) is kept: flock on a second fd of
 * the same file would refuse aord its own lock (review). Errors go to err, not the log:
 * rstate logs them, one line a minute. */
static int relock_state(const char *path, char *err, size_t errlen, void *arg) {
    int *lock_fd = arg;
    struct stat held, at;
    if (*lock_fd >= 0 && fstat(*lock_fd, &held) == 0 && stat(path, &at) == 0 &&
        held.st_dev == at.st_dev && held.st_ino == at.st_ino)
        return 0;
    char *dir = dir_of(path);
    if (dir) {
        mkdirs(dir, 0700);
        free(dir);
    }
    int fd = instance_lock(path, err, errlen);
    if (fd < 0)
        return -1;
    if (*lock_fd >= 0)
        close(*lock_fd);
    *lock_fd = fd;
    return 0;
}

/* Opens /dev/null on whichever of fds 0, 1 and 2 is closed: a file aord opens later
 * (the state file's lock) would otherwise get that number, and every log line written to
 * "stderr" would land in it (QA: `aord >&- 2>&-` wrote its log over aor.db's header, and
 * the state was lost at the next start). */
static void standard_fds_open(void) {
    /* In ascending order, so each open takes the lowest free number: fd itself. */
    for (int fd = 0; fd <= 2; fd++)
        if (fcntl(fd, F_GETFD) == -1 && errno == EBADF)
            (void)open("/dev/null", fd == 0 ? O_RDONLY : O_WRONLY);
}

/* Tells a supervisor that aord serves: the sd_notify(3) protocol, one "READY=1" datagram
 * to the AF_UNIX socket $NOTIFY_SOCKET names ('@': an abstract one), as systemd sets it for
 * a Type=notify unit (the one `aor install-service` writes). `systemctl start` then
 * returns once aord answers, and systemd sends no reload (SIGHUP) before that (QA: a
 * SIGHUP in the first milliseconds, before the program could hold it, killed aord).
 * Nothing without the variable; a failure is only logged. */
static void notify_ready(void) {
    const char *path = getenv("NOTIFY_SOCKET");
    if (!path || (path[0] != '/' && path[0] != '@'))
        return;
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    size_t n = strlen(path);
    if (n >= sizeof sa.sun_path) {
        aor_warn("NOTIFY_SOCKET is too long for a socket address; not notifying");
        return;
    }
    memcpy(sa.sun_path, path, n);
    if (path[0] == '@')
        sa.sun_path[0] = '\0';
    int fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    if (fd < 0 || sendto(fd, "READY=1", 7, MSG_NOSIGNAL, (struct sockaddr *)&sa,
                         (socklen_t)(offsetof(struct sockaddr_un, sun_path) + n)) < 0)
        aor_warn("cannot notify the supervisor at %s: %s", path, strerror(errno));
    if (fd >= 0)
        close(fd);
}

int main(int argc, char **argv) {
    standard_fds_open();
    const char *config_arg = NULL;
    struct event *ev_term = NULL, *ev_int = NULL, *ev_hup = NULL, *ev_trim = NULL;
    /* SIGHUP held until its handler is there: a reload asked for while aord starts (the CA,
     * the state replay take a while) would otherwise kill it, silently, and a supervisor
     * takes death by SIGHUP for a clean exit and leaves it down (QA; spec §9). It is
     * delivered, as a reload, once the handler exists. */
    sigset_t hup;
    sigemptyset(&hup);
    sigaddset(&hup, SIGHUP);
    sigprocmask(SIG_BLOCK, &hup, NULL);
    tune_malloc();
    raise_fd_limit();
    int check_only = 0;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--config") == 0 || strncmp(argv[i], "--config=", 9) == 0) {
            /* An empty name ("$UNSET") is refused, as by aor: not the default file. */
            config_arg = argv[i][8] == '=' ? argv[i] + 9 : i + 1 < argc ? argv[++i] : NULL;
            if (!config_arg || !*config_arg) {
                fprintf(stderr, "aord: --config needs a FILE\n");
                usage(stderr);
                return 2;
            }
        } else if (strcmp(argv[i], "--check-config") == 0) {
            check_only = 1;
        } else if (strcmp(argv[i], "--version") == 0) {
            printf("aord %s\n", AOR_VERSION);
            return 0;
        } else if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
            usage(stdout);
            return 0;
        } else {
            fprintf(stderr, "aord: unknown argument '%s'\n", argv[i]);
            usage(stderr);
            return 2;
        }
    }
    /* The daemon never routes its own upstream traffic through the shim (§2): a shim
     * preloaded into aord is off (aor_daemon_marker), and the programs aord starts
     * (none today) would not load it. */
    setenv("AOR_DAEMON", "1", 1);
    unsetenv("LD_PRELOAD");
    if (getenv("AOR_DEBUG") && strcmp(getenv("AOR_DEBUG"), "1") == 0)
        aor_log_set_level(AOR_LOG_DEBUG);

    event_set_log_callback(libevent_log);
    const char *cerr = NULL;
    if (aor_clock_init(&cerr) < 0) {
        fprintf(stderr, "aord: %s\n", cerr);
        return 2;
    }
    /* Spec §3.1, all errors at once: what the start would refuse about the socket path
     * (relative, its directory, something else at the path) is listed with the others,
     * at its line, and is a configuration error (exit 2) at start too (QA: the start
     * said it without file:line and exited 1, which a service manager restarts). */
    char *errors = NULL;
    aor_config *cfg = aor_config_load_flags(config_arg, AOR_CONFIG_CHECK_SOCKET, &errors);
    if (!cfg) {
        fprintf(stderr, "aord: configuration errors:\n%s", errors ? errors : "(unknown)\n");
        if (errors && errors[0] && errors[strlen(errors) - 1] != '\n')
            fputc('\n', stderr);
        if (!check_only)
            log_start_errors(errors);
        free(errors);
        return 2;
    }
    if (check_only) {
        size_t nk = cfg->nkeys; /* distinct keys (one may serve several providers) */
        printf("aord: configuration OK (%s): %zu provider%s, %zu key%s\n",
               cfg->source ? cfg->source : "embedded default from the environment",
               aor_config_count_providers(cfg), aor_config_count_providers(cfg) == 1 ? "" : "s", nk,
               nk == 1 ? "" : "s");
        log_config_warnings(cfg);
        aor_config_free(cfg);
        return 0;
    }

    aor_daemon d;
    memset(&d, 0, sizeof d);
    int lock_fd = -1;
    int cfg_owned = 0; /* cfg is not in d.cfgs yet */
    d.cfg = cfg;
    d.config_arg = config_arg;
    int rc = 1;
    char err[1024] = "";
    signal(SIGPIPE, SIG_IGN);
    d.socket_path = strdup(cfg->socket_path);
    d.runtime_dir = d.socket_path ? dir_of(d.socket_path) : NULL;
    d.state_dir = aor_path_state_dir();
    d.data_dir = aor_path_data_dir();
    d.boot_state = strdup(cfg->state_path);
    d.boot_listen = cfg->listen ? strdup(cfg->listen) : NULL;
    d.cfgs = aor_cfgref_new(cfg);
    if (!d.cfgs)
        cfg_owned = 1; /* freed at out */
    if (!d.socket_path || !d.runtime_dir || !d.state_dir || !d.data_dir || !d.boot_state ||
        (cfg->listen && !d.boot_listen) || !d.cfgs) {
        fprintf(stderr, "aord: out of memory\n");
        goto out;
    }
    if (mkdirs(d.state_dir, 0700) < 0) {
        fprintf(stderr, "aord: cannot create %s: %s\n", d.state_dir, strerror(errno));
        goto out;
    }
    /* The state directory holds admin.token, aord.log and (by default) aor.db: refused,
     * like the socket and data directories, when another user owns it or group or others
     * can write to it (they could replace the token or the log with a link). Said on
     * stderr only: the log is not opened in such a directory. */
    char *why = NULL;
    if (aor_path_dir_problem(d.state_dir, "state directory", NULL, "chmod 700 it", &why) < 0) {
        aor_error("%s", why ? why : "out of memory while checking the state directory");
        free(why);
        goto out;
    }
    char *state_parent = dir_of(cfg->state_path);
    if (state_parent)
        mkdirs(state_parent, 0700);
    open_log(d.state_dir);
    /* A `state =` elsewhere: its directory is not the state directory checked above. Not
     * refused (the file holds no secret), but said: whoever can write there can replace
     * the routing state (QA: a 0777 directory of another user went unmentioned). */
    char *swhy = NULL;
    if (state_parent && d.state_dir && strcmp(state_parent, d.state_dir) != 0 &&
        aor_path_dir_problem(state_parent, "directory of the state file", NULL, NULL, &swhy) < 0)
        aor_warn("%s: another user could replace or read the routing state there; give the "
                 "state file a directory of its own (0700)",
                 swhy ? swhy : "directory of the state file: cannot check it");
    free(swhy);
    free(state_parent);
    /* One aord per state file, before anything touches it: a second one (started twice,
     * a service and a hand start, two `aor run` at once) would replay and compact the
     * log under the running one and drop what it appends meanwhile (§4.5). */
    lock_fd = instance_lock(cfg->state_path, err, sizeof err);
    if (lock_fd < 0) {
        aor_error("%s", err);
        if (lock_fd == -2)
            rc = AORD_EXIT_RUNNING;
        lock_fd = -1;
        goto out;
    }
    d.base = event_base_new();
    if (!d.base) {
        aor_error("cannot create the event loop");
        goto out;
    }
    d.started = aor_clock_now();
    d.tls = aor_tls_new_for_config(d.data_dir, cfg, err, sizeof err);
    if (!d.tls) {
        aor_error("TLS: %s", err);
        goto out_base;
    }
    if (aor_tls_warning(d.tls))
        aor_warn("TLS: %s", aor_tls_warning(d.tls));
    d.rs = aor_rstate_open(cfg, cfg->state_path, aor_clock_now(), err, sizeof err);
    if (!d.rs) {
        aor_error("state: %s", err);
        goto out_tls;
    }
    aor_rstate_set_relock(d.rs, relock_state, &lock_fd);
    d.sse_ends = aor_sse_ends_new();
    if (!d.sse_ends) {
        aor_error("out of memory");
        goto out_rs;
    }
    d.up = aor_upstream_new(d.base);
    if (!d.up) {
        aor_error("cannot create the upstream multi handle");
        goto out_rs;
    }
    if (aor_admin_token_init(&d, err, sizeof err) < 0) {
        aor_error("admin token: %s", err);
        goto out_up;
    }
    /* The handlers before the sockets: a SIGTERM sent as soon as the socket exists (a
     * supervisor, a test) stops aord cleanly instead of killing it. */
    /* A signal mask inherited blocked (a parent that blocked them, then exec'd aord)
     * would make aord deaf to "stop" and "reload" (spec §9; QA: aor run under such a
     * parent started an aord only SIGKILL stopped). */
    sigset_t ours;
    sigemptyset(&ours);
    sigaddset(&ours, SIGTERM);
    sigaddset(&ours, SIGINT);
    sigaddset(&ours, SIGHUP);
    ev_term = evsignal_new(d.base, SIGTERM, on_stop, &d);
    ev_int = evsignal_new(d.base, SIGINT, on_stop, &d);
    ev_hup = evsignal_new(d.base, SIGHUP, on_reload, &d);
    if (!ev_term || !ev_int || !ev_hup) {
        aor_error("cannot install signal handlers");
        goto out_up;
    }
    evsignal_add(ev_term, NULL);
    evsignal_add(ev_int, NULL);
    evsignal_add(ev_hup, NULL);
    sigprocmask(SIG_UNBLOCK, &ours, NULL); /* a SIGHUP held since the start: a reload now */
    /* A shorter AOR_TRIM_EVERY_S is a test hook (tests/e2e/test_conn_io.py). */
    const char *te = getenv("AOR_TRIM_EVERY_S");
    long tv_s = te ? strtol(te, NULL, 10) : 0;
    struct timeval trim_every = {tv_s >= 1 && tv_s <= TRIM_EVERY_S ? tv_s : TRIM_EVERY_S, 0};
    ev_trim = event_new(d.base, -1, EV_PERSIST, on_trim_tick, &d);
    if (ev_trim)
        event_add(ev_trim, &trim_every); /* without it aord only keeps more memory */
    if (aor_listen_unix(&d, err, sizeof err) < 0) {
        aor_error("%s", err);
        goto out_up;
    }
    if (aor_listen_tcp(&d, err, sizeof err) < 0) {
        aor_error("%s", err);
        goto out_listen;
    }
    /* The publisher's resolver thread takes the mask it is created with: every signal
     * blocked, so SIGTERM/SIGHUP always reach the event loop's thread (while that thread
     * blocked SIGTERM during the teardown, one went to the resolver thread and killed
     * aord with the default action). */
    sigset_t all_sigs, main_mask;
    sigfillset(&all_sigs);
    pthread_sigmask(SIG_BLOCK, &all_sigs, &main_mask);
    int published = aor_publish_start(d.runtime_dir, cfg);
    pthread_sigmask(SIG_SETMASK, &main_mask, NULL);
    if (published < 0)
        aor_warn("cannot publish the address set in %s: %s", d.runtime_dir, strerror(errno));
    size_t nk = cfg->nkeys; /* distinct keys (one may serve several providers) */
    aor_info("aord %s ready: socket %s, sidecar %s%s, %zu provider%s, %zu key%s, config %s%s",
             AOR_VERSION, d.socket_path, cfg->listen ? cfg->listen : "off", "",
             aor_config_count_providers(cfg), aor_config_count_providers(cfg) == 1 ? "" : "s", nk,
             nk == 1 ? "" : "s", cfg->source ? cfg->source : "<embedded default>",
             aor_clock_is_fake() ? ", TEST CLOCK" : "");
    log_config_warnings(cfg);
    notify_ready();
    event_base_dispatch(d.base);
    rc = 0;
    aor_info("stopped");
out_listen:
    aor_listen_close(&d);
    if (d.runtime_dir)
        aor_publish_stop(d.runtime_dir); /* the address set, if still aord's own */
out_up:
    /* Freeing the signal events puts the default actions back: a second SIGTERM during
     * the teardown (a supervisor that repeats it, the e2e harness's stop) killed aord
     * with status 143 instead of the clean exit the first one asked for. Blocked while
     * the events go, then ignored. */
    sigset_t stop_sigs, old_mask;
    sigemptyset(&stop_sigs);
    sigaddset(&stop_sigs, SIGTERM);
    sigaddset(&stop_sigs, SIGINT);
    sigaddset(&stop_sigs, SIGHUP);
    pthread_sigmask(SIG_BLOCK, &stop_sigs, &old_mask);
    if (ev_term)
        event_free(ev_term);
    if (ev_int)
        event_free(ev_int);
    if (ev_hup)
        event_free(ev_hup);
    if (d.drain_ev)
        event_free(d.drain_ev);
    if (ev_trim)
        event_free(ev_trim);
    signal(SIGTERM, SIG_IGN);
    signal(SIGINT, SIG_IGN);
    signal(SIGHUP, SIG_IGN);
    pthread_sigmask(SIG_SETMASK, &old_mask, NULL);
    aor_conn_close_all(&d);
    aor_passthru_close_all();
    aor_proxy_spares_free();
    aor_http_spares_free();
    aor_upstream_free(d.up);
    aor_rstate_sync(d.rs, aor_clock_now());
out_rs:
    aor_sse_ends_free(d.sse_ends);
    aor_rstate_close(d.rs);
out_tls:
    aor_tls_free(d.tls);
out_base:
    event_base_free(d.base);
out:
    if (cfg_owned)
        aor_config_free(d.cfg);
    aor_cfgref_free(d.cfgs); /* the current config and any a request held (none now) */
    free(d.boot_state);
    free(d.boot_listen);
    free(d.socket_path);
    free(d.runtime_dir);
    free(d.state_dir);
    free(d.data_dir);
    if (lock_fd >= 0)
        close(lock_fd); /* the lock goes with it, after the store was closed */
    aor_log_close();
    return rc;
}
