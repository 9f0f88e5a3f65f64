/* Server-side TLS of aord: the SSL_CTX, ALPN, the SNI callback and the leaf cache.
 * Contract: tls.h. CA files: tls_ca.c. Decisions: docs/tls.md. */
#include "tls.h"

#include "hash.h"
#include "log.h"
#include "tls_ca.h"

#include <arpa/inet.h>
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <openssl/ec.h>
#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/x509v3.h>

#define DAY_S 86400
#define CN_MAX 64     /* RFC 5280 ub-common-name: longer names get no CN */
#define NBUCKETS 2048 /* power of two, >= AOR_TLS_CACHE_MAX */

enum { EXT_BC, EXT_KU, EXT_EKU, EXT_SKI, EXT_AKI, EXT_COUNT };

struct leaf {
    struct leaf *hnext;         /* bucket chain */
    struct leaf *newer, *older; /* use order; t->newest / t->oldest are the ends */
    X509 *cert;
    time_t made; /* real-clock second the cert was made */
    uint32_t hash;
    char host[]; /* normalised name (aor_tls_host_check) */
};

struct aor_tls {
    aor_tls_ca ca;
    char *data_dir; /* for aor_tls_reload */
    SSL_CTX *ctx;
    EVP_PKEY *leaf_key;             /* one key for every leaf of this process */
    X509_EXTENSION *ext[EXT_COUNT]; /* the extensions every leaf shares */
    time_t ca_not_after;
    struct leaf *bucket[NBUCKETS];
    struct leaf *newest, *oldest;
    size_t nleaves;
    char default_host[AOR_TLS_HOST_MAX + 1];
    int default_kind;
};

/* Per-connection data, in the SSL's ex_data. */
struct conn_data {
    char hint[AOR_TLS_HOST_MAX + 1]; /* aor_tls_set_conn_host, "" when unset */
    int hint_kind;
    char host[AOR_TLS_HOST_MAX + 1]; /* what the leaf was made for, "" before */
};

static CRYPTO_ONCE conn_once = CRYPTO_ONCE_STATIC_INIT;
static int conn_idx = -1;

/* --- host names ------------------------------------------------------------------ */

int aor_tls_host_check(const char *host, char out[AOR_TLS_HOST_MAX + 1]) {
    unsigned char addr[16];
    char tmp[AOR_TLS_HOST_MAX + 1];
    size_t len, label = 0;
    int all_digits = 1;

    if (host == NULL)
        goto bad;
    len = strnlen(host, AOR_TLS_HOST_MAX + 2);
    if (len == 0 || len > AOR_TLS_HOST_MAX + 1)
        goto bad;
    if (inet_pton(AF_INET, host, addr) == 1) {
        if (inet_ntop(AF_INET, addr, out, AOR_TLS_HOST_MAX + 1) == NULL)
            goto bad;
        return AOR_TLS_NAME_IP;
    }
    if (inet_pton(AF_INET6, host, addr) == 1) {
        if (inet_ntop(AF_INET6, addr, out, AOR_TLS_HOST_MAX + 1) == NULL)
            goto bad;
        return AOR_TLS_NAME_IP;
    }
    if (host[len - 1] == '.')
        len--; /* one trailing dot: the absolute form of the same name */
    if (len == 0 || len > AOR_TLS_HOST_MAX)
        goto bad;
    for (size_t i = 0; i < len; i++) {
        char c = host[i];

        if (c == '.') {
            if (label == 0 || tmp[i - 1] == '-')
                goto bad;
            label = 0;
            all_digits = 1;
            tmp[i] = c;
            continue;
        }
        if (c >= 'A' && c <= 'Z')
            c = (char)(c - 'A' + 'a');
        if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-'))
            goto bad;
        if (c == '-' && label == 0)
            goto bad;
        if (c < '0' || c > '9')
            all_digits = 0;
        if (++label > 63)
            goto bad;
        tmp[i] = c;
    }
    /* last label: not empty ("a.."), not ending in '-', not all digits (no TLD is, and
     * "1.2.3" must not pass as a DNS name) */
    if (label == 0 || tmp[len - 1] == '-' || all_digits)
        goto bad;
    tmp[len] = '\0';
    memcpy(out, tmp, len + 1);
    return AOR_TLS_NAME_DNS;

bad:
    errno = EINVAL;
    return -1;
}

