/* The local CA's files: data directory, ca.pem / ca.key load-or-create, bundle.pem.
 * Rules: tls.h (aor_tls_new) and docs/tls.md. */
#include "tls_ca.h"
#include "tls.h"
#include "sysca.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <pwd.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <openssl/bn.h>
#include <openssl/crypto.h>
#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/x509v3.h>

#define CA_NAME "ca.pem"
#define KEY_NAME "ca.key"
#define CA_OLD_NAME "ca.pem.old"
#define KEY_OLD_NAME "ca.key.old"
#define CA_CN_PREFIX "aor local CA ("
#define BUNDLE_NAME "bundle.pem"
#define SYSTEM_BUNDLE AOR_SYSCA_BUNDLE
#define PEM_FILE_MAX ((size_t)1 << 20)     /* bytes; a bigger ca.pem / ca.key is not ours */
#define BUNDLE_FILE_MAX ((size_t)64 << 20) /* bytes; cap on the bundles we read */
#define CA_CN_MAX 64                       /* RFC 5280 ub-common-name */
#define DAY_S 86400

void aor_tls_set_err(char *err, size_t errlen, const char *fmt, ...) {
    va_list ap;

    if (err == NULL || errlen == 0)
        return;
    va_start(ap, fmt);
    (void)vsnprintf(err, errlen, fmt, ap); /* a cut message is still a message */
    va_end(ap);
}

/* Appends one non-fatal problem to ca->warning ("; " between two). */
static void add_warning(aor_tls_ca *ca, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void add_warning(aor_tls_ca *ca, const char *fmt, ...) {
    size_t used = strlen(ca->warning);
    va_list ap;

    if (used > 0 && used + 2 < sizeof ca->warning) {
        memcpy(ca->warning + used, "; ", 3);
        used += 2;
    }
    if (used + 1 >= sizeof ca->warning)
        return;
    va_start(ap, fmt);
    (void)vsnprintf(ca->warning + used, sizeof ca->warning - used, fmt, ap);
    va_end(ap);
}

const char *aor_tls_ossl_why(char *buf, size_t len) {
    unsigned long e = ERR_peek_last_error();

    if (e == 0)
        (void)snprintf(buf, len, "no detail from OpenSSL");
    else
        ERR_error_string_n(e, buf, len);
    ERR_clear_error();
    return buf;
}

static char *path_join(const char *dir, const char *name) {
    size_t dlen = strlen(dir);
    char *p;

    while (dlen > 1 && dir[dlen - 1] == '/')
        dlen--;
    if (asprintf(&p, "%.*s/%s", (int)dlen, dir, name) < 0)
        return NULL;
    return p;
}

/* Reads the regular file name (relative to dirfd, or absolute) into a malloc'd,
 * NUL-terminated buffer. Returns 0, or -1 with errno (ENOENT, EFBIG over max, EINVAL
 * not a regular file, ...). st_out, when not NULL, receives the file's fstat. */
static int read_file(int dirfd, const char *name, size_t max, char **out, size_t *outlen,
                     struct stat *st_out) {
    struct stat st;
    size_t cap, len = 0;
    char *p;
    int fd, saved;

    fd = openat(dirfd, name, O_RDONLY | O_CLOEXEC | O_NOCTTY);
    if (fd < 0)
        return -1;
    if (fstat(fd, &st) < 0)
        goto fail_close;
    if (!S_ISREG(st.st_mode)) {
        errno = EINVAL;
        goto fail_close;
    }
    if (st.st_size < 0 || (uintmax_t)st.st_size > max) {
        errno = EFBIG;
        goto fail_close;
    }
    cap = (size_t)st.st_size;
    p = malloc(cap + 1);
    if (p == NULL)
        goto fail_close;
    while (len < cap) {
        ssize_t n = read(fd, p + len, cap - len);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0)
            goto fail_free;
        if (n == 0)
            break; /* shrank under us: take what is there */
        len += (size_t)n;
    }
    p[len] = '\0';
    (void)close(fd);
    if (st_out != NULL)
        *st_out = st;
    *out = p;
    *outlen = len;
    return 0;

fail_free:
    saved = errno;
    free(p);
    errno = saved;
fail_close:
    saved = errno;
    (void)close(fd);
    errno = saved;
    return -1;
}

static int write_all(int fd, const char *data, size_t len) {
    while (len > 0) {
        ssize_t n = write(fd, data, len);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0)
            return -1;
        data += n;
        len -= (size_t)n;
    }
    return 0;
}

/* Writes name in dirfd atomically: "<name>.tmp" created 0600 and chmod'ed to mode
 * before the first byte, fsync'ed, renamed over name, directory fsync'ed.
 * Returns 0, or -1 with errno (the tmp file is removed). */
