/* aord's listeners: the Unix socket for the shim (spec §7: directory 0700, socket
 * 0600, SO_PEERCRED uid check) and the loopback sidecar/admin listener (spec §8: only
 * connections of the daemon's own uid, found through NETLINK_SOCK_DIAG on Linux). */
#ifndef AOR_LISTEN_H
#define AOR_LISTEN_H

#include "daemon.h"

/* Binds the Unix socket (0600) at d->socket_path in d->runtime_dir. The directory is
 * created 0700 when missing; it must be owned by aord's euid and not writable by group
 * or others, except that the default one ($XDG_RUNTIME_DIR/aor or /tmp/aor-<uid>, not a
 * symbolic link) or one aord just created is tightened to 0700; other directories are
 * never chmod'ed. Only a stale socket (one nobody answers on) is replaced at the path;
 * anything else there, or a <dir>/hosts that is not aord's address set
 * (aor_publish_check_dir), makes it fail without touching anything. Returns 0, or -1
 * with a message naming the path in err (errlen bytes), e.g. another aord is already
 * running. */
int aor_listen_unix(aor_daemon *d, char *err, size_t errlen);

/* Binds the sidecar listener at d->cfg->listen ("host:port", loopback only). Sets
 * d->tcp_port and d->sidecar_url. Returns 0 (also when listen is off), or -1 with a message in err.
 */
int aor_listen_tcp(aor_daemon *d, char *err, size_t errlen);

/* What NETLINK_SOCK_DIAG (Linux inet_diag) says of the TCP socket at the other end of
 * the loopback connection fd: *uid, the uid owning it (spec §8: only aord's own may use
 * the listener), and *held, 1 while a process still has it open, 0 once every descriptor
 * of it was closed and the kernel finishes the connection alone (an orphaned or
 * TIME_WAIT socket, inode 0: nobody can read an answer any more). A shutdown(SHUT_WR)
 * keeps it held: that is how a close and a half-close, alike on the wire until a write
 * fails, are told apart. Either pointer may be NULL. Returns 0, or -1 with errno: ENOENT
 * (no such socket any more), ENOTCONN (fd's connection is gone), EAFNOSUPPORT (fd is
 * not TCP over IPv4 or IPv6), or a socket call's. Asks through one netlink socket kept
 * open from aor_listen_tcp (or the first call) until aor_listen_close (it needs no
 * descriptor per call; one that fails is replaced at once).
 * Event loop thread only. */
int aor_listen_peer(int fd, unsigned *uid, int *held);

/* Closes both listeners and removes the socket file (when it is still a socket). */
void aor_listen_close(aor_daemon *d);

#endif
