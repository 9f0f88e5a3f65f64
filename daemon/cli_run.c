/* aor run / aor env (spec §1, §2 "Trust" and last bullet): start aord when it is not
 * running, set LD_PRELOAD and the CA variables (or the sidecar base-URL variables for a
 * statically linked program) and exec the program; or print those variables. */
#include "binkind.h"
#include "cli.h"
#include "envflag.h"
#include "paths.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <netdb.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define POLL_NS (20 * 1000 * 1000) /* socket poll interval while aord starts */

/* Exit codes of the start helper process. */
enum { START_UP = 0, START_EXEC_FAILED = 3, START_EXITED = 4, START_TIMEOUT = 5 };

static int on(const char *name) {
    return aor_envflag_on(getenv(name));
}

static void sleep_poll(void) {
    struct timespec ts = {0, POLL_NS};
    nanosleep(&ts, NULL);
}

static double mono_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* close_range(2) of [lo, hi]: 0, or -1 (ENOSYS before Linux 5.9 or without the number). */
static int close_fd_range(unsigned lo, unsigned hi) {
#ifdef SYS_close_range
    return lo > hi ? 0 : (int)syscall(SYS_close_range, lo, hi, 0);
#else
    (void)lo;
    (void)hi;
    errno = ENOSYS;
    return -1;
#endif
}

/* Closes every fd from 3 up but keep: aord must not hold what the caller of `aor run`
 * left open (the write end of `aor run ... | cat` would keep the reader waiting until
 * aord exits). keep is the exec-error pipe, close-on-exec: nothing is handed to aord. */
static void close_inherited_fds(int keep) {
    if (keep < 3 ? close_fd_range(3, ~0U) == 0
                 : close_fd_range(3, (unsigned)keep - 1) == 0 &&
                       close_fd_range((unsigned)keep + 1, ~0U) == 0)
        return;
    long max = sysconf(_SC_OPEN_MAX);
    if (max < 0 || max > INT_MAX)
        max = max < 0 ? 1024 : INT_MAX;
    for (int fd = 3; fd < (int)max; fd++)
        if (fd != keep)
            close(fd);
}

/* Grandchild: the daemon itself, in its own session, stdio on /dev/null, no other fd of
 * the caller. */
static void exec_aord(const char *aord, const char *config_abs, int errfd) {
    setsid();
    if (chdir("/") < 0) {
        /* keep the current directory; aord uses absolute paths */
    }
    if (errfd < 3) /* the caller had closed stdin/stdout/stderr: keep it out of their way */
        errfd = fcntl(errfd, F_DUPFD_CLOEXEC, 3);
    /* Not close-on-exec: when it is 0, 1 or 2 itself (closed in the caller) it stays. */
    int nul = open("/dev/null", O_RDWR);
    if (nul >= 0) {
        dup2(nul, 0);
        dup2(nul, 1);
        dup2(nul, 2);
    }
    close_inherited_fds(errfd); /* and nul, when it is above 2 */

    unsetenv("LD_PRELOAD"); /* the daemon never routes itself (spec §2) */
    /* The caller's service manager is not aord's: a Type=notify unit running `aor run`
     * would get aord's READY=1 as its own (QA). */
    unsetenv("NOTIFY_SOCKET");
    /* A daemon starts with no signal blocked or ignored (daemon(7)): the caller's mask
     * and ignored signals would carry over exec (QA: SIGTERM and SIGHUP blocked). */
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, NULL);
    for (int s = 1; s < NSIG; s++)
        if (s != SIGKILL && s != SIGSTOP)
            signal(s, SIG_DFL);
    char *args[4] = {(char *)aord, NULL, NULL, NULL};
    if (config_abs) {
        args[1] = "--config";
        args[2] = (char *)config_abs;
    }
    execv(aord, args);
    int e = errno;
    if (write(errfd, &e, sizeof e) < 0) {
        /* nothing left to tell */
    }
    _exit(127);
}

/* Forks the daemon (exec_aord) and waits until its exec is known to have worked. Returns
 * its pid; exits the helper with START_EXEC_FAILED (said on stderr) when it could not. */