static int write_atomic(int dirfd, const char *name, const char *data, size_t len, mode_t mode) {
    char tmp[64];
    int fd, saved, n;

    n = snprintf(tmp, sizeof tmp, "%s.tmp", name);
    if (n < 0 || (size_t)n >= sizeof tmp) {
        errno = ENAMETOOLONG;
        return -1;
    }
    if (unlinkat(dirfd, tmp, 0) < 0 && errno != ENOENT)
        return -1;
    fd = openat(dirfd, tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600);
    if (fd < 0)
        return -1;
    if (fchmod(fd, mode) < 0 || write_all(fd, data, len) < 0 || fsync(fd) < 0)
        goto fail_unlink;
    if (close(fd) < 0) {
        fd = -1;
        goto fail_unlink;
    }
    fd = -1;
    if (renameat(dirfd, tmp, dirfd, name) < 0)
        goto fail_unlink;
    (void)fsync(dirfd); /* best effort: the rename is durable on most file systems */
    return 0;

fail_unlink:
    saved = errno;
    if (fd >= 0)
        (void)close(fd);
    (void)unlinkat(dirfd, tmp, 0);
    errno = saved;
    return -1;
}

/* mkdir -p with mode 0700 for every directory it creates. */
static int make_dirs(const char *path, char *err, size_t errlen) {
    size_t n = strlen(path);
    char *p = strdup(path);

    if (p == NULL) {
        aor_tls_set_err(err, errlen, "out of memory");
        return -1;
    }
    for (size_t i = 1; i <= n; i++) {
        char c = p[i];
        struct stat st;

        if (c != '/' && c != '\0')
            continue;
        if (p[i - 1] == '/')
            continue;
        p[i] = '\0';
        if (mkdir(p, 0700) == 0) {
            if (chmod(p, 0700) < 0) { /* umask may have taken bits we need */
                aor_tls_set_err(err, errlen, "%s: cannot chmod 0700: %s", p, strerror(errno));
                free(p);
                return -1;
            }
        } else if (errno != EEXIST && (stat(p, &st) < 0 || !S_ISDIR(st.st_mode))) {
            aor_tls_set_err(err, errlen, "%s: cannot create directory: %s", p, strerror(errno));
            free(p);
            return -1;
        }
        p[i] = c;
    }
    free(p);
    return 0;
}

static int no_passphrase(char *buf, int size, int rwflag, void *u) {
    return -1; /* an encrypted ca.key is an error, never a terminal prompt */
}

/* PEM text of x (malloc'd, NUL-terminated) or NULL. */
static char *cert_pem(X509 *x, size_t *len_out) {
    BIO *b = BIO_new(BIO_s_mem());
    char *data, *out = NULL;
    long len;

    if (b == NULL)
        return NULL;
    if (PEM_write_bio_X509(b, x) == 1) {
        len = BIO_get_mem_data(b, &data);
        if (len > 0 && (out = malloc((size_t)len + 1)) != NULL) {
            memcpy(out, data, (size_t)len);
            out[len] = '\0';
            *len_out = (size_t)len;
        }
    }
    BIO_free(b);
    return out;
}

int aor_tls_rand_serial(X509 *x) {
    BIGNUM *bn = BN_new();
    int rc = -1;

    if (bn == NULL)
        return -1;
    do {
        if (!BN_rand(bn, 128, BN_RAND_TOP_ANY, BN_RAND_BOTTOM_ANY))
            goto out_free;
    } while (BN_is_zero(bn));
    if (BN_to_ASN1_INTEGER(bn, X509_get_serialNumber(x)) != NULL)
        rc = 0;
out_free:
    BN_free(bn);
    return rc;
}

int aor_tls_sign(X509 *x, EVP_PKEY *key) {
    int id = EVP_PKEY_get_base_id(key);
    const EVP_MD *md = (id == EVP_PKEY_ED25519 || id == EVP_PKEY_ED448) ? NULL : EVP_sha256();

    return X509_sign(x, key, md) > 0 ? 0 : -1;
}

/* Copies src into dst (dstlen bytes), bytes outside printable ASCII replaced by '?'. */
static void printable_copy(char *dst, size_t dstlen, const char *src) {
    size_t i = 0;

    for (; src[i] != '\0' && i + 1 < dstlen; i++) {
        unsigned char c = (unsigned char)src[i];
        dst[i] = (c >= 0x20 && c < 0x7f) ? (char)c : '?';
    }
    dst[i] = '\0';
}

/* "aor local CA (<user>@<host>)", cut to fit RFC 5280's 64-character CN. */
static void ca_common_name(char *out, size_t outlen) {
    char user[21], host[65], raw[256];
    const char *u = NULL;
    struct passwd *pw = getpwuid(geteuid());
    int ulen, hlen, room = CA_CN_MAX - (int)strlen("aor local CA (@)");

    if (pw != NULL && pw->pw_name != NULL && pw->pw_name[0] != '\0')
        u = pw->pw_name;
    else if ((u = getenv("USER")) == NULL || u[0] == '\0') {
        (void)snprintf(raw, sizeof raw, "uid%u", (unsigned)geteuid());
        u = raw;
    }
    printable_copy(user, sizeof user, u);
    if (gethostname(raw, sizeof raw) < 0)
        raw[0] = '\0';
    raw[sizeof raw - 1] = '\0';
    printable_copy(host, sizeof host, raw[0] != '\0' ? raw : "localhost");
    ulen = (int)strlen(user);
    hlen = (int)strlen(host);
    if (hlen > room - ulen)
        hlen = room - ulen;
    (void)snprintf(out, outlen, "aor local CA (%s@%.*s)", user, hlen, host);
}

