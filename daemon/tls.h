/* TLS for intercepted provider connections (spec §1 "terminates TLS ... with
 * certificates from a per-user local CA", §2 "Trust", §9 file places; design.md
 * "TLS, certificates"). See docs/tls.md.
 *
 * One aor_tls per daemon. It owns:
 *   - the per-user local CA: $XDG_DATA_HOME/aor/ca.pem + ca.key (0600), created on the
 *     first start (ECDSA P-256, 10 years), loaded on every later start;
 *   - bundle.pem beside them: the system CA bundle followed by ca.pem, rewritten at
 *     start when it is out of date (the shim and `aor run` point SSL_CERT_FILE & co.
 *     at it);
 *   - the server SSL_CTX: TLS 1.2+, ALPN "http/1.1" only, and an SNI callback that
 *     hands each connection a leaf certificate for the host it asked for, made on the
 *     fly (ECDSA P-256, one leaf key per process, ~0.1 ms each) and cached by name.
 *
 * Not thread-safe: one event-loop thread uses it (the daemon's design). Certificates
 * are dated with the real clock (time(NULL)), never AOR_FAKE_CLOCK: clients check
 * them against their real clock. */
#ifndef AOR_TLS_H
#define AOR_TLS_H

#include <stddef.h>

#include <openssl/ssl.h>

#include "config.h"

#define AOR_TLS_HOST_MAX 253              /* longest DNS name (bytes, without trailing dot) */
#define AOR_TLS_CACHE_MAX 1024            /* leaves kept in memory; the least recently used go */
#define AOR_TLS_LEAF_DAYS 199             /* notAfter - notBefore of a leaf, in days */
#define AOR_TLS_LEAF_RENEW_S (30 * 86400) /* a cached leaf older than this is re-made */
#define AOR_TLS_CA_DAYS 3650              /* validity of a new CA, in days */

typedef struct aor_tls aor_tls;

/* Kinds returned by aor_tls_host_check. */
#define AOR_TLS_NAME_DNS 1
#define AOR_TLS_NAME_IP 2

/* Opens (or on the first start creates) the local CA in data_dir and builds the server
 * context.
 * data_dir: "$XDG_DATA_HOME/aor", resolved by the caller. Missing directories on the
 *   way are created with mode 0700. It must be owned by the caller's uid and not
 *   writable by group/others.
 * hosts: NULL-terminated list of the names aord makes leaves for (DNS names or IP
 *   literals; aor_tls_hosts_for_config builds it), or NULL for no name constraints.
 *   With hosts (issue 4 item 7; docs/tls.md "Name constraints"):
 *     - a new CA gets a critical nameConstraints extension whose permitted subtrees
 *       are those names (each also permits its subdomains), 127.0.0.0/8 and ::1;
 *     - an existing CA made by aor whose constraints leave a host out is re-issued:
 *       ca.pem / ca.key are renamed to ca.pem.old / ca.key.old and a new CA permits
 *       the old names plus the new ones; aor_tls_warning says so (log it);
 *     - an existing CA not made by aor that leaves a host out is kept, with a warning
 *       naming the host; an existing CA without name constraints is kept as it is.
 *   Without hosts a new CA is unconstrained and nothing is checked.
 * Files (written atomically: "<name>.tmp" + rename; ca.key is mode 0600 before its
 * first byte is written; the directory is flock()ed while they are read/written so two
 * starts at once cannot make two CAs):
 *   ca.pem 0644, ca.key 0600: loaded when both exist; created when neither exists.
 *     Exactly one present, a file that is not PEM, an encrypted key, a key that does
 *     not match the certificate, a certificate that is not a CA, or an expired CA is an
 *     error naming the file: the user's CA is never silently replaced. A ca.key with
 *     group/other permission bits is tightened to 0600.
 *   bundle.pem 0644: system bundle (/etc/ssl/certs/ca-certificates.crt, else OpenSSL's
 *     X509_get_default_cert_file()) + ca.pem; rewritten only when its content differs.
 *     Without a readable system bundle it holds ca.pem alone (see aor_tls_warning).
 * At the end a leaf for the first DNS name of hosts the CA permits (else "localhost")
 * is made and verified against the CA with X509_V_FLAG_X509_STRICT, so a CA that cannot
 * sign good leaves fails here, not in the first client's handshake.
 * err/errlen: on failure receives one line naming the file or step and the reason
 *   (never key material). May be NULL/0.
 * Returns the object (free with aor_tls_free), or NULL on failure. A failure never
 * removes an existing ca.pem / ca.key (a failed re-issue puts the old pair back); a
 * first start that fails half-way removes the ca.key it wrote. Directories created
 * stay. */
aor_tls *aor_tls_new(const char *data_dir, const char *const *hosts, char *err, size_t errlen);

/* The names aord terminates TLS for under cfg (spec §2 "Hosts to intercept"): the
 * built-in provider hosts (aor_builtin_hosts), then each provider's base_url host and
 * intercept names, normalised (aor_tls_host_check), without repeats; names that fail
 * the check are left out. Returns a malloc'd NULL-terminated array (free with
 * aor_tls_hosts_free), or NULL with errno ENOMEM. cfg NULL: the built-in hosts. */
char **aor_tls_hosts_for_config(const aor_config *cfg);

/* Frees what aor_tls_hosts_for_config returned. NULL is a no-op. */
void aor_tls_hosts_free(char **hosts);

/* aor_tls_new(data_dir, aor_tls_hosts_for_config(cfg), err, errlen): what aord calls at
 * start. */
aor_tls *aor_tls_new_for_config(const char *data_dir, const aor_config *cfg, char *err,
                                size_t errlen);

