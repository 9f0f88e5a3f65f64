/* aor: helpers shared by the commands (see cli.h): config loading, finding the binaries,
 * the socket probe, small file I/O, shell quoting. */
#include "cli.h"
#include "paths.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

int aor_cli_take_config(aor_cli *c, int argc, char **argv, int *i) {
    const char *a = argv[*i];
    if (strncmp(a, "--config=", 9) == 0) {
        if (!a[9]) {
            fprintf(stderr, "aor: --config needs a file name\n");
            return -1;
        }
        c->config_arg = a + 9;
        return 1;
    }
    if (strcmp(a, "--config") != 0)
        return 0;
    if (*i + 1 >= argc || !argv[*i + 1][0]) {
        fprintf(stderr, "aor: --config needs a file name\n");
        return -1;
    }
    c->config_arg = argv[++*i];
    return 1;
}

const char *aor_cli_chosen_config(const aor_cli *c) {
    if (c->config_arg && *c->config_arg)
        return c->config_arg;
    const char *env = getenv("AOR_CONFIG");
    return env && *env ? env : NULL;
}

char *aor_cli_service_env_file(void) {
    char *dir = aor_path_config_dir();
    char *home = aor_path_home();
    char *cand[2] = {home ? aor_path_join(home, ".config/aor/env") : NULL,
                     dir ? aor_path_join(dir, "env") : NULL};
    char *found = NULL;
    struct stat st;
    for (int i = 0; i < 2 && !found; i++)
        if (cand[i] && stat(cand[i], &st) == 0 && S_ISREG(st.st_mode))
            found = cand[i], cand[i] = NULL;
    free(cand[0]);
    free(cand[1]);
    free(dir);
    free(home);
    return found;
}