/* --- leaves ---------------------------------------------------------------------- */

/* A new leaf for host (already normalised), signed by the CA. NULL on failure. */
static X509 *make_leaf(aor_tls *t, const char *host, int kind, time_t now) {
    size_t hlen = strlen(host);
    /* CN is at most 64 characters (RFC 5280); a longer name has an empty subject and
     * a critical SAN, which clients match anyway: they use the SAN, never the CN. An IP
     * leaf has no CN either: OpenSSL checks a CN like "127.0.0.1" against the CA's DNS
     * name constraints when the leaf has no DNS SAN, and fails it. */
    int cn = kind == AOR_TLS_NAME_DNS && hlen <= CN_MAX;
    time_t not_before = now - DAY_S;
    time_t not_after = not_before + (time_t)AOR_TLS_LEAF_DAYS * DAY_S;
    X509 *x = X509_new();
    X509_NAME *subject = X509_NAME_new();

    if (not_after > t->ca_not_after)
        not_after = t->ca_not_after; /* a leaf never outlives its CA */
    if (x == NULL || subject == NULL || not_after <= now)
        goto fail_free;
    if (cn && X509_NAME_add_entry_by_NID(subject, NID_commonName, MBSTRING_ASC,
                                         (const unsigned char *)host, -1, -1, 0) != 1)
        goto fail_free;
    if (X509_set_version(x, X509_VERSION_3) != 1 || aor_tls_rand_serial(x) < 0 ||
        X509_set_issuer_name(x, X509_get_subject_name(t->ca.cert)) != 1 ||
        X509_set_subject_name(x, subject) != 1 ||
        ASN1_TIME_set(X509_getm_notBefore(x), not_before) == NULL ||
        ASN1_TIME_set(X509_getm_notAfter(x), not_after) == NULL ||
        X509_set_pubkey(x, t->leaf_key) != 1)
        goto fail_free;
    for (int i = 0; i < EXT_COUNT; i++) {
        if (X509_add_ext(x, t->ext[i], -1) != 1)
            goto fail_free;
    }
    if (aor_tls_add_san(x, host, kind, !cn) < 0 || aor_tls_sign(x, t->ca.key) < 0)
        goto fail_free;
    X509_NAME_free(subject);
    return x;

fail_free:
    X509_NAME_free(subject);
    X509_free(x);
    return NULL;
}

static uint32_t hash_name(const char *s) {
    uint32_t h = 2166136261u; /* FNV-1a */

    for (; *s != '\0'; s++) {
        h ^= (unsigned char)*s;
        h *= 16777619u;
    }
    return h;
}

static void use_unlink(aor_tls *t, struct leaf *e) {
    if (e->newer != NULL)
        e->newer->older = e->older;
    else
        t->newest = e->older;
    if (e->older != NULL)
        e->older->newer = e->newer;
    else
        t->oldest = e->newer;
    e->newer = e->older = NULL;
}

static void use_push(aor_tls *t, struct leaf *e) {
    e->newer = NULL;
    e->older = t->newest;
    if (t->newest != NULL)
        t->newest->newer = e;
    t->newest = e;
    if (t->oldest == NULL)
        t->oldest = e;
}

static void cache_remove(aor_tls *t, struct leaf *e) {
    struct leaf **pp = &t->bucket[e->hash & (NBUCKETS - 1)];

    while (*pp != NULL && *pp != e)
        pp = &(*pp)->hnext;
    if (*pp == e)
        *pp = e->hnext;
    use_unlink(t, e);
    X509_free(e->cert);
    free(e);
    t->nleaves--;
}

