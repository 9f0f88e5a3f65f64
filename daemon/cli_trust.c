/* aor: the environment `aor run` sets and `aor env` prints — LD_PRELOAD, the CA trust
 * variables (spec §2 "Trust") and the sidecar base-URL variables (spec §2, last bullet).
 * See cli.h and docs/cli.md. */
#include "cli.h"
#include "envflag.h"
#include "paths.h"
#include "sysca.h"

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/x509.h>

#define NODE_MERGED_PREFIX "node-extra-ca-" /* shim/trust.c's MERGED_PREFIX */

/* Name of the merged NODE_EXTRA_CA_CERTS file for this merged content, by the shim's
 * rule (aor_trust_merged_name in shim/trust.c, docs/shim.md "Trust"), so both write and
 * find the same file: "node-extra-ca-<FNV-1a 64 of the bytes, 16 hex digits>.pem". One
 * file per distinct content: two programs started at once with different user files
 * never overwrite each other's file. malloc'd, or NULL on ENOMEM. */
static char *node_merged_name(const char *data, size_t len) {
    uint64_t h = 14695981039346656037ULL; /* FNV-1a 64 offset basis */
    for (size_t i = 0; i < len; i++) {
        h ^= (unsigned char)data[i];
        h *= 1099511628211ULL; /* FNV-1a 64 prime */
    }
    char *out = NULL;
    if (asprintf(&out, NODE_MERGED_PREFIX "%016llx.pem", (unsigned long long)h) < 0)
        return NULL;
    return out;
}

int aor_cli_plan_add(aor_cli_plan *p, const char *name, const char *value) {
    aor_cli_var *nv = realloc(p->v, (p->n + 1) * sizeof *nv);
    if (!nv)
        return -1;
    p->v = nv;
    char *n = strdup(name), *v = strdup(value);
    if (!n || !v) {
        free(n);
        free(v);
        return -1;
    }
    p->v[p->n].name = n;
    p->v[p->n].value = v;
    p->n++;
    return 0;
}

void aor_cli_plan_free(aor_cli_plan *p) {
    for (size_t i = 0; i < p->n; i++) {
        free(p->v[i].name);
        free(p->v[i].value);
    }
    free(p->v);
    p->v = NULL;
    p->n = 0;
}

int aor_cli_plan_apply(const aor_cli_plan *p) {
    for (size_t i = 0; i < p->n; i++)
        if (setenv(p->v[i].name, p->v[i].value, 1) < 0)
            return -1;
    return 0;
}

/* 1 when the LD_PRELOAD list `list` (space or colon separated) names lib. */
static int list_has(const char *list, const char *lib) {
    size_t ll = strlen(lib);
    for (const char *p = list; *p;) {
        size_t n = strcspn(p, " :");
        if (n == ll && memcmp(p, lib, ll) == 0)
            return 1;
        p += n;
        p += strspn(p, " :");
    }
    return 0;
}

int aor_cli_plan_preload(aor_cli_plan *p, const char *lib) {
    const char *cur = getenv("LD_PRELOAD");
    if (!cur || !*cur)
        return aor_cli_plan_add(p, "LD_PRELOAD", lib);
    if (list_has(cur, lib))
        return aor_cli_plan_add(p, "LD_PRELOAD", cur);
    char *v = NULL;
    if (asprintf(&v, "%s:%s", lib, cur) < 0)
        return -1;
    int r = aor_cli_plan_add(p, "LD_PRELOAD", v);
    free(v);
    return r;
}

static int set_nonempty(const char *name) {
    const char *v = getenv(name);
    return v && *v;
}

static int regular_file(const char *path) {
    struct stat st;
    return stat(path, &st) == 0 && S_ISREG(st.st_mode);
}

/* A flag variable as the shim reads it (common/envflag.h: "0", "false", "no", "off" are
 * off; QA: AOR_NO_TRUST=false was on here and off in the shim). */
static int on(const char *name) {
    return aor_envflag_on(getenv(name));
}

/* NODE_EXTRA_CA_CERTS takes one file: a user's file that lacks the CA is merged with
 * ca.pem into data_dir/node-extra-ca-<hash>.pem (node_merged_name), written atomically
 * (aor_cli_write_file: a temp file renamed over the name) and only when it differs.
 * Returns 0 (plan or note done), -1 ENOMEM. */