int aor_cli_check_chosen_config(const aor_cli *c) {
    const char *file = aor_cli_chosen_config(c);
    if (!file)
        return 0;
    const char *by = c->config_arg && *c->config_arg ? "--config" : "AOR_CONFIG";
    struct stat st;
    const char *why = NULL;
    /* O_NONBLOCK: a FIFO must not hang aor (the loader refuses it too). */
    int fd = open(file, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
    if (fd < 0)
        why = strerror(errno);
    else if (fstat(fd, &st) < 0)
        why = strerror(errno);
    else if (!S_ISREG(st.st_mode))
        why = "not a regular file";
    if (fd >= 0)
        close(fd);
    if (!why)
        return 0;
    fprintf(stderr, "aor: configuration file %s (named by %s): %s\n", file, by, why);
    return -1;
}

int aor_cli_check_socket(const aor_config *cfg, int full) {
    char *why = NULL;
    if (aor_path_config_socket_problem(cfg->socket_path, cfg->source, full, &why) == 0)
        return 0;
    fprintf(stderr, "aor: configuration errors:\n%s\n",
            why ? why : "out of memory while checking the socket path");
    free(why);
    return -1;
}

/* The socket problem of the configuration at c, loaded without secrets, for the error
 * list of a load that failed (a relative AOR_SOCKET with full 0): a malloc'd line, or
 * NULL when there is none or the file has other errors that keep it from loading at all.
 * (The full check is the loader's: AOR_CONFIG_CHECK_SOCKET.) */
static char *socket_problem_anyway(const aor_cli *c, int full) {
    char *errors = NULL, *why = NULL;
    aor_config *cfg = aor_config_load_flags(c->config_arg, AOR_CONFIG_SECRETS_OPTIONAL, &errors);
    free(errors);
    if (cfg && aor_path_config_socket_problem(cfg->socket_path, cfg->source, full, &why) == 0) {
        free(why);
        why = NULL;
    }
    aor_config_free(cfg);
    return why;
}

/* 1 when a line of errors says a key's variable is not set, other than one whose env_file
 * could not be used: that line already says to fix the file, and the notes below (export
 * it, or put it in env_file) would only mislead (QA). */
static int unset_variable_error(const char *errors) {
    for (const char *l = errors; l && *l;) {
        const char *end = strchr(l, '\n');
        size_t len = end ? (size_t)(end - l) : strlen(l);
        if (memmem(l, len, " is not set", strlen(" is not set")) &&
            !memmem(l, len, "could not be used", strlen("could not be used")))
            return 1;
        l = end ? end + 1 : NULL;
    }
    return 0;
}

static aor_config *load_config(const aor_cli *c, unsigned flags, int full) {
    char *errors = NULL;
    /* full: the loader lists the socket's problems with the other errors, in line
     * order (QA: they were hidden by any other error, or printed out of order). */
    aor_config *cfg =
        aor_config_load_flags(c->config_arg, flags | (full ? AOR_CONFIG_CHECK_SOCKET : 0), &errors);
    if (cfg && !full && aor_cli_check_socket(cfg, 0) < 0) {
        aor_config_free(cfg);
        return NULL;
    }
    if (cfg)
        return cfg;
    fprintf(stderr, "aor: configuration errors:\n%s", errors ? errors : "(out of memory)\n");
    if (errors && errors[0] && errors[strlen(errors) - 1] != '\n')
        fputc('\n', stderr);
    char *sock_why =
        full || (flags & AOR_CONFIG_SECRETS_OPTIONAL) ? NULL : socket_problem_anyway(c, 0);
    if (sock_why)
        fprintf(stderr, "%s\n", sock_why);
    free(sock_why);
    if (errors && unset_variable_error(errors)) {
        /* Keys kept only in the service's env file are unset here: say where they may be. */
        char *envf = aor_cli_service_env_file();
        if (envf)
            fprintf(stderr,
                    "aor: note: %s exists (the service's EnvironmentFile): aord run as a "
                    "service gets its variables from there, but aor checks this shell's "
                    "environment (and env_file in [daemon]): a variable listed above that is in "
                    "that file is missing only here\n",
                    envf);
        free(envf);
        /* "export it" is right for this shell only: a running aord never sees it. */
        fprintf(stderr,
                "aor: note: aord needs each key's variable in its own environment, read when it "
                "starts: exporting one in a shell does not reach an aord that is already "
                "running (a SIGHUP reload does not either); restart aord with the variable set "
                "(as a service: in its EnvironmentFile, then `systemctl --user restart aord`), "
                "or put it in env_file in [daemon], which every load and reload reads\n");
    }
    free(errors);
    return NULL;
}

aor_config *aor_cli_load_config(const aor_cli *c) {
    return load_config(c, 0, 0);
}

aor_config *aor_cli_load_config_full(const aor_cli *c) {
    return load_config(c, 0, 1);
}

aor_config *aor_cli_load_config_no_secrets(const aor_cli *c) {
    return load_config(c, AOR_CONFIG_SECRETS_OPTIONAL, 0);
}

static int is_exec_file(const char *path) {
    struct stat st;
    return stat(path, &st) == 0 && S_ISREG(st.st_mode) && access(path, X_OK) == 0;
}

static int is_file(const char *path) {
    struct stat st;
    return stat(path, &st) == 0 && S_ISREG(st.st_mode);
}

static int exists(const char *path) {
    struct stat st;
    return stat(path, &st) == 0;
}

char *aor_cli_which(const char *cmd) {
    return aor_cli_path_find(cmd, is_exec_file);
}

int aor_cli_exists_not_runnable(const char *cmd) {
    if (!cmd)
        return 0;
    char *p = aor_cli_path_find(cmd, strchr(cmd, '/') ? exists : is_file);
    free(p);
    return p != NULL;
}

char *aor_cli_path_find(const char *cmd, int (*accept)(const char *path)) {
    if (!cmd || !*cmd)
        return NULL;
    if (strchr(cmd, '/'))
        return accept(cmd) ? strdup(cmd) : NULL;
    const char *path = getenv("PATH");
    char cs[256];
    /* Without PATH, execvp uses confstr(_CS_PATH) ("/bin:/usr/bin" in glibc): the same
     * list, so the program looked at is the one run (QA). */
    if (!path) {
        size_t n = confstr(_CS_PATH, cs, sizeof cs);
        path = n > 0 && n <= sizeof cs ? cs : "/bin:/usr/bin";
    }
    size_t clen = strlen(cmd);
    for (const char *p = path;;) {
        const char *end = strchr(p, ':');
        size_t dlen = end ? (size_t)(end - p) : strlen(p);
        char *cand = NULL;
        /* An empty PATH entry means the current directory. */
        if (asprintf(&cand, "%.*s%s%.*s", (int)dlen, dlen ? p : ".", "/", (int)clen, cmd) < 0)
            return NULL;
        if (accept(cand))
            return cand;
        free(cand);
        if (!end)
            return NULL;
        p = end + 1;
    }
}

static char *dir_of(const char *path) {
    const char *slash = strrchr(path, '/');
    if (!slash)
        return strdup(".");
    if (slash == path)
        return strdup("/");
    return strndup(path, (size_t)(slash - path));
}

char *aor_cli_self_dir(const char *argv0) {
    char buf[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", buf, sizeof buf - 1);
    if (n > 0) {
        buf[n] = '\0';
        return dir_of(buf);
    }
    char *found = argv0 ? aor_cli_which(argv0) : NULL;
    if (!found)
        return NULL;
    char *real = realpath(found, NULL);
    free(found);
    if (!real)
        return NULL;
    char *d = dir_of(real);
    free(real);
    return d;
}

/* LD_PRELOAD splits its value at spaces and colons, with no escape (ld.so(8)): when the
 * resolved path has one and the absolute name it was found by has none (a symbolic link
 * made as the workaround, docs/cli.md), that name is returned instead. Takes real. */
static char *preload_name(char *real, const char *given) {
    if (!strpbrk(real, " :") || given[0] != '/' || strpbrk(given, " :"))
        return real;
    char *g = strdup(given);
    if (!g)
        return real;
    free(real);
    return g;
}

char *aor_cli_find_lib(const char *self_dir, int quiet) {
    const char *env = getenv("AOR_LIB");
    if (env && *env) {
        char *real = realpath(env, NULL);
        struct stat st;
        if (real && stat(real, &st) == 0 && S_ISREG(st.st_mode))
            return preload_name(real, env);
        free(real);
        if (!quiet)
            fprintf(stderr, "aor: AOR_LIB=%s: %s\n", env,
                    errno ? strerror(errno) : "not a regular file");
        return NULL;
    }
    const char *rel[] = {"libaor.so", "../lib/libaor.so"};
    for (size_t i = 0; self_dir && i < 2; i++) {
        char *cand = NULL;
        if (asprintf(&cand, "%s/%s", self_dir, rel[i]) < 0)
            return NULL;
        char *real = realpath(cand, NULL);
        struct stat st;
        if (real && stat(real, &st) == 0 && S_ISREG(st.st_mode)) {
            real = preload_name(real, cand);
            free(cand);
            return real;
        }
        free(cand);
        free(real);
    }
    if (!quiet)
        fprintf(stderr,
                "aor: cannot find libaor.so (looked in %s/ and %s/../lib/); set "
                "AOR_LIB=/path/to/libaor.so\n",
                self_dir ? self_dir : "?", self_dir ? self_dir : "?");
    return NULL;
}

char *aor_cli_find_aord(const char *self_dir) {
    if (self_dir) {
        char *cand = NULL;
        if (asprintf(&cand, "%s/aord", self_dir) < 0)
            return NULL;
        if (is_exec_file(cand)) {
            char *real = realpath(cand, NULL);
            free(cand);
            return real;
        }
        free(cand);
    }
    char *found = aor_cli_which("aord");
    if (!found)
        return NULL;
    char *real = realpath(found, NULL);
    free(found);
    return real;
}

int aor_cli_socket_answers(const char *path, pid_t *pid) {
    if (pid)
        *pid = 0;
    struct sockaddr_un sun;
    memset(&sun, 0, sizeof sun);
    sun.sun_family = AF_UNIX;
    if (!path || strlen(path) >= sizeof sun.sun_path)
        return 0;
    memcpy(sun.sun_path, path, strlen(path) + 1);
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return 0;
    int ok = connect(fd, (struct sockaddr *)&sun, sizeof sun) == 0;
#ifdef SO_PEERCRED
    if (ok && pid) {
        struct ucred cred;
        socklen_t len = sizeof cred;
        if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) == 0)
            *pid = cred.pid;
    }
#endif
    /* Closing without a byte is quiet on the daemon's side (no preamble = no warning). */
    close(fd);
    return ok;
}

