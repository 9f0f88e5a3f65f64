/* libaor.so: offline fallback addresses and answers (see fallback.h). */
#include "fallback.h"

#include "env.h"
#include "real.h"

#include <errno.h>
#include <netinet/in.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

/* FNV-1a 32-bit; then a murmur3 finaliser so nearby names spread over the range. */
static uint32_t hash_host(const char *host, unsigned attempt) {
    uint32_t h = 2166136261u;
    for (const unsigned char *p = (const unsigned char *)host; *p != '\0'; p++) {
        h ^= *p;
        h *= 16777619u;
    }
    h += attempt * 0x9e3779b9u;
    h ^= h >> 16;
    h *= 0x85ebca6bu;
    h ^= h >> 13;
    h *= 0xc2b2ae35u;
    h ^= h >> 16;
    return h;
}

void aor_fallback_ip(const char *host, unsigned attempt, aor_ip *out) {
    /* 17 host bits: 198.18.0.0 + v, v in 1..0x1fffe, last octet not 0 or 255. */
    uint32_t v = hash_host(host != NULL ? host : "", attempt) % 0x1fffeu + 1u;
    if ((v & 0xffu) == 0)
        v |= 1u;
    else if ((v & 0xffu) == 0xffu)
        v -= 1u;
    memset(out, 0, sizeof(*out));
    out->family = AF_INET;
    out->bytes[0] = 198;
    out->bytes[1] = (unsigned char)(18u + (v >> 16));
    out->bytes[2] = (unsigned char)((v >> 8) & 0xffu);
    out->bytes[3] = (unsigned char)(v & 0xffu);
}

int aor_fallback_in_range(const aor_ip *ip) {
    return ip->family == AF_INET && ip->bytes[0] == 198 && (ip->bytes[1] & 0xfe) == 18;
}

/* One answer entry and its address in a single block, as glibc allocates them. */
struct fb_node {
    struct addrinfo ai;
    union {
        struct sockaddr_in in4;
        struct sockaddr_in6 in6;
    } sa;
};

static int service_port(const char *service, int flags, int socktype, int *port) {
    if (service == NULL || service[0] == '\0') {
        *port = 0;
        return 0;
    }
    char *end = NULL;
    errno = 0;
    long v = strtol(service, &end, 10);
    if (end != service && *end == '\0') {
        if (errno != 0 || v < 0 || v > 65535)
            return EAI_SERVICE;
        *port = (int)v;
        return 0;
    }
    if (flags & AI_NUMERICSERV)
        return EAI_NONAME;
    struct servent se, *found = NULL;
    char buf[1024];
    const char *proto = socktype == SOCK_DGRAM ? "udp" : "tcp";
    if (getservbyname_r(service, proto, &se, buf, sizeof(buf), &found) != 0 || found == NULL)
        return EAI_SERVICE;
    *port = ntohs((uint16_t)found->s_port);
    return 0;
}