static pid_t spawn_aord(const char *aord, const char *config_abs) {
    int pfd[2];
    if (pipe2(pfd, O_CLOEXEC) < 0) {
        fprintf(stderr, "aor: cannot start aord: pipe: %s\n", strerror(errno));
        _exit(START_EXEC_FAILED);
    }
    pid_t gc = fork();
    if (gc < 0) {
        fprintf(stderr, "aor: cannot start aord: fork: %s\n", strerror(errno));
        _exit(START_EXEC_FAILED);
    }
    if (gc == 0) {
        close(pfd[0]);
        exec_aord(aord, config_abs, pfd[1]);
    }
    close(pfd[1]);
    int e = 0;
    ssize_t n;
    do
        n = read(pfd[0], &e, sizeof e);
    while (n < 0 && errno == EINTR);
    close(pfd[0]);
    if (n == (ssize_t)sizeof e) {
        waitpid(gc, NULL, 0);
        fprintf(stderr, "aor: cannot start %s: %s\n", aord, strerror(e));
        _exit(START_EXEC_FAILED);
    }
    return gc;
}

/* Middle process: starts aord detached and waits until its socket answers, so aord is
 * never a child of the program we exec (which would not reap it, and a shell's `wait`
 * would wait for it). Its exit code is one of START_*. An aord that exits with
 * AORD_EXIT_RUNNING lost to another one on the state file: that one is starting (its
 * socket answers soon) or stopping (a SIGTERM drain, up to AORD_DRAIN_S; its socket is
 * gone already), so ours is started again until one answers, within the drain's time. */
/* The message of the last "error:" line that aord's log got after byte since (its size
 * before this start), within its last 16 KiB (lines are "TIME LEVEL: message"), into out
 * (outlen bytes, cut to fit). 0, or -1 when there is none or the log cannot be read. The
 * log holds no secret (daemon/log.h). */
static int log_last_error(const char *path, off_t since, char *out, size_t outlen) {
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    if (fd < 0)
        return -1;
    char buf[16384 + 1];
    off_t size = lseek(fd, 0, SEEK_END);
    off_t from = size > 16384 ? size - 16384 : 0;
    if (from < since)
        from = since;
    ssize_t n = size >= 0 ? pread(fd, buf, sizeof buf - 1, from) : -1;
    close(fd);
    if (n <= 0)
        return -1;
    buf[n] = '\0';
    const char *best = NULL;
    for (char *l = buf; l && *l;) {
        char *nl = strchr(l, '\n');
        if (nl)
            *nl = '\0';
        char *m = strstr(l, " error: ");
        if (m)
            best = m + 8;
        l = nl ? nl + 1 : NULL;
    }
    if (!best || !*best)
        return -1;
    snprintf(out, outlen, "%s", best);
    return 0;
}

/* Where to look when the aord started here stopped or did not answer: its log, or, when
 * it stopped before opening one (a refused directory, a bad socket place), the commands
 * that say why (QA: the hint named a log that did not exist). */
static void say_where(const char *log_hint, off_t log_was) {
    char last[1024];
    if (log_last_error(log_hint, log_was, last, sizeof last) == 0)
        fprintf(stderr, ": %s; see %s\n", last, log_hint); /* fresh-user pass */
    else if (access(log_hint, F_OK) == 0)
        fprintf(stderr, "; see %s\n", log_hint);
    else
        fprintf(stderr,
                "; it wrote no log (it stopped before opening %s): `aor doctor`, or "
                "aord run in a terminal, says why\n",
                log_hint);
}

