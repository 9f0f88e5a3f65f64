/* Unit tests for daemon/tls.c + daemon/tls_ca.c: the per-user local CA and its files
 * (spec §2 Trust, §9), leaves per SNI host, the server context (real handshakes over a
 * socketpair). */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>

#include "tls.h"

#define SYSTEM_BUNDLE "/etc/ssl/certs/ca-certificates.crt"

/* --- fixtures -------------------------------------------------------------------- */

typedef struct {
    char root[64]; /* mkdtemp dir, removed after the test */
    char dir[128]; /* root/share/aor: does not exist before the first start */
    char err[512];
} fx;

static int setup(void **state) {
    fx *f = calloc(1, sizeof *f);

    if (f == NULL)
        return -1;
    memcpy(f->root, "/tmp/aor-tls-XXXXXX", sizeof "/tmp/aor-tls-XXXXXX");
    if (mkdtemp(f->root) == NULL)
        return -1;
    if (snprintf(f->dir, sizeof f->dir, "%s/share/aor", f->root) >= (int)sizeof f->dir)
        return -1;
    *state = f;
    return 0;
}

static int rm_one(const char *path, const struct stat *st, int flag, struct FTW *ftw) {
    (void)chmod(path, 0700);
    return remove(path);
}

static int teardown(void **state) {
    fx *f = *state;

    (void)chmod(f->dir, 0700);
    (void)nftw(f->root, rm_one, 16, FTW_DEPTH | FTW_PHYS);
    free(f);
    return 0;
}

static void path_in(const fx *f, const char *name, char *out, size_t outlen) {
    assert_true(snprintf(out, outlen, "%s/%s", f->dir, name) < (int)outlen);
}

static char *slurp(const char *path, size_t *len_out) {
    FILE *fp = fopen(path, "rb");
    char *buf;
    long n;

    if (fp == NULL)
        return NULL;
    assert_int_equal(fseek(fp, 0, SEEK_END), 0);
    n = ftell(fp);
    assert_true(n >= 0);
    rewind(fp);
    buf = malloc((size_t)n + 1);
    assert_non_null(buf);
    assert_int_equal(fread(buf, 1, (size_t)n, fp), (size_t)n);
    buf[n] = '\0';
    fclose(fp);
    if (len_out != NULL)
        *len_out = (size_t)n;
    return buf;
}

static void spit(const char *path, const char *data) {
    FILE *fp = fopen(path, "wb");

    assert_non_null(fp);
    assert_int_equal(fwrite(data, 1, strlen(data), fp), strlen(data));
    assert_int_equal(fclose(fp), 0);
}

static mode_t mode_of(const char *path) {
    struct stat st;

    assert_int_equal(stat(path, &st), 0);
    return st.st_mode & 07777;
}

static X509 *pem_to_x509(const char *pem) {
    BIO *b = BIO_new_mem_buf(pem, -1);
    X509 *x;

    assert_non_null(b);
    x = PEM_read_bio_X509(b, NULL, NULL, NULL);
    BIO_free(b);
    assert_non_null(x);
    return x;
}

static X509 *load_cert(const char *path) {
    char *pem = slurp(path, NULL);
    X509 *x;

    assert_non_null(pem);
    x = pem_to_x509(pem);
    free(pem);
    return x;
}

static void fingerprint(const char *path, unsigned char md[32]) {
    X509 *x = load_cert(path);
    unsigned int n = 0;

    assert_int_equal(X509_digest(x, EVP_sha256(), md, &n), 1);
    assert_int_equal(n, 32);
    X509_free(x);
}

static aor_tls *start(fx *f) {
    aor_tls *t = aor_tls_new(f->dir, NULL, f->err, sizeof f->err);

    if (t == NULL)
        fail_msg("aor_tls_new: %s", f->err);
    return t;
}

/* X509_verify_cert of leaf against ca with X509_V_FLAG_X509_STRICT and purpose
 * sslserver; returns the X509_V_* code (X509_V_OK when good). */
static int verify_strict(X509 *ca, X509 *leaf) {
    X509_STORE *store = X509_STORE_new();
    X509_STORE_CTX *ctx = X509_STORE_CTX_new();
    int rc;

    assert_non_null(store);
    assert_non_null(ctx);
    assert_int_equal(X509_STORE_add_cert(store, ca), 1);
    assert_int_equal(X509_STORE_CTX_init(ctx, store, leaf, NULL), 1);
    X509_VERIFY_PARAM_set_flags(X509_STORE_CTX_get0_param(ctx), X509_V_FLAG_X509_STRICT);
    assert_int_equal(X509_STORE_CTX_set_purpose(ctx, X509_PURPOSE_SSL_SERVER), 1);
    rc = X509_verify_cert(ctx) == 1 ? X509_V_OK : X509_STORE_CTX_get_error(ctx);
    X509_STORE_CTX_free(ctx);
    X509_STORE_free(store);
    return rc;
}

static int ext_critical(X509 *x, int nid) {
    int i = X509_get_ext_by_NID(x, nid, -1);

    assert_true(i >= 0);
    return X509_EXTENSION_get_critical(X509_get_ext(x, i));
}

static long validity_s(X509 *x) {
    int days, secs;

    assert_int_equal(ASN1_TIME_diff(&days, &secs, X509_get0_notBefore(x), X509_get0_notAfter(x)),
                     1);
    return (long)days * 86400 + secs;
}

static long seconds_from_now(const ASN1_TIME *t) {
    int days, secs;

    assert_int_equal(ASN1_TIME_diff(&days, &secs, NULL, t), 1);
    return (long)days * 86400 + secs;
}

static int serial_bits(X509 *x) {
    BIGNUM *bn = ASN1_INTEGER_to_BN(X509_get0_serialNumber(x), NULL);
    int bits;

    assert_non_null(bn);
    assert_false(BN_is_negative(bn));
    bits = BN_num_bits(bn);
    BN_free(bn);
    return bits;
}

static void assert_p256(X509 *x) {
    EVP_PKEY *pk = X509_get0_pubkey(x);
    char group[64];
    size_t n = 0;

    assert_non_null(pk);
    assert_int_equal(EVP_PKEY_get_base_id(pk), EVP_PKEY_EC);
    assert_int_equal(EVP_PKEY_get_group_name(pk, group, sizeof group, &n), 1);
    assert_string_equal(group, "prime256v1");
}

static char *cn_of(X509 *x, char *out, size_t outlen) {
    int n = X509_NAME_get_text_by_NID(X509_get_subject_name(x), NID_commonName, out, (int)outlen);

    return n < 0 ? NULL : out;
}

/* --- CA files -------------------------------------------------------------------- */

/* First start: the directory chain, ca.pem, ca.key, bundle.pem appear with the spec's
 * modes (§9), whatever the umask; the CA certificate is what docs/tls.md promises. */
