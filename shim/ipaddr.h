/* libaor.so: a compact IP address value (IPv4, or IPv6 with IPv4-mapped addresses folded
 * to IPv4) used as the key of every address table in the shim. Pure code. */
#ifndef AOR_SHIM_IPADDR_H
#define AOR_SHIM_IPADDR_H

#include <stddef.h>
#include <sys/socket.h>

typedef struct {
    unsigned char family;    /* AF_INET or AF_INET6 */
    unsigned char bytes[16]; /* network order; 4 used for AF_INET, rest zero */
} aor_ip;

/* Shortest AF_INET6 address Linux's connect takes: RFC 2133's sockaddr_in6, without
 * sin6_scope_id (the kernel's SIN6_LEN_RFC2133). */
#define AOR_SIN6_LEN_MIN 24

/* Reads family, address and port (host order) of an AF_INET / AF_INET6 sockaddr of len
 * bytes. An IPv4-mapped IPv6 address (::ffff:a.b.c.d) becomes AF_INET. port may be NULL.
 * Returns 0, or -1 (not INET/INET6, or len too short: under sizeof(struct sockaddr_in),
 * or AOR_SIN6_LEN_MIN for AF_INET6, as the kernel checks). */
int aor_ip_from_sockaddr(const struct sockaddr *sa, socklen_t len, aor_ip *ip, int *port);

/* Builds an aor_ip from raw address bytes (4 for AF_INET, 16 for AF_INET6), folding
 * IPv4-mapped addresses. Returns 0, or -1 for another family. */
int aor_ip_from_raw(int family, const void *raw, aor_ip *ip);

/* Parses textual IPv4/IPv6 (len bytes, no NUL needed, at most 45). Returns 0 or -1. */
int aor_ip_parse(const char *text, size_t len, aor_ip *ip);

/* Textual form into buf (46 bytes always enough). Returns 0 or -1 (ENOSPC). */
int aor_ip_format(const aor_ip *ip, char *buf, size_t buflen);

/* Total order (family, then bytes); 0 when equal. */
int aor_ip_cmp(const aor_ip *a, const aor_ip *b);

#endif
