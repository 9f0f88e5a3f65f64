/* libaor.so: settings read from the environment once per process, and the shim's only
 * output (debug lines, the one fail-open warning). Source: spec §2, §7, §9. */
#ifndef AOR_SHIM_ENV_H
#define AOR_SHIM_ENV_H

#include <stddef.h>
#include <sys/socket.h>
#include <sys/un.h>

typedef struct {
    int disabled;      /* AOR_DISABLE=1, AOR_DAEMON=1 or the process is aord: pass through */
    int strict;        /* AOR_STRICT=1: an unreachable daemon fails connect() (ECONNREFUSED) */
    int debug;         /* AOR_DEBUG=1: one stderr line per decision */
    int no_trust;      /* AOR_NO_TRUST=1: leave CA variables alone */
    int sock_ok;       /* sock_path is absolute and fits in sockaddr_un.sun_path */
    int sock_relative; /* !sock_ok: AOR_SOCKET is a relative path (aord refuses one) */
    size_t sock_want;  /* !sock_ok: bytes the socket path would have had (without NUL) */
    /* The daemon socket; when !sock_ok the first bytes of the path that did not fit
     * (shown in messages, never connected to). */
    char sock_path[sizeof(((struct sockaddr_un *)0)->sun_path)];
    char hosts_path[sizeof(((struct sockaddr_un *)0)->sun_path) + 8]; /* published file */
} aor_shim_env;

/* The settings; valid after aor_shim_init(). Never NULL. */
const aor_shim_env *aor_env(void);

/* aor_env()->debug, as a plain global for the connect hook's fast path (a load, no
 * call: docs/performance.md change 52). Written by aor_env_load only. */
extern int aor_env_debug;

/* Reads AOR_DISABLE, AOR_DAEMON, AOR_STRICT, AOR_DEBUG, AOR_NO_TRUST, AOR_SOCKET,
 * XDG_RUNTIME_DIR and program_invocation_short_name into the settings. Called once by
 * aor_shim_init (single-threaded there). */
void aor_env_load(void);

/* Socket path rule of spec §7 as a pure function for tests: aor_socket (AOR_SOCKET) if
 * set and non-empty, else runtime_dir/aor/aor.sock (XDG_RUNTIME_DIR, if absolute), else
 * /tmp/aor-<uid>/aor.sock. Writes the socket path into sock (socklen bytes) and the
 * published-file path "<socket dir>/hosts" into hosts (hostslen bytes).
 * Returns 0, or -1 when a path does not fit (errno ENAMETOOLONG) or aor_socket is not
 * absolute (errno EINVAL: aord and aor refuse a relative socket path, and its published
 * file would be looked for in the program's working directory). */
int aor_env_paths(const char *aor_socket, const char *runtime_dir, unsigned uid, char *sock,
                  size_t socklen, char *hosts, size_t hostslen);

/* With AOR_DEBUG=1 writes one line "aor[pid]: <message>\n" to stderr with a single
 * write(2) (at most 512 bytes, longer text is cut). Otherwise does nothing. Keeps errno.
 * Like every line of the shim it goes through aor_stderr_write (below): never into a
 * network socket or a redirected fd, never with a SIGPIPE. */
void aor_debug(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* Writes "aor: daemon not reachable at PATH, connecting directly (fail-open)" to stderr
 * the first time it is called in this process; later calls do nothing. synthetic: 0
 * connecting directly; 1 an offline fallback address was refused (it cannot be reached
 * directly: "..., offline fallback address refused (the host does not resolve)"); 2
 * refused because of AOR_STRICT=1. When the socket path did not fit a Unix socket
 * address (!sock_ok) the line starts "aor: daemon socket path too long (N bytes, at most
 * 107): <first bytes>..." instead. One line per process whichever comes first; written
 * with aor_stderr_write. Keeps errno. */
void aor_warn_failopen(int synthetic);

/* Writes len bytes of one message line to fd 2 (STDERR_FILENO), or nothing when fd 2
 * cannot safely take it: closed, a redirected fd (fdtab), or a socket that is not
 * AF_UNIX (a program that closed stderr may have got a TCP connection as fd 2: its
 * peer must not receive the shim's text, and writing to it may raise SIGPIPE). An
 * AF_UNIX socket (journald's stream) is written with MSG_NOSIGNAL; anything else (tty,
 * pipe, file) with SIGPIPE blocked in this thread and a SIGPIPE this write caused
 * consumed, so the program never gets a SIGPIPE from the shim. Short writes are
 * continued, EINTR retried; errors are ignored. Keeps errno. Source: docs/shim.md
 * "Output". */
void aor_stderr_write(const char *buf, size_t len);

/* 1 when addr (len bytes, as getpeername/getsockname returned them) is the Unix
 * address of the daemon socket: AF_UNIX, a path equal to sock_path (sock_ok). Pure
 * comparison, no system call. Source: spec §7 (socket path). */
int aor_env_is_daemon_addr(const struct sockaddr *addr, socklen_t len);

/* 1 when the peer of the connected Unix socket fd runs as this process's uid
 * (SO_PEERCRED), else 0. uid_out, when not NULL, receives the peer's uid, or -1 when
 * the kernel did not tell it. Keeps errno. Source: spec §7 (the socket belongs to the
 * user; docs/shim.md "Daemon socket"). */
int aor_env_peer_is_user(int fd, int *uid_out);

/* 1 when the daemon socket exists (stat: a socket at sock_path). Keeps errno. */
int aor_daemon_socket_exists(void);

#endif
