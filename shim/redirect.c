/* libaor.so: connect() redirect and TCP Fast Open sends (see redirect.h). */
#include "redirect.h"

#include "env.h"
#include "fdtab.h"
#include "hosts.h"
#include "inherit.h"
#include "preamble.h"
#include "real.h"

#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <sys/un.h>
#include <unistd.h>

#define HANDOFF_TIMEOUT_S 1 /* the local hand-off; the daemon accepts at once normally */

static int get_int_opt(int fd, int level, int opt, int dflt) {
    int v = 0;
    socklen_t l = sizeof(v);
    if (aor_real.getsockopt(fd, level, opt, &v, &l) != 0 || l != sizeof(v))
        return dflt;
    return v;
}

static int send_all(int fd, const char *buf, size_t len) {
    while (len > 0) {
        ssize_t w = aor_real.sendto(fd, buf, len, MSG_NOSIGNAL, NULL, 0);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return -1;
        buf += w;
        len -= (size_t)w;
    }
    return 0;
}

/* Why fd (a SOCK_STREAM socket of domain) must not be redirected to addr (len bytes),
 * or NULL when it may: it is no longer a fresh socket (connected, connecting or
 * listening: TCP_INFO's state is not TCP_CLOSE; or closed after a connection, which the
 * kernel still takes for connected: a round-trip time was measured, QA: a direct
 * connection reset by its peer was replaced), or an IPv6-only socket is given a
 * v4-mapped address. A refused connect measures none, so a socket retried after one is
 * still redirected. Only on the redirect path: a system call or two. */
static const char *socket_busy(int fd, int domain, const struct sockaddr *addr, socklen_t len) {
    struct tcp_info ti;
    socklen_t sl = sizeof(ti);
    memset(&ti, 0, sizeof(ti));
    if (aor_real.getsockopt(fd, IPPROTO_TCP, TCP_INFO, &ti, &sl) == 0 && sl >= 1) {
        if (ti.tcpi_state == TCP_LISTEN)
            return "a listening socket";
        if (ti.tcpi_state != TCP_CLOSE)
            return "already connected or connecting";
        if (sl >= offsetof(struct tcp_info, tcpi_rtt) + sizeof(ti.tcpi_rtt) && ti.tcpi_rtt != 0)
            return "closed after a connection (the kernel still takes it for connected)";
    }
    if (domain == AF_INET6 && len >= (socklen_t)AOR_SIN6_LEN_MIN) {
        struct sockaddr_in6 sin6;
        memset(&sin6, 0, sizeof(sin6));
        memcpy(&sin6, addr, len < (socklen_t)sizeof(sin6) ? len : (socklen_t)sizeof(sin6));
        if (IN6_IS_ADDR_V4MAPPED(&sin6.sin6_addr) && get_int_opt(fd, IPPROTO_IPV6, IPV6_V6ONLY, 0))
            return "an IPv6-only socket given a v4-mapped address";
    }
    return NULL;
}

/* Connects a new Unix socket to the daemon and writes the preamble. name (namelen bytes;
 * 0: none) is bound first: the abstract name that lets a program that inherits the fd
 * across exec see the TCP socket it stands for (inherit.h). Returns the socket, -1 when
 * the daemon is not reachable (errno), -2 on a local error (errno: no socket could be
 * made). */
