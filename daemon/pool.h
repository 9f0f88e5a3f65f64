/* Spare objects of one kind, kept for the next request instead of freed (issue 5: "no
 * per-request allocations that a pool can serve"; docs/performance.md). A request's
 * proxy, its parsed request and its upstream transfer are freed and allocated again for
 * every request; each keeps buffers (header memory, evbuffers) that the next one of the
 * same kind can use as they are. A pool is a bounded stack of such objects: taking one
 * is a few instructions, where malloc + free of a large or calloc'ed block and of its
 * buffers costs hundreds.
 *
 * Under AddressSanitizer, a kept object's bytes are poisoned until it is taken again, so
 * a use after "free" is still reported.
 *
 * Not thread-safe: one pool per thread (aord's requests all run on its event loop). */
#ifndef AOR_POOL_H
#define AOR_POOL_H

#include <stddef.h>

/* How many spare objects a pool keeps at most; more are freed by their owner. */
#define AOR_POOL_MAX 32

/* A pool. Zero-initialised it is empty and ready; it owns nothing by itself (the code
 * that keeps objects in it frees them with aor_pool_take until it returns NULL). */
typedef struct {
    void *spare[AOR_POOL_MAX];
    unsigned n;
} aor_pool;

/* Takes a spare object of size bytes out of pl (the size given to aor_pool_keep), with
 * its bytes as they were when kept. Returns NULL when pl is empty: the caller allocates.
 * The caller owns the object. Cannot fail otherwise. */
void *aor_pool_take(aor_pool *pl, size_t size);

/* Keeps obj (size bytes, the caller's, not NULL) in pl for a later aor_pool_take.
 * Returns 1 when kept (pl owns it now; its bytes must not be touched), 0 when pl is full
 * (the caller still owns obj and frees it). */
int aor_pool_keep(aor_pool *pl, void *obj, size_t size);

#if defined(__SANITIZE_ADDRESS__)
/* Marks bytes of a buffer a kept object holds as not to be touched (AddressSanitizer
 * reports an access) until aor_pool_unpoison; no-op in builds without it. mem may be
 * NULL when bytes is 0. */
void aor_pool_poison(const void *mem, size_t bytes);

/* Undoes aor_pool_poison for mem..bytes. */
void aor_pool_unpoison(const void *mem, size_t bytes);
#else
/* Without AddressSanitizer: nothing to mark (inline, so nothing is called). */
static inline void aor_pool_poison(const void *mem, size_t bytes) {
    (void)mem;
    (void)bytes;
}

static inline void aor_pool_unpoison(const void *mem, size_t bytes) {
    (void)mem;
    (void)bytes;
}
#endif

/* aor_pool_poison (poison != 0) or aor_pool_unpoison of mem..bytes. */
static inline void aor_pool_mark(const void *mem, size_t bytes, int poison) {
    if (poison)
        aor_pool_poison(mem, bytes);
    else
        aor_pool_unpoison(mem, bytes);
}

#endif