static void test_first_start_creates_files(void **state) {
    fx *f = *state;
    char ca[256], key[256], bundle[256], parent[256], tmp[256];
    mode_t old = umask(0077); /* would make ca.pem 0600 without an explicit chmod */
    aor_tls *t = start(f);
    X509 *x;
    char cn[128];
    long left;

    umask(old);
    path_in(f, "ca.pem", ca, sizeof ca);
    path_in(f, "ca.key", key, sizeof key);
    path_in(f, "bundle.pem", bundle, sizeof bundle);
    assert_true(snprintf(parent, sizeof parent, "%s/share", f->root) < (int)sizeof parent);
    assert_string_equal(aor_tls_ca_path(t), ca);
    assert_string_equal(aor_tls_bundle_path(t), bundle);
    assert_int_equal(mode_of(f->dir), 0700);
    assert_int_equal(mode_of(parent), 0700);
    assert_int_equal(mode_of(key), 0600);
    assert_int_equal(mode_of(ca), 0600); /* spec §9 */
    assert_int_equal(mode_of(bundle), 0644);
    path_in(f, "ca.key.tmp", tmp, sizeof tmp);
    assert_int_not_equal(access(tmp, F_OK), 0);
    path_in(f, "ca.pem.tmp", tmp, sizeof tmp);
    assert_int_not_equal(access(tmp, F_OK), 0);

    x = load_cert(ca);
    assert_non_null(cn_of(x, cn, sizeof cn));
    assert_memory_equal(cn, "aor local CA (", 14);
    assert_non_null(strchr(cn, '@'));
    assert_int_equal(cn[strlen(cn) - 1], ')');
    assert_int_equal(X509_NAME_cmp(X509_get_subject_name(x), X509_get_issuer_name(x)), 0);
    assert_int_equal(X509_check_ca(x), 1);
    assert_int_equal(ext_critical(x, NID_basic_constraints), 1);
    assert_int_equal(X509_get_pathlen(x), 0);
    assert_int_equal(ext_critical(x, NID_key_usage), 1);
    assert_int_equal(X509_get_key_usage(x), KU_KEY_CERT_SIGN | KU_CRL_SIGN);
    assert_non_null(X509_get0_subject_key_id(x));
    assert_int_equal(ext_critical(x, NID_subject_key_identifier), 0);
    assert_p256(x);
    assert_true(serial_bits(x) >= 100);
    left = seconds_from_now(X509_get0_notAfter(x));
    assert_true(left > 3649L * 86400 && left <= 3650L * 86400);
    assert_true(seconds_from_now(X509_get0_notBefore(x)) <= 0);
    assert_int_equal(X509_get_signature_nid(x), NID_ecdsa_with_SHA256);
    X509_free(x);
    aor_tls_free(t);
}

/* bundle.pem is the system bundle followed by ca.pem, so SSL_CERT_FILE=bundle.pem keeps
 * trusting real servers and trusts aor. */
static void test_bundle_is_system_plus_ca(void **state) {
    fx *f = *state;
    aor_tls *t = start(f);
    size_t blen, clen, slen = 0;
    char *bundle = slurp(aor_tls_bundle_path(t), &blen);
    char *ca = slurp(aor_tls_ca_path(t), &clen);
    char *sys = slurp(SYSTEM_BUNDLE, &slen);

    assert_non_null(bundle);
    assert_non_null(ca);
    assert_true(blen >= clen);
    assert_memory_equal(bundle + blen - clen, ca, clen);
    if (sys != NULL) {
        assert_null(aor_tls_warning(t));
        assert_true(blen >= slen + clen);
        assert_memory_equal(bundle, sys, slen);
    } else {
        assert_non_null(aor_tls_warning(t));
    }
    free(sys);
    free(ca);
    free(bundle);
    aor_tls_free(t);
}

/* Second start loads the same CA (same fingerprint, key untouched); an up-to-date
 * bundle is left alone, an outdated one is rewritten. */
static void test_second_start_same_ca(void **state) {
    fx *f = *state;
    unsigned char fp1[32], fp2[32];
    char ca[256], key[256], bundle[256];
    char *key1, *key2, *b1, *b2;
    struct stat st1, st2;
    aor_tls *t = start(f);

    path_in(f, "ca.pem", ca, sizeof ca);
    path_in(f, "ca.key", key, sizeof key);
    path_in(f, "bundle.pem", bundle, sizeof bundle);
    fingerprint(ca, fp1);
    key1 = slurp(key, NULL);
    b1 = slurp(bundle, NULL);
    assert_int_equal(stat(bundle, &st1), 0);
    aor_tls_free(t);

    t = start(f);
    fingerprint(ca, fp2);
    assert_memory_equal(fp1, fp2, 32);
    key2 = slurp(key, NULL);
    assert_string_equal(key1, key2);
    assert_int_equal(stat(bundle, &st2), 0);
    assert_int_equal(st1.st_ino, st2.st_ino); /* not rewritten */
    aor_tls_free(t);

    spit(bundle, "stale\n");
    assert_int_equal(chmod(bundle, 0600), 0);
    t = start(f);
    b2 = slurp(bundle, NULL);
    assert_string_equal(b1, b2);
    assert_int_equal(mode_of(bundle), 0644);
    aor_tls_free(t);
    free(b2);
    free(b1);
    free(key2);
    free(key1);
}

/* A corrupt ca.key is an error naming the file; nothing is overwritten. */
static void test_corrupt_key_is_error(void **state) {
    fx *f = *state;
    char ca[256], key[256];
    char *pem1, *pem2, *k;

    aor_tls_free(start(f));
    path_in(f, "ca.pem", ca, sizeof ca);
    path_in(f, "ca.key", key, sizeof key);
    pem1 = slurp(ca, NULL);
    spit(key, "-----BEGIN PRIVATE KEY-----\nnot base64 at all\n-----END PRIVATE KEY-----\n");
    assert_int_equal(chmod(key, 0600), 0);
    assert_null(aor_tls_new(f->dir, NULL, f->err, sizeof f->err));
    assert_non_null(strstr(f->err, key));
    assert_non_null(strstr(f->err, "private key"));
    pem2 = slurp(ca, NULL);
    assert_string_equal(pem1, pem2);
    k = slurp(key, NULL);
    assert_non_null(strstr(k, "not base64"));
    free(k);
    free(pem2);
    free(pem1);
}

static void test_corrupt_cert_is_error(void **state) {
    fx *f = *state;
    char ca[256];
    char *pem;

    aor_tls_free(start(f));
    path_in(f, "ca.pem", ca, sizeof ca);
    spit(ca, "garbage\n");
    assert_null(aor_tls_new(f->dir, NULL, f->err, sizeof f->err));
    assert_non_null(strstr(f->err, ca));
    assert_non_null(strstr(f->err, "not a PEM certificate"));
    pem = slurp(ca, NULL);
    assert_string_equal(pem, "garbage\n");
    free(pem);
}

/* One of the pair missing: error naming the missing file, the other one kept. */
static void test_half_missing_is_error(void **state) {
    fx *f = *state;
    char ca[256], key[256];

    aor_tls_free(start(f));
    path_in(f, "ca.pem", ca, sizeof ca);
    path_in(f, "ca.key", key, sizeof key);
    assert_int_equal(unlink(key), 0);
    assert_null(aor_tls_new(f->dir, NULL, f->err, sizeof f->err));
    assert_non_null(strstr(f->err, key));
    assert_non_null(strstr(f->err, "missing"));
    assert_int_equal(access(ca, F_OK), 0);
    assert_int_not_equal(access(key, F_OK), 0);
}

/* A key from another CA does not silently pass. */
static void test_mismatched_key_is_error(void **state) {
    fx *f = *state;
    char key[256], other_dir[160], other_key[200];
    char *k;
    aor_tls *t;

    aor_tls_free(start(f));
    assert_true(snprintf(other_dir, sizeof other_dir, "%s/other", f->root) < (int)sizeof other_dir);
    t = aor_tls_new(other_dir, NULL, f->err, sizeof f->err);
    assert_non_null(t);
    aor_tls_free(t);
    assert_true(snprintf(other_key, sizeof other_key, "%s/ca.key", other_dir) <
                (int)sizeof other_key);
    path_in(f, "ca.key", key, sizeof key);
    k = slurp(other_key, NULL);
    spit(key, k);
    free(k);
    assert_null(aor_tls_new(f->dir, NULL, f->err, sizeof f->err));
    assert_non_null(strstr(f->err, key));
    assert_non_null(strstr(f->err, "is not the key of"));
}

/* A readable-by-others ca.key is tightened to 0600, with a warning to log. */
static void test_loose_key_mode_tightened(void **state) {
    fx *f = *state;
    char key[256];
    aor_tls *t;

    aor_tls_free(start(f));
    path_in(f, "ca.key", key, sizeof key);
    assert_int_equal(chmod(key, 0644), 0);
    t = start(f);
    assert_int_equal(mode_of(key), 0600);
    assert_non_null(aor_tls_warning(t));
    assert_non_null(strstr(aor_tls_warning(t), "ca.key had mode 0644"));
    aor_tls_free(t);
}

/* A data directory others can write to is refused (they could swap ca.pem). */
static void test_group_writable_dir_refused(void **state) {
    fx *f = *state;

    aor_tls_free(start(f));
    assert_int_equal(chmod(f->dir, 0777), 0);
    assert_null(aor_tls_new(f->dir, NULL, f->err, sizeof f->err));
    assert_non_null(strstr(f->err, f->dir));
    assert_non_null(strstr(f->err, "writable by group or others"));
    assert_null(aor_tls_new("", NULL, f->err, sizeof f->err));
}