static int add_ext(X509 *x, X509V3_CTX *v3, int nid, const char *value) {
    X509_EXTENSION *ext = X509V3_EXT_nconf_nid(NULL, v3, nid, value);
    int ok;

    if (ext == NULL)
        return -1;
    ok = X509_add_ext(x, ext, -1);
    X509_EXTENSION_free(ext);
    return ok == 1 ? 0 : -1;
}

/* --- name constraints ------------------------------------------------------------ */

int aor_tls_add_san(X509 *x, const char *host, int kind, int critical) {
    GENERAL_NAMES *gens = GENERAL_NAMES_new();
    GENERAL_NAME *gn = GENERAL_NAME_new();
    int rc = -1;

    if (gens == NULL || gn == NULL)
        goto out_free;
    if (kind == AOR_TLS_NAME_IP) {
        ASN1_OCTET_STRING *ip = a2i_IPADDRESS(host);
        if (ip == NULL)
            goto out_free;
        GENERAL_NAME_set0_value(gn, GEN_IPADD, ip);
    } else {
        ASN1_IA5STRING *dns = ASN1_IA5STRING_new();
        if (dns == NULL)
            goto out_free;
        if (ASN1_STRING_set(dns, host, (int)strlen(host)) != 1) {
            ASN1_IA5STRING_free(dns);
            goto out_free;
        }
        GENERAL_NAME_set0_value(gn, GEN_DNS, dns);
    }
    if (sk_GENERAL_NAME_push(gens, gn) <= 0)
        goto out_free;
    gn = NULL; /* owned by gens now */
    if (X509_add1_ext_i2d(x, NID_subject_alt_name, gens, critical, X509V3_ADD_DEFAULT) == 1)
        rc = 0;
out_free:
    GENERAL_NAME_free(gn);
    GENERAL_NAMES_free(gens);
    return rc;
}

/* A nameConstraints subtree base for host: dNSName, or iPAddress with the full mask
 * (one address). ip_prefix >= 0 makes the IP a network of that many bits instead.
 * NULL on failure. */
static GENERAL_NAME *subtree_name(const char *host, int kind, int ip_prefix) {
    unsigned char buf[32];
    GENERAL_NAME *gn = GENERAL_NAME_new();
    ASN1_STRING *v = NULL;
    size_t alen;

    if (gn == NULL)
        return NULL;
    if (kind == AOR_TLS_NAME_IP) {
        if (inet_pton(AF_INET, host, buf) == 1)
            alen = 4;
        else if (inet_pton(AF_INET6, host, buf) == 1)
            alen = 16;
        else
            goto fail_free;
        if (ip_prefix < 0 || (size_t)ip_prefix > alen * 8)
            ip_prefix = (int)alen * 8;
        for (size_t i = 0; i < alen; i++) {
            int bits = ip_prefix - (int)i * 8;
            unsigned char m = bits >= 8   ? 0xff
                              : bits <= 0 ? 0
                                          : (unsigned char)(0xff << (8 - bits));
            buf[alen + i] = m;
            buf[i] &= m;
        }
        v = ASN1_OCTET_STRING_new();
        if (v == NULL || ASN1_OCTET_STRING_set(v, buf, (int)(alen * 2)) != 1)
            goto fail_free;
        GENERAL_NAME_set0_value(gn, GEN_IPADD, v);
    } else {
        v = ASN1_IA5STRING_new();
        if (v == NULL || ASN1_STRING_set(v, host, (int)strlen(host)) != 1)
            goto fail_free;
        GENERAL_NAME_set0_value(gn, GEN_DNS, v);
    }
    return gn;

fail_free:
    ASN1_STRING_free(v);
    GENERAL_NAME_free(gn);
    return NULL;
}

/* Pushes gn onto names unless an equal name is there; takes gn either way.
 * Returns 0, or -1 (allocation). */
static int push_unique(GENERAL_NAMES *names, GENERAL_NAME *gn) {
    for (int i = 0; i < sk_GENERAL_NAME_num(names); i++) {
        if (GENERAL_NAME_cmp(sk_GENERAL_NAME_value(names, i), gn) == 0) {
            GENERAL_NAME_free(gn);
            return 0;
        }
    }
    if (sk_GENERAL_NAME_push(names, gn) <= 0) {
        GENERAL_NAME_free(gn);
        return -1;
    }
    return 0;
}

/* The permitted subtrees of a new CA: 127.0.0.0/8 and ::1 (loopback leaves), each
 * valid name of hosts, then (keep != NULL) the DNS and IP permitted subtrees of keep, so
 * a re-issued CA still covers what the old one did (up to AOR_TLS_CA_NC_MAX).
 * NULL on allocation failure. */