static int daemon_connect(const char *preamble, size_t plen, const struct sockaddr_un *name,
                          socklen_t namelen) {
    const aor_shim_env *env = aor_env();
    struct sockaddr_un sun;
    size_t pl = strlen(env->sock_path);
    if (!env->sock_ok || pl >= sizeof(sun.sun_path)) {
        /* for AOR_DEBUG's "daemon not reachable (...)": QA, a relative AOR_SOCKET was
         * explained as "File name too long" */
        errno = env->sock_relative ? EINVAL : ENAMETOOLONG;
        return -1;
    }
    int u = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (u < 0)
        return -2;
    /* Without the name the connection still works; only an exec'd program's view of it
     * would show the Unix socket (EADDRINUSE: another user took the name first). */
    if (namelen > 0 && bind(u, (const struct sockaddr *)name, namelen) != 0)
        aor_debug("cannot name the daemon connection (%s): its TCP view is lost across exec",
                  strerror(errno));
    struct timeval tv = {HANDOFF_TIMEOUT_S, 0};
    aor_real.setsockopt(u, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
    memset(&sun, 0, sizeof(sun));
    sun.sun_family = AF_UNIX;
    memcpy(sun.sun_path, env->sock_path, pl + 1);
    int rc, tries = 0;
    do {
        rc = aor_real.connect(u, (struct sockaddr *)&sun, sizeof(sun));
    } while (rc != 0 && errno == EINTR && ++tries < 5);
    if (rc != 0) {
        int e = errno;
        aor_real.close(u);
        errno = e;
        return -1;
    }
    /* Only our own user's daemon gets the connection: with XDG_RUNTIME_DIR unset the
     * socket is under /tmp, where another user could have put a listener first (§7: the
     * daemon checks its peers; this is the other direction). */
    int peer_uid;
    if (!aor_env_peer_is_user(u, &peer_uid)) {
        aor_debug("daemon socket %s is served by uid %d, not this user's (%d): not used",
                  env->sock_path, peer_uid, (int)getuid());
        aor_real.close(u);
        errno = EPERM;
        return -1;
    }
    if (send_all(u, preamble, plen) != 0) {
        int e = errno;
        aor_real.close(u);
        errno = e;
        return -1;
    }
    return u;
}

/* Moves the daemon connection u onto fd, keeping fd's flags and timeouts, and records
 * the original peer. before: fd's fstat when the hand-off began (NULL: unknown). Returns
 * 0, -1 with errno (fd untouched, u closed), or -3 (u closed) when fd is no longer the
 * socket it was: another thread closed the number during the hand-off and it may now be
 * someone else's file, which dup3 must not replace. */
static int take_over(int fd, int u, const struct sockaddr *addr, socklen_t len,
                     const struct stat *before) {
    int fl = aor_real.fcntl(fd, F_GETFL);
    int fdfl = aor_real.fcntl(fd, F_GETFD);
    struct timeval rcvto = {0, 0}, sndto = {0, 0};
    socklen_t tl = sizeof(rcvto);
    int e;
    aor_fdinfo info;
    memset(&info, 0, sizeof(info));

    if (fl < 0 || fdfl < 0 || aor_fdtab_reserve(fd) != 0)
        goto fail_close;
    info.domain = get_int_opt(fd, SOL_SOCKET, SO_DOMAIN, addr->sa_family);
    info.protocol = get_int_opt(fd, SOL_SOCKET, SO_PROTOCOL, IPPROTO_TCP);
    info.nodelay = 1; /* a Unix socket never delays small writes */
    info.keepidle = get_int_opt(fd, IPPROTO_TCP, TCP_KEEPIDLE, 7200);
    info.keepintvl = get_int_opt(fd, IPPROTO_TCP, TCP_KEEPINTVL, 75);
    info.keepcnt = get_int_opt(fd, IPPROTO_TCP, TCP_KEEPCNT, 9);
    /* getpeername reports the family's size, as the kernel does, whatever length the
     * program passed to connect (a sockaddr_storage's 128, RFC 2133's 24 for AF_INET6);
     * aor_ip_from_sockaddr has checked that len covers the address. */
    info.peerlen = addr->sa_family == AF_INET6 ? (socklen_t)sizeof(struct sockaddr_in6)
                                               : (socklen_t)sizeof(struct sockaddr_in);
    memcpy(&info.peer, addr, len < info.peerlen ? len : info.peerlen);
    /* The program's own timeouts carry over; the hand-off timeout does not. */
    if (aor_real.getsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &rcvto, &tl) != 0)
        memset(&rcvto, 0, sizeof(rcvto));
    tl = sizeof(sndto);
    if (aor_real.getsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &sndto, &tl) != 0)
        memset(&sndto, 0, sizeof(sndto));
    aor_real.setsockopt(u, SOL_SOCKET, SO_RCVTIMEO, &rcvto, sizeof(rcvto));
    aor_real.setsockopt(u, SOL_SOCKET, SO_SNDTIMEO, &sndto, sizeof(sndto));
    /* SO_KEEPALIVE reads back as set (libcurl and Node set it before connect; QA); a
     * Unix socket takes the flag, with no effect. */
    int keepalive = get_int_opt(fd, SOL_SOCKET, SO_KEEPALIVE, 0);
    if (keepalive)
        aor_real.setsockopt(u, SOL_SOCKET, SO_KEEPALIVE, &keepalive, sizeof(keepalive));
    if (fl & O_NONBLOCK) {
        if (aor_real.fcntl(u, F_SETFL, O_NONBLOCK) != 0)
            goto fail_close;
    }
    struct stat cur;
    if (before != NULL &&
        (fstat(fd, &cur) != 0 || cur.st_ino != before->st_ino || cur.st_dev != before->st_dev)) {
        aor_real.close(u);
        return -3; /* the narrow window left is dup3's own */
    }
    if (aor_real.dup3(u, fd, (fdfl & FD_CLOEXEC) ? O_CLOEXEC : 0) < 0)
        goto fail_close;
    aor_real.close(u);

    struct stat st;
    if (fstat(fd, &st) != 0)
        return 0; /* cannot happen for a valid fd; then the TCP view is not kept */
    aor_fdinfo_set_ino(&info, (unsigned long)st.st_ino);
    aor_fdtab_set(fd, &info);
    return 0;

