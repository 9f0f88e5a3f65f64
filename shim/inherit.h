/* libaor.so: redirected connections inherited across exec (spec §2 "works ... across
 * fork/exec"; "hooks keep the program's view of a TCP socket").
 *
 * A new program image starts with an empty fd table, so a redirected fd it inherited
 * (a shell's `exec 3<>/dev/tcp/HOST/443`, a parent that hands a connection to a child)
 * would show its Unix socket. Each daemon connection is therefore bound, before it
 * connects, to an abstract Unix address that records what the program connected to:
 *
 *     "\0" "aor/1 <pid>.<seq> <domain> <protocol> <ip> <port> <scope-id>"
 *
 * (<pid>.<seq> keeps names unique in the network namespace). In the program that
 * inherited the fd, a hook that finds an AF_UNIX socket where the program expects TCP
 * (getpeername/getsockname answering AF_UNIX, SO_DOMAIN saying AF_UNIX, a TCP-level
 * option refused) reads that name and adopts the fd into its table. Sockets of other
 * families never reach this code. Internal to the shim. */
#ifndef AOR_SHIM_INHERIT_H
#define AOR_SHIM_INHERIT_H

#include "fdtab.h"

#include <sys/socket.h>
#include <sys/un.h>

/* Fills *sun with the abstract address for a daemon connection standing for a socket of
 * domain (AF_INET/AF_INET6) and protocol connected to peer (peerlen bytes, a
 * sockaddr_in or sockaddr_in6 of that domain). Returns the length to pass to bind(), or
 * 0 when no name can be made (then the connection simply goes unnamed). */
socklen_t aor_inherit_name(struct sockaddr_un *sun, int domain, int protocol,
                           const struct sockaddr *peer, socklen_t peerlen);

/* Parses an address made by aor_inherit_name (len bytes of sun, as getsockname returned
 * them) into out's domain, protocol, peer and peerlen; other fields untouched. Returns 1,
 * or 0 when it is not such a name (any other Unix socket). */
int aor_inherit_parse(const struct sockaddr_un *sun, socklen_t len, aor_fdinfo *out);

/* When fd is an inherited daemon connection (an AF_UNIX socket bound by
 * aor_inherit_name) that the table does not know, adds it to the table, with the TCP
 * view a fresh redirect has, and copies its entry to *out (may be NULL). Returns 1 when
 * fd is (now) in the table, 0 otherwise. Cheap to call only where the caller saw an
 * AF_UNIX socket. Keeps errno. */
int aor_inherit_adopt(int fd, aor_fdinfo *out);

#endif
