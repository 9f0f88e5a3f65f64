#include "pool.h"

#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/asan_interface.h>
#define POISON(m, n) ASAN_POISON_MEMORY_REGION((m), (n))
#define UNPOISON(m, n) ASAN_UNPOISON_MEMORY_REGION((m), (n))
#else
#define POISON(m, n) ((void)(m), (void)(n))
#define UNPOISON(m, n) ((void)(m), (void)(n))
#endif

void *aor_pool_take(aor_pool *pl, size_t size) {
    if (pl->n == 0)
        return NULL;
    void *obj = pl->spare[--pl->n];
    UNPOISON(obj, size);
    return obj;
}

int aor_pool_keep(aor_pool *pl, void *obj, size_t size) {
    if (pl->n >= AOR_POOL_MAX)
        return 0;
    POISON(obj, size);
    pl->spare[pl->n++] = obj;
    return 1;
}

#if defined(__SANITIZE_ADDRESS__)
void aor_pool_poison(const void *mem, size_t bytes) {
    if (mem && bytes)
        POISON(mem, bytes);
}

void aor_pool_unpoison(const void *mem, size_t bytes) {
    if (mem && bytes)
        UNPOISON(mem, bytes);
}
#endif