fail_close:
    e = errno;
    aor_real.close(u);
    errno = e;
    return -1;
}

int aor_redirect_try(int fd, const struct sockaddr *addr, socklen_t len, const char *what) {
    int saved = errno;
    aor_ip ip;
    int port = 0;
    if (aor_ip_from_sockaddr(addr, len, &ip, &port) != 0) {
        errno = saved;
        return AOR_REDIRECT_PASS;
    }
    if (!aor_hosts_port_candidate(port)) {
        if (aor_env()->debug) {
            /* AOR_DEBUG explains each decision (spec §9): a provider's address on a port
             * that is not redirected is worth a line (QA: it said nothing). */
            char h[AOR_HOST_MAX + 1] = "", ipb[46] = "?";
            int r = aor_hosts_recognise(&ip, 443, h, sizeof(h), NULL);
            if (r != 0 && get_int_opt(fd, SOL_SOCKET, SO_TYPE, -1) == SOCK_STREAM) {
                aor_ip_format(&ip, ipb, sizeof(ipb));
                aor_debug("%s fd %d to %s port %d (%s%s%s): a provider address, but not on "
                          "443 or an intercepted port: direct",
                          what, fd, ipb, port, r == 1 ? h : "-", r == 3 ? ", published for " : "",
                          r == 3 ? h : "");
            }
        }
        errno = saved;
        return AOR_REDIRECT_PASS;
    }
    char host[AOR_HOST_MAX + 1] = "";
    char ipbuf[46] = "?";
    int synthetic = 0;
    int rec = aor_hosts_recognise(&ip, port, host, sizeof(host), &synthetic);
    if (rec == 0) {
        if (aor_env()->debug) {
            aor_ip_format(&ip, ipbuf, sizeof(ipbuf));
            aor_debug("%s fd %d to %s port %d: not an intercepted address, direct", what, fd, ipbuf,
                      port);
        }
        errno = saved;
        return AOR_REDIRECT_PASS;
    }
    aor_ip_format(&ip, ipbuf, sizeof(ipbuf));
    int type = get_int_opt(fd, SOL_SOCKET, SO_TYPE, -1);
    if (type != SOCK_STREAM) {
        aor_debug("%s fd %d to %s port %d: not a stream socket, untouched", what, fd, ipbuf, port);
        errno = saved;
        return AOR_REDIRECT_PASS; /* UDP (QUIC, glibc's address sorting), raw, not a socket */
    }
    int domain = get_int_opt(fd, SOL_SOCKET, SO_DOMAIN, -1);
    if (domain != addr->sa_family) {
        /* The kernel refuses it (an AF_INET socket given a sockaddr_in6, even a
         * v4-mapped one: EAFNOSUPPORT; AF_INET6 given a sockaddr_in: EINVAL; an AF_UNIX
         * socket: EINVAL): the real call gives the program its real error. */
        aor_debug("%s fd %d to %s port %d: address family %d does not match the socket's "
                  "(%d), untouched",
                  what, fd, ipbuf, port, (int)addr->sa_family, domain);
        errno = saved;
        return AOR_REDIRECT_PASS;
    }
    const char *busy = socket_busy(fd, domain, addr, len);
    if (busy != NULL) {
        /* The real call gives the kernel's answer (EISCONN, EALREADY, ENETUNREACH) and
         * the program keeps its own connection (QA: a second connect() on a direct
         * connection made while aord was down replaced it with a new one to aord). */
        aor_debug("%s fd %d to %s port %d: %s, untouched", what, fd, ipbuf, port, busy);
        errno = saved;
        return AOR_REDIRECT_PASS;
    }
    /* Only a name this program resolved to the address stands for itself (docs/shim.md);
     * a host known from the published set alone goes as "-": the daemon goes by the SNI
     * or the Host header (QA: a plain-HTTP site sharing a provider's address was routed
     * as that provider). */
    char shownbuf[AOR_HOST_MAX + 24];
    const char *shown = rec == 1 ? host : "-";
    if (rec == 3) {
        snprintf(shownbuf, sizeof shownbuf, "- (published for %s)", host);
        shown = shownbuf;
    }

    char pre[AOR_PREAMBLE_MAX + 1];
    int plen = aor_preamble_format(pre, sizeof(pre), rec == 1 ? host : NULL, ipbuf, port);
    if (plen < 0) {
        errno = saved;
        return AOR_REDIRECT_PASS;
    }
    struct stat before;
    int have_before = fstat(fd, &before) == 0;
    struct sockaddr_un name;
    socklen_t namelen = aor_inherit_name(
        &name, domain, get_int_opt(fd, SOL_SOCKET, SO_PROTOCOL, IPPROTO_TCP), addr, len);
    int u = daemon_connect(pre, (size_t)plen, &name, namelen);
    if (u >= 0) {
        int t = take_over(fd, u, addr, len, have_before ? &before : NULL);
        if (t == 0) {
            aor_debug("%s fd %d to %s port %d (%s): redirected to %s", what, fd, ipbuf, port, shown,
                      aor_env()->sock_path);
            errno = saved;
            return AOR_REDIRECT_DONE;
        }
        if (t == -3) {
            aor_debug("%s fd %d: closed by another thread during the hand-off, EBADF", what, fd);
            errno = EBADF;
            return AOR_REDIRECT_FAIL;
        }
        u = -2;
    }
    int err = errno;
    const aor_shim_env *env = aor_env();
    if (u == -2) {
        aor_debug("%s fd %d to %s port %d (%s): local error (%s), %s", what, fd, ipbuf, port, shown,
                  strerror(err), env->strict ? "failing (strict)" : "direct");
        if (env->strict) {
            errno = err;
            return AOR_REDIRECT_FAIL;
        }
        errno = saved;
        return AOR_REDIRECT_PASS;
    }
    if (env->strict) {
        aor_debug("%s fd %d to %s port %d (%s): daemon not reachable (%s), ECONNREFUSED "
                  "(AOR_STRICT)",
                  what, fd, ipbuf, port, shown, strerror(err));
        aor_warn_failopen(2);
        errno = ECONNREFUSED;
        return AOR_REDIRECT_FAIL;
    }
    aor_warn_failopen(synthetic);
    if (synthetic) {
        /* An offline fallback address is not routable: a direct connect cannot work. */
        aor_debug("%s fd %d to %s port %d (%s): daemon not reachable (%s) and the address is "
                  "an offline fallback, ECONNREFUSED",
                  what, fd, ipbuf, port, shown, strerror(err));
        errno = ECONNREFUSED;
        return AOR_REDIRECT_FAIL;
    }
    aor_debug("%s fd %d to %s port %d (%s): daemon not reachable (%s), direct (fail-open)", what,
              fd, ipbuf, port, shown, strerror(err));
    errno = saved;
    return AOR_REDIRECT_PASS;
}

