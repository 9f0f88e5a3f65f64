/* libaor.so: the offline fallback answer (spec §2 step 3): when the real resolver fails
 * for an intercepted host and the daemon is up, the host gets a stable address from
 * 198.18.0.0/15 (RFC 2544 benchmarking range, never routed on the Internet), and the
 * connect() to it is redirected to the daemon, which knows the real host from the
 * preamble. Pure code, except aor_fallback_daemon_up (one non-blocking connect). */
#ifndef AOR_SHIM_FALLBACK_H
#define AOR_SHIM_FALLBACK_H

#include <netdb.h>
#include <stddef.h>

#include "ipaddr.h"

/* The fallback address of a host (normalised name). attempt 0 is the stable address;
 * attempts 1, 2, ... give other addresses of the range for when attempt 0 is already
 * taken by another host in this process. The result is in 198.18.0.1..198.19.255.254
 * and never ends in .0 or .255. Can't fail. */
void aor_fallback_ip(const char *host, unsigned attempt, aor_ip *out);

/* 1 when ip lies in 198.18.0.0/15. */
int aor_fallback_in_range(const aor_ip *ip);

/* Builds a getaddrinfo() answer for ip (AF_INET) honouring hints (NULL = defaults):
 * ai_family AF_UNSPEC/AF_INET give AF_INET; AF_INET6 with AI_V4MAPPED gives the
 * IPv4-mapped IPv6 address; socktype 0 gives STREAM/tcp and DGRAM/udp (and RAW when
 * service is NULL) like glibc; ai_protocol is honoured; AI_CANONNAME sets ai_canonname
 * of the first entry to host; service is a port number or a service name
 * (getservbyname_r; AI_NUMERICSERV allows numbers only).
 * On success returns 0 and *res (free with freeaddrinfo: each entry is one malloc block
 * holding the addrinfo and its sockaddr, ai_canonname a separate one, as glibc does).
 * Returns EAI_FAMILY (family not answerable here), EAI_SOCKTYPE, EAI_SERVICE,
 * EAI_NONAME (non-numeric service with AI_NUMERICSERV) or EAI_MEMORY. */
int aor_fallback_addrinfo(const char *host, const char *service, const struct addrinfo *hints,
                          const aor_ip *ip, struct addrinfo **res);

/* Fills ret as gethostbyname_r would for host -> ip (AF_INET), with every pointer into
 * buf (buflen bytes; no static storage). Returns 0, or ERANGE when buf is too small. */
int aor_fallback_hostent(const char *host, const aor_ip *ip, struct hostent *ret, char *buf,
                         size_t buflen);

/* 1 when the daemon is up (spec §2 step 3 "and the daemon is up"): a Unix stream socket
 * listening at path (NUL-ended) takes a connection now. A new non-blocking socket
 * connects (the real connect, never blocking) and is closed at once, so the shim keeps
 * no fd; aord drops a connection that ends before its first byte with a debug line
 * only. Up: the connect succeeded and the listener runs as this uid (SO_PEERCRED, as
 * the redirect checks), or the listener's queue is full (EAGAIN: a listener exists).
 * Not up: no file, a socket file left by a daemon that died (ECONNREFUSED), anything
 * that is not a socket, a path too long for sun_path, another user's listener, any
 * other error. Only for the resolver-failure path: it costs a socket, a connect and a
 * close. Keeps errno. Thread-safe. */
int aor_fallback_daemon_up(const char *path);

#endif
