/* The address set the daemon publishes for the shim (spec §2 recognition step 2):
 * `<socket dir>/hosts`, written atomically (tmp + rename), mode 0644, format:
 *     aor-hosts 1
 *     h <host> <port>          an intercepted host name and the port to redirect
 *     a <ip> <port> <host>     an address the daemon resolved for that host
 * Hosts: the built-in provider hosts, every provider's base_url host and `intercept`
 * names (host names only; IP literals and localhost are not intercepted). Addresses are
 * resolved in a background thread (DNS may be slow or absent) and refreshed every
 * AOR_PUBLISH_REFRESH_S seconds. */
#ifndef AOR_PUBLISH_H
#define AOR_PUBLISH_H

#include "config.h"

#define AOR_PUBLISH_REFRESH_S 300

/* Writes the host lines now and starts the resolver thread (once). dir: the socket
 * directory. Returns 0 or -1 with errno (the daemon goes on without it). */
int aor_publish_start(const char *dir, const aor_config *cfg);

/* Replaces the host list after a config reload; the thread picks it up. */
int aor_publish_update(const aor_config *cfg);

/* 1 when host (lower case) is a built-in provider host, a provider's base_url host or
 * one of its `intercept` names: a host aord routes. */
int aor_publish_host_intercepted(const aor_config *cfg, const char *host);

#endif