/* 1 when fd is a live redirected fd (the entry checked against fstat). */
static int redirected(int fd) {
    return aor_fdtab_any() && aor_fdtab_marked(fd) && aor_fdtab_get_checked(fd, NULL);
}

/* A pointer in the first page, never mapped: the hooks do not read it and the real call
 * gives the program the kernel's EFAULT (QA: connect(fd, (void *)16, 16) crashed). An
 * arbitrary bad pointer still faults in the hook: there is no cheap check for it. */
static int low_pointer(const void *p) {
    return (uintptr_t)p < 4096;
}

/* After a real call on fd failed with errno err: 1 when fd turns out to be a redirected
 * connection inherited across exec that no hook has adopted yet (inherit.h), now
 * adopted, so the caller can answer as the TCP socket would. Only on error paths: a
 * connected Unix socket answers EINVAL to connect() with an IP address, EISCONN to a
 * send with an address (QA: after exec, connect() gave EINVAL instead of EISCONN). */
static int adopted_after(int fd, int err, int expect) {
    if (err != expect || !aor_shim_on() || aor_inherit_adopt(fd, NULL) == 0) {
        errno = err;
        return 0;
    }
    errno = err;
    return 1;
}

/* The real connect(); an inherited redirected fd is adopted on the way (EISCONN). */
static int real_connect(int fd, const struct sockaddr *addr, socklen_t len) {
    int rc = aor_real.connect(fd, addr, len);
    if (rc != 0 && adopted_after(fd, errno, EINVAL)) {
        aor_debug("connect fd %d: already connected through aor (before exec), EISCONN", fd);
        errno = EISCONN;
    }
    return rc;
}