/* Writes a CA of our own making into f->dir (as a user bringing their own CA would). */
static void write_own_ca(fx *f, int rsa, long not_after_s, const char *bc, const char *ku,
                         const char *nc) {
    char path[256], parent[160];
    EVP_PKEY *k = rsa ? EVP_RSA_gen(2048) : EVP_EC_gen("P-256");
    X509 *x = X509_new();
    X509V3_CTX v3;
    X509_EXTENSION *ext;
    const struct {
        int nid;
        const char *v;
    } exts[] = {{NID_basic_constraints, bc},
                {NID_key_usage, ku},
                {NID_subject_key_identifier, "hash"},
                {NID_name_constraints, nc}};
    FILE *fp;

    assert_non_null(k);
    assert_non_null(x);
    assert_int_equal(X509_set_version(x, X509_VERSION_3), 1);
    assert_int_equal(ASN1_INTEGER_set(X509_get_serialNumber(x), 4242), 1);
    assert_int_equal(X509_NAME_add_entry_by_txt(X509_get_subject_name(x), "CN", MBSTRING_ASC,
                                                (const unsigned char *)"my own CA", -1, -1, 0),
                     1);
    assert_int_equal(X509_set_issuer_name(x, X509_get_subject_name(x)), 1);
    assert_non_null(X509_gmtime_adj(X509_getm_notBefore(x), -3L * 86400));
    assert_non_null(X509_gmtime_adj(X509_getm_notAfter(x), not_after_s));
    assert_int_equal(X509_set_pubkey(x, k), 1);
    X509V3_set_ctx(&v3, x, x, NULL, NULL, 0);
    for (size_t i = 0; i < sizeof exts / sizeof exts[0]; i++) {
        if (exts[i].v == NULL)
            continue;
        ext = X509V3_EXT_nconf_nid(NULL, &v3, exts[i].nid, exts[i].v);
        assert_non_null(ext);
        assert_int_equal(X509_add_ext(x, ext, -1), 1);
        X509_EXTENSION_free(ext);
    }
    assert_true(X509_sign(x, k, EVP_sha256()) > 0);

    assert_true(snprintf(parent, sizeof parent, "%s/share", f->root) < (int)sizeof parent);
    assert_int_equal(mkdir(parent, 0700), 0);
    assert_int_equal(mkdir(f->dir, 0700), 0);
    path_in(f, "ca.pem", path, sizeof path);
    fp = fopen(path, "w");
    assert_non_null(fp);
    assert_int_equal(PEM_write_X509(fp, x), 1);
    assert_int_equal(fclose(fp), 0);
    path_in(f, "ca.key", path, sizeof path);
    fp = fopen(path, "w");
    assert_non_null(fp);
    assert_int_equal(chmod(path, 0600), 0);
    assert_int_equal(PEM_write_PrivateKey(fp, k, NULL, NULL, 0, NULL, NULL), 1);
    assert_int_equal(fclose(fp), 0);
    X509_free(x);
    EVP_PKEY_free(k);
}

/* An expired CA is an error that says what to do, not a silent new CA. */
static void test_expired_ca_refused(void **state) {
    fx *f = *state;
    char ca[256];

    write_own_ca(f, 0, -86400, "critical,CA:TRUE", "critical,keyCertSign,cRLSign", NULL);
    path_in(f, "ca.pem", ca, sizeof ca);
    assert_null(aor_tls_new(f->dir, NULL, f->err, sizeof f->err));
    assert_non_null(strstr(f->err, ca));
    assert_non_null(strstr(f->err, "has expired"));
}

/* A certificate that is not a CA cannot sign leaves: refused at start. */
static void test_non_ca_cert_refused(void **state) {
    fx *f = *state;

    write_own_ca(f, 0, 86400L * 30, "critical,CA:FALSE", "critical,digitalSignature", NULL);
    assert_null(aor_tls_new(f->dir, NULL, f->err, sizeof f->err));
    assert_non_null(strstr(f->err, "not a CA certificate"));
}

/* A user's own RSA CA is used as it is: leaves are signed by it and verify strictly. */
static void test_own_rsa_ca_used(void **state) {
    fx *f = *state;
    aor_tls *t;
    X509 *ca, *leaf;
    char *pem = NULL;

    write_own_ca(f, 1, 86400L * 365, "critical,CA:TRUE", "critical,keyCertSign,cRLSign", NULL);
    t = start(f);
    ca = load_cert(aor_tls_ca_path(t));
    assert_int_equal(aor_tls_leaf_pem(t, "api.openai.com", &pem), 0);
    leaf = pem_to_x509(pem);
    assert_int_equal(verify_strict(ca, leaf), X509_V_OK);
    assert_int_equal(X509_get_signature_nid(leaf), NID_sha256WithRSAEncryption);
    X509_free(leaf);
    X509_free(ca);
    free(pem);
    aor_tls_free(t);
}

/* --- leaves ---------------------------------------------------------------------- */

static void test_host_check(void **state) {
    static const struct {
        const char *in, *out;
        int kind;
    } good[] = {
        {"api.openai.com", "api.openai.com", AOR_TLS_NAME_DNS},
        {"API.OpenAI.COM", "api.openai.com", AOR_TLS_NAME_DNS},
        {"api.anthropic.com.", "api.anthropic.com", AOR_TLS_NAME_DNS},
        {"localhost", "localhost", AOR_TLS_NAME_DNS},
        {"xn--bcher-kva.example", "xn--bcher-kva.example", AOR_TLS_NAME_DNS},
        {"1.2.3.4.nip.io", "1.2.3.4.nip.io", AOR_TLS_NAME_DNS},
        {"127.0.0.1", "127.0.0.1", AOR_TLS_NAME_IP},
        {"::1", "::1", AOR_TLS_NAME_IP},
        {"2001:DB8:0:0::1", "2001:db8::1", AOR_TLS_NAME_IP},
    };
    static const char *bad[] = {
        "",
        ".",
        "..",
        "a..b",
        ".a",
        "-a.com",
        "a-.com",
        "a.-b.com",
        "a_b.com",
        "a b.com",
        "*.openai.com",
        "a.com..",
        "1.2.3",
        "999.1.1.1",
        "01.2.3.4",
        "host:443",
        "\xc3\xa9.com",
        "api.openai.com\n",
        "fe80::1%eth0",
        "a/b",
    };
    char out[AOR_TLS_HOST_MAX + 1], label64[65], long_ok[AOR_TLS_HOST_MAX + 2];
    char long_bad[AOR_TLS_HOST_MAX + 3];

    for (size_t i = 0; i < sizeof good / sizeof good[0]; i++) {
        assert_int_equal(aor_tls_host_check(good[i].in, out), good[i].kind);
        assert_string_equal(out, good[i].out);
    }
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        errno = 0;
        if (aor_tls_host_check(bad[i], out) != -1)
            fail_msg("accepted bad host \"%s\"", bad[i]);
        assert_int_equal(errno, EINVAL);
    }
    assert_int_equal(aor_tls_host_check(NULL, out), -1);

    memset(label64, 'a', 64);
    label64[64] = '\0';
    assert_int_equal(aor_tls_host_check(label64, out), -1);
    label64[63] = '\0';
    assert_int_equal(aor_tls_host_check(label64, out), AOR_TLS_NAME_DNS);

    /* 253 bytes: labels of 63 and dots; plus an optional trailing dot */
    memset(long_ok, 'b', AOR_TLS_HOST_MAX);
    for (int i = 63; i < AOR_TLS_HOST_MAX; i += 64)
        long_ok[i] = '.';
    long_ok[AOR_TLS_HOST_MAX] = '\0';
    assert_int_equal(aor_tls_host_check(long_ok, out), AOR_TLS_NAME_DNS);
    assert_int_equal(strlen(out), AOR_TLS_HOST_MAX);
    long_ok[AOR_TLS_HOST_MAX] = '.';
    long_ok[AOR_TLS_HOST_MAX + 1] = '\0';
    assert_int_equal(aor_tls_host_check(long_ok, out), AOR_TLS_NAME_DNS);
    memcpy(long_bad, long_ok, AOR_TLS_HOST_MAX);
    long_bad[AOR_TLS_HOST_MAX] = 'c';
    long_bad[AOR_TLS_HOST_MAX + 1] = '\0';
    assert_int_equal(aor_tls_host_check(long_bad, out), -1);
}