/* 1 when the CA's name constraints (if any) permit the leaf x (as a client checks). */
static int leaf_permitted(aor_tls *t, X509 *x) {
    int ok;

    if (t->ca.nc == NULL)
        return 1;
    ok = X509_check_purpose(x, -1, 0) == 1 && NAME_CONSTRAINTS_check(x, t->ca.nc) == X509_V_OK;
    ERR_clear_error();
    return ok;
}

/* The leaf for host (normalised): from the cache when fresh, else made and cached.
 * The cert is owned by the cache; it stays valid until the next leaf_get (which may
 * evict it), so callers take their own reference at once. NULL on failure. */
static X509 *leaf_get(aor_tls *t, const char *host, int kind) {
    time_t now = time(NULL);
    uint32_t h = hash_name(host);
    struct leaf *e = t->bucket[h & (NBUCKETS - 1)];
    size_t hlen;
    X509 *x;

    while (e != NULL && (e->hash != h || strcmp(e->host, host) != 0))
        e = e->hnext;
    if (e != NULL && now >= e->made && now - e->made < AOR_TLS_LEAF_RENEW_S) {
        use_unlink(t, e);
        use_push(t, e);
        return e->cert;
    }
    x = make_leaf(t, host, kind, now);
    if (x == NULL)
        return NULL;
    if (!leaf_permitted(t, x))
        aor_warn("TLS: %s is outside the name constraints of %s: clients will reject its "
                 "certificate (a host added to the config after aord started? reload or "
                 "restart aord to re-issue the CA; docs/tls.md)",
                 host, t->ca.ca_path);
    if (e != NULL) { /* stale (or the clock went back): replace in place */
        X509_free(e->cert);
        e->cert = x;
        e->made = now;
        use_unlink(t, e);
        use_push(t, e);
        return x;
    }
    hlen = strlen(host);
    e = malloc(sizeof *e + hlen + 1);
    if (e == NULL) {
        X509_free(x);
        return NULL;
    }
    if (t->nleaves >= AOR_TLS_CACHE_MAX)
        cache_remove(t, t->oldest);
    memcpy(e->host, host, hlen + 1);
    e->cert = x;
    e->made = now;
    e->hash = h;
    e->hnext = t->bucket[h & (NBUCKETS - 1)];
    t->bucket[h & (NBUCKETS - 1)] = e;
    use_push(t, e);
    t->nleaves++;
    return x;
}

/* --- per-connection data --------------------------------------------------------- */

static void conn_data_free(void *parent, void *ptr, CRYPTO_EX_DATA *ad, int idx, long argl,
                           void *argp) {
    free(ptr);
}

static int conn_data_dup(CRYPTO_EX_DATA *to, const CRYPTO_EX_DATA *from, void **from_d, int idx,
                         long argl, void *argp) {
    struct conn_data *copy;

    if (*from_d == NULL)
        return 1;
    copy = malloc(sizeof *copy);
    if (copy == NULL)
        return 0;
    memcpy(copy, *from_d, sizeof *copy);
    *from_d = copy;
    return 1;
}

static void conn_idx_init(void) {
    conn_idx = SSL_get_ex_new_index(0, NULL, NULL, conn_data_dup, conn_data_free);
}

static struct conn_data *conn_data_get(const SSL *ssl, int create) {
    struct conn_data *cd;

    if (!CRYPTO_THREAD_run_once(&conn_once, conn_idx_init) || conn_idx < 0)
        return NULL;
    cd = SSL_get_ex_data(ssl, conn_idx);
    if (cd != NULL || !create)
        return cd;
    cd = calloc(1, sizeof *cd);
    if (cd == NULL)
        return NULL;
    if (SSL_set_ex_data((SSL *)ssl, conn_idx, cd) != 1) {
        free(cd);
        return NULL;
    }
    return cd;
}