static void start_helper(const char *aord, const char *config_abs, const char *sock,
                         const char *state, const char *log_hint) {
    struct stat lst;
    off_t log_was = stat(log_hint, &lst) == 0 ? lst.st_size : 0; /* older lines: not ours */
    pid_t gc = spawn_aord(aord, config_abs);
    double end = mono_s() + AOR_CLI_START_WAIT_S;
    double held_end = end + AORD_DRAIN_S; /* the other aord's drain, at the most */
    for (;;) {
        if (aor_cli_socket_answers(sock, NULL))
            _exit(START_UP);
        int status;
        if (waitpid(gc, &status, WNOHANG) == gc) {
            if (aor_cli_socket_answers(sock, NULL))
                _exit(START_UP);
            if (WIFEXITED(status) && WEXITSTATUS(status) == AORD_EXIT_RUNNING) {
                /* Started again only once the other one has let go of the state file:
                 * not every 0.5 s, each start a line in aord.log (QA: 65 of them). */
                while (mono_s() <= held_end && aor_cli_state_locked(state)) {
                    sleep_poll();
                    if (aor_cli_socket_answers(sock, NULL))
                        _exit(START_UP);
                }
                if (mono_s() <= held_end) {
                    gc = spawn_aord(aord, config_abs);
                    end = mono_s() + AOR_CLI_START_WAIT_S;
                    continue;
                }
                fprintf(stderr,
                        "aor: another aord holds the state file %s but does not answer on %s: "
                        "it serves another socket (AOR_SOCKET, or [daemon] socket, differs "
                        "from where it was started with); stop it, or point AOR_SOCKET at its "
                        "socket\n",
                        state ? state : "(unknown)", sock);
                _exit(START_EXITED);
            }
            if (WIFEXITED(status))
                fprintf(stderr, "aor: aord exited with status %d while starting",
                        WEXITSTATUS(status));
            else
                fprintf(stderr, "aor: aord was killed by signal %d while starting",
                        WIFSIGNALED(status) ? WTERMSIG(status) : 0);
            say_where(log_hint, log_was);
            _exit(START_EXITED);
        }
        if (mono_s() > end) {
            fprintf(stderr, "aor: aord did not answer on %s within %d s", sock,
                    AOR_CLI_START_WAIT_S);
            say_where(log_hint, log_was);
            _exit(START_TIMEOUT);
        }
        sleep_poll();
    }
}

/* Makes sure aord answers on cfg->socket_path, starting it when not. 0 when up. */
static int ensure_daemon(const aor_config *cfg, const char *self_dir) {
    if (aor_cli_socket_answers(cfg->socket_path, NULL))
        return 0;
    char *aord = aor_cli_find_aord(self_dir);
    if (!aord) {
        fprintf(stderr,
                "aor: aord is not running and cannot be found (not in %s, not on "
                "PATH)\n",
                self_dir ? self_dir : "the directory of aor");
        return -1;
    }
    char *config_abs = cfg->source ? realpath(cfg->source, NULL) : NULL;
    char *state = aor_path_state_dir();
    char *log_hint = state ? aor_path_join(state, "aord.log") : NULL;
    fflush(NULL);
    int rc = -1;
    /* SIGCHLD at its default while the helpers wait for their children: a caller that
     * ignores it (inherited over exec) would have them reaped unseen, and waitpid's
     * ECHILD read as a good start (QA: 5 s lost, a failed start taken as one, AOR_STRICT
     * ignored). The program run afterwards gets the caller's setting back. */
    struct sigaction dfl, old_chld;
    memset(&dfl, 0, sizeof dfl);
    dfl.sa_handler = SIG_DFL;
    sigemptyset(&dfl.sa_mask);
    int chld_saved = sigaction(SIGCHLD, &dfl, &old_chld) == 0;
    pid_t pid = fork();
    if (pid < 0) {
        fprintf(stderr, "aor: cannot start aord: fork: %s\n", strerror(errno));
        goto out;
    }
    if (pid == 0)
        start_helper(aord, config_abs, cfg->socket_path, cfg->state_path,
                     log_hint ? log_hint : "aord's log");
    int status = 0;
    pid_t w;
    do
        w = waitpid(pid, &status, 0);
    while (w < 0 && errno == EINTR);
    rc = w == pid && WIFEXITED(status) && WEXITSTATUS(status) == START_UP ? 0 : -1;
out:
    if (chld_saved)
        sigaction(SIGCHLD, &old_chld, NULL);
    free(aord);
    free(config_abs);
    free(state);
    free(log_hint);
    return rc;
}

/* Comma list of the plan's names into buf. */
static const char *names_of(const aor_cli_plan *p, size_t from, char *buf, size_t cap) {
    size_t o = 0;
    buf[0] = '\0';
    for (size_t i = from; i < p->n; i++) {
        int n = snprintf(buf + o, cap - o, "%s%s", o ? ", " : "", p->v[i].name);
        if (n < 0 || (size_t)n >= cap - o)
            break;
        o += (size_t)n;
    }
    return buf;
}

/* 1 when LD_PRELOAD can name lib: ld.so splits the variable at spaces and colons and has
 * no escape for them (ld.so(8)). */
static int preloadable(const char *lib) {
    return strpbrk(lib, " :") == NULL;
}