int aor_cli_read_file(const char *path, size_t max, char **out, size_t *len) {
    int e;
    *out = NULL;
    if (len)
        *len = 0;
    /* O_NONBLOCK: a FIFO named in a variable must not hang aor (it is refused below). */
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
    if (fd < 0)
        return -1;
    struct stat st;
    if (fstat(fd, &st) < 0)
        goto fail_fd;
    if (!S_ISREG(st.st_mode)) {
        errno = S_ISDIR(st.st_mode) ? EISDIR : EINVAL;
        goto fail_fd;
    }
    if ((unsigned long long)st.st_size > max) {
        errno = EFBIG;
        goto fail_fd;
    }
    size_t cap = (size_t)st.st_size + 1, n = 0;
    char *buf = malloc(cap);
    if (!buf)
        goto fail_fd;
    for (;;) {
        if (n + 1 >= cap) {
            if (cap > max) {
                errno = EFBIG; /* grew while we read it */
                goto fail_buf;
            }
            char *nb = realloc(buf, cap * 2);
            if (!nb)
                goto fail_buf;
            buf = nb;
            cap *= 2;
        }
        ssize_t r = read(fd, buf + n, cap - n - 1);
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0)
            goto fail_buf;
        if (r == 0)
            break;
        n += (size_t)r;
    }
    if (n > max) {
        errno = EFBIG;
        goto fail_buf;
    }
    buf[n] = '\0';
    close(fd);
    *out = buf;
    if (len)
        *len = n;
    return 0;