int aor_tls_set_conn_host(SSL *ssl, const char *host) {
    char name[AOR_TLS_HOST_MAX + 1];
    int kind = aor_tls_host_check(host, name);
    struct conn_data *cd;

    if (kind < 0)
        return -1;
    cd = conn_data_get(ssl, 1);
    if (cd == NULL) {
        errno = ENOMEM;
        return -1;
    }
    memcpy(cd->hint, name, strlen(name) + 1);
    cd->hint_kind = kind;
    /* Sessions (TLS 1.2 tickets, TLS 1.3 PSKs) are bound to the host: one issued for
     * api.openai.com is not resumed for another name, whose certificate the client never
     * checked (RFC 6066 §3; QA). The context is the start of the name's SHA-256 in hex
     * (SSL_MAX_SID_CTX_LENGTH bytes); a mismatch is a full handshake. */
    char hex[65];
    aor_hash_sha256_hex(name, strlen(name), hex);
    if (SSL_set_session_id_context(ssl, (const unsigned char *)hex, SSL_MAX_SID_CTX_LENGTH) != 1)
        return -1;
    return 0;
}

const char *aor_tls_conn_host(const SSL *ssl) {
    struct conn_data *cd = conn_data_get(ssl, 0);

    return (cd != NULL && cd->host[0] != '\0') ? cd->host : NULL;
}

/* --- callbacks ------------------------------------------------------------------- */

/* Called for every ClientHello (with or without SNI), before the certificate is
 * chosen: picks the host, gives the connection its leaf. */
static int on_servername(SSL *ssl, int *al, void *arg) {
    aor_tls *t = arg;
    const char *sni = SSL_get_servername(ssl, TLSEXT_NAMETYPE_host_name);
    struct conn_data *cd = conn_data_get(ssl, 0);
    char host[AOR_TLS_HOST_MAX + 1];
    int kind;
    X509 *leaf;

    if (sni != NULL) {
        kind = aor_tls_host_check(sni, host);
        if (kind < 0) {
            *al = SSL_AD_UNRECOGNIZED_NAME;
            return SSL_TLSEXT_ERR_ALERT_FATAL;
        }
    } else if (cd != NULL && cd->hint[0] != '\0') {
        memcpy(host, cd->hint, strlen(cd->hint) + 1);
        kind = cd->hint_kind;
    } else {
        memcpy(host, t->default_host, strlen(t->default_host) + 1);
        kind = t->default_kind;
    }
    leaf = leaf_get(t, host, kind);
    if (leaf == NULL || SSL_use_certificate(ssl, leaf) != 1 ||
        SSL_use_PrivateKey(ssl, t->leaf_key) != 1 || (cd = conn_data_get(ssl, 1)) == NULL) {
        *al = SSL_AD_INTERNAL_ERROR;
        return SSL_TLSEXT_ERR_ALERT_FATAL;
    }
    memcpy(cd->host, host, strlen(host) + 1);
    return SSL_TLSEXT_ERR_OK;
}

/* ALPN: "http/1.1" if offered, else no ALPN at all. */
static int on_alpn(SSL *ssl, const unsigned char **out, unsigned char *outlen,
                   const unsigned char *in, unsigned int inlen, void *arg) {
    static const char h11[] = "http/1.1";
    unsigned int i = 0;

    while (i < inlen) {
        unsigned int n = in[i];

        if (n == 0 || n > inlen - i - 1)
            break; /* malformed list (OpenSSL checks it first; be safe) */
        if (n == sizeof h11 - 1 && memcmp(in + i + 1, h11, n) == 0) {
            *out = in + i + 1;
            *outlen = (unsigned char)n;
            return SSL_TLSEXT_ERR_OK;
        }
        i += 1 + n;
    }
    return SSL_TLSEXT_ERR_NOACK;
}

/* --- object ---------------------------------------------------------------------- */

