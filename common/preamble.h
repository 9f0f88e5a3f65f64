/* The shim -> daemon preamble (spec §7): one line "AOR/1 <host|-> <ip> <port>\n".
 * Used by the shim (format) and the daemon (parse); libc only. */
#ifndef AOR_PREAMBLE_H
#define AOR_PREAMBLE_H

#include <stddef.h>

#define AOR_PREAMBLE_MAX 320 /* bytes, newline included; longer is malformed */
#define AOR_HOST_MAX 253     /* DNS name length limit */

typedef struct {
    char host[AOR_HOST_MAX + 1]; /* "" when the shim sent "-" */
    char ip[46];                 /* textual IPv4 or IPv6 (INET6_ADDRSTRLEN) */
    int port;                    /* 1..65535 */
} aor_preamble;

/* Parses a preamble from the first len bytes of buf (not NUL-terminated).
 * Returns the number of bytes it occupies (newline included) and fills *out;
 * 0 when no newline is there yet and len < AOR_PREAMBLE_MAX (need more bytes);
 * -1 when malformed (bad magic, bad host, ip not an address, port out of range, too
 * long); then *err (if not NULL) points to a static text naming what was wrong. */
int aor_preamble_parse(const char *buf, size_t len, aor_preamble *out, const char **err);

/* Writes "AOR/1 host ip port\n" into buf (host NULL or "" -> "-").
 * Returns the length written (without NUL), or -1 with errno=EINVAL (bad field) or
 * ENOSPC (buf too small; AOR_PREAMBLE_MAX+1 is always enough). Async-signal-safe-ish:
 * no allocation. */
int aor_preamble_format(char *buf, size_t buflen, const char *host, const char *ip, int port);

/* Parses a decimal port: the n bytes at s (no NUL needed), 1 to 5 digits, no sign or
 * space, value 1..65535. Returns the port, or -1 when it is anything else. Used for the
 * preamble's port field (spec §7) and for the ports of the shim's host list and of the
 * daemon's published address file (spec §2). */
int aor_preamble_port_parse(const char *s, size_t n);

#endif