static GENERAL_NAMES *nc_names(const char *const *hosts, const NAME_CONSTRAINTS *keep) {
    GENERAL_NAMES *names = sk_GENERAL_NAME_new_null();
    char host[AOR_TLS_HOST_MAX + 1];
    GENERAL_NAME *gn;

    if (names == NULL)
        return NULL;
    if ((gn = subtree_name("127.0.0.0", AOR_TLS_NAME_IP, 8)) == NULL ||
        push_unique(names, gn) < 0 || (gn = subtree_name("::1", AOR_TLS_NAME_IP, -1)) == NULL ||
        push_unique(names, gn) < 0)
        goto fail_free;
    for (size_t i = 0; hosts != NULL && hosts[i] != NULL; i++) {
        int kind = aor_tls_host_check(hosts[i], host);

        if (kind < 0)
            continue; /* not a name a leaf can be made for */
        if ((gn = subtree_name(host, kind, -1)) == NULL || push_unique(names, gn) < 0)
            goto fail_free;
    }
    for (int i = 0; keep != NULL && i < sk_GENERAL_SUBTREE_num(keep->permittedSubtrees); i++) {
        const GENERAL_SUBTREE *st = sk_GENERAL_SUBTREE_value(keep->permittedSubtrees, i);

        if (sk_GENERAL_NAME_num(names) >= AOR_TLS_CA_NC_MAX)
            break;
        if (st->base == NULL || (st->base->type != GEN_DNS && st->base->type != GEN_IPADD))
            continue;
        if ((gn = GENERAL_NAME_dup(st->base)) == NULL || push_unique(names, gn) < 0)
            goto fail_free;
    }
    return names;

fail_free:
    GENERAL_NAMES_free(names);
    return NULL;
}

/* Adds a critical nameConstraints extension permitting names to x. 0 or -1. */
static int add_name_constraints(X509 *x, const GENERAL_NAMES *names) {
    NAME_CONSTRAINTS *nc = NAME_CONSTRAINTS_new();
    int rc = -1;

    if (nc == NULL || (nc->permittedSubtrees = sk_GENERAL_SUBTREE_new_null()) == NULL)
        goto out_free;
    for (int i = 0; i < sk_GENERAL_NAME_num(names); i++) {
        GENERAL_SUBTREE *st = GENERAL_SUBTREE_new();
        GENERAL_NAME *gn = GENERAL_NAME_dup(sk_GENERAL_NAME_value(names, i));

        if (st == NULL || gn == NULL) {
            GENERAL_SUBTREE_free(st);
            GENERAL_NAME_free(gn);
            goto out_free;
        }
        GENERAL_NAME_free(st->base);
        st->base = gn;
        if (sk_GENERAL_SUBTREE_push(nc->permittedSubtrees, st) <= 0) {
            GENERAL_SUBTREE_free(st);
            goto out_free;
        }
    }
    if (X509_add1_ext_i2d(x, NID_name_constraints, nc, 1, X509V3_ADD_DEFAULT) == 1)
        rc = 0;
out_free:
    NAME_CONSTRAINTS_free(nc);
    return rc;
}

int aor_tls_ca_permits(const aor_tls_ca *ca, const char *host, int kind) {
    X509 *x;
    int ok = 0;

    if (ca->nc == NULL)
        return 1;
    /* A throw-away certificate with host as its only name. NAME_CONSTRAINTS_check reads
     * the SAN from OpenSSL's extension cache, which is only filled for a complete
     * (encodable, hence signed) certificate: one ECDSA signature, at start and per new
     * leaf only. */
    x = X509_new();
    if (x != NULL && X509_set_version(x, X509_VERSION_3) == 1 &&
        X509_set_issuer_name(x, X509_get_subject_name(ca->cert)) == 1 &&
        X509_set_pubkey(x, ca->key) == 1 && aor_tls_add_san(x, host, kind, 1) == 0 &&
        aor_tls_sign(x, ca->key) == 0 && X509_check_purpose(x, -1, 0) == 1)
        ok = NAME_CONSTRAINTS_check(x, ca->nc) == X509_V_OK;
    X509_free(x);
    ERR_clear_error();
    return ok;
}

/* Reads the nameConstraints of ca->cert into ca->nc (NULL when it has none). */
static int read_nc(aor_tls_ca *ca, char *err, size_t errlen) {
    int crit = -1;

    NAME_CONSTRAINTS_free(ca->nc);
    ca->nc = X509_get_ext_d2i(ca->cert, NID_name_constraints, &crit, NULL);
    if (ca->nc == NULL && crit != -1) {
        ERR_clear_error();
        aor_tls_set_err(err, errlen, "%s: unreadable or repeated nameConstraints extension",
                        ca->ca_path);
        return -1;
    }
    return 0;
}

/* 1 when cert is a CA this code made: self-issued, CN "aor local CA (...)". */
static int made_by_aor(X509 *cert) {
    char cn[CA_CN_MAX + 1];
    X509_NAME *subject = X509_get_subject_name(cert);

    if (X509_NAME_cmp(subject, X509_get_issuer_name(cert)) != 0)
        return 0;
    if (X509_NAME_get_text_by_NID(subject, NID_commonName, cn, (int)sizeof cn) < 0)
        return 0;
    return strncmp(cn, CA_CN_PREFIX, strlen(CA_CN_PREFIX)) == 0;
}

/* A new self-signed CA certificate for key (spec: design.md "TLS, certificates"),
 * permitting names (nameConstraints) unless names is NULL. */
