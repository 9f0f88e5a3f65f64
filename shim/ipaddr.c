/* libaor.so: compact IP address values (see ipaddr.h). */
#include "ipaddr.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <string.h>

static const unsigned char v4mapped_prefix[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};

int aor_ip_from_raw(int family, const void *raw, aor_ip *ip) {
    memset(ip, 0, sizeof(*ip));
    if (family == AF_INET) {
        ip->family = AF_INET;
        memcpy(ip->bytes, raw, 4);
        return 0;
    }
    if (family == AF_INET6) {
        const unsigned char *b = raw;
        if (memcmp(b, v4mapped_prefix, sizeof(v4mapped_prefix)) == 0) {
            ip->family = AF_INET;
            memcpy(ip->bytes, b + 12, 4);
        } else {
            ip->family = AF_INET6;
            memcpy(ip->bytes, b, 16);
        }
        return 0;
    }
    return -1;
}

int aor_ip_from_sockaddr(const struct sockaddr *sa, socklen_t len, aor_ip *ip, int *port) {
    if (sa == NULL || len < (socklen_t)sizeof(sa_family_t))
        return -1;
    if (sa->sa_family == AF_INET && len >= (socklen_t)sizeof(struct sockaddr_in)) {
        struct sockaddr_in sin;
        memcpy(&sin, sa, sizeof(sin));
        if (port != NULL)
            *port = ntohs(sin.sin_port);
        return aor_ip_from_raw(AF_INET, &sin.sin_addr, ip);
    }
    /* Linux takes an AF_INET6 address without sin6_scope_id (RFC 2133's 24 bytes). */
    if (sa->sa_family == AF_INET6 && len >= (socklen_t)AOR_SIN6_LEN_MIN) {
        struct sockaddr_in6 sin6;
        memset(&sin6, 0, sizeof(sin6));
        memcpy(&sin6, sa, len < (socklen_t)sizeof(sin6) ? len : (socklen_t)sizeof(sin6));
        if (port != NULL)
            *port = ntohs(sin6.sin6_port);
        return aor_ip_from_raw(AF_INET6, &sin6.sin6_addr, ip);
    }
    return -1;
}

int aor_ip_parse(const char *text, size_t len, aor_ip *ip) {
    char tmp[46];
    unsigned char raw[16];
    if (text == NULL || len == 0 || len >= sizeof(tmp))
        return -1;
    memcpy(tmp, text, len);
    tmp[len] = '\0';
    if (inet_pton(AF_INET, tmp, raw) == 1)
        return aor_ip_from_raw(AF_INET, raw, ip);
    if (inet_pton(AF_INET6, tmp, raw) == 1)
        return aor_ip_from_raw(AF_INET6, raw, ip);
    return -1;
}

int aor_ip_format(const aor_ip *ip, char *buf, size_t buflen) {
    if (inet_ntop(ip->family, ip->bytes, buf, (socklen_t)buflen) == NULL)
        return -1;
    return 0;
}

int aor_ip_cmp(const aor_ip *a, const aor_ip *b) {
    if (a->family != b->family)
        return a->family < b->family ? -1 : 1;
    return memcmp(a->bytes, b->bytes, sizeof(a->bytes));
}
