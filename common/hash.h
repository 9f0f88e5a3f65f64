/* Hashing (spec §5.1 client identity: SHA-256 from OpenSSL's libcrypto; §5.2 tie-breaking:
 * XXH3 from libxxhash). Daemon side only; the shim does not link this.
 *
 * "Can't fail" below: libcrypto can only fail here when it cannot allocate; that is
 * treated like any other daemon OOM (one line on stderr, abort()). */
#ifndef AOR_HASH_H
#define AOR_HASH_H

#include <stddef.h>
#include <stdint.h>

/* Hex SHA-256 (lower case) of data/len into out (65 bytes: 64 hex digits + NUL).
 * data may be NULL only when len is 0 (hash of the empty string). Can't fail. */
void aor_hash_sha256_hex(const void *data, size_t len, char out[65]);

/* 64-bit hash of the concatenation a || 0x00 || b: its XXH3-64 (xxHash 0.8, the value
 * `xxhsum -H3` prints). NULL counts as "". Used to order equal-priority keys consistently
 * per client (§5.2): a = client hash, b = "provider/key". Not a cryptographic hash: it
 * only spreads clients over keys, and the client id it is given is already a SHA-256.
 * Can't fail. */
uint64_t aor_hash_pair64(const char *a, const char *b);

/* out[i] = aor_hash_pair64(a, b[i]) for each i < n, bit for bit, with a copied once (§5.2:
 * one client, every tied candidate). NULL a or b[i] counts as ""; b and out hold n entries
 * (n == 0: no-op). Can't fail. */
void aor_hash_pair64_many(const char *a, const char *const *b, size_t n, uint64_t *out);

#endif