/* The leaf for api.openai.com verifies strictly against the CA and has the SAN, EKU,
 * AKI, key usage, validity the spec asks for. */
static void test_leaf_verifies_strictly(void **state) {
    fx *f = *state;
    aor_tls *t = start(f);
    X509 *ca = load_cert(aor_tls_ca_path(t)), *leaf;
    char *pem = NULL, cn[128];
    GENERAL_NAMES *san;
    GENERAL_NAME *gn;
    int crit = -1;
    long nb;

    assert_int_equal(aor_tls_leaf_pem(t, "api.openai.com", &pem), 0);
    leaf = pem_to_x509(pem);
    assert_int_equal(verify_strict(ca, leaf), X509_V_OK);
    assert_int_equal(X509_check_host(leaf, "api.openai.com", 0, 0, NULL), 1);
    assert_int_not_equal(X509_check_host(leaf, "api.anthropic.com", 0, 0, NULL), 1);
    assert_string_equal(cn_of(leaf, cn, sizeof cn), "api.openai.com");
    assert_int_equal(X509_NAME_cmp(X509_get_issuer_name(leaf), X509_get_subject_name(ca)), 0);

    san = X509_get_ext_d2i(leaf, NID_subject_alt_name, &crit, NULL);
    assert_non_null(san);
    assert_int_equal(crit, 0);
    assert_int_equal(sk_GENERAL_NAME_num(san), 1);
    gn = sk_GENERAL_NAME_value(san, 0);
    assert_int_equal(gn->type, GEN_DNS);
    assert_int_equal(ASN1_STRING_length(gn->d.dNSName), 14);
    assert_memory_equal(ASN1_STRING_get0_data(gn->d.dNSName), "api.openai.com", 14);
    GENERAL_NAMES_free(san);

    assert_int_equal(X509_get_extended_key_usage(leaf), XKU_SSL_SERVER);
    assert_int_equal(X509_get_key_usage(leaf), KU_DIGITAL_SIGNATURE);
    assert_int_equal(ext_critical(leaf, NID_key_usage), 1);
    assert_int_equal(X509_check_ca(leaf), 0);
    assert_int_equal(ext_critical(leaf, NID_basic_constraints), 1);
    assert_non_null(X509_get0_authority_key_id(leaf));
    assert_int_equal(
        ASN1_OCTET_STRING_cmp(X509_get0_authority_key_id(leaf), X509_get0_subject_key_id(ca)), 0);
    assert_true(validity_s(leaf) <= 199L * 86400);
    assert_true(validity_s(leaf) > 190L * 86400);
    nb = seconds_from_now(X509_get0_notBefore(leaf));
    assert_true(nb <= -86400 + 5 && nb >= -86400 - 5); /* backdated one day */
    assert_true(serial_bits(leaf) >= 100);
    assert_p256(leaf);
    assert_int_equal(X509_get_version(leaf), X509_VERSION_3);

    X509_free(leaf);
    X509_free(ca);
    free(pem);
    aor_tls_free(t);
}

/* Same check with the openssl command line (spec issue 4 item 7), and a negative control
 * against a different CA so the check can fail. */
static void test_leaf_openssl_cli(void **state) {
    fx *f = *state;
    char leaf_path[160], other_dir[160], cmd[1024];
    char *pem = NULL;
    aor_tls *t, *other;
    int rc;

    if (access("/usr/bin/openssl", X_OK) != 0)
        skip();
    t = start(f);
    assert_true(snprintf(other_dir, sizeof other_dir, "%s/other", f->root) < (int)sizeof other_dir);
    other = aor_tls_new(other_dir, NULL, f->err, sizeof f->err);
    assert_non_null(other);
    assert_int_equal(aor_tls_leaf_pem(t, "api.openai.com", &pem), 0);
    assert_true(snprintf(leaf_path, sizeof leaf_path, "%s/leaf.pem", f->root) <
                (int)sizeof leaf_path);
    spit(leaf_path, pem);

    assert_true(snprintf(cmd, sizeof cmd,
                         "/usr/bin/openssl verify -x509_strict -purpose sslserver -verify_hostname "
                         "api.openai.com -CAfile %s %s >/dev/null 2>&1",
                         aor_tls_ca_path(t), leaf_path) < (int)sizeof cmd);
    rc = system(cmd);
    assert_true(WIFEXITED(rc));
    assert_int_equal(WEXITSTATUS(rc), 0);

    assert_true(snprintf(cmd, sizeof cmd,
                         "/usr/bin/openssl verify -x509_strict -CAfile %s %s >/dev/null 2>&1",
                         aor_tls_ca_path(other), leaf_path) < (int)sizeof cmd);
    rc = system(cmd);
    assert_true(WIFEXITED(rc));
    assert_int_not_equal(WEXITSTATUS(rc), 0);

    free(pem);
    aor_tls_free(other);
    aor_tls_free(t);
}

/* Names over 64 bytes get no CN (RFC 5280 limit) and a critical SAN; IP hosts get an
 * IP SAN; both still verify strictly. Upper case is folded. */
static void test_leaf_long_and_ip_names(void **state) {
    fx *f = *state;
    aor_tls *t = start(f);
    X509 *ca = load_cert(aor_tls_ca_path(t)), *leaf;
    char *pem = NULL, cn[128], host[128];
    int crit = -1;
    GENERAL_NAMES *san;

    memset(host, 'x', 101); /* two labels of 50: 113 bytes with the domain */
    host[50] = '.';
    memcpy(host + 101, ".example.com", sizeof ".example.com");
    assert_int_equal(aor_tls_leaf_pem(t, host, &pem), 0);
    leaf = pem_to_x509(pem);
    assert_int_equal(verify_strict(ca, leaf), X509_V_OK);
    assert_null(cn_of(leaf, cn, sizeof cn));
    assert_int_equal(X509_check_host(leaf, host, 0, 0, NULL), 1);
    san = X509_get_ext_d2i(leaf, NID_subject_alt_name, &crit, NULL);
    assert_non_null(san);
    assert_int_equal(crit, 1);
    GENERAL_NAMES_free(san);
    X509_free(leaf);
    free(pem);

    assert_int_equal(aor_tls_leaf_pem(t, "127.0.0.1", &pem), 0);
    leaf = pem_to_x509(pem);
    assert_int_equal(verify_strict(ca, leaf), X509_V_OK);
    assert_int_equal(X509_check_ip_asc(leaf, "127.0.0.1", 0), 1);
    assert_null(cn_of(leaf, cn, sizeof cn)); /* no CN: see test_nc_ip_leaves */
    san = X509_get_ext_d2i(leaf, NID_subject_alt_name, &crit, NULL);
    assert_non_null(san);
    assert_int_equal(crit, 1);
    assert_int_equal(sk_GENERAL_NAME_num(san), 1);
    assert_int_equal(sk_GENERAL_NAME_value(san, 0)->type, GEN_IPADD);
    GENERAL_NAMES_free(san);
    X509_free(leaf);
    free(pem);

    assert_int_equal(aor_tls_leaf_pem(t, "API.Mistral.AI", &pem), 0);
    leaf = pem_to_x509(pem);
    assert_string_equal(cn_of(leaf, cn, sizeof cn), "api.mistral.ai");
    X509_free(leaf);
    free(pem);

    pem = NULL;
    errno = 0;
    assert_int_equal(aor_tls_leaf_pem(t, "bad_name.example", &pem), -1);
    assert_int_equal(errno, EINVAL);
    assert_null(pem);
    X509_free(ca);
    aor_tls_free(t);
}

/* The cache hands out the same leaf for a name, keeps at most AOR_TLS_CACHE_MAX, and
 * evicts the least recently used. Also reports leaf making speed. */