AOR_EXPORT int connect(int fd, const struct sockaddr *addr, socklen_t len) {
    aor_shim_ensure();
    if (!aor_shim_on() || low_pointer(addr) || len < (socklen_t)sizeof(sa_family_t) ||
        (addr->sa_family != AF_INET && addr->sa_family != AF_INET6))
        return aor_real.connect(fd, addr, len);
    /* The common case in a few loads, no call (docs/performance.md, change 52): a port
     * no intercepted host uses, in a process that redirected nothing. sin_port and
     * sin6_port are both the 2 bytes at offset 2. */
    if (len >= 4 && !aor_fdtab_any() &&
        !aor_hosts_port_maybe(ntohs(((const struct sockaddr_in *)(const void *)addr)->sin_port)) &&
        !aor_env_debug) /* AOR_DEBUG explains every connect (aor_redirect_try) */
        return real_connect(fd, addr, len);
    if (redirected(fd)) {
        aor_debug("connect fd %d: already connected through aor, EISCONN", fd);
        errno = EISCONN;
        return -1;
    }
    int r = aor_redirect_try(fd, addr, len, "connect");
    if (r == AOR_REDIRECT_DONE)
        return 0;
    if (r == AOR_REDIRECT_FAIL)
        return -1;
    return real_connect(fd, addr, len);
}

/* The real sendto(); when it refuses an address on an inherited redirected fd (adopted
 * on the way), sent again without it, as a connected TCP socket ignores the address. */
