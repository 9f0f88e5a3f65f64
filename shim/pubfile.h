/* libaor.so: the address set the daemon publishes next to its socket (spec §2 step 2).
 * Parsing only (pure); hosts.c loads and refreshes the live copy.
 *
 * File format (text, one record a line, written by aord atomically via rename):
 *     aor-hosts 1
 *     h <host> <port>          an intercepted host and the port to redirect
 *     a <ip> <port> <host>     an address the daemon resolved for that host
 * Blank lines and lines starting with '#' are skipped; other bad lines are ignored. */
#ifndef AOR_SHIM_PUBFILE_H
#define AOR_SHIM_PUBFILE_H

#include <stddef.h>

#include "hostlist.h"
#include "ipaddr.h"

#define AOR_PUBFILE_MAX_BYTES (1024 * 1024) /* larger files are ignored */
#define AOR_PUBFILE_MAX_ADDRS 8192          /* further "a" lines are ignored */

typedef struct aor_pubset aor_pubset; /* opaque, immutable once parsed */

/* Parses len bytes of a published file (no NUL needed). Returns a new set (free with
 * aor_pubset_free), or NULL with errno EINVAL (first line is not "aor-hosts 1", or len
 * over AOR_PUBFILE_MAX_BYTES) or ENOMEM. *nbad (may be NULL) counts ignored lines. */
aor_pubset *aor_pubset_parse(const char *buf, size_t len, int *nbad);

/* Frees a set; NULL is fine. */
void aor_pubset_free(aor_pubset *s);

/* The published hosts ("h" lines, plus hosts only named by "a" lines) with their ports.
 * Lives as long as the set. Never NULL for a parsed set. */
const aor_hostlist *aor_pubset_hosts(const aor_pubset *s);

/* Number of published addresses. */
size_t aor_pubset_addr_count(const aor_pubset *s);

/* Port of address entry i (for the redirect-port set). */
int aor_pubset_addr_port(const aor_pubset *s, size_t i);

/* Looks up a connect() destination: ip and port (host order). It matches when ip is
 * published and port is 443, the port of its "a" line or the port of its host.
 * Returns 1 and copies the host into host (hostlen bytes, 254 always enough) when one
 * host matches; 2 with host "" when the address belongs to several hosts; 0 when no
 * entry matches. s may be NULL (0). */
int aor_pubset_match(const aor_pubset *s, const aor_ip *ip, int port, char *host, size_t hostlen);

/* aor_pubset_match counting only the entries whose host is on only (AOR_HOSTS: the
 * whole list of hosts the shim intercepts, docs/shim.md); only NULL counts every entry
 * (= aor_pubset_match), an empty list none. 2 means several hosts of only share ip. */
int aor_pubset_match_only(const aor_pubset *s, const aor_ip *ip, int port, const aor_hostlist *only,
                          char *host, size_t hostlen);

#endif
