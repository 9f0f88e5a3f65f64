/* libaor.so: the program's view of a redirected fd stays a TCP socket (spec §2):
 * getpeername gives the original address, getsockname a loopback address of the same
 * family, getsockopt/setsockopt at IPPROTO_TCP/IP/IPV6 succeed with plausible values
 * (setsockopt refuses what a TCP socket refuses for its arguments: EINVAL, EFAULT,
 * ENOPROTOOPT for another level), SO_DOMAIN/SO_PROTOCOL/SO_TYPE report the original
 * socket. Other fds pass through after one atomic load; when the real call shows an
 * AF_UNIX socket where the program expects TCP, the fd may be a redirected connection
 * inherited across exec, which inherit.c adopts into the table. */
#include "env.h"
#include "fdtab.h"
#include "inherit.h"
#include "real.h"

#include <errno.h>
#include <netinet/in.h>
#include <netinet/ip.h>
#include <netinet/tcp.h>
#include <stddef.h>
#include <string.h>
#include <sys/un.h>

/* Fills *out when fd is a live redirected fd. */
static int view_of(int fd, aor_fdinfo *out) {
    return aor_fdtab_any() && aor_fdtab_marked(fd) && aor_fdtab_get_checked(fd, out);
}

/* Copies an answer of size bytes the way the kernel does: at most *len bytes, *len
 * set to what was copied. */
static int answer(void *val, socklen_t *len, const void *data, size_t size) {
    if (val == NULL || len == NULL) {
        errno = EFAULT;
        return -1;
    }
    if ((int)*len < 0) {
        errno = EINVAL;
        return -1;
    }
    size_t n = (size_t)*len < size ? (size_t)*len : size;
    memcpy(val, data, n);
    *len = (socklen_t)n;
    return 0;
}

static int answer_int(void *val, socklen_t *len, int v) {
    return answer(val, len, &v, sizeof(v));
}

/* After a real getpeername (self 0) or getsockname (self 1) that succeeded with asked
 * bytes of room: 1 when it showed an AF_UNIX socket that is a redirected connection
 * inherited across exec, now adopted (*info filled, *len restored for the view's
 * answer). Without a system call for the usual Unix sockets: an unnamed peer (a
 * socketpair), a peer that is not the daemon socket, or an own name that is not the
 * shim's, when the address was returned whole. */
static int unix_adopted(int fd, int self, int rc, const struct sockaddr *addr, socklen_t *len,
                        socklen_t asked, aor_fdinfo *info) {
    if (rc != 0 || addr == NULL || len == NULL || asked < (socklen_t)sizeof(sa_family_t) ||
        addr->sa_family != AF_UNIX)
        return 0;
    const size_t path_off = offsetof(struct sockaddr_un, sun_path);
    if (!self && *len <= path_off)
        return 0; /* the peer has no name: not the daemon's socket */
    if (!self && *len <= asked && !aor_env_is_daemon_addr(addr, *len))
        return 0; /* another server's socket (D-Bus, X11, ...) */
    if (self && *len <= asked) {
        aor_fdinfo probe;
        if (!aor_inherit_parse((const struct sockaddr_un *)(const void *)addr, *len, &probe))
            return 0;
    }
    if (!aor_inherit_adopt(fd, info))
        return 0;
    *len = asked;
    return 1;
}

AOR_EXPORT int getpeername(int fd, struct sockaddr *addr, socklen_t *len) {
    aor_fdinfo info;
    aor_shim_ensure();
    if (!view_of(fd, &info)) {
        socklen_t asked = len != NULL ? *len : 0;
        int rc = aor_real.getpeername(fd, addr, len);
        if (!unix_adopted(fd, 0, rc, addr, len, asked, &info))
            return rc;
    }
    if (addr == NULL || len == NULL) {
        errno = EFAULT;
        return -1;
    }
    size_t n = *len < info.peerlen ? *len : info.peerlen;
    memcpy(addr, &info.peer, n);
    *len = info.peerlen; /* the full size, as the kernel reports it */
    return 0;
}

AOR_EXPORT int getsockname(int fd, struct sockaddr *addr, socklen_t *len) {
    aor_fdinfo info;
    aor_shim_ensure();
    if (!view_of(fd, &info)) {
        socklen_t asked = len != NULL ? *len : 0;
        int rc = aor_real.getsockname(fd, addr, len);
        if (!unix_adopted(fd, 1, rc, addr, len, asked, &info))
            return rc;
    }
    if (addr == NULL || len == NULL) {
        errno = EFAULT;
        return -1;
    }
    union {
        struct sockaddr_in in4;
        struct sockaddr_in6 in6;
    } me;
    size_t size;
    memset(&me, 0, sizeof(me));
    if (info.domain == AF_INET6) {
        me.in6.sin6_family = AF_INET6;
        me.in6.sin6_port = htons((uint16_t)info.local_port);
        me.in6.sin6_addr = in6addr_loopback;
        size = sizeof(me.in6);
    } else {
        me.in4.sin_family = AF_INET;
        me.in4.sin_port = htons((uint16_t)info.local_port);
        me.in4.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        size = sizeof(me.in4);
    }
    size_t n = *len < size ? *len : size;
    memcpy(addr, &me, n);
    *len = (socklen_t)size;
    return 0;
}

