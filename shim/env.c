/* libaor.so: environment settings and the shim's output (spec §2, §7, §9). */
#include "env.h"
#include "envflag.h"

#include "fdtab.h"
#include "real.h"

#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

static aor_shim_env g_env;
static atomic_int g_warned;

int aor_env_debug;

const aor_shim_env *aor_env(void) {
    return &g_env;
}

int aor_env_paths(const char *aor_socket, const char *runtime_dir, unsigned uid, char *sock,
                  size_t socklen, char *hosts, size_t hostslen) {
    int n, err = ENAMETOOLONG;
    if (aor_socket != NULL && aor_socket[0] != '\0' && aor_socket[0] != '/') {
        err = EINVAL; /* relative: aord refuses it too */
        goto fail;
    }
    if (aor_socket != NULL && aor_socket[0] != '\0')
        n = snprintf(sock, socklen, "%s", aor_socket);
    else if (runtime_dir != NULL && runtime_dir[0] == '/')
        n = snprintf(sock, socklen, "%s/aor/aor.sock", runtime_dir);
    else
        n = snprintf(sock, socklen, "/tmp/aor-%u/aor.sock", uid);
    if (n < 0 || (size_t)n >= socklen)
        goto fail;

    /* The published file sits next to the socket: "<dirname(socket)>/hosts" (the path is
     * absolute, so it has a '/'). */
    const char *slash = strrchr(sock, '/');
    n = snprintf(hosts, hostslen, "%.*s/hosts", (int)(slash - sock), sock);
    if (n < 0 || (size_t)n >= hostslen)
        goto fail;
    return 0;

fail:
    if (socklen > 0)
        sock[0] = '\0';
    if (hostslen > 0)
        hosts[0] = '\0';
    errno = err;
    return -1;
}

void aor_env_load(void) {
    memset(&g_env, 0, sizeof(g_env));
    g_env.debug = aor_envflag_on(getenv("AOR_DEBUG"));
    aor_env_debug = g_env.debug;
    g_env.strict = aor_envflag_on(getenv("AOR_STRICT"));
    g_env.no_trust = aor_envflag_on(getenv("AOR_NO_TRUST"));
    /* The daemon never routes itself (spec §2): by the marker in aord's symbol table
     * (daemon/main.c: whatever its file is called), by name, or by the variable aord
     * sets for what it starts. */
    g_env.disabled = aor_envflag_on(getenv("AOR_DISABLE")) ||
                     aor_envflag_on(getenv("AOR_DAEMON")) ||
                     strcmp(program_invocation_short_name, "aord") == 0 ||
                     dlsym(RTLD_DEFAULT, "aor_daemon_marker") != NULL;
    g_env.sock_ok = aor_env_paths(getenv("AOR_SOCKET"), getenv("XDG_RUNTIME_DIR"),
                                  (unsigned)getuid(), g_env.sock_path, sizeof(g_env.sock_path),
                                  g_env.hosts_path, sizeof(g_env.hosts_path)) == 0;
    if (!g_env.sock_ok) {
        /* Keep the start of the path and its length for the warning; it cannot be
         * connected to. Only AOR_SOCKET or XDG_RUNTIME_DIR can make it too long. */
        const char *s = getenv("AOR_SOCKET");
        const char *dir = getenv("XDG_RUNTIME_DIR");
        g_env.sock_relative = s != NULL && s[0] != '\0' && s[0] != '/';
        if (s != NULL && s[0] != '\0') {
            g_env.sock_want = strlen(s);
            snprintf(g_env.sock_path, sizeof(g_env.sock_path), "%s", s);
        } else if (dir != NULL && dir[0] == '/') {
            g_env.sock_want = strlen(dir) + strlen("/aor/aor.sock");
            snprintf(g_env.sock_path, sizeof(g_env.sock_path), "%s/aor/aor.sock", dir);
        } else {
            g_env.sock_want = 0;
            snprintf(g_env.sock_path, sizeof(g_env.sock_path), "(path too long)");
        }
    }
    /* A reload after init (the unit tests do) keeps "shim on" in step with disabled;
     * during init the flag stays 0 until init_once sets it at its end. */
    if (atomic_load_explicit(&aor_shim_ready, memory_order_acquire))
        atomic_store_explicit(&aor_shim_active, !g_env.disabled, memory_order_release);
}

/* How fd 2 may take a line: 0 not at all, 1 write(2), 2 send(MSG_NOSIGNAL). */
enum { STDERR_SKIP, STDERR_WRITE, STDERR_SEND };

static int stderr_kind(void) {
    struct stat st;
    if (fstat(STDERR_FILENO, &st) != 0)
        return STDERR_SKIP; /* closed */
    if (!S_ISSOCK(st.st_mode))
        return STDERR_WRITE;
    /* A connection the shim handed to the daemon: the bytes would go upstream. */
    if (aor_fdtab_any() && aor_fdtab_marked(STDERR_FILENO) &&
        aor_fdtab_get_checked(STDERR_FILENO, NULL))
        return STDERR_SKIP;
    int dom = -1;
    socklen_t dl = sizeof(dom);
    if (aor_real.getsockopt(STDERR_FILENO, SOL_SOCKET, SO_DOMAIN, &dom, &dl) != 0 || dom != AF_UNIX)
        return STDERR_SKIP; /* TCP (a program's own connection), netlink, ... */
    /* A redirected fd inherited across exec is not in this process's table: its peer
     * is the daemon socket. */
    struct sockaddr_un peer;
    socklen_t pl = sizeof(peer);
    memset(&peer, 0, sizeof(peer));
    if (aor_real.getpeername(STDERR_FILENO, (struct sockaddr *)&peer, &pl) == 0 &&
        aor_env_is_daemon_addr((const struct sockaddr *)&peer, pl))
        return STDERR_SKIP;
    return STDERR_SEND; /* journald's stream, a Unix socketpair */
}