static X509 *make_ca_cert(EVP_PKEY *key, const GENERAL_NAMES *names) {
    char cn[CA_CN_MAX + 1];
    time_t now = time(NULL);
    X509 *x = X509_new();
    X509_NAME *name = X509_NAME_new();
    X509V3_CTX v3;

    if (x == NULL || name == NULL)
        goto fail_free;
    ca_common_name(cn, sizeof cn);
    if (X509_NAME_add_entry_by_NID(name, NID_commonName, MBSTRING_UTF8, (const unsigned char *)cn,
                                   -1, -1, 0) != 1)
        goto fail_free;
    if (X509_set_version(x, X509_VERSION_3) != 1 || aor_tls_rand_serial(x) < 0 ||
        X509_set_subject_name(x, name) != 1 || X509_set_issuer_name(x, name) != 1 ||
        ASN1_TIME_set(X509_getm_notBefore(x), now - DAY_S) == NULL ||
        ASN1_TIME_set(X509_getm_notAfter(x), now + (time_t)AOR_TLS_CA_DAYS * DAY_S) == NULL ||
        X509_set_pubkey(x, key) != 1)
        goto fail_free;
    X509V3_set_ctx(&v3, x, x, NULL, NULL, 0);
    if (add_ext(x, &v3, NID_basic_constraints, "critical,CA:TRUE,pathlen:0") < 0 ||
        add_ext(x, &v3, NID_key_usage, "critical,keyCertSign,cRLSign") < 0 ||
        add_ext(x, &v3, NID_subject_key_identifier, "hash") < 0 ||
        (names != NULL && add_name_constraints(x, names) < 0) || aor_tls_sign(x, key) < 0)
        goto fail_free;
    X509_NAME_free(name);
    return x;

fail_free:
    X509_NAME_free(name);
    X509_free(x);
    return NULL;
}

/* Creates ca.key then ca.pem, both 0600 (spec §9 "ca.pem, ca.key (0600)"; the directory
 * is 0700, so a wider mode would give no one else access anyway), the CA permitting names (NULL:
 * unconstrained); on failure neither is left behind. */
static int create_ca(aor_tls_ca *ca, int dirfd, const GENERAL_NAMES *names, char *err,
                     size_t errlen) {
    char why[256], *pem = NULL, *kdata;
    size_t pemlen = 0;
    long klen;
    BIO *kb = NULL;

    ca->key = EVP_EC_gen("P-256");
    if (ca->key == NULL) {
        aor_tls_set_err(err, errlen, "cannot generate the CA key: %s",
                        aor_tls_ossl_why(why, sizeof why));
        return -1;
    }
    ca->cert = make_ca_cert(ca->key, names);
    if (ca->cert == NULL || (pem = cert_pem(ca->cert, &pemlen)) == NULL) {
        aor_tls_set_err(err, errlen, "cannot build the CA certificate: %s",
                        aor_tls_ossl_why(why, sizeof why));
        goto fail_free;
    }
    kb = BIO_new(BIO_s_secmem());
    if (kb == NULL || PEM_write_bio_PrivateKey(kb, ca->key, NULL, NULL, 0, NULL, NULL) != 1 ||
        (klen = BIO_get_mem_data(kb, &kdata)) <= 0) {
        aor_tls_set_err(err, errlen, "cannot encode the CA key: %s",
                        aor_tls_ossl_why(why, sizeof why));
        goto fail_free;
    }
    if (write_atomic(dirfd, KEY_NAME, kdata, (size_t)klen, 0600) < 0) {
        aor_tls_set_err(err, errlen, "%s: cannot write: %s", ca->key_path, strerror(errno));
        goto fail_free;
    }
    if (write_atomic(dirfd, CA_NAME, pem, pemlen, 0600) < 0) {
        aor_tls_set_err(err, errlen, "%s: cannot write: %s", ca->ca_path, strerror(errno));
        (void)unlinkat(dirfd, KEY_NAME, 0);
        goto fail_free;
    }
    BIO_free(kb); /* secure-heap BIO: cleansed on free */
    free(pem);
    return 0;

fail_free:
    BIO_free(kb);
    free(pem);
    return -1;
}

static void format_time(const ASN1_TIME *t, char *out, size_t outlen) {
    struct tm tm;

    if (ASN1_TIME_to_tm(t, &tm) != 1 || strftime(out, outlen, "%Y-%m-%d %H:%M:%S UTC", &tm) == 0)
        (void)snprintf(out, outlen, "?");
}

