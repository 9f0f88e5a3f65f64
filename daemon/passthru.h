/* Raw pass-through of a shim connection whose TLS SNI (or plain-HTTP host) is not an
 * intercepted host (spec §2): the daemon connects to the original address and copies
 * bytes both ways, untouched. A side's end of sending (EOF) is passed on as a half-close
 * (shutdown SHUT_WR) once its bytes are written, and the other direction stays open
 * until its sender ends too; an error on either side closes both once the bytes queued
 * toward the surviving side are written. */
#ifndef AOR_PASSTHRU_H
#define AOR_PASSTHRU_H

#include "daemon.h"

/* Takes over fd (the client side; nothing of it consumed beyond the preamble) and
 * connects to ip:port (textual IPv4/IPv6). On any failure the client's fd is closed. */
void aor_passthru_start(aor_daemon *d, int fd, const char *ip, int port);

/* Closes every pass-through connection (both sides) now: the end of aord's shutdown.
 * A graceful stop does not wait for them (they are opaque: an idle tunnel would hold
 * every stop for the whole drain). */
void aor_passthru_close_all(void);

#endif