/* libaor.so to preload into *lib (malloc'd), or NULL with *lib NULL after writing to
 * stderr, with no newline, "aor: " and why not: not found (where aor looked, AOR_LIB), or
 * found at a path LD_PRELOAD cannot carry (and the workaround). ENOMEM counts as not
 * found. The caller ends the line. */
static void find_preload_lib(const char *self_dir, char **lib) {
    *lib = aor_cli_find_lib(self_dir, 1);
    if (*lib && preloadable(*lib))
        return;
    if (*lib) {
        fprintf(stderr,
                "aor: libaor.so is at %s, whose path has a %s, and LD_PRELOAD splits its "
                "value at spaces and colons with no way to escape them (ld.so(8)), so it "
                "cannot be preloaded from there; make a symbolic link to it at a path without "
                "either (ln -s ",
                *lib, strchr(*lib, ' ') ? "space" : "colon");
        aor_cli_shell_quote(stderr, *lib);
        fputs(" DIR/libaor.so) and set AOR_LIB=DIR/libaor.so", stderr);
        free(*lib);
        *lib = NULL;
        return;
    }
    const char *env = getenv("AOR_LIB");
    struct stat st;
    if (env && *env)
        fprintf(stderr, "aor: cannot find libaor.so: AOR_LIB=%s: %s", env,
                stat(env, &st) < 0 ? strerror(errno) : "not a regular file");
    else
        fprintf(stderr,
                "aor: cannot find libaor.so (looked for %s/libaor.so and %s/../lib/libaor.so; "
                "set AOR_LIB=/path/to/libaor.so)",
                self_dir ? self_dir : "<dir of aor>", self_dir ? self_dir : "<dir of aor>");
}

/* Builds the plan for one program kind. static_cmd: display name of a program the shim
 * cannot serve (sidecar mode; why: what it is, "is statically linked") or NULL (preload
 * mode, with lib: libaor.so, from find_preload_lib).
 * Returns 0, or -1 on ENOMEM. */
static int build_plan(aor_cli_plan *p, const aor_config *cfg, const char *lib,
                      const char *static_cmd, const char *why, int sidecar_only) {
    if (static_cmd || sidecar_only) {
        if (!cfg->listen)
            return 0; /* no sidecar: the caller said so and runs the program unrouted */
        char kept[256];
        if (aor_cli_plan_sidecar(p, cfg->listen, kept, sizeof kept) < 0)
            return -1;
        if (static_cmd) {
            char names[256];
            if (p->n)
                fprintf(stderr,
                        "aor: %s %s; LD_PRELOAD cannot work, using the sidecar at http://%s "
                        "(%s set)",
                        static_cmd, why, cfg->listen, names_of(p, 0, names, sizeof names));
            else
                fprintf(stderr,
                        "aor: %s %s; LD_PRELOAD cannot work, using the sidecar at http://%s "
                        "only where a base-URL variable points at it",
                        static_cmd, why, cfg->listen);
            if (*kept)
                fprintf(stderr,
                        "%s%s already set here and left as %s: what goes there is not routed "
                        "by aor",
                        p->n ? "; " : ": ", kept, strchr(kept, ',') ? "they are" : "it is");
            fputc('\n', stderr);
        }
        return 0;
    }
    if (aor_cli_plan_preload(p, lib) < 0)
        return -1;
    /* A config's `socket` the shim would not find by itself (it knows AOR_SOCKET and
     * XDG_RUNTIME_DIR, not the config): the program would miss the aord started for it
     * and go direct, silently (QA). */
    char *shim_sock = aor_path_socket();
    if (!shim_sock)
        return -1;
    int same = strcmp(shim_sock, cfg->socket_path) == 0;
    free(shim_sock);
    return same ? 0 : aor_cli_plan_add(p, "AOR_SOCKET", cfg->socket_path);
}

/* The trust variables into p; warn_prefix: when not NULL, also the warning line about
 * bundle variables the user set to files without the aor CA (aor_cli_trust_warn). */
static int plan_trust(aor_cli_plan *p, const char *warn_prefix) {
    char *data = aor_path_data_dir();
    if (!data) {
        fprintf(stderr, "aor: cannot find the data directory (set HOME or XDG_DATA_HOME): %s\n",
                strerror(errno));
        return 0;
    }
    int r = aor_cli_plan_trust(p, data);
    if (r == 0 && warn_prefix)
        aor_cli_trust_warn(stderr, warn_prefix, data);
    free(data);
    return r;
}

