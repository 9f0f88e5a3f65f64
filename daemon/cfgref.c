/* The configurations aord holds (cfgref.h). */
#include "cfgref.h"

#include <errno.h>
#include <stdlib.h>

typedef struct {
    aor_config *cfg;
    size_t holds;
} held_cfg;

struct aor_cfgref {
    held_cfg cur;
    held_cfg *old; /* replaced configs that are still held */
    size_t nold, capold;
};

aor_cfgref *aor_cfgref_new(aor_config *cfg) {
    aor_cfgref *r = calloc(1, sizeof *r);
    if (!r) {
        errno = ENOMEM;
        return NULL;
    }
    r->cur.cfg = cfg;
    return r;
}

aor_config *aor_cfgref_current(const aor_cfgref *r) {
    return r->cur.cfg;
}

const aor_config *aor_cfgref_hold(aor_cfgref *r) {
    r->cur.holds++;
    return r->cur.cfg;
}

void aor_cfgref_release(aor_cfgref *r, const aor_config *cfg) {
    if (!r || !cfg)
        return;
    if (cfg == r->cur.cfg) {
        if (r->cur.holds > 0)
            r->cur.holds--;
        return;
    }
    for (size_t i = 0; i < r->nold; i++) {
        if (r->old[i].cfg != cfg)
            continue;
        if (--r->old[i].holds == 0) {
            aor_config_free(r->old[i].cfg);
            r->old[i] = r->old[--r->nold];
        }
        return;
    }
}

int aor_cfgref_replace(aor_cfgref *r, aor_config *next) {
    if (r->cur.holds > 0 && r->nold == r->capold) {
        size_t cap = r->capold ? r->capold * 2 : 4;
        held_cfg *n = realloc(r->old, cap * sizeof *n);
        if (!n) {
            errno = ENOMEM;
            return -1;
        }
        r->old = n;
        r->capold = cap;
    }
    if (r->cur.holds > 0)
        r->old[r->nold++] = r->cur;
    else
        aor_config_free(r->cur.cfg);
    r->cur.cfg = next;
    r->cur.holds = 0;
    return 0;
}

size_t aor_cfgref_retired(const aor_cfgref *r) {
    return r->nold;
}

void aor_cfgref_free(aor_cfgref *r) {
    if (!r)
        return;
    for (size_t i = 0; i < r->nold; i++)
        aor_config_free(r->old[i].cfg);
    free(r->old);
    aor_config_free(r->cur.cfg);
    free(r);
}
