/* libaor.so: redirected connections inherited across exec (see inherit.h). */
#include "inherit.h"

#include "env.h"
#include "real.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define NAME_PREFIX "aor/1 "

static atomic_uint name_seq;

socklen_t aor_inherit_name(struct sockaddr_un *sun, int domain, int protocol,
                           const struct sockaddr *peer, socklen_t peerlen) {
    char ip[INET6_ADDRSTRLEN];
    unsigned port, scope = 0;
    if (domain == AF_INET && peer->sa_family == AF_INET &&
        peerlen >= (socklen_t)sizeof(struct sockaddr_in)) {
        const struct sockaddr_in *in4 = (const struct sockaddr_in *)(const void *)peer;
        if (!inet_ntop(AF_INET, &in4->sin_addr, ip, sizeof ip))
            return 0;
        port = ntohs(in4->sin_port);
    } else if (domain == AF_INET6 && peer->sa_family == AF_INET6 &&
               peerlen >= (socklen_t)sizeof(struct sockaddr_in6)) {
        const struct sockaddr_in6 *in6 = (const struct sockaddr_in6 *)(const void *)peer;
        if (!inet_ntop(AF_INET6, &in6->sin6_addr, ip, sizeof ip))
            return 0;
        port = ntohs(in6->sin6_port);
        scope = in6->sin6_scope_id;
    } else {
        return 0;
    }
    memset(sun, 0, sizeof *sun);
    sun->sun_family = AF_UNIX;
    /* sun_path[0] stays 0: the abstract namespace (no file, gone with the socket). */
    int n = snprintf(sun->sun_path + 1, sizeof sun->sun_path - 1,
                     NAME_PREFIX "%ld.%u %d %d %s %u %u", (long)getpid(),
                     atomic_fetch_add(&name_seq, 1u), domain, protocol, ip, port, scope);
    if (n < 0 || (size_t)n >= sizeof sun->sun_path - 1)
        return 0;
    return (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 + (size_t)n);
}

int aor_inherit_parse(const struct sockaddr_un *sun, socklen_t len, aor_fdinfo *out) {
    size_t off = offsetof(struct sockaddr_un, sun_path);
    size_t plen = strlen(NAME_PREFIX);
    if (len <= off + 1 + plen || len > sizeof *sun || sun->sun_family != AF_UNIX ||
        sun->sun_path[0] != '\0' || memcmp(sun->sun_path + 1, NAME_PREFIX, plen) != 0)
        return 0;
    /* The name is not NUL-terminated: copy it into a string to parse. */
    char name[sizeof sun->sun_path];
    size_t nlen = len - off - 1;
    memcpy(name, sun->sun_path + 1, nlen);
    name[nlen] = '\0';
    long pid;
    unsigned seq, port, scope;
    int domain, protocol, used = 0;
    char ip[INET6_ADDRSTRLEN + 1];
    if (sscanf(name + plen, "%ld.%u %d %d %46s %u %u%n", &pid, &seq, &domain, &protocol, ip, &port,
               &scope, &used) != 7 ||
        (size_t)used != nlen - plen || port > 65535)
        return 0;
    memset(&out->peer, 0, sizeof out->peer);
    if (domain == AF_INET) {
        if (inet_pton(AF_INET, ip, &out->peer.in4.sin_addr) != 1)
            return 0;
        out->peer.in4.sin_family = AF_INET;
        out->peer.in4.sin_port = htons((uint16_t)port);
        out->peerlen = (socklen_t)sizeof(struct sockaddr_in);
    } else if (domain == AF_INET6) {
        if (inet_pton(AF_INET6, ip, &out->peer.in6.sin6_addr) != 1)
            return 0;
        out->peer.in6.sin6_family = AF_INET6;
        out->peer.in6.sin6_port = htons((uint16_t)port);
        out->peer.in6.sin6_scope_id = scope;
        out->peerlen = (socklen_t)sizeof(struct sockaddr_in6);
    } else {
        return 0;
    }
    out->domain = domain;
    out->protocol = protocol;
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
             aor_inherit_parse(&sun, len, &info) && fstat(fd, &st) == 0 &&
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