/* The leaf key (P-256). OpenSSL 3.0's X509_set_pubkey runs its encoder and then its
 * decoder on a provider-backed key (~175 us, three quarters of a leaf), but encodes a
 * legacy EC_KEY-backed key directly (~5 us). The EC_KEY calls are deprecated in 3.0,
 * not removed; without them (OPENSSL_NO_DEPRECATED_3_0) leaves are just slower. */
static EVP_PKEY *make_leaf_key(void) {
#ifndef OPENSSL_NO_DEPRECATED_3_0
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
    EC_KEY *ec = EC_KEY_new_by_curve_name(NID_X9_62_prime256v1);
    EVP_PKEY *pk = EVP_PKEY_new();

    if (ec == NULL || pk == NULL || EC_KEY_generate_key(ec) != 1 ||
        EVP_PKEY_assign_EC_KEY(pk, ec) != 1) { /* on success pk owns ec */
        EC_KEY_free(ec);
        EVP_PKEY_free(pk);
        return NULL;
    }
    return pk;
#pragma GCC diagnostic pop
#else
    return EVP_EC_gen("P-256");
#endif
}

static int build_leaf_exts(aor_tls *t) {
    static const struct {
        int nid;
        const char *value;
    } defs[EXT_COUNT] = {
        [EXT_BC] = {NID_basic_constraints, "critical,CA:FALSE"},
        [EXT_KU] = {NID_key_usage, "critical,digitalSignature"},
        [EXT_EKU] = {NID_ext_key_usage, "serverAuth"},
        [EXT_SKI] = {NID_subject_key_identifier, "hash"},
        [EXT_AKI] = {NID_authority_key_identifier, "keyid:always"},
    };
    X509 *tmpl = X509_new(); /* carries the leaf public key for the SKI hash */
    X509V3_CTX v3;
    int rc = -1;

    if (tmpl == NULL || X509_set_pubkey(tmpl, t->leaf_key) != 1)
        goto out_free;
    X509V3_set_ctx(&v3, t->ca.cert, tmpl, NULL, NULL, 0);
    for (int i = 0; i < EXT_COUNT; i++) {
        t->ext[i] = X509V3_EXT_nconf_nid(NULL, &v3, defs[i].nid, defs[i].value);
        if (t->ext[i] == NULL)
            goto out_free;
    }
    rc = 0;
out_free:
    X509_free(tmpl);
    return rc;
}

static SSL_CTX *build_ctx(aor_tls *t) {
    SSL_CTX *ctx = SSL_CTX_new(TLS_server_method());

    if (ctx == NULL)
        return NULL;
    if (SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION) != 1) {
        SSL_CTX_free(ctx);
        return NULL;
    }
    SSL_CTX_set_options(ctx, SSL_OP_NO_RENEGOTIATION | SSL_OP_IGNORE_UNEXPECTED_EOF |
                                 SSL_OP_NO_COMPRESSION | SSL_OP_CIPHER_SERVER_PREFERENCE);
    SSL_CTX_set_mode(ctx, SSL_MODE_RELEASE_BUFFERS | SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER);
    SSL_CTX_set_session_cache_mode(ctx, SSL_SESS_CACHE_OFF);
    (void)SSL_CTX_set_num_tickets(ctx, 1);
    SSL_CTX_set_tlsext_servername_callback(ctx, on_servername);
    SSL_CTX_set_tlsext_servername_arg(ctx, t);
    SSL_CTX_set_alpn_select_cb(ctx, on_alpn, NULL);
    return ctx;
}

