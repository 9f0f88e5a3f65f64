/* libaor.so: the redirect of a recognised TCP connection to the daemon (spec §2 "The
 * redirect", §7), shared by connect() and sendto()/sendmsg() with MSG_FASTOPEN. */
#ifndef AOR_SHIM_REDIRECT_H
#define AOR_SHIM_REDIRECT_H

#include <sys/socket.h>

enum {
    AOR_REDIRECT_PASS = 0,  /* not for aor, or fail-open: the caller does the real call */
    AOR_REDIRECT_DONE = 1,  /* fd now talks to the daemon; the connect succeeded */
    AOR_REDIRECT_FAIL = -1, /* connect must fail with errno (AOR_STRICT, fallback address) */
};

/* Decides and, when the destination addr (len bytes) is a recognised provider address
 * on a redirect port and fd is a SOCK_STREAM socket of the address's family (SO_DOMAIN
 * equal to addr->sa_family; otherwise the real call returns the kernel's error, e.g.
 * EAFNOSUPPORT for a sockaddr_in6 on an AF_INET socket), redirects fd: a Unix socket is
 * connected to the daemon (blocking, 1 s send timeout for the local hand-off), the
 * preamble written, and the socket dup3'd onto fd with O_NONBLOCK and FD_CLOEXEC as
 * they were; the fd table remembers the original peer. what names the hook for debug
 * lines. Returns one of the values above; errno is kept unless AOR_REDIRECT_FAIL. */
int aor_redirect_try(int fd, const struct sockaddr *addr, socklen_t len, const char *what);

#endif