static void test_leaf_cache(void **state) {
    fx *f = *state;
    aor_tls *t = start(f);
    char *keep1, *keep2, *drop1, *drop2, *p, name[64];
    struct timespec a, b;
    double ms;

    assert_int_equal(aor_tls_cache_size(t), 1); /* localhost, from the start-up check */
    assert_int_equal(aor_tls_leaf_pem(t, "drop.example", &drop1), 0);
    assert_int_equal(aor_tls_leaf_pem(t, "keep.example", &keep1), 0);
    assert_int_equal(aor_tls_leaf_pem(t, "KEEP.example", &keep2), 0);
    assert_string_equal(keep1, keep2); /* same name, same cert */
    free(keep2);
    assert_int_equal(aor_tls_cache_size(t), 3);

    clock_gettime(CLOCK_MONOTONIC, &a);
    for (int i = 0; i < AOR_TLS_CACHE_MAX - 3; i++) {
        assert_true(snprintf(name, sizeof name, "h%d.example", i) < (int)sizeof name);
        assert_int_equal(aor_tls_leaf_pem(t, name, &p), 0);
        free(p);
    }
    clock_gettime(CLOCK_MONOTONIC, &b);
    ms = ((double)(b.tv_sec - a.tv_sec) * 1e3 + (double)(b.tv_nsec - a.tv_nsec) / 1e6) /
         (AOR_TLS_CACHE_MAX - 3);
    print_message("leaf certificate: %.3f ms each (incl. PEM encoding)\n", ms);
    assert_int_equal(aor_tls_cache_size(t), AOR_TLS_CACHE_MAX);

    assert_int_equal(aor_tls_leaf_pem(t, "keep.example", &keep2), 0); /* touch */
    assert_string_equal(keep1, keep2);
    free(keep2);
    for (int i = 0; i < 2; i++) { /* evicts localhost, then drop.example */
        assert_true(snprintf(name, sizeof name, "more%d.example", i) < (int)sizeof name);
        assert_int_equal(aor_tls_leaf_pem(t, name, &p), 0);
        free(p);
    }
    assert_int_equal(aor_tls_cache_size(t), AOR_TLS_CACHE_MAX);
    assert_int_equal(aor_tls_leaf_pem(t, "drop.example", &drop2), 0);
    assert_string_not_equal(drop1, drop2); /* was evicted: a new cert */
    assert_int_equal(aor_tls_leaf_pem(t, "keep.example", &keep2), 0);
    assert_string_equal(keep1, keep2); /* recently used: survived */
    assert_int_equal(aor_tls_cache_size(t), AOR_TLS_CACHE_MAX);
    free(keep2);
    free(drop2);
    free(drop1);
    free(keep1);
    aor_tls_free(t);
}

/* --- handshakes ------------------------------------------------------------------ */

enum { HS_PENDING, HS_OK, HS_FAILED };

typedef struct {
    SSL_CTX *cctx;
    SSL *c, *s;
    int fds[2];
    int cstate, sstate;
    unsigned long creason, sreason; /* ERR_GET_REASON of the failure */
} hs;

static SSL_CTX *client_ctx(const char *trust) {
    SSL_CTX *c = SSL_CTX_new(TLS_client_method());

    assert_non_null(c);
    assert_int_equal(SSL_CTX_load_verify_locations(c, trust, NULL), 1);
    SSL_CTX_set_verify(c, SSL_VERIFY_PEER, NULL);
    X509_VERIFY_PARAM_set_flags(SSL_CTX_get0_param(c), X509_V_FLAG_X509_STRICT);
    return c;
}

/* Client + server SSL over a non-blocking socketpair. sni/verify_host may be NULL. */
static void hs_init(hs *h, aor_tls *t, SSL_CTX *cctx, const char *sni, const char *verify_host,
                    const unsigned char *alpn, unsigned alpn_len) {
    memset(h, 0, sizeof *h);
    h->cctx = cctx;
    assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0, h->fds), 0);
    h->c = SSL_new(cctx);
    h->s = SSL_new(aor_tls_server_ctx(t));
    assert_non_null(h->c);
    assert_non_null(h->s);
    assert_int_equal(SSL_set_fd(h->c, h->fds[0]), 1);
    assert_int_equal(SSL_set_fd(h->s, h->fds[1]), 1);
    SSL_set_connect_state(h->c);
    SSL_set_accept_state(h->s);
    if (sni != NULL)
        assert_int_equal(SSL_set_tlsext_host_name(h->c, sni), 1);
    if (verify_host != NULL)
        assert_int_equal(SSL_set1_host(h->c, verify_host), 1);
    if (alpn != NULL)
        assert_int_equal(SSL_set_alpn_protos(h->c, alpn, alpn_len), 0);
}

static void hs_step(SSL *ssl, int *st, unsigned long *reason) {
    int r, e;

    if (*st != HS_PENDING)
        return;
    r = SSL_do_handshake(ssl);
    if (r == 1) {
        *st = HS_OK;
        return;
    }
    e = SSL_get_error(ssl, r);
    if (e == SSL_ERROR_WANT_READ || e == SSL_ERROR_WANT_WRITE)
        return;
    *st = HS_FAILED;
    *reason = ERR_GET_REASON(ERR_peek_last_error());
    ERR_clear_error();
}

static void hs_run(hs *h) {
    h->cstate = h->sstate = HS_PENDING;
    for (int i = 0; i < 100 && (h->cstate == HS_PENDING || h->sstate == HS_PENDING); i++) {
        hs_step(h->c, &h->cstate, &h->creason);
        hs_step(h->s, &h->sstate, &h->sreason);
    }
}

static void hs_free(hs *h) {
    SSL_free(h->c);
    SSL_free(h->s);
    close(h->fds[0]);
    close(h->fds[1]);
    SSL_CTX_free(h->cctx);
}

static const unsigned char alpn_h2_h11[] = "\x02h2\x08http/1.1";

/* SNI api.anthropic.com, hostname verification on, client offers h2 + http/1.1:
 * handshake succeeds, ALPN is http/1.1, bytes flow, the daemon learns the host. */
static void test_handshake_sni_alpn(void **state) {
    fx *f = *state;
    aor_tls *t = start(f);
    const unsigned char *proto = NULL;
    unsigned int plen = 0;
    char buf[16];
    int n = -1;
    hs h;

    hs_init(&h, t, client_ctx(aor_tls_ca_path(t)), "api.anthropic.com", "api.anthropic.com",
            alpn_h2_h11, sizeof alpn_h2_h11 - 1);
    assert_null(aor_tls_conn_host(h.s));
    hs_run(&h);
    assert_int_equal(h.cstate, HS_OK);
    assert_int_equal(h.sstate, HS_OK);
    assert_int_equal(SSL_get_verify_result(h.c), X509_V_OK);
    SSL_get0_alpn_selected(h.c, &proto, &plen);
    assert_int_equal(plen, 8);
    assert_memory_equal(proto, "http/1.1", 8);
    assert_string_equal(aor_tls_conn_host(h.s), "api.anthropic.com");
    assert_true(SSL_version(h.c) >= TLS1_2_VERSION);

    assert_int_equal(SSL_write(h.c, "ping", 4), 4);
    for (int i = 0; i < 10 && n <= 0; i++)
        n = SSL_read(h.s, buf, sizeof buf);
    assert_int_equal(n, 4);
    assert_memory_equal(buf, "ping", 4);
    hs_free(&h);
    aor_tls_free(t);
}

/* Clients that trust bundle.pem (SSL_CERT_FILE) accept aor's leaves too, with TLS 1.2
 * forced (the 1.2 code path of the SNI callback). */
static void test_handshake_tls12_via_bundle(void **state) {
    fx *f = *state;
    aor_tls *t = start(f);
    SSL_CTX *c = client_ctx(aor_tls_bundle_path(t));
    hs h;

    assert_int_equal(SSL_CTX_set_max_proto_version(c, TLS1_2_VERSION), 1);
    hs_init(&h, t, c, "api.openai.com", "api.openai.com", NULL, 0);
    hs_run(&h);
    assert_int_equal(h.cstate, HS_OK);
    assert_int_equal(h.sstate, HS_OK);
    assert_int_equal(SSL_version(h.c), TLS1_2_VERSION);
    assert_string_equal(aor_tls_conn_host(h.s), "api.openai.com");
    hs_free(&h);
    aor_tls_free(t);
}