/* Re-reads the CA files with a new host list (config reload, SIGHUP), with the rules of
 * aor_tls_new (an aor-made CA that does not permit a new host is re-issued). On success
 * the new CA signs every later leaf, the leaf cache is emptied (connections already
 * made keep their certificates), aor_tls_warning reports what this reload found, and 0
 * is returned. On failure t is unchanged (the old CA stays in use), err gets one line,
 * and -1 is returned. */
int aor_tls_reload(aor_tls *t, const char *const *hosts, char *err, size_t errlen);

/* aor_tls_reload(t, aor_tls_hosts_for_config(cfg), err, errlen). */
int aor_tls_reload_config(aor_tls *t, const aor_config *cfg, char *err, size_t errlen);

/* Frees everything, including the server SSL_CTX (SSL objects made from it keep their
 * own reference and stay usable). NULL is a no-op. */
void aor_tls_free(aor_tls *t);

/* The server context, owned by t (do not free; valid until aor_tls_free). Make one SSL
 * per accepted connection with SSL_new(ctx) and SSL_set_fd + SSL_set_accept_state.
 * Behaviour:
 *   - TLS 1.2 and 1.3 only; no renegotiation; SSL_OP_IGNORE_UNEXPECTED_EOF (a peer that
 *     closes without close_notify reads as EOF, not an error); stateless session
 *     tickets (1 per handshake), no server-side session cache; SSL_MODE_RELEASE_BUFFERS
 *     (idle connections hold no record buffers: spec §10 RSS).
 *   - ALPN: selects "http/1.1" when the client offers it, otherwise answers without
 *     ALPN (an h2-only client then fails at the HTTP layer, not in the handshake).
 *   - Certificate, chosen in the SNI callback (called for every ClientHello):
 *       SNI present and valid (aor_tls_host_check) -> leaf for that name;
 *       SNI present but invalid -> handshake fails with alert unrecognized_name
 *         (nothing from a bad name goes into a certificate);
 *       no SNI -> leaf for the connection's host (aor_tls_set_conn_host), else the
 *         default host (aor_tls_set_default_host), else "localhost".
 *     Leaf making failing (out of memory) -> alert internal_error. */
SSL_CTX *aor_tls_server_ctx(aor_tls *t);

/* Sets the process-wide host used for connections that send no SNI and have no
 * per-connection host (see aor_tls_set_conn_host). host: a DNS name or an IPv4/IPv6
 * literal, checked and normalised by aor_tls_host_check; NULL or "" restores
 * "localhost". Returns 0, or -1 with errno=EINVAL (bad name; the old value stays). */
int aor_tls_set_default_host(aor_tls *t, const char *host);

/* Per-connection version of aor_tls_set_default_host: the host the daemon learned from
 * the shim's preamble (spec §7), used when this ssl's client sends no SNI. Call before
 * the handshake. For a connection recognised by address only (preamble host "-"),
 * pass the preamble's IP: the leaf then carries SAN IP:<addr>. Prefer this over the
 * process-wide default: handshakes of many connections interleave in one event loop.
 * The data is freed with the SSL. Returns 0, or -1 with errno=EINVAL (bad name; see
 * aor_tls_host_check) or ENOMEM. */
int aor_tls_set_conn_host(SSL *ssl, const char *host);

/* The normalised host the leaf of this connection was made for (the checked SNI name,
 * or the fallback when there was no SNI), or NULL before the ClientHello was processed
 * or when the handshake failed in the SNI callback. Owned by ssl, valid until SSL_free.
 * The conn layer uses it to know which provider host the client wants. */
const char *aor_tls_conn_host(const SSL *ssl);

/* Checks and normalises a host name that will go into a certificate (SNI is input).
 * Accepted: an IPv4 or IPv6 literal (written back in canonical form) -> AOR_TLS_NAME_IP;
 *   a DNS name of letters, digits, '-' and '.', 1..253 bytes after dropping one
 *   trailing '.', labels of 1..63 bytes not starting or ending with '-', last label not
 *   all digits -> AOR_TLS_NAME_DNS, lower-cased. No wildcards, no underscores.
 * out: AOR_TLS_HOST_MAX + 1 bytes; written only on success.
 * Returns the kind, or -1 with errno=EINVAL. Can't fail otherwise. */
int aor_tls_host_check(const char *host, char out[AOR_TLS_HOST_MAX + 1]);

/* Path of ca.pem / bundle.pem (owned by t, valid until aor_tls_free). The shim and
 * `aor run` point NODE_EXTRA_CA_CERTS at ca.pem and SSL_CERT_FILE, REQUESTS_CA_BUNDLE,
 * CURL_CA_BUNDLE at bundle.pem (spec §2 "Trust"). Can't fail. */
const char *aor_tls_ca_path(const aor_tls *t);
const char *aor_tls_bundle_path(const aor_tls *t);

/* Non-fatal problems found by aor_tls_new (or the last aor_tls_reload) that the daemon
 * should log once, "; " between two (e.g. "no system CA bundle found: bundle.pem holds
 * only the aor CA", "ca.key had mode 0644, now 0600", the CA was re-issued for a new
 * host), or NULL. Owned by t. */
const char *aor_tls_warning(const aor_tls *t);

/* Test and diagnostics helper: the leaf certificate for host (checked as in
 * aor_tls_host_check; taken from / put into the cache exactly as a handshake would),
 * PEM-encoded. *pem_out: NUL-terminated, malloc'd, the caller frees it.
 * Returns 0, or -1 with errno=EINVAL (bad host) or ENOMEM (*pem_out untouched). */
int aor_tls_leaf_pem(aor_tls *t, const char *host, char **pem_out);

/* Number of leaves in the cache (<= AOR_TLS_CACHE_MAX). For tests and /metrics. */
size_t aor_tls_cache_size(const aor_tls *t);

#endif
