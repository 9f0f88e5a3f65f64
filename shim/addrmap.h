/* libaor.so: the per-process record of which addresses name resolution returned for an
 * intercepted host (spec §2 step 1, and the offline fallback of step 3).
 * Thread-safe (one mutex), bounded (oldest entries are replaced), no allocation after
 * the first record. */
#ifndef AOR_SHIM_ADDRMAP_H
#define AOR_SHIM_ADDRMAP_H

#include <stddef.h>

#include "ipaddr.h"

#define AOR_ADDRMAP_DEFAULT_CAP 512

typedef struct aor_addrmap aor_addrmap; /* opaque */

/* A new empty map holding at most cap addresses (cap >= 1). Entries are allocated on
 * the first record. Returns NULL on allocation failure. */
aor_addrmap *aor_addrmap_new(size_t cap);

/* Frees a map; NULL is fine. No other thread may use it any more. */
void aor_addrmap_free(aor_addrmap *m);

/* Records ip -> host (normalised name, at most 253 bytes). synthetic: the address came
 * from the offline fallback (198.18.0.0/15), not from a resolver. An address already
 * recorded for another host becomes ambiguous (looked up as host "-"). When full, the
 * oldest entry is replaced. Returns 0, or -1 with errno ENOMEM / EINVAL. */
int aor_addrmap_record(aor_addrmap *m, const aor_ip *ip, const char *host, int synthetic);

/* Looks ip up. Returns 1 and copies the host into host (hostlen bytes, 254 always
 * enough) when recorded for one host; 2 with host "" when ambiguous; 0 when not
 * recorded. *synthetic (may be NULL) says whether it came from the fallback. */
int aor_addrmap_lookup(aor_addrmap *m, const aor_ip *ip, char *host, size_t hostlen,
                       int *synthetic);

/* Number of recorded addresses (tests). */
size_t aor_addrmap_count(aor_addrmap *m);

/* pthread_atfork helpers: take the lock before fork, release it in parent and child. */
void aor_addrmap_lock(aor_addrmap *m);
void aor_addrmap_unlock(aor_addrmap *m);

#endif