/* A client offering only h2 gets no ALPN (and still a handshake). */
static void test_handshake_h2_only_gets_no_alpn(void **state) {
    fx *f = *state;
    aor_tls *t = start(f);
    const unsigned char *proto = NULL;
    unsigned int plen = 0;
    hs h;

    hs_init(&h, t, client_ctx(aor_tls_ca_path(t)), "api.openai.com", "api.openai.com",
            (const unsigned char *)"\x02h2", 3);
    hs_run(&h);
    assert_int_equal(h.cstate, HS_OK);
    assert_int_equal(h.sstate, HS_OK);
    SSL_get0_alpn_selected(h.c, &proto, &plen);
    assert_int_equal(plen, 0);
    hs_free(&h);
    aor_tls_free(t);
}

/* No SNI: the connection's host from the preamble, else the default host, else
 * localhost. */
static void test_handshake_without_sni(void **state) {
    fx *f = *state;
    aor_tls *t = start(f);
    hs h;

    hs_init(&h, t, client_ctx(aor_tls_ca_path(t)), NULL, "api.groq.com", NULL, 0);
    assert_int_equal(aor_tls_set_conn_host(h.s, "API.groq.com"), 0);
    hs_run(&h);
    assert_int_equal(h.cstate, HS_OK);
    assert_string_equal(aor_tls_conn_host(h.s), "api.groq.com");
    hs_free(&h);

    hs_init(&h, t, client_ctx(aor_tls_ca_path(t)), NULL, "localhost", NULL, 0);
    hs_run(&h);
    assert_int_equal(h.cstate, HS_OK);
    assert_string_equal(aor_tls_conn_host(h.s), "localhost");
    hs_free(&h);

    assert_int_equal(aor_tls_set_default_host(t, "api.deepseek.com"), 0);
    assert_int_equal(aor_tls_set_default_host(t, "bad name"), -1);
    hs_init(&h, t, client_ctx(aor_tls_ca_path(t)), NULL, "api.deepseek.com", NULL, 0);
    hs_run(&h);
    assert_int_equal(h.cstate, HS_OK);
    assert_string_equal(aor_tls_conn_host(h.s), "api.deepseek.com");
    hs_free(&h);

    /* recognised by address only: IP SAN for the preamble's address */
    hs_init(&h, t, client_ctx(aor_tls_ca_path(t)), NULL, NULL, NULL, 0);
    assert_int_equal(X509_VERIFY_PARAM_set1_ip_asc(SSL_get0_param(h.c), "198.18.0.7"), 1);
    assert_int_equal(aor_tls_set_conn_host(h.s, "198.18.0.7"), 0);
    assert_int_equal(aor_tls_set_conn_host(h.s, "not valid!"), -1);
    hs_run(&h);
    assert_int_equal(h.cstate, HS_OK);
    assert_string_equal(aor_tls_conn_host(h.s), "198.18.0.7");
    hs_free(&h);

    /* the wrong leaf is caught by the client: hostname verification is real */
    hs_init(&h, t, client_ctx(aor_tls_ca_path(t)), NULL, "api.openai.com", NULL, 0);
    hs_run(&h);
    assert_int_equal(h.cstate, HS_FAILED);
    assert_int_equal(SSL_get_verify_result(h.c), X509_V_ERR_HOSTNAME_MISMATCH);
    hs_free(&h);
    aor_tls_free(t);
}

/* A syntactically bad SNI name fails the handshake with unrecognized_name: nothing from
 * it goes into a certificate, and no leaf is made for it. */
static void test_handshake_bad_sni_rejected(void **state) {
    fx *f = *state;
    aor_tls *t = start(f);
    size_t before = aor_tls_cache_size(t);
    static const char *bad[] = {"bad_name.example", "a..b", "-x.com", "*.openai.com"};

    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        hs h;

        hs_init(&h, t, client_ctx(aor_tls_ca_path(t)), bad[i], NULL, NULL, 0);
        hs_run(&h);
        assert_int_equal(h.sstate, HS_FAILED);
        assert_int_equal(h.cstate, HS_FAILED);
        assert_int_equal(h.creason, SSL_R_TLSV1_UNRECOGNIZED_NAME);
        assert_null(aor_tls_conn_host(h.s));
        hs_free(&h);
    }
    assert_int_equal(aor_tls_cache_size(t), before);
    aor_tls_free(t);
}

/* TLS 1.1 and older are refused by the server. */
static void test_handshake_tls11_refused(void **state) {
    fx *f = *state;
    aor_tls *t = start(f);
    SSL_CTX *c = client_ctx(aor_tls_ca_path(t));
    hs h;

    SSL_CTX_set_security_level(c, 0);
    assert_int_equal(SSL_CTX_set_min_proto_version(c, TLS1_VERSION), 1);
    assert_int_equal(SSL_CTX_set_max_proto_version(c, TLS1_1_VERSION), 1);
    assert_int_equal(SSL_CTX_set_cipher_list(c, "DEFAULT:@SECLEVEL=0"), 1);
    hs_init(&h, t, c, "api.openai.com", NULL, NULL, 0);
    hs_run(&h);
    assert_int_equal(h.sstate, HS_FAILED);
    assert_int_equal(h.sreason, SSL_R_UNSUPPORTED_PROTOCOL);
    assert_int_not_equal(h.cstate, HS_OK);
    hs_free(&h);
    aor_tls_free(t);
}

/* --- name constraints (issue 4 item 7) ------------------------------------------- */

static const char *const nc_hosts[] = {"api.openai.com", "API.Anthropic.com.", "llm.corp.example",
                                       "10.1.2.3",       "bad_name",           NULL};

static aor_tls *start_hosts(fx *f, const char *const *hosts) {
    aor_tls *t = aor_tls_new(f->dir, hosts, f->err, sizeof f->err);

    if (t == NULL)
        fail_msg("aor_tls_new: %s", f->err);
    return t;
}

/* verify_strict of the leaf t makes for host. */
static int verify_host_leaf(aor_tls *t, X509 *ca, const char *host) {
    char *pem = NULL;
    X509 *leaf;
    int rc;

    assert_int_equal(aor_tls_leaf_pem(t, host, &pem), 0);
    leaf = pem_to_x509(pem);
    rc = verify_strict(ca, leaf);
    X509_free(leaf);
    free(pem);
    return rc;
}

/* The permitted subtrees of ca as text ("DNS:x", "IP:a/m"), one per line. */
static void nc_text(X509 *ca, char *out, size_t outlen) {
    int crit = -1;
    NAME_CONSTRAINTS *nc = X509_get_ext_d2i(ca, NID_name_constraints, &crit, NULL);
    size_t used = 0;

    out[0] = '\0';
    assert_non_null(nc);
    assert_int_equal(crit, 1);
    assert_null(nc->excludedSubtrees);
    for (int i = 0; i < sk_GENERAL_SUBTREE_num(nc->permittedSubtrees); i++) {
        GENERAL_NAME *gn = sk_GENERAL_SUBTREE_value(nc->permittedSubtrees, i)->base;
        char line[300];

        if (gn->type == GEN_DNS) {
            snprintf(line, sizeof line, "DNS:%.*s\n", ASN1_STRING_length(gn->d.dNSName),
                     (const char *)ASN1_STRING_get0_data(gn->d.dNSName));
        } else {
            const unsigned char *b = ASN1_STRING_get0_data(gn->d.iPAddress);
            int n = ASN1_STRING_length(gn->d.iPAddress);
            assert_int_equal(gn->type, GEN_IPADD);
            if (n == 8)
                snprintf(line, sizeof line, "IP:%d.%d.%d.%d/%d.%d.%d.%d\n", b[0], b[1], b[2], b[3],
                         b[4], b[5], b[6], b[7]);
            else
                snprintf(line, sizeof line, "IP:v6/%d\n", n);
        }
        assert_true(used + strlen(line) < outlen);
        memcpy(out + used, line, strlen(line) + 1);
        used += strlen(line);
    }
    NAME_CONSTRAINTS_free(nc);
}