/* Parses and checks the CA read from ca.pem / ca.key. */
static int load_ca(aor_tls_ca *ca, int dirfd, const char *pem, size_t pemlen, const char *key,
                   size_t keylen, const struct stat *key_st, char *err, size_t errlen) {
    char why[256], when[64];
    BIO *b;
    int cmp;

    b = BIO_new_mem_buf(pem, (int)pemlen);
    ca->cert = b != NULL ? PEM_read_bio_X509(b, NULL, no_passphrase, NULL) : NULL;
    BIO_free(b);
    if (ca->cert == NULL) {
        aor_tls_set_err(err, errlen, "%s: not a PEM certificate (%s)", ca->ca_path,
                        aor_tls_ossl_why(why, sizeof why));
        return -1;
    }
    b = BIO_new_mem_buf(key, (int)keylen);
    ca->key = b != NULL ? PEM_read_bio_PrivateKey(b, NULL, no_passphrase, NULL) : NULL;
    BIO_free(b);
    if (ca->key == NULL) {
        aor_tls_set_err(err, errlen, "%s: not an unencrypted PEM private key (%s)", ca->key_path,
                        aor_tls_ossl_why(why, sizeof why));
        return -1;
    }
    if (X509_check_private_key(ca->cert, ca->key) != 1) {
        ERR_clear_error();
        aor_tls_set_err(err, errlen,
                        "%s is not the key of %s; restore the matching pair, or remove both "
                        "to create a new CA",
                        ca->key_path, ca->ca_path);
        return -1;
    }
    if (X509_check_ca(ca->cert) != 1 || (X509_get_key_usage(ca->cert) & KU_KEY_CERT_SIGN) == 0) {
        aor_tls_set_err(err, errlen,
                        "%s: not a CA certificate (needs basicConstraints CA:TRUE and "
                        "keyUsage keyCertSign)",
                        ca->ca_path);
        return -1;
    }
    cmp = X509_cmp_current_time(X509_get0_notAfter(ca->cert));
    if (cmp <= 0) {
        format_time(X509_get0_notAfter(ca->cert), when, sizeof when);
        aor_tls_set_err(err, errlen,
                        "%s: the CA %s (notAfter %s); remove ca.pem and ca.key to create a "
                        "new one and trust it again (docs/tls.md)",
                        ca->ca_path, cmp < 0 ? "has expired" : "has an unreadable expiry", when);
        return -1;
    }
    if ((key_st->st_mode & 077) != 0) {
        if (key_st->st_uid != geteuid()) {
            aor_tls_set_err(err, errlen, "%s: mode %04o and owned by uid %u, not by you",
                            ca->key_path, (unsigned)(key_st->st_mode & 07777),
                            (unsigned)key_st->st_uid);
            return -1;
        }
        if (fchmodat(dirfd, KEY_NAME, 0600, 0) < 0) {
            aor_tls_set_err(err, errlen, "%s: mode %04o and chmod 0600 failed: %s", ca->key_path,
                            (unsigned)(key_st->st_mode & 07777), strerror(errno));
            return -1;
        }
        (void)snprintf(ca->warning, sizeof ca->warning, "%s had mode %04o, now 0600", ca->key_path,
                       (unsigned)(key_st->st_mode & 07777));
    }
    return 0;
}

/* bundle.pem = system bundle + ca.pem, written only when its content differs. */
static int update_bundle(aor_tls_ca *ca, int dirfd, char *err, size_t errlen) {
    const char *cands[2] = {SYSTEM_BUNDLE, X509_get_default_cert_file()};
    char *ca_pem = NULL, *sys = NULL, *cur = NULL, *want = NULL;
    size_t ca_len = 0, sys_len = 0, cur_len = 0, want_len;
    struct stat st;
    int rc = -1, have_cur;

    ca_pem = cert_pem(ca->cert, &ca_len);
    if (ca_pem == NULL) {
        aor_tls_set_err(err, errlen, "%s: cannot encode the CA certificate", ca->bundle_path);
        goto out_free;
    }
    for (size_t i = 0; i < 2 && sys == NULL; i++) {
        if (cands[i] != NULL && (i == 0 || strcmp(cands[i], cands[0]) != 0))
            (void)read_file(AT_FDCWD, cands[i], BUNDLE_FILE_MAX, &sys, &sys_len, NULL);
    }
    if (sys == NULL) {
        sys_len = 0;
        if (ca->warning[0] == '\0')
            (void)snprintf(ca->warning, sizeof ca->warning,
                           "no system CA bundle (%s, %s): %s holds only the aor CA, so clients "
                           "pointed at it trust no other server",
                           SYSTEM_BUNDLE, cands[1] != NULL ? cands[1] : "-", ca->bundle_path);
    }
    want_len = sys_len + 1 + ca_len;
    want = malloc(want_len + 1);
    if (want == NULL) {
        aor_tls_set_err(err, errlen, "out of memory");
        goto out_free;
    }
    if (sys_len > 0)
        memcpy(want, sys, sys_len);
    want_len = sys_len;
    if (sys_len > 0 && sys[sys_len - 1] != '\n')
        want[want_len++] = '\n';
    memcpy(want + want_len, ca_pem, ca_len);
    want_len += ca_len;

    have_cur = read_file(dirfd, BUNDLE_NAME, BUNDLE_FILE_MAX, &cur, &cur_len, &st) == 0;
    if (have_cur && cur_len == want_len && memcmp(cur, want, want_len) == 0) {
        if ((st.st_mode & 07777) != 0644 && fchmodat(dirfd, BUNDLE_NAME, 0644, 0) < 0) {
            aor_tls_set_err(err, errlen, "%s: cannot chmod 0644: %s", ca->bundle_path,
                            strerror(errno));
            goto out_free;
        }
        rc = 0;
        goto out_free;
    }
    if (write_atomic(dirfd, BUNDLE_NAME, want, want_len, 0644) < 0) {
        aor_tls_set_err(err, errlen, "%s: cannot write: %s", ca->bundle_path, strerror(errno));
        goto out_free;
    }
    rc = 0;
out_free:
    free(cur);
    free(want);
    free(sys);
    free(ca_pem);
    return rc;
}

