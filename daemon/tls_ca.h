/* The local CA's files (spec §9: ca.pem, ca.key 0600, bundle.pem under
 * $XDG_DATA_HOME/aor). Internal to daemon/tls.c; the public contract is aor_tls_new in
 * tls.h, which documents the file rules implemented here. See docs/tls.md. */
#ifndef AOR_TLS_CA_H
#define AOR_TLS_CA_H

#include <stddef.h>

#include <openssl/evp.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>

#define AOR_TLS_CA_NC_MAX 256 /* permitted subtrees a re-issued CA keeps at most */

typedef struct {
    X509 *cert;           /* the CA certificate (owned) */
    EVP_PKEY *key;        /* its private key (owned) */
    NAME_CONSTRAINTS *nc; /* the CA's nameConstraints (owned), NULL: unconstrained */
    char *ca_path;        /* "<data_dir>/ca.pem" (malloc'd) */
    char *key_path;       /* "<data_dir>/ca.key" */
    char *bundle_path;    /* "<data_dir>/bundle.pem" */
    char warning[1024];   /* "" or non-fatal problems to log once ("; " between them) */
    char check_host[256]; /* a host of `hosts` the CA covers, "" when none/no hosts */
} aor_tls_ca;

/* Creates data_dir (0700) if missing, locks it, loads or creates ca.pem + ca.key, and
 * brings bundle.pem up to date.
 * hosts: NULL-terminated list of the host names (DNS names or IP literals) aord makes
 *   leaves for, or NULL. With hosts, a new CA gets a critical nameConstraints extension
 *   permitting exactly those names (and their subdomains), 127.0.0.0/8 and ::1; an
 *   existing CA whose constraints leave one of them out is re-issued when aor made it
 *   (the old pair is renamed to ca.pem.old / ca.key.old, the new CA permits the old
 *   names plus the new ones, and a warning says so), else kept with a warning naming
 *   the host. An existing CA without constraints is kept as it is. Without hosts a new
 *   CA is unconstrained and nothing is checked. See docs/tls.md "Name constraints".
 * On success returns 0 and fills *ca (release with aor_tls_ca_close). On failure
 * returns -1, writes one line into err naming the file and the reason, and leaves *ca
 * zeroed (nothing to release); a failed re-issue puts the old pair back. */
int aor_tls_ca_open(aor_tls_ca *ca, const char *data_dir, const char *const *hosts, char *err,
                    size_t errlen);

/* 1 when a leaf for host (normalised by aor_tls_host_check, of kind AOR_TLS_NAME_DNS or
 * AOR_TLS_NAME_IP) satisfies the CA's name constraints (always 1 for an unconstrained
 * CA), 0 when not or on allocation failure. */
int aor_tls_ca_permits(const aor_tls_ca *ca, const char *host, int kind);

/* Adds subjectAltName DNS:host or IP:host (kind AOR_TLS_NAME_*), critical or not, to x.
 * Returns 0 or -1 (OpenSSL failure). */
int aor_tls_add_san(X509 *x, const char *host, int kind, int critical);

/* Releases what aor_tls_ca_open filled; the struct is zeroed. Can't fail. */
void aor_tls_ca_close(aor_tls_ca *ca);

/* Gives x a random positive 128-bit serial number. Returns 0, or -1 (OpenSSL failure:
 * out of memory or no randomness). */
int aor_tls_rand_serial(X509 *x);

/* Signs x with key: SHA-256 for EC and RSA keys, the built-in digest for Ed25519/Ed448.
 * Returns 0 or -1. */
int aor_tls_sign(X509 *x, EVP_PKEY *key);

/* OpenSSL's reason for its latest failure, for one error line: writes it into buf (len
 * bytes, always NUL-terminated) and returns buf; "no detail from OpenSSL" when its error
 * queue is empty. Clears the queue. Shared by tls.c and tls_ca.c. */
const char *aor_tls_ossl_why(char *buf, size_t len);

/* Writes one error line (printf format) into err (errlen bytes, cut to fit, always
 * NUL-terminated); does nothing when err is NULL or errlen is 0. Shared by tls.c and
 * tls_ca.c for their err/errlen out-parameters. */
void aor_tls_set_err(char *err, size_t errlen, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

#endif
