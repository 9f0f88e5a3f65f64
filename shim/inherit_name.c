/* libaor.so: the abstract names of redirected connections (see inherit.h): made and
 * parsed here, without system calls beyond the clock (a fuzz target links this file
 * alone). */
#include "inherit.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define NAME_PREFIX "aor/1 "

static atomic_uint name_seq;
static atomic_int name_seq_seeded;

/* The next sequence number. It starts at a value taken from the clock, not at 0: a
 * program that execs keeps its pid, and a name its fds inherited from the earlier image
 * still holds "<pid>.<n>" (a bind to it would fail with EADDRINUSE). */
static unsigned next_seq(void) {
    if (!atomic_load_explicit(&name_seq_seeded, memory_order_acquire)) {
        struct timespec ts;
        unsigned seed = 0;
        if (clock_gettime(CLOCK_MONOTONIC, &ts) == 0)
            seed = (unsigned)ts.tv_nsec ^ ((unsigned)ts.tv_sec << 20);
        unsigned zero = 0;
        atomic_compare_exchange_strong(&name_seq, &zero, seed);
        atomic_store_explicit(&name_seq_seeded, 1, memory_order_release);
    }
    return atomic_fetch_add(&name_seq, 1u);
}

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
    int n =
        snprintf(sun->sun_path + 1, sizeof sun->sun_path - 1, NAME_PREFIX "%ld.%u %d %d %s %u %u",
                 (long)getpid(), next_seq(), domain, protocol, ip, port, scope);
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