/* " and N more host(s)" for n > 1 names, "" for one. */
static void more_text(size_t n, char *out, size_t outlen) {
    out[0] = '\0';
    if (n > 1)
        (void)snprintf(out, outlen, " and %zu more host(s)", n - 1);
}

/* Renames from1 to to1, then from2 to to2, in dirfd; when the second fails the first is
 * put back. Returns 0 or -1 with errno. */
static int rename_pair(int dirfd, const char *from1, const char *to1, const char *from2,
                       const char *to2) {
    int saved;

    if (renameat(dirfd, from1, dirfd, to1) < 0)
        return -1;
    if (renameat(dirfd, from2, dirfd, to2) < 0) {
        saved = errno;
        (void)renameat(dirfd, to1, dirfd, from1);
        errno = saved;
        return -1;
    }
    return 0;
}

/* Re-issues an aor-made CA whose constraints leave out a needed host: the old pair
 * becomes ca.pem.old / ca.key.old, a new CA permits the old names plus hosts. On
 * failure the old pair is put back and -1 returned (err set). */
static int reissue_ca(aor_tls_ca *ca, int dirfd, const char *const *hosts, const char *missing,
                      size_t nmissing, char *err, size_t errlen) {
    GENERAL_NAMES *names = nc_names(hosts, ca->nc);
    char why[256], more[48];

    if (names == NULL) {
        aor_tls_set_err(err, errlen, "%s: cannot build name constraints: %s", ca->ca_path,
                        aor_tls_ossl_why(why, sizeof why));
        return -1;
    }
    if (rename_pair(dirfd, CA_NAME, CA_OLD_NAME, KEY_NAME, KEY_OLD_NAME) < 0) {
        aor_tls_set_err(err, errlen, "%s: cannot rename the old CA to %s: %s", ca->ca_path,
                        CA_OLD_NAME, strerror(errno));
        GENERAL_NAMES_free(names);
        return -1;
    }
    X509_free(ca->cert);
    EVP_PKEY_free(ca->key);
    NAME_CONSTRAINTS_free(ca->nc);
    ca->cert = NULL;
    ca->key = NULL;
    ca->nc = NULL;
    if (create_ca(ca, dirfd, names, err, errlen) < 0) {
        (void)rename_pair(dirfd, CA_OLD_NAME, CA_NAME, KEY_OLD_NAME, KEY_NAME);
        GENERAL_NAMES_free(names);
        return -1;
    }
    GENERAL_NAMES_free(names);
    more_text(nmissing, more, sizeof more);
    add_warning(ca,
                "%s did not permit %s%s in its name constraints: made a new CA that does (the "
                "old one is now %s.old); restart running clients, and trust the new %s again "
                "wherever you installed it system-wide (docs/tls.md)",
                ca->ca_path, missing, more, ca->ca_path, ca->ca_path);
    return 0;
}

/* With hosts: checks that ca's name constraints permit every one of them; re-issues an
 * aor-made CA that does not (reissue_ca), warns about a foreign one. */
static int check_cover(aor_tls_ca *ca, int dirfd, const char *const *hosts, char *err,
                       size_t errlen) {
    char host[AOR_TLS_HOST_MAX + 1], first[AOR_TLS_HOST_MAX + 1] = "", more[48];
    size_t missing = 0;

    if (hosts == NULL || ca->nc == NULL)
        return 0; /* nothing asked, or an unconstrained CA: covers every name */
    for (size_t i = 0; hosts[i] != NULL; i++) {
        int kind = aor_tls_host_check(hosts[i], host);

        if (kind < 0 || aor_tls_ca_permits(ca, host, kind))
            continue;
        if (missing++ == 0)
            memcpy(first, host, strlen(host) + 1);
    }
    if (missing == 0)
        return 0;
    if (made_by_aor(ca->cert))
        return reissue_ca(ca, dirfd, hosts, first, missing, err, errlen);
    more_text(missing, more, sizeof more);
    add_warning(ca,
                "%s (not made by aor, so kept) does not permit %s%s in its name constraints: "
                "clients will reject aor's certificates for them",
                ca->ca_path, first, more);
    return 0;
}

/* The start-up self-check host: the first of hosts the CA permits ("" when none or no
 * hosts: aor_tls_new then uses its default). */
static void pick_check_host(aor_tls_ca *ca, const char *const *hosts) {
    char host[AOR_TLS_HOST_MAX + 1];

    ca->check_host[0] = '\0';
    for (size_t i = 0; hosts != NULL && hosts[i] != NULL; i++) {
        int kind = aor_tls_host_check(hosts[i], host);

        if (kind == AOR_TLS_NAME_DNS && aor_tls_ca_permits(ca, host, kind) &&
            strlen(host) < sizeof ca->check_host) {
            memcpy(ca->check_host, host, strlen(host) + 1);
            return;
        }
    }
}

