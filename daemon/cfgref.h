/* The configurations aord holds: the current one and the ones a reload (SIGHUP, spec
 * §9) replaced while requests in flight still used them. A request holds the config it
 * started with until it ends (its candidates index that config's providers and keys,
 * and its upstream attempts read that config's secrets); a replaced config is freed,
 * secrets wiped (aor_config_free), when its last holder lets go. Before this, every
 * replaced config was kept until exit (~2 KiB and the old secrets per reload).
 *
 * Not thread-safe: aord's requests and reloads all run on its event loop. */
#ifndef AOR_CFGREF_H
#define AOR_CFGREF_H

#include <stddef.h>

#include "config.h"

typedef struct aor_cfgref aor_cfgref;

/* A holder set whose current config is cfg (not NULL). Takes ownership of cfg on
 * success. Returns NULL with errno ENOMEM when out of memory (cfg is then still the
 * caller's). Free with aor_cfgref_free. */
aor_cfgref *aor_cfgref_new(aor_config *cfg);

/* The current config (owned by r; valid until it is replaced and, if held then, until
 * its last release). */
aor_config *aor_cfgref_current(const aor_cfgref *r);

/* The current config, held: it stays valid until aor_cfgref_release(r, returned), even
 * over aor_cfgref_replace. Cannot fail. */
const aor_config *aor_cfgref_hold(aor_cfgref *r);

/* Lets go of a config that aor_cfgref_hold returned. A replaced config whose last holder
 * this was is freed now. A cfg that r does not know (or NULL) is ignored. */
void aor_cfgref_release(aor_cfgref *r, const aor_config *cfg);

/* Makes next (not NULL; ownership passes to r on success) the current config. The one
 * it replaces is freed now when nothing holds it, else when its last holder releases it.
 * Returns 0, or -1 with errno ENOMEM (nothing changed; next is still the caller's). */
int aor_cfgref_replace(aor_cfgref *r, aor_config *next);

/* How many replaced configs are still held (kept for their holders). */
size_t aor_cfgref_retired(const aor_cfgref *r);

/* Frees every config r has, held or not, then r. NULL is a no-op. */
void aor_cfgref_free(aor_cfgref *r);

#endif