/* aord started from here gets this environment: a key whose variable is neither here
 * nor in env_file (cfg loaded with AOR_CONFIG_SECRETS_OPTIONAL: its secret is NULL)
 * would make it exit with a configuration error. Says so on stderr, naming the
 * variables and where aord can get them, and returns 1; 0 when every key has one. */
static int keys_missing_for_aord(const aor_config *cfg) {
    size_t n = 0;
    for (size_t i = 0; i < cfg->nkeys; i++)
        n += !cfg->keys[i].secret && cfg->keys[i].env;
    if (!n)
        return 0;
    const char *it = n == 1 ? "it" : "them";
    fputs("aor: aord is not running and cannot be started from here: ", stderr);
    for (size_t i = 0, k = 0; i < cfg->nkeys; i++)
        if (!cfg->keys[i].secret && cfg->keys[i].env)
            fprintf(stderr, "%s%s (key \"%s\")", k++ ? ", " : "", cfg->keys[i].env,
                    cfg->keys[i].name);
    fprintf(stderr,
            " %s not set in this environment%s, and aord needs %s in its own environment "
            "(it would exit with a configuration error)\n",
            n == 1 ? "is" : "are", cfg->env_file ? " nor in env_file" : "", it);
    char *envf = aor_cli_service_env_file();
    if (envf) {
        fprintf(stderr,
                "aor: %s exists (the service's EnvironmentFile): start aord as the service "
                "(`aor install-service`, `systemctl --user start aord`) so that aord reads %s "
                "from there, or export %s before `aor run`, or put %s in env_file in [daemon]\n",
                envf, it, it, it);
    } else {
        char *dir = aor_path_config_dir();
        fprintf(stderr,
                "aor: to give %s to aord: export %s before `aor run`, put %s in env_file in "
                "[daemon] of the configuration, or run aord as a service (`aor "
                "install-service`) with %s in %s/env\n",
                it, it, it, it, dir ? dir : "$XDG_CONFIG_HOME/aor");
        free(dir);
    }
    free(envf);
    return 1;
}

/* 1 when something accepts a TCP connection at listen ("host:port", "[v6]:port"; the
 * config's loopback listen address), 0 when not. A loopback connect is answered at
 * once (accepted or refused), so this does not wait. */
static int sidecar_answers(const char *listen) {
    char host[256];
    const char *colon = strrchr(listen, ':');
    if (!colon || (size_t)(colon - listen) >= sizeof host)
        return 0;
    size_t hl = (size_t)(colon - listen);
    memcpy(host, listen, hl);
    host[hl] = '\0';
    const char *h = host;
    if (hl >= 2 && host[0] == '[' && host[hl - 1] == ']') {
        host[hl - 1] = '\0';
        h = host + 1;
    }
    struct addrinfo hints = {.ai_socktype = SOCK_STREAM,
                             .ai_flags = AI_NUMERICHOST | AI_NUMERICSERV};
    struct addrinfo *ai = NULL;
    if (getaddrinfo(h, colon + 1, &hints, &ai) != 0 || !ai)
        return 0;
    int ok = 0;
    int fd = socket(ai->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd >= 0) {
        ok = connect(fd, ai->ai_addr, ai->ai_addrlen) == 0;
        close(fd);
    }
    freeaddrinfo(ai);
    return ok;
}