static ssize_t real_sendto(int fd, const void *buf, size_t n, int flags,
                           const struct sockaddr *dest, socklen_t dlen) {
    ssize_t w = aor_real.sendto(fd, buf, n, flags, dest, dlen);
    if (w < 0 && dest != NULL && adopted_after(fd, errno, EISCONN))
        w = aor_real.sendto(fd, buf, n, flags & ~MSG_FASTOPEN, NULL, 0);
    return w;
}

AOR_EXPORT ssize_t sendto(int fd, const void *buf, size_t n, int flags, const struct sockaddr *dest,
                          socklen_t dlen) {
    aor_shim_ensure();
    if (!(flags & MSG_FASTOPEN) && (dest == NULL || !aor_fdtab_any()))
        return real_sendto(fd, buf, n, flags, dest, dlen);
    if (!aor_shim_on() || low_pointer(dest))
        return aor_real.sendto(fd, buf, n, flags, dest, dlen);
    if (redirected(fd)) /* a stream socket ignores the address; the Unix one would not */
        return aor_real.sendto(fd, buf, n, flags & ~MSG_FASTOPEN, NULL, 0);
    if (!(flags & MSG_FASTOPEN))
        return real_sendto(fd, buf, n, flags, dest, dlen);
    int r = aor_redirect_try(fd, dest, dlen, "sendto(MSG_FASTOPEN)");
    if (r == AOR_REDIRECT_FAIL)
        return -1;
    if (r == AOR_REDIRECT_DONE)
        return aor_real.sendto(fd, buf, n, flags & ~MSG_FASTOPEN, NULL, 0);
    return real_sendto(fd, buf, n, flags, dest, dlen);
}

/* sendmsg's counterpart of real_sendto. */
static ssize_t real_sendmsg(int fd, const struct msghdr *msg, int flags) {
    ssize_t w = aor_real.sendmsg(fd, msg, flags);
    /* only on EISCONN: a bad msg fails with EFAULT and is not read here */
    if (w < 0 && errno == EISCONN && !low_pointer(msg) && msg->msg_name != NULL &&
        adopted_after(fd, errno, EISCONN)) {
        struct msghdr copy = *msg;
        copy.msg_name = NULL;
        copy.msg_namelen = 0;
        w = aor_real.sendmsg(fd, &copy, flags & ~MSG_FASTOPEN);
    }
    return w;
}

AOR_EXPORT ssize_t sendmsg(int fd, const struct msghdr *msg, int flags) {
    aor_shim_ensure();
    /* The common case in a flag test and a load, msg not read: no MSG_FASTOPEN in a
     * process that redirected nothing (QA: every sendmsg read msg->msg_name, so a bad msg
     * crashed). With a redirected fd in the process, a destination is looked at (one in
     * the first page is the kernel's EFAULT), and fd checked once (one fstat). */
    if (low_pointer(msg) || (!(flags & MSG_FASTOPEN) && !aor_fdtab_any()) || !aor_shim_on())
        return real_sendmsg(fd, msg, flags);
    const void *dest = msg->msg_name;
    if (!(flags & MSG_FASTOPEN) && dest == NULL)
        return aor_real.sendmsg(fd, msg, flags);
    struct msghdr copy = *msg;
    copy.msg_name = NULL;
    copy.msg_namelen = 0;
    if (redirected(fd)) /* a stream socket ignores the address; the Unix one would not */
        return aor_real.sendmsg(fd, &copy, flags & ~MSG_FASTOPEN);
    if (!(flags & MSG_FASTOPEN) || dest == NULL || low_pointer(dest))
        return real_sendmsg(fd, msg, flags);
    int r = aor_redirect_try(fd, (const struct sockaddr *)dest, msg->msg_namelen,
                             "sendmsg(MSG_FASTOPEN)");
    if (r == AOR_REDIRECT_FAIL)
        return -1;
    if (r == AOR_REDIRECT_DONE)
        return aor_real.sendmsg(fd, &copy, flags & ~MSG_FASTOPEN);
    return real_sendmsg(fd, msg, flags);
}