/* Strict verification of one leaf against the CA (the start-up self-check). */
static int verify_strict(aor_tls *t, X509 *leaf, char *why, size_t whylen) {
    X509_STORE *store = X509_STORE_new();
    X509_STORE_CTX *sctx = X509_STORE_CTX_new();
    int rc = -1;

    if (store == NULL || sctx == NULL || X509_STORE_add_cert(store, t->ca.cert) != 1 ||
        X509_STORE_CTX_init(sctx, store, leaf, NULL) != 1) {
        (void)aor_tls_ossl_why(why, whylen);
        goto out_free;
    }
    X509_VERIFY_PARAM_set_flags(X509_STORE_CTX_get0_param(sctx), X509_V_FLAG_X509_STRICT);
    (void)X509_STORE_CTX_set_purpose(sctx, X509_PURPOSE_SSL_SERVER);
    if (X509_verify_cert(sctx) == 1)
        rc = 0;
    else
        (void)snprintf(why, whylen, "%s",
                       X509_verify_cert_error_string(X509_STORE_CTX_get_error(sctx)));
out_free:
    X509_STORE_CTX_free(sctx);
    X509_STORE_free(store);
    return rc;
}

/* Everything that depends on t->ca (t->leaf_key must be set): the CA's notAfter, the
 * leaf extensions (AKI = the CA's SKI), and the start-up check: a leaf for a host the
 * CA permits (else "localhost") must verify strictly. 0, or -1 with err set. */
static int prepare_ca(aor_tls *t, char *err, size_t errlen) {
    char why[256];
    struct tm tm;
    const char *check = t->ca.check_host[0] != '\0' ? t->ca.check_host : "localhost";
    X509 *leaf;

    if (ASN1_TIME_to_tm(X509_get0_notAfter(t->ca.cert), &tm) != 1) {
        aor_tls_set_err(err, errlen, "%s: unreadable notAfter", t->ca.ca_path);
        return -1;
    }
    t->ca_not_after = timegm(&tm);
    if (build_leaf_exts(t) < 0) {
        aor_tls_set_err(err, errlen, "%s: cannot build leaf extensions with this CA (%s)",
                        t->ca.ca_path, aor_tls_ossl_why(why, sizeof why));
        return -1;
    }
    leaf = leaf_get(t, check, AOR_TLS_NAME_DNS);
    if (leaf == NULL) {
        aor_tls_set_err(err, errlen, "%s: cannot sign a leaf certificate with this CA (%s)",
                        t->ca.ca_path, aor_tls_ossl_why(why, sizeof why));
        return -1;
    }
    if (verify_strict(t, leaf, why, sizeof why) < 0) {
        aor_tls_set_err(err, errlen, "%s: leaves signed by this CA do not verify: %s (leaf for %s)",
                        t->ca.ca_path, why, check);
        return -1;
    }
    return 0;
}

aor_tls *aor_tls_new(const char *data_dir, const char *const *hosts, char *err, size_t errlen) {
    char why[256];
    aor_tls *t = calloc(1, sizeof *t);

    if (t == NULL || data_dir == NULL || (t->data_dir = strdup(data_dir)) == NULL) {
        aor_tls_set_err(err, errlen,
                        data_dir == NULL ? "no data directory given for the aor CA"
                                         : "out of memory");
        free(t);
        return NULL;
    }
    if (aor_tls_ca_open(&t->ca, data_dir, hosts, err, errlen) < 0)
        goto fail_free;
    t->leaf_key = make_leaf_key();
    if (t->leaf_key == NULL) {
        aor_tls_set_err(err, errlen, "cannot generate the leaf key: %s",
                        aor_tls_ossl_why(why, sizeof why));
        goto fail_free;
    }
    memcpy(t->default_host, "localhost", sizeof "localhost");
    t->default_kind = AOR_TLS_NAME_DNS;
    if (prepare_ca(t, err, errlen) < 0)
        goto fail_free;
    t->ctx = build_ctx(t);
    if (t->ctx == NULL) {
        aor_tls_set_err(err, errlen, "cannot create the TLS server context: %s",
                        aor_tls_ossl_why(why, sizeof why));
        goto fail_free;
    }
    return t;

fail_free:
    aor_tls_free(t);
    return NULL;
}

