/* libaor.so: redirected connections inherited across exec are adopted into the table
 * (see inherit.h; the names are made and parsed in inherit_name.c). */
#include "inherit.h"

#include "env.h"
#include "real.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* 1 when fd is connected to this user's daemon: its peer is the daemon socket's path
 * and is served by this uid. The name alone proves nothing: any process can bind an
 * abstract "aor/1 ..." name and pass the socket over SCM_RIGHTS. */
static int peer_is_daemon(int fd) {
    struct sockaddr_un peer;
    socklen_t plen = sizeof peer;
    memset(&peer, 0, sizeof peer);
    if (aor_real.getpeername(fd, (struct sockaddr *)&peer, &plen) != 0 || plen > sizeof peer ||
        !aor_env_is_daemon_addr((const struct sockaddr *)&peer, plen))
        return 0;
    if (!aor_env_peer_is_user(fd, NULL)) {
        aor_debug("fd %d: named like a redirected connection but not served by this user's "
                  "daemon: left alone",
                  fd);
        return 0;
    }
    return 1;
}

int aor_inherit_adopt(int fd, aor_fdinfo *out) {
    if (!aor_shim_on() || fd < 0)
        return 0;
    int saved = errno;
    aor_fdinfo info;
    struct sockaddr_un sun;
    socklen_t len = sizeof sun;
    struct stat st;
    memset(&info, 0, sizeof info);
    int ok = aor_real.getsockname(fd, (struct sockaddr *)&sun, &len) == 0 &&
             aor_inherit_parse(&sun, len, &info) && peer_is_daemon(fd) && fstat(fd, &st) == 0 &&
             aor_fdtab_reserve(fd) == 0;
    if (ok) {
        /* What a fresh redirect reports for options the program has not set here (the
         * values set before exec are not known). */
        aor_fdinfo_set_ino(&info, (unsigned long)st.st_ino);
        info.nodelay = 1;
        info.keepidle = 7200;
        info.keepintvl = 75;
        info.keepcnt = 9;
        ok = aor_fdtab_set(fd, &info) == 0;
    }
    if (ok) {
        char ipb[INET6_ADDRSTRLEN] = "?";
        int port = info.domain == AF_INET6 ? ntohs(info.peer.in6.sin6_port)
                                           : ntohs(info.peer.in4.sin_port);
        inet_ntop(info.domain,
                  info.domain == AF_INET6 ? (const void *)&info.peer.in6.sin6_addr
                                          : (const void *)&info.peer.in4.sin_addr,
                  ipb, sizeof ipb);
        aor_debug("fd %d: a connection redirected before exec (to %s port %d): TCP view restored",
                  fd, ipb, port);
        if (out != NULL)
            *out = info;
    }
    errno = saved;
    return ok;
}
