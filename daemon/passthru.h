/* Raw pass-through of a shim connection whose TLS SNI is not an intercepted host
 * (spec §2): the daemon connects to the original address and copies bytes both ways,
 * untouched, until either side closes. */
#ifndef AOR_PASSTHRU_H
#define AOR_PASSTHRU_H

#include "daemon.h"

/* Takes over fd (the client side; nothing of it consumed beyond the preamble) and
 * connects to ip:port (textual IPv4/IPv6). On any failure the client's fd is closed. */
void aor_passthru_start(aor_daemon *d, int fd, const char *ip, int port);

#endif