static const char *read_errstr(int e) {
    if (e == EFBIG)
        return "larger than 1 MiB, not a PEM file";
    if (e == EINVAL)
        return "not a regular file";
    return strerror(e);
}

int aor_tls_ca_open(aor_tls_ca *ca, const char *data_dir, const char *const *hosts, char *err,
                    size_t errlen) {
    GENERAL_NAMES *names = NULL;
    char *pem = NULL, *key = NULL;
    size_t pemlen = 0, keylen = 0;
    struct stat st, key_st;
    int dirfd = -1, have_pem, have_key, pem_errno, key_errno;

    memset(ca, 0, sizeof *ca);
    if (data_dir == NULL || data_dir[0] == '\0') {
        aor_tls_set_err(err, errlen, "no data directory given for the aor CA");
        return -1;
    }
    ca->ca_path = path_join(data_dir, CA_NAME);
    ca->key_path = path_join(data_dir, KEY_NAME);
    ca->bundle_path = path_join(data_dir, BUNDLE_NAME);
    if (ca->ca_path == NULL || ca->key_path == NULL || ca->bundle_path == NULL) {
        aor_tls_set_err(err, errlen, "out of memory");
        goto fail_close;
    }
    if (make_dirs(data_dir, err, errlen) < 0)
        goto fail_close;
    dirfd = open(data_dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dirfd < 0 || fstat(dirfd, &st) < 0) {
        aor_tls_set_err(err, errlen, "%s: cannot open directory: %s", data_dir, strerror(errno));
        goto fail_close;
    }
    if (st.st_uid != geteuid()) {
        aor_tls_set_err(err, errlen, "%s: owned by uid %u, not by you (uid %u)", data_dir,
                        (unsigned)st.st_uid, (unsigned)geteuid());
        goto fail_close;
    }
    if ((st.st_mode & 022) != 0) {
        aor_tls_set_err(err, errlen, "%s: writable by group or others (mode %04o); chmod 700 it",
                        data_dir, (unsigned)(st.st_mode & 07777));
        goto fail_close;
    }
    /* Two aord starting at once must not create two CAs. */
    while (flock(dirfd, LOCK_EX) < 0) {
        if (errno != EINTR) {
            aor_tls_set_err(err, errlen, "%s: cannot lock: %s", data_dir, strerror(errno));
            goto fail_close;
        }
    }

    have_pem = read_file(dirfd, CA_NAME, PEM_FILE_MAX, &pem, &pemlen, NULL) == 0;
    pem_errno = have_pem ? 0 : errno;
    have_key = read_file(dirfd, KEY_NAME, PEM_FILE_MAX, &key, &keylen, &key_st) == 0;
    key_errno = have_key ? 0 : errno;
    if (!have_pem && pem_errno != ENOENT) {
        aor_tls_set_err(err, errlen, "%s: cannot read: %s", ca->ca_path, read_errstr(pem_errno));
        goto fail_close;
    }
    if (!have_key && key_errno != ENOENT) {
        aor_tls_set_err(err, errlen, "%s: cannot read: %s", ca->key_path, read_errstr(key_errno));
        goto fail_close;
    }
    if (have_pem && !have_key) {
        aor_tls_set_err(err, errlen,
                        "%s is missing but %s exists; restore it, or remove %s to create "
                        "a new CA",
                        ca->key_path, ca->ca_path, ca->ca_path);
        goto fail_close;
    }
    if (!have_pem && have_key) {
        aor_tls_set_err(err, errlen,
                        "%s is missing but %s exists; restore it, or remove %s to create "
                        "a new CA",
                        ca->ca_path, ca->key_path, ca->key_path);
        goto fail_close;
    }
    if (have_pem) {
        if (load_ca(ca, dirfd, pem, pemlen, key, keylen, &key_st, err, errlen) < 0 ||
            read_nc(ca, err, errlen) < 0 || check_cover(ca, dirfd, hosts, err, errlen) < 0)
            goto fail_close;
    } else {
        if (hosts != NULL && (names = nc_names(hosts, NULL)) == NULL) {
            aor_tls_set_err(err, errlen, "out of memory");
            goto fail_close;
        }
        if (create_ca(ca, dirfd, names, err, errlen) < 0)
            goto fail_close;
    }
    if (read_nc(ca, err, errlen) < 0 || update_bundle(ca, dirfd, err, errlen) < 0)
        goto fail_close;
    pick_check_host(ca, hosts);

    if (key != NULL)
        OPENSSL_cleanse(key, keylen);
    free(key);
    free(pem);
    GENERAL_NAMES_free(names);
    (void)close(dirfd); /* releases the lock */
    return 0;

fail_close:
    if (key != NULL)
        OPENSSL_cleanse(key, keylen);
    free(key);
    free(pem);
    GENERAL_NAMES_free(names);
    if (dirfd >= 0)
        (void)close(dirfd);
    aor_tls_ca_close(ca);
    return -1;
}

void aor_tls_ca_close(aor_tls_ca *ca) {
    X509_free(ca->cert);
    EVP_PKEY_free(ca->key);
    NAME_CONSTRAINTS_free(ca->nc);
    free(ca->ca_path);
    free(ca->key_path);
    free(ca->bundle_path);
    memset(ca, 0, sizeof *ca);
}