int aor_cli_cmd_run(aor_cli *c, int argc, char **argv) {
    int i = 0, sidecar = 0;
    for (; i < argc; i++) {
        int t = aor_cli_take_config(c, argc, argv, &i);
        if (t < 0)
            return AOR_CLI_USAGE;
        if (t > 0)
            continue;
        if (strcmp(argv[i], "--sidecar") == 0) {
            sidecar = 1; /* as for a static program: base-URL variables, no LD_PRELOAD */
            continue;
        }
        if (strcmp(argv[i], "--") == 0) {
            i++;
            break;
        }
        if (argv[i][0] == '-') {
            fprintf(stderr,
                    "aor run: unknown option '%s' (use `aor run -- %s ...` to run a "
                    "program whose name starts with '-')\n",
                    argv[i], argv[i]);
            return AOR_CLI_USAGE;
        }
        break;
    }
    if (i >= argc) {
        fprintf(stderr, "usage: aor run [--config FILE] [--sidecar] [--] CMD [ARGS...]\n");
        return AOR_CLI_USAGE;
    }
    char **cmd = argv + i;
    int rc = AOR_CLI_FAIL;
    aor_cli_plan plan = {0};
    aor_config *cfg = NULL;
    char *self_dir = NULL, *lib = NULL;
    /* The program first: not found is 127 before anything else (docs/cli.md). */
    char *path = aor_cli_which(cmd[0]);
    if (!path) {
        /* As a shell says it: 126 for a file that is there but cannot be run. */
        struct stat cst;
        int serr = strchr(cmd[0], '/') && stat(cmd[0], &cst) != 0 ? errno : 0;
        if (aor_cli_exists_not_runnable(cmd[0])) {
            fprintf(stderr, "aor: %s: not executable (a directory, or no execute permission)\n",
                    cmd[0]);
            rc = 126;
        } else if (serr != 0 && serr != ENOENT) {
            /* A symbolic link loop, a file used as a directory: a shell says 126 (QA) */
            fprintf(stderr, "aor: %s: %s\n", cmd[0], strerror(serr));
            rc = 126;
        } else {
            /* A path is not looked up on $PATH: not "command not found" (fresh-user pass). */
            fprintf(stderr, "aor: %s: %s\n", cmd[0],
                    strchr(cmd[0], '/') ? "No such file or directory" : "command not found");
            rc = 127;
        }
        goto out;
    }
    cfg = aor_cli_load_config_no_secrets(c);
    if (!cfg) {
        rc = AOR_CLI_USAGE;
        goto out;
    }
    self_dir = aor_cli_self_dir(c->argv0);
    aor_binkind kind = aor_binkind_of_file(path);
    /* The shim cannot serve it: static (no dynamic linker), or Go (its runtime's own
     * system calls); the sidecar's base-URL variables instead (spec §2, last bullet). */
    int is_static = kind == AOR_BIN_STATIC || kind == AOR_BIN_GO;
    const char *why = kind == AOR_BIN_GO ? "is a Go program (its runtime makes its own "
                                           "system calls, which the shim does not see)"
                                         : "is statically linked";
    if (sidecar && !cfg->listen) {
        fprintf(stderr, "aor: --sidecar: the sidecar is off (listen = off)%s\n",
                on("AOR_STRICT") ? "; AOR_STRICT=1: not running it" : "; running it without aor");
        if (on("AOR_STRICT"))
            goto out;
        goto exec;
    }
    if (is_static && !cfg->listen) {
        /* Neither the shim nor the sidecar can serve it: as --sidecar above, and no aord
         * is started for it (QA: AOR_STRICT=1 ran it unrouted, after starting one). */
        fprintf(stderr, "aor: %s %s, and the sidecar is off (listen = off)%s\n", cmd[0], why,
                on("AOR_STRICT") ? "; AOR_STRICT=1: not running it" : "; running it without aor");
        if (on("AOR_STRICT"))
            goto out;
        goto exec;
    }
    if (!is_static && !sidecar) {
        /* Nothing to route through without the shim: no aord to start for it (spec §1
         * fail-open: the program runs unrouted, unless AOR_STRICT=1). */
        find_preload_lib(self_dir, &lib);
        if (!lib) {
            if (on("AOR_STRICT")) {
                fprintf(stderr, "; AOR_STRICT=1: not running %s without aor\n", cmd[0]);
                goto out;
            }
            fprintf(stderr,
                    "; running %s without aor: its provider traffic goes direct "
                    "(fail-open)\n",
                    cmd[0]);
            goto exec;
        }
    }

    int up = aor_cli_socket_answers(cfg->socket_path, NULL);
    /* aord to be started here loads the config with every secret, from this environment:
     * a missing one means it cannot start (said, with the variables), so fail open. */
    if (!up && !keys_missing_for_aord(cfg))
        up = ensure_daemon(cfg, self_dir) == 0;
    if (!up) {
        if (on("AOR_STRICT")) {
            fprintf(stderr, "aor: AOR_STRICT=1: not running %s without aord\n", cmd[0]);
            goto out;
        }
        fprintf(stderr,
                "aor: running %s anyway; its provider traffic goes direct "
                "(fail-open)\n",
                cmd[0]);
        /* The base-URL variables would point at a sidecar nobody serves (QA): direct, as
         * said. A preloaded program's shim gets out of the way by itself. */
        if (is_static || sidecar)
            goto exec;
    } else if ((is_static || sidecar) && cfg->listen && !sidecar_answers(cfg->listen)) {
        /* The aord that answers is not on this listen address (a reload that moved it,
         * another config's aord on the socket): the variables would name a dead port. */
        fprintf(stderr,
                "aor: nothing answers on the sidecar address %s (aord runs with another "
                "listen; `aor status` says which)%s\n",
                cfg->listen,
                on("AOR_STRICT") ? "; AOR_STRICT=1: not running it"
                                 : "; running it anyway, its traffic goes direct (fail-open)");
        if (on("AOR_STRICT"))
            goto out;
        goto exec;
    }
    if (build_plan(&plan, cfg, lib, is_static && !sidecar ? cmd[0] : NULL, why, sidecar) < 0) {
        fprintf(stderr, "aor: out of memory\n");
        goto out;
    }
    if (sidecar) {
        char names[256];
        if (plan.n)
            fprintf(stderr, "aor: --sidecar: %s uses the sidecar at http://%s (%s set)\n", cmd[0],
                    cfg->listen, names_of(&plan, 0, names, sizeof names));
        else
            fprintf(stderr,
                    "aor: --sidecar: %s uses the sidecar at http://%s (the base-URL "
                    "variables were already set)\n",
                    cmd[0], cfg->listen);
    }
    /* The CA-variable warning only for a preloaded program: one in sidecar mode talks
     * plain HTTP to the sidecar. */
    if (plan_trust(&plan, is_static || sidecar ? NULL : "aor: ") < 0 ||
        aor_cli_plan_apply(&plan) < 0) {
        fprintf(stderr, "aor: cannot set the environment: %s\n", strerror(errno));
        goto out;
    }
exec:
    aor_cli_plan_free(&plan);
    free(lib);
    free(self_dir);
    free(path);
    aor_config_free(cfg);
    fflush(NULL);
    execvp(cmd[0], cmd);
    int e = errno;
    fprintf(stderr, "aor: cannot run %s: %s\n", cmd[0], strerror(e));
    return e == ENOENT ? 127 : 126;
out:
    aor_cli_plan_free(&plan);
    free(lib);
    free(self_dir);
    free(path);
    aor_config_free(cfg);
    return rc;
}

