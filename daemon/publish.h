/* The address set the daemon publishes for the shim (spec §2 recognition step 2):
 * `<socket dir>/hosts`, written atomically (tmp + rename), mode 0644, format:
 *     aor-hosts 1
 *     h <host> <port>          an intercepted host name and the port to redirect
 *     a <ip> <port> <host>     an address the daemon resolved for that host
 * Hosts: the built-in provider hosts, every provider's base_url host and `intercept`
 * names (host names only; IP literals and localhost are not intercepted). Addresses are
 * resolved in a background thread (DNS may be slow or absent) and refreshed every
 * AOR_PUBLISH_REFRESH_S seconds, and at once after a reload; a host whose look-up fails
 * keeps its last addresses, and a rewrite after a reload keeps those of the hosts still
 * listed. Every write (either thread) happens under one lock. At shutdown the file keeps
 * its host lines only (aor_publish_stop). A `hosts` file that is not aord's own (not a
 * regular file starting with "aor-hosts ") is never overwritten nor removed. */
#ifndef AOR_PUBLISH_H
#define AOR_PUBLISH_H

#include "config.h"

#define AOR_PUBLISH_REFRESH_S 300

/* Writes the host lines now and starts the resolver thread (once). dir: the socket
 * directory. Returns 0 or -1 with errno (the daemon goes on without it). */
int aor_publish_start(const char *dir, const aor_config *cfg);

/* Checks that <dir>/hosts is absent or an address set aord wrote (a regular file, not a
 * symbolic link, starting with "aor-hosts "), so aord may replace it. Returns 0, or -1
 * with a message naming the file in err (errlen bytes). Call before aor_publish_start. */
int aor_publish_check_dir(const char *dir, char *err, size_t errlen);

/* At aord's shutdown: when dir is the directory this process published to
 * (aor_publish_start) and <dir>/hosts is aord's address set (see aor_publish_check_dir),
 * rewrites it with its host lines only (the addresses dropped: they go stale, and another
 * service may hold one later), so that with aord down the shim still knows the configured
 * hosts by name and fails open with its warning, or fails with AOR_STRICT=1 (spec §2);
 * the file is not written again (until aor_publish_start). Anything else is left alone:
 * a file this process did not publish may be another running aord's (an aord that
 * failed to start must not touch it). Returns 1 when rewritten (or removed because it
 * could not be rewritten), 0 when there was nothing of this process's, -1 with errno on
 * an error. */
int aor_publish_stop(const char *dir);

/* Replaces the host list after a config reload and rewrites the file at once, with the
 * addresses already resolved for the hosts still listed; the thread then looks the new
 * list up. Returns 0, or -1 (ENOMEM, or the file could not be written). */
int aor_publish_update(const aor_config *cfg);

/* 1 when host (an SNI or preamble host, as the client sent it) is a built-in provider
 * host, a provider's base_url host or one of its `intercept` names: a host aord routes.
 * Compared as aor_config_provider_owns_host does: case-insensitive, one trailing dot
 * ignored. */
int aor_publish_host_intercepted(const aor_config *cfg, const char *host);

/* 1 when the published address set has ip (text form, as in a preamble) for host
 * (compared case-insensitively, one trailing dot ignored): the shim could have
 * recognised a connection to ip for host. 0 otherwise, also before the first lookup.
 * Thread-safe. For plain HTTP with preamble host "-", whose Host header aord takes for
 * the host only when it has that address (docs/shim.md "Pass-through"). */
int aor_publish_has_addr(const char *host, const char *ip);

#endif
