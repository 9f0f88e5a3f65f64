/* SHA-256 of client credentials over OpenSSL EVP (spec §5.1) and the XXH3 tie-break hash
 * (§5.2). */
#include "hash.h"

#include <openssl/evp.h>
#define XXH_INLINE_ALL /* header-only: no library to map at run time */
#include <xxhash.h>

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The digest object, fetched once (an explicit fetch avoids OpenSSL 3's per-call implicit
 * fetch on the routing path). Falls back to the legacy static object if the fetch fails. */
static EVP_MD *fetched_md;
static pthread_once_t md_once = PTHREAD_ONCE_INIT;

static void fetch_md(void) {
    fetched_md = EVP_MD_fetch(NULL, "SHA256", NULL);
}

static const EVP_MD *sha256_md(void) {
    pthread_once(&md_once, fetch_md);
    return fetched_md != NULL ? fetched_md : EVP_sha256();
}

/* SHA-256 can only fail on allocation failure inside libcrypto; the contract says "can't
 * fail", so that is fatal (daemon side only, never in the shim). */
static void hash_die(void) {
    fputs("aor: SHA-256 failed in libcrypto (out of memory)\n", stderr);
    abort();
}

/* Digest contexts kept per thread, reused: EVP_MD_CTX_new/free on every hash was a third
 * of the cost of hashing a short string, and the daemon hashes on every request (client
 * identity; docs/performance.md). CTX_WORK is the one every hash runs in. Freed at thread
 * exit. */
enum { CTX_WORK, CTX_SLOTS };
static pthread_key_t ctx_keys[CTX_SLOTS];
static int ctx_keys_ok;
static pthread_once_t ctx_once = PTHREAD_ONCE_INIT;

static void free_ctx(void *ctx) {
    EVP_MD_CTX_free(ctx);
}

static void make_ctx_keys(void) {
    for (int i = 0; i < CTX_SLOTS; i++) {
        if (pthread_key_create(&ctx_keys[i], free_ctx) != 0) {
            while (i-- > 0)
                pthread_key_delete(ctx_keys[i]);
            return;
        }
    }
    ctx_keys_ok = 1;
}

/* The calling thread's context in slot, or NULL when none can be kept (then the caller
 * makes a fresh one). */
static EVP_MD_CTX *thread_ctx(int slot) {
    pthread_once(&ctx_once, make_ctx_keys);
    if (!ctx_keys_ok)
        return NULL;
    EVP_MD_CTX *ctx = pthread_getspecific(ctx_keys[slot]);
    if (ctx == NULL) {
        ctx = EVP_MD_CTX_new();
        if (ctx != NULL && pthread_setspecific(ctx_keys[slot], ctx) != 0) {
            EVP_MD_CTX_free(ctx);
            ctx = NULL;
        }
    }
    return ctx;
}

static void sha256_parts(const void *const *parts, const size_t *lens, size_t nparts,
                         unsigned char digest[32]) {
    EVP_MD_CTX *kept = thread_ctx(CTX_WORK);
    EVP_MD_CTX *ctx = kept != NULL ? kept : EVP_MD_CTX_new();
    unsigned int dlen = 0;
    if (ctx == NULL)
        hash_die();
    if (EVP_DigestInit_ex(ctx, sha256_md(), NULL) != 1)
        goto fail_ctx;
    for (size_t i = 0; i < nparts; i++) {
        if (EVP_DigestUpdate(ctx, parts[i], lens[i]) != 1)
            goto fail_ctx;
    }
    if (EVP_DigestFinal_ex(ctx, digest, &dlen) != 1 || dlen != 32)
        goto fail_ctx;
    if (kept == NULL)
        EVP_MD_CTX_free(ctx);
    return;
fail_ctx:
    if (kept == NULL)
        EVP_MD_CTX_free(ctx);
    hash_die();
}

void aor_hash_sha256_hex(const void *data, size_t len, char out[65]) {
    static const char hex[] = "0123456789abcdef";
    unsigned char digest[32];
    const void *parts[1] = {data != NULL ? data : ""};
    size_t lens[1] = {data != NULL ? len : 0};

    sha256_parts(parts, lens, 1, digest);
    for (size_t i = 0; i < 32; i++) {
        out[2 * i] = hex[digest[i] >> 4];
        out[2 * i + 1] = hex[digest[i] & 0x0f];
    }
    out[64] = '\0';
}

/* The tie-break hash (§5.2) needs no cryptographic strength, only a stable, well-spread
 * order per client: XXH3-64 (libxxhash, header-only and inlined as in map.c): tens of ns
 * for a 64-digit client id and a key name, where SHA-256 through EVP took ~350 ns, on
 * every request of a user with two keys of equal priority (docs/performance.md). */
#define PAIR_STACK 256 /* a || 0x00 || b up to this many bytes: one-shot from the stack */

/* XXH3-64 of a (alen bytes) || 0x00 || b (blen bytes). buf (PAIR_STACK bytes) holds a ||
 * 0x00 already when alen + 1 <= PAIR_STACK. */
static uint64_t pair_hash(char *buf, const char *a, size_t alen, const char *b, size_t blen) {
    static const unsigned char sep = 0;
    if (alen + 1 + blen <= PAIR_STACK) {
        memcpy(buf + alen + 1, b, blen);
        return XXH3_64bits(buf, alen + 1 + blen);
    }
    /* Streaming gives the one-shot result (XXH3's contract), for names of any length; its
     * calls fail only for a NULL state or input pointer. */
    XXH3_state_t st;
    (void)XXH3_64bits_reset(&st);
    (void)XXH3_64bits_update(&st, a, alen);
    (void)XXH3_64bits_update(&st, &sep, 1);
    (void)XXH3_64bits_update(&st, b, blen);
    return XXH3_64bits_digest(&st);
}

/* Fills buf with a || 0x00 when it fits; returns strlen(a). */
static size_t pair_prefix(char *buf, const char *a) {
    size_t alen = strlen(a);
    if (alen + 1 <= PAIR_STACK) {
        memcpy(buf, a, alen);
        buf[alen] = '\0';
    }
    return alen;
}

uint64_t aor_hash_pair64(const char *a, const char *b) {
    char buf[PAIR_STACK];
    const char *sa = a != NULL ? a : "";
    const char *sb = b != NULL ? b : "";
    size_t alen = pair_prefix(buf, sa);
    return pair_hash(buf, sa, alen, sb, strlen(sb));
}

void aor_hash_pair64_many(const char *a, const char *const *b, size_t n, uint64_t *out) {
    char buf[PAIR_STACK];
    const char *sa = a != NULL ? a : "";

    if (n == 0)
        return;
    size_t alen = pair_prefix(buf, sa);
    for (size_t i = 0; i < n; i++) {
        const char *sb = b[i] != NULL ? b[i] : "";
        out[i] = pair_hash(buf, sa, alen, sb, strlen(sb));
    }
}