int aor_cli_cmd_env(aor_cli *c, int argc, char **argv) {
    int sidecar = 0;
    for (int i = 0; i < argc; i++) {
        int t = aor_cli_take_config(c, argc, argv, &i);
        if (t < 0)
            return AOR_CLI_USAGE;
        if (t > 0)
            continue;
        if (strcmp(argv[i], "--sidecar") == 0) {
            sidecar = 1;
            continue;
        }
        fprintf(stderr, "aor env: unknown argument '%s'\n", argv[i]);
        return AOR_CLI_USAGE;
    }
    aor_config *cfg = aor_cli_load_config_no_secrets(c);
    if (!cfg)
        return AOR_CLI_USAGE;
    int rc = AOR_CLI_FAIL;
    aor_cli_plan plan = {0};
    char *self_dir = aor_cli_self_dir(c->argv0), *lib = NULL;
    if (!sidecar) {
        /* Printing a LD_PRELOAD that ld.so ignores would fail silently later: say why. */
        find_preload_lib(self_dir, &lib);
        if (!lib) {
            fputc('\n', stderr);
            goto out;
        }
    }
    if (build_plan(&plan, cfg, lib, NULL, NULL, sidecar) < 0)
        goto out;
    /* Notes go to stderr ("# " lines there): `eval "$(aor env)"` reads only stdout. */
    if (!sidecar && plan_trust(&plan, "# aor: ") < 0) {
        fprintf(stderr, "aor: out of memory\n");
        goto out;
    }
    for (size_t k = 0; k < plan.n; k++) {
        printf("export %s=", plan.v[k].name);
        aor_cli_shell_quote(stdout, plan.v[k].value);
        putchar('\n');
    }
    rc = fflush(stdout) == 0 ? AOR_CLI_OK : AOR_CLI_FAIL;
out:
    aor_cli_plan_free(&plan);
    free(lib);
    free(self_dir);
    aor_config_free(cfg);
    return rc;
}