static int plan_node(aor_cli_plan *p, const char *data_dir, const char *ca) {
    const char *user = getenv("NODE_EXTRA_CA_CERTS");
    if (!user || !*user)
        return aor_cli_plan_add(p, "NODE_EXTRA_CA_CERTS", ca);
    if (strcmp(user, ca) == 0)
        return 0;
    int has = aor_cli_file_has_ca(user, ca);
    if (has == 1)
        return 0; /* already trusts aor (e.g. our merged file from an earlier `aor env`) */
    char *ubuf = NULL, *cbuf = NULL, *merged = NULL, *out = NULL, *name = NULL;
    size_t ulen = 0, clen = 0;
    int rc = 0;
    if (aor_cli_read_file(user, AOR_CLI_FILE_MAX, &ubuf, &ulen) < 0) {
        if (errno == EINVAL) { /* a pipe (`<(cat corp.pem)`): Node reads it; we cannot */
            fprintf(stderr,
                    "aor: NODE_EXTRA_CA_CERTS=%s is not a regular file; left as it is (Node "
                    "will not trust aor's CA: put your CAs in a file)\n",
                    user);
            goto out;
        }
        fprintf(stderr, "aor: cannot read NODE_EXTRA_CA_CERTS=%s (%s); Node will use %s alone\n",
                user, strerror(errno), ca);
        rc = aor_cli_plan_add(p, "NODE_EXTRA_CA_CERTS", ca);
        goto out;
    }
    if (aor_cli_read_file(ca, AOR_CLI_FILE_MAX, &cbuf, &clen) < 0) {
        fprintf(stderr, "aor: cannot read %s: %s\n", ca, strerror(errno));
        goto out;
    }
    int nl = ulen > 0 && ubuf[ulen - 1] != '\n';
    size_t total = ulen + (size_t)nl + clen;
    out = malloc(total ? total : 1);
    if (!out) {
        rc = -1;
        goto out;
    }
    memcpy(out, ubuf, ulen);
    if (nl)
        out[ulen] = '\n';
    memcpy(out + ulen + nl, cbuf, clen);
    name = node_merged_name(out, total);
    merged = name ? aor_path_join(data_dir, name) : NULL;
    if (!merged) {
        rc = -1;
        goto out;
    }
    if (aor_cli_write_file(merged, out, total, 0644) < 0) {
        fprintf(stderr, "aor: cannot write %s: %s; NODE_EXTRA_CA_CERTS left as %s\n", merged,
                strerror(errno), user);
        goto out;
    }
    rc = aor_cli_plan_add(p, "NODE_EXTRA_CA_CERTS", merged);
out:
    free(ubuf);
    free(cbuf);
    free(out);
    free(merged);
    free(name);
    return rc;
}

int aor_cli_plan_trust(aor_cli_plan *p, const char *data_dir) {
    if (on("AOR_NO_TRUST"))
        return 0;
    char *ca = aor_path_join(data_dir, "ca.pem");
    char *bundle = aor_path_join(data_dir, "bundle.pem");
    int rc = -1;
    if (!ca || !bundle)
        goto out;
    rc = 0;
    if (!regular_file(ca) || !regular_file(bundle)) {
        fprintf(stderr,
                "aor: no CA in %s yet (aord creates it on its first start); CA variables "
                "not set\n",
                data_dir);
        goto out;
    }
    /* Unset, empty, or the system's bundle (which bundle.pem holds: common/sysca.h). */
    const char *bundle_vars[] = {"SSL_CERT_FILE", "REQUESTS_CA_BUNDLE", "CURL_CA_BUNDLE"};
    for (size_t i = 0; i < 3 && rc == 0; i++)
        if (!set_nonempty(bundle_vars[i]) || aor_sysca_is_bundle(getenv(bundle_vars[i])))
            rc = aor_cli_plan_add(p, bundle_vars[i], bundle);
    if (rc == 0)
        rc = plan_node(p, data_dir, ca);
out:
    free(ca);
    free(bundle);
    return rc;
}

/* 1 when the bundle variable `name` is set (non-empty) to a file that TLS clients will
 * use instead of aor's bundle and that lacks the aor CA (unreadable counts: the clients
 * cannot use it either). */
static int bundle_var_conflicts(const char *name, const char *bundle, const char *ca) {
    const char *v = getenv(name);
    if (!v || !*v || strcmp(v, bundle) == 0 || aor_sysca_is_bundle(v))
        return 0; /* pointed at bundle.pem by `aor run` and the shim */
    return aor_cli_file_has_ca(v, ca) != 1;
}

