/* libaor.so: which names and addresses are intercepted (spec §2 "Recognising a provider
 * connection"). Combines the built-in list or AOR_HOSTS, the daemon-published file
 * (<socket dir>/hosts, re-checked at most once a second) and the per-process record of
 * resolved addresses. When AOR_HOSTS is set (even empty) it is the whole list of
 * intercepted hosts: published entries count only for hosts on it (spec §2 "AOR_HOSTS
 * overrides"; docs/shim.md). Thread-safe. */
#ifndef AOR_SHIM_HOSTS_H
#define AOR_SHIM_HOSTS_H

#include "ipaddr.h"
#include "tick.h"

#include <stdatomic.h>
#include <stddef.h>

/* Builds the static host list (AOR_HOSTS if set, even empty, else the built-in list)
 * and the redirect-port set (443 plus listed ports). Called once by aor_shim_init; a
 * second call (unit tests only, no other thread in the shim) replaces the list and
 * the record of resolved addresses (ports only accumulate). */
void aor_hosts_init(void);

/* 1 when name is an intercepted host (static list, or published file when AOR_HOSTS is
 * not set); then its
 * normalised form is written to norm (normlen bytes, 254 always enough) unless norm is
 * NULL (only the answer). May re-check the published file (at most once a second).
 * Most other names are turned away by aor_hosts_maybe's filter, first. */
int aor_hosts_intercepted(const char *name, char *norm, size_t normlen);

/* The name filter aor_hosts_intercepted applies first: 0 when name cannot be
 * intercepted (NULL, empty, too long, no intercepted host has its length, or a Bloom
 * filter of the intercepted hosts has not seen it), 1 when the host lists must decide
 * (an intercepted host, or rarely a false positive). No lock and no allocation on its
 * own: a length, a hash of the name and three bits (docs/performance.md, shim cost).
 * It first re-checks the published file when a second has passed since the last look
 * (that takes a lock and may read the file). */
int aor_hosts_maybe(const char *name);

/* Fast check for connect(): 1 when port can be a redirect port (443, an AOR_HOSTS port,
 * a published port). Lock-free; on a miss it may re-check the published file (a stat
 * at most once a second) and look again. */
int aor_hosts_port_candidate(int port);

/* The redirect ports as a bitmap (bit port of byte port / 8); written by hosts.c only. */
extern _Atomic unsigned char aor_hosts_ports[65536 / 8];

/* The connect hook's first look (inline, lock-free, no call): 0 when port is no redirect
 * port and the once-a-second look at the published file is not due (tick.h), so the
 * connection is surely not one to redirect; 1 when aor_redirect_try must look. */
static inline int aor_hosts_port_maybe(unsigned port) {
    if ((atomic_load_explicit(&aor_hosts_ports[(port & 0xffff) >> 3], memory_order_relaxed) >>
         (port & 7)) &
        1)
        return 1;
    return !aor_tick_quiet();
}

/* Recognises a connect() destination: in order the addresses this process resolved
 * for intercepted hosts (aor_hosts_record), then the published addresses (with
 * AOR_HOSTS set, only those of its hosts). The port must be 443 or the port listed for
 * the host.
 * Returns 1 with the host in host (hostlen bytes, 254 always enough) when this process
 * resolved that host to ip; 3 with the host when only the published set says so (one
 * host has ip there: the program may have looked up another name with that address, so
 * the preamble says "-" and the daemon goes by SNI / Host, QA); 2 when the address is
 * known but not its single host (host ""); 0 when not recognised.
 * *synthetic (may be NULL) is 1 when the address is an offline fallback address. */
int aor_hosts_recognise(const aor_ip *ip, int port, char *host, size_t hostlen, int *synthetic);

/* Records that resolving host (normalised) returned ip. Thread-safe; can't fail in a
 * way the caller must handle (a full table drops the oldest record). */
void aor_hosts_record(const aor_ip *ip, const char *host, int synthetic);

/* Picks the offline fallback address of host (normalised): the stable address of
 * aor_fallback_ip, or the next attempt when another host of this process already holds
 * it; records it (synthetic). Writes it to *out. Can't fail. */
void aor_hosts_fallback(const char *host, aor_ip *out);

/* Re-reads the published file at path when now_s (seconds, time() in the hooks) differs from the
 * last check and the file's identity (inode, size, mtime) changed. A missing or
 * malformed file leaves no published set. Returns 1 when a set is loaded afterwards,
 * 0 when not. Exposed for tests; hooks go through the functions above. */
int aor_hosts_refresh_from(const char *path, long now_s);

/* pthread_atfork helpers: lock every hosts lock before fork, unlock after. */
void aor_hosts_lock_all(void);
void aor_hosts_unlock_all(void);

#endif
