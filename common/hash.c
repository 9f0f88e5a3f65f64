/* SHA-256 helpers (spec §5.1 client identity, §5.2 tie-breaking) over OpenSSL EVP. */
#include "hash.h"

#include <openssl/evp.h>

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
 * identity, tie-break per candidate; docs/performance.md). CTX_WORK is the one every hash
 * runs in; CTX_PREFIX holds aor_hash_pair64_many's state after a || 0x00. Freed at
 * thread exit. */
enum { CTX_WORK, CTX_PREFIX, CTX_SLOTS };
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

/* First 8 bytes of a digest, big-endian. */
static uint64_t first64(const unsigned char digest[32]) {
    uint64_t v = 0;
    for (size_t i = 0; i < 8; i++)
        v = (v << 8) | digest[i];
    return v;
}

uint64_t aor_hash_pair64(const char *a, const char *b) {
    static const unsigned char sep = 0;
    unsigned char digest[32];
    const char *sa = a != NULL ? a : "";
    const char *sb = b != NULL ? b : "";
    const void *parts[3] = {sa, &sep, sb};
    size_t lens[3] = {strlen(sa), 1, strlen(sb)};

    sha256_parts(parts, lens, 3, digest);
    return first64(digest);
}

void aor_hash_pair64_many(const char *a, const char *const *b, size_t n, uint64_t *out) {
    static const unsigned char sep = 0;
    const char *sa = a != NULL ? a : "";
    EVP_MD_CTX *kept_prefix, *kept_work, *prefix, *work;
    int ok;

    if (n == 0)
        return;
    kept_prefix = thread_ctx(CTX_PREFIX);
    kept_work = thread_ctx(CTX_WORK);
    prefix = kept_prefix != NULL ? kept_prefix : EVP_MD_CTX_new();
    work = kept_work != NULL ? kept_work : EVP_MD_CTX_new();
    ok = prefix != NULL && work != NULL;
    if (ok)
        ok = EVP_DigestInit_ex(prefix, sha256_md(), NULL) == 1 &&
             EVP_DigestUpdate(prefix, sa, strlen(sa)) == 1 &&
             EVP_DigestUpdate(prefix, &sep, 1) == 1;
    for (size_t i = 0; ok && i < n; i++) {
        unsigned char digest[32];
        unsigned int dlen = 0;
        const char *sb = b[i] != NULL ? b[i] : "";
        /* copy_ex duplicates the provider's digest state: the midstate after a || 0x00. */
        ok = EVP_MD_CTX_copy_ex(work, prefix) == 1 && EVP_DigestUpdate(work, sb, strlen(sb)) == 1 &&
             EVP_DigestFinal_ex(work, digest, &dlen) == 1 && dlen == 32;
        if (ok)
            out[i] = first64(digest);
    }
    if (kept_prefix == NULL)
        EVP_MD_CTX_free(prefix);
    if (kept_work == NULL)
        EVP_MD_CTX_free(work);
    if (!ok)
        hash_die();
}
