/* libaor.so: environment settings and the shim's output (spec §2, §7, §9). */
#include "env.h"

#include "fdtab.h"
#include "real.h"

#include <errno.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

static aor_shim_env g_env;
static atomic_int g_warned;

const aor_shim_env *aor_env(void) {
    return &g_env;
}

int aor_env_flag(const char *value) {
    return value != NULL && value[0] != '\0' && strcmp(value, "0") != 0;
}

int aor_env_paths(const char *aor_socket, const char *runtime_dir, unsigned uid, char *sock,
                  size_t socklen, char *hosts, size_t hostslen) {
    int n;
    if (aor_socket != NULL && aor_socket[0] != '\0')
        n = snprintf(sock, socklen, "%s", aor_socket);
    else if (runtime_dir != NULL && runtime_dir[0] == '/')
        n = snprintf(sock, socklen, "%s/aor/aor.sock", runtime_dir);
    else
        n = snprintf(sock, socklen, "/tmp/aor-%u/aor.sock", uid);
    if (n < 0 || (size_t)n >= socklen)
        goto too_long;

    /* The published file sits next to the socket: "<dirname(socket)>/hosts". */
    const char *slash = strrchr(sock, '/');
    if (slash == NULL)
        n = snprintf(hosts, hostslen, "hosts");
    else
        n = snprintf(hosts, hostslen, "%.*s/hosts", (int)(slash - sock), sock);
    if (n < 0 || (size_t)n >= hostslen)
        goto too_long;
    return 0;

too_long:
    if (socklen > 0)
        sock[0] = '\0';
    if (hostslen > 0)
        hosts[0] = '\0';
    errno = ENAMETOOLONG;
    return -1;
}

void aor_env_load(void) {
    memset(&g_env, 0, sizeof(g_env));
    g_env.debug = aor_env_flag(getenv("AOR_DEBUG"));
    g_env.strict = aor_env_flag(getenv("AOR_STRICT"));
    g_env.no_trust = aor_env_flag(getenv("AOR_NO_TRUST"));
    /* The daemon never routes itself (spec §2): by name, or by the variable aord sets. */
    g_env.disabled = aor_env_flag(getenv("AOR_DISABLE")) || aor_env_flag(getenv("AOR_DAEMON")) ||
                     strcmp(program_invocation_short_name, "aord") == 0;
    g_env.sock_ok = aor_env_paths(getenv("AOR_SOCKET"), getenv("XDG_RUNTIME_DIR"),
                                  (unsigned)getuid(), g_env.sock_path, sizeof(g_env.sock_path),
                                  g_env.hosts_path, sizeof(g_env.hosts_path)) == 0;
    if (!g_env.sock_ok) {
        /* Keep the name for the warning; it cannot be connected to. */
        const char *s = getenv("AOR_SOCKET");
        snprintf(g_env.sock_path, sizeof(g_env.sock_path), "%s",
                 s != NULL && s[0] != '\0' ? s : "(path too long)");
    }
    /* A reload after init (the unit tests do) keeps "shim on" in step with disabled;
     * during init the flag stays 0 until init_once sets it at its end. */
    if (atomic_load_explicit(&aor_shim_ready, memory_order_acquire))
        atomic_store_explicit(&aor_shim_active, !g_env.disabled, memory_order_release);
}

static void write_all_stderr(const char *buf, size_t len) {
    while (len > 0) {
        ssize_t w = write(STDERR_FILENO, buf, len);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return;
        buf += w;
        len -= (size_t)w;
    }
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
    write_all_stderr(line, len);
out:
    errno = saved;
}

void aor_warn_failopen(int synthetic) {
    if (atomic_exchange(&g_warned, 1) != 0)
        return;
    int saved = errno;
    char line[256];
    int n = snprintf(line, sizeof(line), "aor: daemon not reachable at %s, %s\n", g_env.sock_path,
                     synthetic == 2   ? "refusing the connection (AOR_STRICT=1)"
                     : synthetic == 1 ? "offline fallback address refused (the host does not "
                                        "resolve)"
                                      : "connecting directly (fail-open)");
    if (n > 0) {
        size_t len = (size_t)n < sizeof(line) ? (size_t)n : sizeof(line) - 1;
        if (line[len - 1] != '\n')
            line[len - 1] = '\n';
        write_all_stderr(line, len);
    }
    errno = saved;
}

int aor_daemon_socket_exists(void) {
    int saved = errno;
    struct stat st;
    int ok = g_env.sock_ok && stat(g_env.sock_path, &st) == 0 && S_ISSOCK(st.st_mode);
    errno = saved;
    return ok;
}