static int tcp_opt(const aor_fdinfo *info, int opt, void *val, socklen_t *len) {
    switch (opt) {
    case TCP_NODELAY:
        return answer_int(val, len, info->nodelay);
    case TCP_KEEPIDLE:
        return answer_int(val, len, info->keepidle);
    case TCP_KEEPINTVL:
        return answer_int(val, len, info->keepintvl);
    case TCP_KEEPCNT:
        return answer_int(val, len, info->keepcnt);
    case TCP_MAXSEG:
        return answer_int(val, len, info->domain == AF_INET6 ? 1428 : 1448);
    case TCP_SYNCNT:
        return answer_int(val, len, 6);
    case TCP_QUICKACK:
        return answer_int(val, len, 1);
    case TCP_INFO: {
        struct tcp_info ti;
        memset(&ti, 0, sizeof(ti));
        ti.tcpi_state = TCP_ESTABLISHED;
        ti.tcpi_snd_mss = info->domain == AF_INET6 ? 1428 : 1448;
        ti.tcpi_rcv_mss = ti.tcpi_snd_mss;
        ti.tcpi_pmtu = 65535;
        ti.tcpi_snd_cwnd = 10;
        ti.tcpi_rtt = 50;
        ti.tcpi_rttvar = 25;
        return answer(val, len, &ti, sizeof(ti));
    }
    case TCP_CONGESTION: {
        static const char name[16] = "cubic";
        return answer(val, len, name, sizeof(name));
    }
    default:
        return answer_int(val, len, 0);
    }
}

static int ip_opt(int level, int opt, void *val, socklen_t *len) {
    if (level == IPPROTO_IP && opt == IP_TTL)
        return answer_int(val, len, 64);
    if (level == IPPROTO_IPV6 && opt == IPV6_UNICAST_HOPS)
        return answer_int(val, len, 64);
    return answer_int(val, len, 0); /* IP_TOS, IPV6_V6ONLY, IPV6_TCLASS, ... */
}

/* After a real getsockopt that did not go through the view: 1 when its answer shows an
 * AF_UNIX socket where the program expects TCP (SO_DOMAIN AF_UNIX, SO_PROTOCOL 0, a
 * TCP/IP-level option refused) and the fd is a redirected connection inherited across
 * exec, now adopted (*info filled; errno and *len restored for the view's answer). */
static int opt_adopted(int fd, int level, int opt, int rc, int saved, const void *val,
                       socklen_t *len, socklen_t asked, aor_fdinfo *info) {
    int hint;
    if (level == SOL_SOCKET) {
        int v;
        if (rc != 0 || (opt != SO_DOMAIN && opt != SO_PROTOCOL) || val == NULL || len == NULL ||
            *len != (socklen_t)sizeof(v))
            return 0;
        memcpy(&v, val, sizeof(v));
        hint = v == (opt == SO_DOMAIN ? AF_UNIX : 0);
    } else {
        /* what an AF_UNIX socket answers at a TCP/IP level; not EBADF, ENOTSOCK, EFAULT,
         * EINVAL (no socket, or bad arguments: nothing to adopt) */
        hint = rc != 0 && (errno == EOPNOTSUPP || errno == ENOPROTOOPT);
    }
    if (!hint || !aor_inherit_adopt(fd, info))
        return 0;
    errno = saved;
    if (len != NULL)
        *len = asked;
    return 1;
}

AOR_EXPORT int getsockopt(int fd, int level, int opt, void *val, socklen_t *len) {
    aor_fdinfo info;
    aor_shim_ensure();
    if (level != SOL_SOCKET && level != IPPROTO_TCP && level != IPPROTO_IP && level != IPPROTO_IPV6)
        return aor_real.getsockopt(fd, level, opt, val, len);
    if (!aor_fdtab_any() || !aor_fdtab_marked(fd) || !aor_fdtab_get_checked(fd, &info)) {
        int saved = errno;
        socklen_t asked = len != NULL ? *len : 0;
        int rc = aor_real.getsockopt(fd, level, opt, val, len);
        if (!opt_adopted(fd, level, opt, rc, saved, val, len, asked, &info))
            return rc;
    }
    if (level == SOL_SOCKET) {
        switch (opt) {
        case SO_DOMAIN:
            return answer_int(val, len, info.domain);
        case SO_PROTOCOL:
            return answer_int(val, len, info.protocol);
        case SO_TYPE:
            return answer_int(val, len, SOCK_STREAM);
        default:
            return aor_real.getsockopt(fd, level, opt, val, len);
        }
    }
    if (level == IPPROTO_TCP)
        return tcp_opt(&info, opt, val, len);
    return ip_opt(level, opt, val, len);
}

