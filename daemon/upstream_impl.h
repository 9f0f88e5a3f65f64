/* Internal to the upstream module: what both transfer backends share. Not for proxy.c;
 * it uses upstream.h only. */
#ifndef AOR_UPSTREAM_IMPL_H
#define AOR_UPSTREAM_IMPL_H

#include "upstream.h"

/* Which backend carries a transfer (docs/architecture.md, "Upstream"). */
enum { AOR_XFER_CURL = 1, AOR_XFER_H1 = 2 };

/* The first member of every backend's transfer struct, so an aor_xfer * can be handed
 * back to the backend that made it. */
struct aor_xfer {
    int backend;
};

#endif
