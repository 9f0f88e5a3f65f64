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

/* One digest context per thread, reused: EVP_MD_CTX_new/free on every hash was a third of
 * the cost of hashing a short string, and the daemon hashes on every request (client
 * identity, tie-break per candidate; docs/performance.md). Freed at thread exit. */
static pthread_key_t ctx_key;
static int ctx_key_ok;
static pthread_once_t ctx_once = PTHREAD_ONCE_INIT;

static void free_ctx(void *ctx) {
    EVP_MD_CTX_free(ctx);
}

static void make_ctx_key(void) {
    ctx_key_ok = pthread_key_create(&ctx_key, free_ctx) == 0;
}

/* The calling thread's context, or NULL when none can be kept (then the caller makes a
 * fresh one). */
static EVP_MD_CTX *thread_ctx(void) {
    pthread_once(&ctx_once, make_ctx_key);
    if (!ctx_key_ok)
        return NULL;
    EVP_MD_CTX *ctx = pthread_getspecific(ctx_key);
    if (ctx == NULL) {
        ctx = EVP_MD_CTX_new();
        if (ctx != NULL && pthread_setspecific(ctx_key, ctx) != 0) {
            EVP_MD_CTX_free(ctx);
            ctx = NULL;
        }
    }
    return ctx;
}

static void sha256_parts(const void *const *parts, const size_t *lens, size_t nparts,
                         unsigned char digest[32]) {
    EVP_MD_CTX *kept = thread_ctx();
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

uint64_t aor_hash_pair64(const char *a, const char *b) {
    static const unsigned char sep = 0;
    unsigned char digest[32];
    const char *sa = a != NULL ? a : "";
    const char *sb = b != NULL ? b : "";
    const void *parts[3] = {sa, &sep, sb};
    size_t lens[3] = {strlen(sa), 1, strlen(sb)};
    uint64_t v = 0;

    sha256_parts(parts, lens, 3, digest);
    for (size_t i = 0; i < 8; i++)
        v = (v << 8) | digest[i];
    return v;
}