fail_buf:
    e = errno;
    free(buf);
    errno = e;
fail_fd:
    e = errno;
    close(fd);
    errno = e;
    return -1;
}

int aor_cli_mkdirs(const char *dir, mode_t mode) {
    char *copy = strdup(dir);
    if (!copy)
        return -1;
    for (char *s = copy + 1;; s++) {
        if (*s != '/' && *s != '\0')
            continue;
        char saved = *s;
        *s = '\0';
        if (mkdir(copy, mode) < 0 && errno != EEXIST) {
            int e = errno;
            free(copy);
            errno = e;
            return -1;
        }
        *s = saved;
        if (!saved)
            break;
    }
    free(copy);
    return 0;
}

int aor_cli_write_file(const char *path, const void *data, size_t len, mode_t mode) {
    int e;
    char *old = NULL;
    size_t oldlen = 0;
    if (aor_cli_read_file(path, len, &old, &oldlen) == 0 && oldlen == len &&
        memcmp(old, data, len) == 0) {
        free(old);
        return chmod(path, mode);
    }
    free(old);
    char *tmp = NULL;
    if (asprintf(&tmp, "%s.tmp.%ld", path, (long)getpid()) < 0)
        return -1;
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, mode);
    if (fd < 0)
        goto fail_tmp;
    const char *p = data;
    size_t left = len;
    while (left > 0) {
        ssize_t w = write(fd, p, left);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            goto fail_fd;
        p += w;
        left -= (size_t)w;
    }
    if (fchmod(fd, mode) < 0 || fsync(fd) < 0)
        goto fail_fd;
    if (close(fd) < 0) {
        fd = -1;
        goto fail_file;
    }
    if (rename(tmp, path) < 0) {
        fd = -1;
        goto fail_file;
    }
    free(tmp);
    return 0;

fail_fd:
    e = errno;
    close(fd);
    errno = e;
fail_file:
    e = errno;
    unlink(tmp);
    errno = e;
fail_tmp:
    e = errno;
    free(tmp);
    errno = e;
    return -1;
}

void aor_cli_shell_quote(FILE *f, const char *s) {
    fputc('\'', f);
    for (; *s; s++) {
        if (*s == '\'')
            fputs("'\\''", f);
        else
            fputc(*s, f);
    }
    fputc('\'', f);
}

const char *aor_cli_duration(double s, char *buf, size_t cap) {
    if (!(s > 0))
        s = 0;
    if (s > 1e9)
        s = 1e9;
    long t = (long)(s + 0.999); /* round up: "free in 1 s" until it really is free */
    if (t < 60)
        snprintf(buf, cap, "%ld s", t);
    else if (t < 3600)
        snprintf(buf, cap, "%ld min %02ld s", t / 60, t % 60);
    else
        snprintf(buf, cap, "%ld h %02ld min", t / 3600, (t % 3600) / 60);
    return buf;
}

int aor_cli_state_locked(const char *path) {
    int fd = path ? open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK) : -1;
    if (fd < 0)
        return 0;
    struct stat st;
    int held = fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && flock(fd, LOCK_EX | LOCK_NB) != 0 &&
               errno == EWOULDBLOCK;
    close(fd); /* lets go of the lock when this took it */
    return held;
}