int aor_cli_trust_warn(FILE *f, const char *prefix, const char *data_dir) {
    static const char *const vars[] = {"SSL_CERT_FILE", "REQUESTS_CA_BUNDLE", "CURL_CA_BUNDLE"};
    /* Who reads each (as `aor doctor` says; QA: curl was named for REQUESTS_CA_BUNDLE,
     * and for SSL_CERT_FILE, which curl reads only when CURL_CA_BUNDLE is unset: aor sets
     * that one unless it names another bundle, then curl is named for it). */
    static const char *const who[] = {"OpenSSL-based clients: Python, Ruby, ...", "Python requests",
                                      "curl"};
    if (on("AOR_NO_TRUST"))
        return 0;
    char *ca = aor_path_join(data_dir, "ca.pem");
    char *bundle = aor_path_join(data_dir, "bundle.pem");
    int n = 0;
    if (!ca || !bundle || !regular_file(ca) || !regular_file(bundle))
        goto out; /* no CA yet: plan_trust says so */
    int bad[3];
    for (size_t i = 0; i < 3; i++) {
        bad[i] = bundle_var_conflicts(vars[i], bundle, ca);
        n += bad[i];
    }
    if (!n)
        goto out;
    fputs(prefix, f);
    for (size_t i = 0, k = 0; i < 3; i++)
        if (bad[i])
            fprintf(f, "%s%s=%s", k++ ? ", " : "", vars[i], getenv(vars[i]));
    fprintf(f, " %s already set, so aor leaves %s alone: TLS clients that read %s (",
            n == 1 ? "is" : "are", n == 1 ? "it" : "them", n == 1 ? "it" : "them");
    for (size_t i = 0, k = 0; i < 3; i++)
        if (bad[i])
            fprintf(f, "%s%s", k++ ? "; " : "", who[i]);
    fprintf(f,
            ") will not trust aor's CA and fail with certificate errors (%s"
            "CERTIFICATE_VERIFY_FAILED); unset %s, or add %s to %s (`aor doctor` explains)\n",
            bad[2] ? "curl exit 60, " : "", n == 1 ? "it" : "them", ca,
            n == 1 ? "that bundle" : "those bundles");
out:
    free(ca);
    free(bundle);
    return n;
}

int aor_cli_plan_sidecar(aor_cli_plan *p, const char *listen, char *kept, size_t kept_cap) {
    static const struct {
        const char *name;
        const char *suffix;
    } vars[] = {
        /* Not OPENROUTER_BASE_URL: OpenRouter speaks the OpenAI dialect on the same paths,
         * so the sidecar takes its requests for OpenAI's, and with a keyless provider the
         * client's OpenRouter key would go to api.openai.com (fresh-user pass). OpenRouter
         * clients stay direct, or use the shim (it goes by the host). */
        {"OPENAI_BASE_URL", "/v1"},
        {"ANTHROPIC_BASE_URL", ""},
        {"GEMINI_BASE_URL", ""},
        {"GOOGLE_GEMINI_BASE_URL", ""},
    };
    size_t ko = 0;
    if (kept && kept_cap)
        kept[0] = '\0';
    for (size_t i = 0; i < sizeof vars / sizeof vars[0]; i++) {
        if (set_nonempty(vars[i].name)) {
            size_t nl = strlen(vars[i].name);
            if (kept && ko + (ko ? 2 : 0) + nl < kept_cap) {
                if (ko) {
                    memcpy(kept + ko, ", ", 2);
                    ko += 2;
                }
                memcpy(kept + ko, vars[i].name, nl + 1);
                ko += nl;
            }
            continue;
        }
        char *v = NULL;
        if (asprintf(&v, "http://%s%s", listen, vars[i].suffix) < 0)
            return -1;
        int r = aor_cli_plan_add(p, vars[i].name, v);
        free(v);
        if (r < 0)
            return -1;
    }
    return 0;
}

/* First certificate of a PEM file, or NULL with errno. */
static X509 *first_cert(const char *path) {
    char *buf = NULL;
    size_t len = 0;
    if (aor_cli_read_file(path, AOR_CLI_FILE_MAX, &buf, &len) < 0)
        return NULL;
    BIO *bio = BIO_new_mem_buf(buf, (int)len);
    X509 *x = bio ? PEM_read_bio_X509(bio, NULL, NULL, NULL) : NULL;
    BIO_free(bio);
    free(buf);
    ERR_clear_error();
    if (!x)
        errno = EINVAL;
    return x;
}

int aor_cli_file_has_ca(const char *path, const char *ca_path) {
    X509 *ca = first_cert(ca_path);
    if (!ca)
        return -1;
    char *buf = NULL;
    size_t len = 0;
    int found = -1;
    if (aor_cli_read_file(path, AOR_CLI_FILE_MAX, &buf, &len) < 0)
        goto out_ca;
    found = 0;
    BIO *bio = BIO_new_mem_buf(buf, (int)len);
    if (!bio) {
        errno = ENOMEM;
        found = -1;
        goto out_buf;
    }
    X509 *x;
    while (!found && (x = PEM_read_bio_X509(bio, NULL, NULL, NULL)) != NULL) {
        found = X509_cmp(x, ca) == 0;
        X509_free(x);
    }
    BIO_free(bio);
out_buf:
    free(buf);
out_ca:
    ERR_clear_error();
    X509_free(ca);
    return found;
}