/* A new CA with a host list carries a critical nameConstraints extension: leaves for
 * the listed hosts (and loopback IPs) verify strictly, a leaf for any other host fails
 * with X509_V_ERR_PERMITTED_VIOLATION. */
static void test_nc_new_ca_constrained(void **state) {
    fx *f = *state;
    aor_tls *t = start_hosts(f, nc_hosts);
    X509 *ca = load_cert(aor_tls_ca_path(t));
    char text[1024];

    nc_text(ca, text, sizeof text);
    assert_string_equal(text, "IP:127.0.0.0/255.0.0.0\n"
                              "IP:v6/32\n"
                              "DNS:api.openai.com\n"
                              "DNS:api.anthropic.com\n"
                              "DNS:llm.corp.example\n"
                              "IP:10.1.2.3/255.255.255.255\n");
    assert_true(aor_tls_warning(t) == NULL || strstr(aor_tls_warning(t), "name constr") == NULL);
    /* the start-up check used the first permitted name, not localhost */
    assert_int_equal(aor_tls_cache_size(t), 1);

    assert_int_equal(verify_host_leaf(t, ca, "api.openai.com"), X509_V_OK);
    assert_int_equal(verify_host_leaf(t, ca, "api.anthropic.com"), X509_V_OK);
    assert_int_equal(verify_host_leaf(t, ca, "llm.corp.example"), X509_V_OK);
    assert_int_equal(verify_host_leaf(t, ca, "eu.api.openai.com"), X509_V_OK); /* subdomain */
    assert_int_equal(verify_host_leaf(t, ca, "127.0.0.1"), X509_V_OK);
    assert_int_equal(verify_host_leaf(t, ca, "127.8.9.10"), X509_V_OK);
    assert_int_equal(verify_host_leaf(t, ca, "::1"), X509_V_OK);
    assert_int_equal(verify_host_leaf(t, ca, "10.1.2.3"), X509_V_OK);

    assert_int_equal(verify_host_leaf(t, ca, "www.example.com"), X509_V_ERR_PERMITTED_VIOLATION);
    assert_int_equal(verify_host_leaf(t, ca, "localhost"), X509_V_ERR_PERMITTED_VIOLATION);
    assert_int_equal(verify_host_leaf(t, ca, "xapi.openai.com"), X509_V_ERR_PERMITTED_VIOLATION);
    assert_int_equal(verify_host_leaf(t, ca, "openai.com"), X509_V_ERR_PERMITTED_VIOLATION);
    assert_int_equal(verify_host_leaf(t, ca, "10.1.2.4"), X509_V_ERR_PERMITTED_VIOLATION);
    assert_int_equal(verify_host_leaf(t, ca, "192.0.2.1"), X509_V_ERR_PERMITTED_VIOLATION);
    assert_int_equal(verify_host_leaf(t, ca, "2001:db8::1"), X509_V_ERR_PERMITTED_VIOLATION);
    X509_free(ca);
    aor_tls_free(t);
}

/* A client that enforces name constraints (OpenSSL's, as in curl, Python and Node) fails
 * the handshake for a host outside them and completes it for a listed one. */
static void test_nc_handshake(void **state) {
    fx *f = *state;
    aor_tls *t = start_hosts(f, nc_hosts);
    hs h;

    hs_init(&h, t, client_ctx(aor_tls_ca_path(t)), "api.openai.com", "api.openai.com", NULL, 0);
    hs_run(&h);
    assert_int_equal(h.cstate, HS_OK);
    assert_int_equal(SSL_get_verify_result(h.c), X509_V_OK);
    hs_free(&h);

    hs_init(&h, t, client_ctx(aor_tls_ca_path(t)), "www.example.com", "www.example.com", NULL, 0);
    hs_run(&h);
    assert_int_equal(h.cstate, HS_FAILED);
    assert_int_equal(SSL_get_verify_result(h.c), X509_V_ERR_PERMITTED_VIOLATION);
    hs_free(&h);
    aor_tls_free(t);
}

/* The openssl command line agrees (a negative control included). */
static void test_nc_openssl_cli(void **state) {
    fx *f = *state;
    char path[160], cmd[1024];
    char *pem = NULL;
    aor_tls *t;
    int rc;

    if (access("/usr/bin/openssl", X_OK) != 0)
        skip();
    t = start_hosts(f, nc_hosts);
    assert_true(snprintf(path, sizeof path, "%s/leaf.pem", f->root) < (int)sizeof path);
    for (int bad = 0; bad < 2; bad++) {
        assert_int_equal(aor_tls_leaf_pem(t, bad ? "www.example.com" : "api.openai.com", &pem), 0);
        spit(path, pem);
        free(pem);
        assert_true(snprintf(cmd, sizeof cmd,
                             "/usr/bin/openssl verify -x509_strict -purpose sslserver -CAfile %s "
                             "%s 2>&1 | grep -q '%s'",
                             aor_tls_ca_path(t), path,
                             bad ? "permitted subtree violation" : ": OK") < (int)sizeof cmd);
        rc = system(cmd);
        assert_true(WIFEXITED(rc));
        assert_int_equal(WEXITSTATUS(rc), 0);
    }
    aor_tls_free(t);
}

/* A config that gains a host the aor-made CA does not permit re-issues the CA: the old
 * pair is kept as ca.pem.old / ca.key.old, the new CA permits the old and new names, the
 * warning says what happened. A later start with fewer hosts keeps the CA. */
static void test_nc_reissue_for_new_host(void **state) {
    fx *f = *state;
    static const char *const more[] = {"api.openai.com", "new.example.net", NULL};
    static const char *const fewer[] = {"api.openai.com", NULL};
    unsigned char fp1[32], fp2[32], fp_old[32], fp3[32];
    char ca_path[256], old_path[256], key_old[256], text[1024];
    aor_tls *t = start_hosts(f, nc_hosts);
    X509 *ca;

    path_in(f, "ca.pem", ca_path, sizeof ca_path);
    path_in(f, "ca.pem.old", old_path, sizeof old_path);
    path_in(f, "ca.key.old", key_old, sizeof key_old);
    fingerprint(ca_path, fp1);
    aor_tls_free(t);

    t = start_hosts(f, more);
    fingerprint(ca_path, fp2);
    assert_memory_not_equal(fp1, fp2, 32);
    fingerprint(old_path, fp_old);
    assert_memory_equal(fp1, fp_old, 32);
    assert_int_equal(mode_of(key_old), 0600);
    assert_non_null(aor_tls_warning(t));
    assert_non_null(strstr(aor_tls_warning(t), "new.example.net"));
    assert_non_null(strstr(aor_tls_warning(t), "ca.pem.old"));
    ca = load_cert(ca_path);
    nc_text(ca, text, sizeof text);
    assert_non_null(strstr(text, "DNS:new.example.net\n"));
    assert_non_null(strstr(text, "DNS:llm.corp.example\n")); /* kept from the old CA */
    assert_non_null(strstr(text, "IP:10.1.2.3/"));
    assert_int_equal(verify_host_leaf(t, ca, "new.example.net"), X509_V_OK);
    assert_int_equal(verify_host_leaf(t, ca, "llm.corp.example"), X509_V_OK);
    X509_free(ca);
    aor_tls_free(t);

    t = start_hosts(f, fewer);
    fingerprint(ca_path, fp3);
    assert_memory_equal(fp2, fp3, 32);
    assert_true(aor_tls_warning(t) == NULL || strstr(aor_tls_warning(t), "name") == NULL);
    aor_tls_free(t);
}

/* A CA without name constraints (made without a host list, or an older aor) is kept,
 * whatever the hosts; so is a user's own constrained CA, with a warning naming the host
 * it leaves out. */