int aor_fallback_addrinfo(const char *host, const char *service, const struct addrinfo *hints,
                          const aor_ip *ip, struct addrinfo **res) {
    static const struct {
        int socktype, protocol, needs_noservice;
    } combos[] = {{SOCK_STREAM, IPPROTO_TCP, 0}, {SOCK_DGRAM, IPPROTO_UDP, 0}, {SOCK_RAW, 0, 1}};
    int family = hints != NULL ? hints->ai_family : AF_UNSPEC;
    int flags = hints != NULL ? hints->ai_flags : (AI_V4MAPPED | AI_ADDRCONFIG);
    int socktype = hints != NULL ? hints->ai_socktype : 0;
    int protocol = hints != NULL ? hints->ai_protocol : 0;
    int mapped = 0;

    *res = NULL;
    if (family == AF_INET6 && (flags & AI_V4MAPPED))
        mapped = 1;
    else if (family != AF_UNSPEC && family != AF_INET)
        return EAI_FAMILY;
    if (socktype != 0 && socktype != SOCK_STREAM && socktype != SOCK_DGRAM && socktype != SOCK_RAW)
        return EAI_SOCKTYPE;
    int port = 0;
    int rc = service_port(service, flags, socktype, &port);
    if (rc != 0)
        return rc;

    struct addrinfo *head = NULL, **tail = &head;
    for (size_t i = 0; i < sizeof(combos) / sizeof(combos[0]); i++) {
        if (socktype != 0 && socktype != combos[i].socktype)
            continue;
        if (socktype == 0 && protocol != 0 && combos[i].protocol != 0 &&
            protocol != combos[i].protocol)
            continue;
        if (combos[i].needs_noservice && service != NULL)
            continue;
        struct fb_node *n = calloc(1, sizeof(*n));
        if (n == NULL)
            goto fail_nomem;
        n->ai.ai_flags = flags;
        n->ai.ai_socktype = combos[i].socktype;
        n->ai.ai_protocol = protocol != 0 ? protocol : combos[i].protocol;
        if (mapped) {
            n->ai.ai_family = AF_INET6;
            n->ai.ai_addrlen = sizeof(struct sockaddr_in6);
            n->sa.in6.sin6_family = AF_INET6;
            n->sa.in6.sin6_port = htons((uint16_t)port);
            n->sa.in6.sin6_addr.s6_addr[10] = 0xff;
            n->sa.in6.sin6_addr.s6_addr[11] = 0xff;
            memcpy(&n->sa.in6.sin6_addr.s6_addr[12], ip->bytes, 4);
        } else {
            n->ai.ai_family = AF_INET;
            n->ai.ai_addrlen = sizeof(struct sockaddr_in);
            n->sa.in4.sin_family = AF_INET;
            n->sa.in4.sin_port = htons((uint16_t)port);
            memcpy(&n->sa.in4.sin_addr, ip->bytes, 4);
        }
        n->ai.ai_addr = (struct sockaddr *)&n->sa;
        *tail = &n->ai;
        tail = &n->ai.ai_next;
    }
    if (head == NULL)
        return EAI_SOCKTYPE;
    if (flags & AI_CANONNAME) {
        head->ai_canonname = strdup(host);
        if (head->ai_canonname == NULL)
            goto fail_nomem;
    }
    *res = head;
    return 0;

fail_nomem:
    while (head != NULL) {
        struct addrinfo *next = head->ai_next;
        free(head->ai_canonname);
        free(head);
        head = next;
    }
    return EAI_MEMORY;
}

int aor_fallback_hostent(const char *host, const aor_ip *ip, struct hostent *ret, char *buf,
                         size_t buflen) {
    /* buf layout: aliases[1], addr_list[2] (pointer-aligned), 4 address bytes, name. */
    size_t hl = strlen(host);
    uintptr_t base = (uintptr_t)buf;
    size_t pad = (sizeof(char *) - base % sizeof(char *)) % sizeof(char *);
    size_t need = pad + 3 * sizeof(char *) + 4 + hl + 1;
    if (buf == NULL || buflen < need)
        return ERANGE;
    char **ptrs = (char **)(void *)(buf + pad);
    char *addr = buf + pad + 3 * sizeof(char *);
    char *name = addr + 4;
    memcpy(addr, ip->bytes, 4);
    memcpy(name, host, hl + 1);
    ptrs[0] = NULL; /* aliases */
    ptrs[1] = addr; /* addr_list[0] */
    ptrs[2] = NULL; /* addr_list[1] */
    memset(ret, 0, sizeof(*ret));
    ret->h_name = name;
    ret->h_aliases = &ptrs[0];
    ret->h_addrtype = AF_INET;
    ret->h_length = 4;
    ret->h_addr_list = &ptrs[1];
    return 0;
}

int aor_fallback_daemon_up(const char *path) {
    int saved = errno;
    int up = 0;
    struct sockaddr_un sun;
    size_t pl = path != NULL ? strlen(path) : 0;
    if (pl == 0 || pl >= sizeof(sun.sun_path))
        goto out;
    memset(&sun, 0, sizeof(sun));
    sun.sun_family = AF_UNIX;
    memcpy(sun.sun_path, path, pl + 1);
    int u = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (u < 0)
        goto out;
    int rc, tries = 0;
    do {
        rc = aor_real.connect(u, (struct sockaddr *)&sun, sizeof(sun));
    } while (rc != 0 && errno == EINTR && ++tries < 5);
    if (rc == 0) {
        up = aor_env_peer_is_user(u, NULL);
    } else {
        up = errno == EAGAIN || errno == EWOULDBLOCK; /* a listener, its queue full */
    }
    aor_real.close(u);
out:
    errno = saved;
    return up;
}