int aor_tls_reload(aor_tls *t, const char *const *hosts, char *err, size_t errlen) {
    aor_tls *fresh = calloc(1, sizeof *fresh);
    aor_tls_ca ca;
    X509_EXTENSION *ext;
    time_t not_after;

    if (fresh == NULL) {
        aor_tls_set_err(err, errlen, "out of memory");
        return -1;
    }
    /* fresh borrows the leaf key (its own reference) and gets the CA as it is now */
    if (EVP_PKEY_up_ref(t->leaf_key) != 1) {
        free(fresh);
        aor_tls_set_err(err, errlen, "out of memory");
        return -1;
    }
    fresh->leaf_key = t->leaf_key;
    if (aor_tls_ca_open(&fresh->ca, t->data_dir, hosts, err, errlen) < 0 ||
        prepare_ca(fresh, err, errlen) < 0) {
        aor_tls_free(fresh);
        return -1;
    }
    /* swap the CA-dependent parts; fresh takes the old ones and frees them */
    ca = t->ca;
    t->ca = fresh->ca;
    fresh->ca = ca;
    for (int i = 0; i < EXT_COUNT; i++) {
        ext = t->ext[i];
        t->ext[i] = fresh->ext[i];
        fresh->ext[i] = ext;
    }
    not_after = t->ca_not_after;
    t->ca_not_after = fresh->ca_not_after;
    fresh->ca_not_after = not_after;
    while (t->oldest != NULL) /* leaves of the old CA (or of an old constraint check) */
        cache_remove(t, t->oldest);
    aor_tls_free(fresh);
    return 0;
}

void aor_tls_free(aor_tls *t) {
    if (t == NULL)
        return;
    while (t->oldest != NULL)
        cache_remove(t, t->oldest);
    SSL_CTX_free(t->ctx);
    for (int i = 0; i < EXT_COUNT; i++)
        X509_EXTENSION_free(t->ext[i]);
    EVP_PKEY_free(t->leaf_key);
    aor_tls_ca_close(&t->ca);
    free(t->data_dir);
    free(t);
}

SSL_CTX *aor_tls_server_ctx(aor_tls *t) {
    return t->ctx;
}

int aor_tls_set_default_host(aor_tls *t, const char *host) {
    char name[AOR_TLS_HOST_MAX + 1];
    int kind;

    if (host == NULL || host[0] == '\0')
        host = "localhost";
    kind = aor_tls_host_check(host, name);
    if (kind < 0)
        return -1;
    memcpy(t->default_host, name, strlen(name) + 1);
    t->default_kind = kind;
    return 0;
}

const char *aor_tls_ca_path(const aor_tls *t) {
    return t->ca.ca_path;
}

const char *aor_tls_bundle_path(const aor_tls *t) {
    return t->ca.bundle_path;
}

const char *aor_tls_warning(const aor_tls *t) {
    return t->ca.warning[0] != '\0' ? t->ca.warning : NULL;
}

size_t aor_tls_cache_size(const aor_tls *t) {
    return t->nleaves;
}

int aor_tls_leaf_pem(aor_tls *t, const char *host, char **pem_out) {
    char name[AOR_TLS_HOST_MAX + 1], *data, *out;
    int kind = aor_tls_host_check(host, name);
    BIO *b;
    X509 *x;
    long len;

    if (kind < 0)
        return -1;
    x = leaf_get(t, name, kind);
    b = BIO_new(BIO_s_mem());
    if (x == NULL || b == NULL || PEM_write_bio_X509(b, x) != 1 ||
        (len = BIO_get_mem_data(b, &data)) <= 0 || (out = malloc((size_t)len + 1)) == NULL) {
        BIO_free(b);
        ERR_clear_error();
        errno = ENOMEM;
        return -1;
    }
    memcpy(out, data, (size_t)len);
    out[len] = '\0';
    BIO_free(b);
    *pem_out = out;
    return 0;
}