static void test_nc_existing_cas_kept(void **state) {
    fx *f = *state;
    unsigned char fp1[32], fp2[32];
    char ca_path[256];
    aor_tls *t = start(f);

    path_in(f, "ca.pem", ca_path, sizeof ca_path);
    fingerprint(ca_path, fp1);
    aor_tls_free(t);
    t = start_hosts(f, nc_hosts);
    fingerprint(ca_path, fp2);
    assert_memory_equal(fp1, fp2, 32);
    assert_true(aor_tls_warning(t) == NULL || strstr(aor_tls_warning(t), "name") == NULL);
    aor_tls_free(t);
}

static void test_nc_foreign_ca_warns(void **state) {
    fx *f = *state;
    unsigned char fp1[32], fp2[32];
    char ca_path[256], old_path[256];
    X509 *ca;
    aor_tls *t;

    write_own_ca(f, 0, 86400L * 365, "critical,CA:TRUE", "critical,keyCertSign,cRLSign",
                 "critical,permitted;DNS:api.openai.com");
    path_in(f, "ca.pem", ca_path, sizeof ca_path);
    path_in(f, "ca.pem.old", old_path, sizeof old_path);
    fingerprint(ca_path, fp1);
    t = start_hosts(f, nc_hosts);
    fingerprint(ca_path, fp2);
    assert_memory_equal(fp1, fp2, 32);
    assert_int_not_equal(access(old_path, F_OK), 0);
    assert_non_null(aor_tls_warning(t));
    assert_non_null(strstr(aor_tls_warning(t), "not made by aor"));
    /* its DNS-only constraints leave IP names free: 10.1.2.3 is fine */
    assert_non_null(strstr(aor_tls_warning(t), "api.anthropic.com and 1 more host(s)"));
    ca = load_cert(ca_path);
    assert_int_equal(verify_host_leaf(t, ca, "api.openai.com"), X509_V_OK);
    assert_int_equal(verify_host_leaf(t, ca, "api.anthropic.com"), X509_V_ERR_PERMITTED_VIOLATION);
    X509_free(ca);
    aor_tls_free(t);
}

/* aor_tls_reload with a new host re-issues the CA in the running object: later leaves
 * come from the new CA and verify; a failed reload leaves everything as it was. */
static void test_nc_reload(void **state) {
    fx *f = *state;
    static const char *const more[] = {"api.openai.com", "added.example.org", NULL};
    aor_tls *t = start_hosts(f, nc_hosts);
    X509 *ca;
    char ca_path[256], *pem = NULL;

    path_in(f, "ca.pem", ca_path, sizeof ca_path);
    assert_int_equal(aor_tls_leaf_pem(t, "llm.corp.example", &pem), 0);
    free(pem);
    assert_int_equal(aor_tls_cache_size(t), 2);
    assert_int_equal(aor_tls_reload(t, more, f->err, sizeof f->err), 0);
    assert_non_null(aor_tls_warning(t));
    assert_non_null(strstr(aor_tls_warning(t), "added.example.org"));
    assert_int_equal(aor_tls_cache_size(t), 0); /* leaves of the old CA are gone */
    ca = load_cert(ca_path);
    assert_int_equal(verify_host_leaf(t, ca, "added.example.org"), X509_V_OK);
    assert_int_equal(verify_host_leaf(t, ca, "api.openai.com"), X509_V_OK);
    X509_free(ca);

    /* the files vanish: the reload fails, the running CA goes on signing */
    path_in(f, "ca.key", ca_path, sizeof ca_path);
    assert_int_equal(unlink(ca_path), 0);
    assert_int_equal(aor_tls_reload(t, more, f->err, sizeof f->err), -1);
    assert_non_null(strstr(f->err, "ca.key is missing"));
    path_in(f, "ca.pem", ca_path, sizeof ca_path);
    ca = load_cert(ca_path);
    assert_int_equal(verify_host_leaf(t, ca, "added.example.org"), X509_V_OK);
    X509_free(ca);
    aor_tls_free(t);
}

/* The host list aord passes: built-in hosts, then each provider's base_url host and
 * intercept names, normalised, no repeats. */
static void test_nc_hosts_for_config(void **state) {
    char *intercept[] = {"API.OpenAI.com", "alias.example.com"};
    aor_provider_cfg p[2];
    aor_config cfg;
    char **hosts;
    size_t n = 0;

    memset(p, 0, sizeof p);
    memset(&cfg, 0, sizeof cfg);
    p[0].host = "127.0.0.1";
    p[1].host = "llm.corp.example";
    p[1].intercept = intercept;
    p[1].nintercept = 2;
    cfg.providers = p;
    cfg.nproviders = 2;
    hosts = aor_tls_hosts_for_config(&cfg);
    assert_non_null(hosts);
    while (hosts[n] != NULL)
        n++;
    assert_int_equal(n, 13); /* 10 built-in + 127.0.0.1, llm.corp.example, alias */
    assert_string_equal(hosts[0], "api.openai.com");
    assert_string_equal(hosts[10], "127.0.0.1");
    assert_string_equal(hosts[11], "llm.corp.example");
    assert_string_equal(hosts[12], "alias.example.com");
    aor_tls_hosts_free(hosts);
    hosts = aor_tls_hosts_for_config(NULL);
    assert_non_null(hosts);
    assert_string_equal(hosts[9], "api.fireworks.ai");
    assert_null(hosts[10]);
    aor_tls_hosts_free(hosts);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_first_start_creates_files, setup, teardown),
        cmocka_unit_test_setup_teardown(test_bundle_is_system_plus_ca, setup, teardown),
        cmocka_unit_test_setup_teardown(test_second_start_same_ca, setup, teardown),
        cmocka_unit_test_setup_teardown(test_corrupt_key_is_error, setup, teardown),
        cmocka_unit_test_setup_teardown(test_corrupt_cert_is_error, setup, teardown),
        cmocka_unit_test_setup_teardown(test_half_missing_is_error, setup, teardown),
        cmocka_unit_test_setup_teardown(test_mismatched_key_is_error, setup, teardown),
        cmocka_unit_test_setup_teardown(test_loose_key_mode_tightened, setup, teardown),
        cmocka_unit_test_setup_teardown(test_group_writable_dir_refused, setup, teardown),
        cmocka_unit_test_setup_teardown(test_expired_ca_refused, setup, teardown),
        cmocka_unit_test_setup_teardown(test_non_ca_cert_refused, setup, teardown),
        cmocka_unit_test_setup_teardown(test_own_rsa_ca_used, setup, teardown),
        cmocka_unit_test(test_host_check),
        cmocka_unit_test_setup_teardown(test_leaf_verifies_strictly, setup, teardown),
        cmocka_unit_test_setup_teardown(test_leaf_openssl_cli, setup, teardown),
        cmocka_unit_test_setup_teardown(test_leaf_long_and_ip_names, setup, teardown),
        cmocka_unit_test_setup_teardown(test_leaf_cache, setup, teardown),
        cmocka_unit_test_setup_teardown(test_handshake_sni_alpn, setup, teardown),
        cmocka_unit_test_setup_teardown(test_handshake_tls12_via_bundle, setup, teardown),
        cmocka_unit_test_setup_teardown(test_handshake_h2_only_gets_no_alpn, setup, teardown),
        cmocka_unit_test_setup_teardown(test_handshake_without_sni, setup, teardown),
        cmocka_unit_test_setup_teardown(test_handshake_bad_sni_rejected, setup, teardown),
        cmocka_unit_test_setup_teardown(test_handshake_tls11_refused, setup, teardown),
        cmocka_unit_test_setup_teardown(test_nc_new_ca_constrained, setup, teardown),
        cmocka_unit_test_setup_teardown(test_nc_handshake, setup, teardown),
        cmocka_unit_test_setup_teardown(test_nc_openssl_cli, setup, teardown),
        cmocka_unit_test_setup_teardown(test_nc_reissue_for_new_host, setup, teardown),
        cmocka_unit_test_setup_teardown(test_nc_existing_cas_kept, setup, teardown),
        cmocka_unit_test_setup_teardown(test_nc_foreign_ca_warns, setup, teardown),
        cmocka_unit_test_setup_teardown(test_nc_reload, setup, teardown),
        cmocka_unit_test(test_nc_hosts_for_config),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