/* write(2) to fd 2 with SIGPIPE blocked in this thread; a SIGPIPE this write raised
 * (the reader of a pipe is gone) is consumed, one that was pending before is left. */
static void write_nosigpipe(const char *buf, size_t len) {
    sigset_t pipe_set, old, pending;
    sigemptyset(&pipe_set);
    sigaddset(&pipe_set, SIGPIPE);
    int masked = pthread_sigmask(SIG_BLOCK, &pipe_set, &old) == 0;
    int was_pending = 1, epipe = 0;
    if (masked && sigpending(&pending) == 0)
        was_pending = sigismember(&pending, SIGPIPE) == 1;
    if (!masked)
        return; /* cannot protect the program: say nothing */
    while (len > 0) {
        ssize_t w = write(STDERR_FILENO, buf, len);
        if (w < 0 && errno == EINTR)
            continue;
        if (w < 0 && errno == EPIPE)
            epipe = 1;
        if (w <= 0)
            break;
        buf += w;
        len -= (size_t)w;
    }
    if (epipe && !was_pending) {
        struct timespec zero = {0, 0};
        while (sigtimedwait(&pipe_set, NULL, &zero) < 0 && errno == EINTR)
            ;
    }
    pthread_sigmask(SIG_SETMASK, &old, NULL);
}

void aor_stderr_write(const char *buf, size_t len) {
    int saved = errno;
    int kind = stderr_kind();
    if (kind == STDERR_WRITE)
        write_nosigpipe(buf, len);
    while (kind == STDERR_SEND && len > 0) {
        ssize_t w = aor_real.sendto(STDERR_FILENO, buf, len, MSG_NOSIGNAL, NULL, 0);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            break;
        buf += w;
        len -= (size_t)w;
    }
    errno = saved;
}

void aor_debug(const char *fmt, ...) {
    if (!g_env.debug)
        return;
    int saved = errno;
    char line[512];
    int n = snprintf(line, sizeof(line), "aor[%ld]: ", (long)getpid());
    if (n < 0 || (size_t)n >= sizeof(line))
        goto out;
    va_list ap;
    va_start(ap, fmt);
    int m = vsnprintf(line + n, sizeof(line) - (size_t)n, fmt, ap);
    va_end(ap);
    if (m < 0)
        goto out;
    size_t len = (size_t)n + (size_t)m;
    if (len > sizeof(line) - 2)
        len = sizeof(line) - 2; /* cut, keep room for the newline */
    line[len++] = '\n';
    aor_stderr_write(line, len);
out:
    errno = saved;
}

void aor_warn_failopen(int synthetic) {
    if (atomic_exchange(&g_warned, 1) != 0)
        return;
    int saved = errno;
    char line[512], where[256];
    const char *tail = synthetic == 2   ? "refusing the connection (AOR_STRICT=1)"
                       : synthetic == 1 ? "offline fallback address refused (the host does not "
                                          "resolve)"
                                        : "connecting directly (fail-open)";
    int n;
    if (g_env.sock_ok)
        n = snprintf(where, sizeof(where), "daemon not reachable at %s", g_env.sock_path);
    else if (g_env.sock_relative)
        n = snprintf(where, sizeof(where),
                     "AOR_SOCKET=%.200s is not an absolute path (aord refuses one)",
                     g_env.sock_path);
    else if (g_env.sock_want > 0)
        n = snprintf(where, sizeof(where),
                     "daemon socket path too long (%zu bytes, at most %zu): %s...", g_env.sock_want,
                     sizeof(g_env.sock_path) - 1, g_env.sock_path);
    else
        n = snprintf(where, sizeof(where), "daemon socket path too long");
    if (n < 0)
        goto out;
    n = snprintf(line, sizeof(line), "aor: %s, %s\n", where, tail);
    if (n > 0) {
        size_t len = (size_t)n < sizeof(line) ? (size_t)n : sizeof(line) - 1;
        if (line[len - 1] != '\n')
            line[len - 1] = '\n';
        aor_stderr_write(line, len);
    }
out:
    errno = saved;
}

int aor_env_is_daemon_addr(const struct sockaddr *addr, socklen_t len) {
    const size_t off = offsetof(struct sockaddr_un, sun_path);
    if (addr == NULL || !g_env.sock_ok || len <= off || len > sizeof(struct sockaddr_un) ||
        addr->sa_family != AF_UNIX)
        return 0;
    const char *path = ((const struct sockaddr_un *)(const void *)addr)->sun_path;
    size_t n = len - off;
    if (path[0] == '\0')
        return 0; /* abstract: the daemon's socket is a file */
    while (n > 0 && path[n - 1] == '\0')
        n--; /* the kernel counts the terminating NUL when there was room */
    return n == strlen(g_env.sock_path) && memcmp(path, g_env.sock_path, n) == 0;
}

int aor_daemon_socket_exists(void) {
    int saved = errno;
    struct stat st;
    int ok = g_env.sock_ok && stat(g_env.sock_path, &st) == 0 && S_ISSOCK(st.st_mode);
    errno = saved;
    return ok;
}

int aor_env_peer_is_user(int fd, int *uid_out) {
    int saved = errno;
    struct ucred cred;
    socklen_t cl = sizeof(cred);
    int known =
        aor_real.getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &cl) == 0 && cl == sizeof(cred);
    if (uid_out != NULL)
        *uid_out = known ? (int)cred.uid : -1;
    errno = saved;
    return known && cred.uid == getuid();
}