/* 1 for the IPPROTO_IPV6 options Linux reads as an int (do_ipv6_setsockopt refuses
 * a shorter optlen with EINVAL); the common ones. */
static int ipv6_int_opt(int opt) {
    switch (opt) {
    case IPV6_TCLASS:
    case IPV6_RECVTCLASS:
    case IPV6_UNICAST_HOPS:
    case IPV6_MULTICAST_HOPS:
    case IPV6_MULTICAST_LOOP:
    case IPV6_MULTICAST_IF:
    case IPV6_MTU_DISCOVER:
    case IPV6_MTU:
    case IPV6_RECVERR:
    case IPV6_RECVPKTINFO:
    case IPV6_RECVHOPLIMIT:
    case IPV6_DONTFRAG:
    case IPV6_FREEBIND:
    case IPV6_TRANSPARENT:
    case IPV6_MINHOPCOUNT:
    case IPV6_AUTOFLOWLABEL:
    case IPV6_ADDR_PREFERENCES:
        return 1;
    default:
        return 0;
    }
}

/* The answer a connected TCP socket of domain gives to setsockopt(level, opt, val, len)
 * at IPPROTO_TCP/IP/IPV6, as far as the arguments decide it (Linux do_tcp_setsockopt,
 * do_ip_setsockopt, do_ipv6_setsockopt): 0 when accepted, else the errno. */
static int setopt_error(int domain, int level, int opt, const void *val, socklen_t len) {
    if (level == IPPROTO_TCP) {
        if (opt == TCP_CONGESTION || opt == TCP_ULP) /* names: at least one byte */
            return len < 1 ? EINVAL : val == NULL ? EFAULT : 0;
        /* every other option is read as an int first */
        return len < (socklen_t)sizeof(int) ? EINVAL : val == NULL ? EFAULT : 0;
    }
    if (level == IPPROTO_IP) /* int or char values; a NULL pointer faults when read */
        return val == NULL && len > 0 ? EFAULT : 0;
    /* IPPROTO_IPV6: only an IPv6 socket has it (an AF_INET one says ENOPROTOOPT);
     * IPV6_V6ONLY cannot change on a connected socket; a NULL value reads as 0. */
    if (domain != AF_INET6)
        return ENOPROTOOPT;
    if (opt == IPV6_V6ONLY)
        return EINVAL;
    return ipv6_int_opt(opt) && len < (socklen_t)sizeof(int) ? EINVAL : 0;
}

AOR_EXPORT int setsockopt(int fd, int level, int opt, const void *val, socklen_t len) {
    aor_fdinfo info;
    aor_shim_ensure();
    if (!aor_fdtab_any() || !aor_fdtab_marked(fd) || !aor_fdtab_get_checked(fd, &info)) {
        int saved = errno;
        int rc = aor_real.setsockopt(fd, level, opt, val, len);
        /* A TCP/IP-level option refused: an AF_UNIX socket, perhaps a redirected
         * connection inherited across exec (then adopted and answered as TCP). */
        if (rc == 0 || (level != IPPROTO_TCP && level != IPPROTO_IP && level != IPPROTO_IPV6) ||
            (errno != EOPNOTSUPP && errno != ENOPROTOOPT) || !aor_inherit_adopt(fd, &info))
            return rc;
        errno = saved;
    }
    if (level == SOL_SOCKET) {
        int saved = errno;
        int rc = aor_real.setsockopt(fd, level, opt, val, len);
        if (rc != 0 && (errno == ENOPROTOOPT || errno == EOPNOTSUPP)) {
            errno = saved; /* a TCP-only socket option: accepted, no effect */
            return 0;
        }
        return rc;
    }
    if (level != IPPROTO_TCP && level != IPPROTO_IP && level != IPPROTO_IPV6) {
        errno = ENOPROTOOPT; /* what TCP says; the Unix socket would say EOPNOTSUPP */
        return -1;
    }
    int err = setopt_error(info.domain, level, opt, val, len);
    if (err != 0) {
        errno = err;
        return -1;
    }
    if (level == IPPROTO_TCP && val != NULL && len >= (socklen_t)sizeof(int)) {
        int v;
        memcpy(&v, val, sizeof(v));
        aor_fdtab_set_tcpopt(fd, opt, v);
    }
    return 0;
}
