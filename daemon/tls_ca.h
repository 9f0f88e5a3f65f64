/* The local CA's files (spec §9: ca.pem, ca.key 0600, bundle.pem under
 * $XDG_DATA_HOME/aor). Internal to daemon/tls.c; the public contract is aor_tls_new in
 * tls.h, which documents the file rules implemented here. See docs/tls.md. */
#ifndef AOR_TLS_CA_H
#define AOR_TLS_CA_H

#include <stddef.h>

#include <openssl/evp.h>
#include <openssl/x509.h>

typedef struct {
    X509 *cert;        /* the CA certificate (owned) */
    EVP_PKEY *key;     /* its private key (owned) */
    char *ca_path;     /* "<data_dir>/ca.pem" (malloc'd) */
    char *key_path;    /* "<data_dir>/ca.key" */
    char *bundle_path; /* "<data_dir>/bundle.pem" */
    char warning[512]; /* "" or a non-fatal problem to log once */
} aor_tls_ca;

/* Creates data_dir (0700) if missing, locks it, loads or creates ca.pem + ca.key, and
 * brings bundle.pem up to date. On success returns 0 and fills *ca (release with
 * aor_tls_ca_close). On failure returns -1, writes one line into err naming the file
 * and the reason, and leaves *ca zeroed (nothing to release). */
int aor_tls_ca_open(aor_tls_ca *ca, const char *data_dir, char *err, size_t errlen);

/* Releases what aor_tls_ca_open filled; the struct is zeroed. Can't fail. */
void aor_tls_ca_close(aor_tls_ca *ca);

/* Gives x a random positive 128-bit serial number. Returns 0, or -1 (OpenSSL failure:
 * out of memory or no randomness). */
int aor_tls_rand_serial(X509 *x);

/* Signs x with key: SHA-256 for EC and RSA keys, the built-in digest for Ed25519/Ed448.
 * Returns 0 or -1. */
int aor_tls_sign(X509 *x, EVP_PKEY *key);

#endif
