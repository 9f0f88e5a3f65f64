/* libaor.so: point TLS clients at the aor CA (spec §2 "Trust"). libc only: PEM files are
 * compared as text, never parsed as certificates. Rules: trust.h, docs/shim.md. */
#include "trust.h"

#include "env.h"
#include "real.h"
#include "sysca.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#define MERGED_PREFIX "node-extra-ca-"

int aor_trust_data_dir(const char *xdg_data_home, const char *home, char *out, size_t outlen) {
    int n;
    if (xdg_data_home != NULL && xdg_data_home[0] == '/')
        n = snprintf(out, outlen, "%s/aor", xdg_data_home);
    else if (home != NULL && home[0] != '\0')
        n = snprintf(out, outlen, "%s/.local/share/aor", home);
    else
        return -1;
    if (n < 0 || (size_t)n >= outlen)
        return -1;
    return 0;
}

/* --- PEM text ------------------------------------------------------------------------ */

/* The next complete PEM block at or after *pos: *body and *body_len = the text between the
 * BEGIN line and the END marker; *pos moves past the END marker. 1, or 0 when none. */
static int next_block(const char *text, size_t len, size_t *pos, const char **body,
                      size_t *body_len) {
    static const char begin[] = "-----BEGIN ", end[] = "-----END ";
    size_t at = *pos;
    while (at < len) {
        const char *b = memmem(text + at, len - at, begin, sizeof begin - 1);
        if (b == NULL)
            return 0;
        const char *nl = memchr(b, '\n', (size_t)(text + len - b));
        if (nl == NULL)
            return 0;
        const char *start = nl + 1;
        const char *e = memmem(start, (size_t)(text + len - start), end, sizeof end - 1);
        if (e == NULL)
            return 0;
        const char *again = memmem(start, (size_t)(e - start), begin, sizeof begin - 1);
        if (again != NULL) { /* a BEGIN without its END: start over at the inner one */
            at = (size_t)(again - text);
            continue;
        }
        *body = start;
        *body_len = (size_t)(e - start);
        *pos = (size_t)(e - text) + sizeof end - 1;
        return 1;
    }
    return 0;
}

static int is_space(char c) {
    return c == ' ' || c == '\t' || c == '\r' || c == '\n';
}

/* 1 when a and b hold the same characters once white space is dropped. */
static int same_body(const char *a, size_t alen, const char *b, size_t blen) {
    size_t i = 0, j = 0;
    for (;;) {
        while (i < alen && is_space(a[i]))
            i++;
        while (j < blen && is_space(b[j]))
            j++;
        if (i == alen || j == blen)
            return i == alen && j == blen;
        if (a[i] != b[j])
            return 0;
        i++;
        j++;
    }
}

static int has_content(const char *s, size_t n) {
    for (size_t i = 0; i < n; i++)
        if (!is_space(s[i]))
            return 1;
    return 0;
}

int aor_trust_pem_contains(const char *text, size_t len, const char *cert, size_t cert_len) {
    const char *want, *body;
    size_t want_len, body_len, pos = 0;
    if (cert == NULL || !next_block(cert, cert_len, &pos, &want, &want_len) ||
        !has_content(want, want_len))
        return -1;
    if (text == NULL)
        return 0;
    pos = 0;
    while (next_block(text, len, &pos, &body, &body_len)) {
        if (same_body(body, body_len, want, want_len))
            return 1;
    }
    return 0;
}

int aor_trust_merged_name(const char *data, size_t len, char *out, size_t outlen) {
    uint64_t h = 14695981039346656037ULL; /* FNV-1a 64 */
    for (size_t i = 0; i < len; i++) {
        h ^= (unsigned char)data[i];
        h *= 1099511628211ULL;
    }
    int n = snprintf(out, outlen, MERGED_PREFIX "%016llx.pem", (unsigned long long)h);
    return n < 0 || (size_t)n >= outlen ? -1 : 0;
}

/* --- files --------------------------------------------------------------------------- */

/* libc's close (not the shim's own close hook). */
static int close_fd(int fd) {
    if (aor_real.close != NULL)
        return aor_real.close(fd);
    return (int)syscall(SYS_close, fd);
}

/* Reads the regular file path (at most max bytes) into a malloc'd buffer. Returns 0, or
 * -1 with errno (EFBIG when bigger than max, EISDIR for a directory, EINVAL for another
 * file that is not regular: a pipe, a device). */
static int read_file(const char *path, size_t max, char **out, size_t *outlen) {
    struct stat st;
    /* O_NONBLOCK: a FIFO named here must not hang the program's start (it is refused
     * below, unread: reading would take its data from the program). */
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
    if (fd < 0)
        return -1;
    char *buf = NULL;
    if (fstat(fd, &st) != 0)
        goto fail_close;
    if (!S_ISREG(st.st_mode)) {
        errno = S_ISDIR(st.st_mode) ? EISDIR : EINVAL;
        goto fail_close;
    }
    if (st.st_size < 0 || (uintmax_t)st.st_size > max) {
        errno = EFBIG;
        goto fail_close;
    }
    size_t cap = (size_t)st.st_size + 1, n = 0; /* +1: notice a file that grew */
    buf = malloc(cap);
    if (buf == NULL)
        goto fail_close;
    while (n < cap) {
        ssize_t r = read(fd, buf + n, cap - n);
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0)
            goto fail_free;
        if (r == 0)
            break;
        n += (size_t)r;
    }
    if (n > max) {
        errno = EFBIG;
        goto fail_free;
    }
    (void)close_fd(fd);
    *out = buf;
    *outlen = n;
    return 0;

fail_free:
    free(buf);
fail_close : {
    int saved = errno;
    (void)close_fd(fd);
    errno = saved;
}
    return -1;
}

/* 1 when path holds exactly these len bytes. */
static int file_equals(const char *path, const char *data, size_t len) {
    char *cur = NULL;
    size_t cur_len = 0;
    if (read_file(path, len, &cur, &cur_len) != 0)
        return 0;
    int same = cur_len == len && memcmp(cur, data, len) == 0;
    free(cur);
    return same;
}

/* Writes path atomically: "<path>.tmp.<pid>" (0644) + rename. 0, or -1 with errno. */
static int write_atomic(const char *path, const char *data, size_t len) {
    char tmp[PATH_MAX];
    int n = snprintf(tmp, sizeof tmp, "%s.tmp.%ld", path, (long)getpid());
    if (n < 0 || (size_t)n >= sizeof tmp) {
        errno = ENAMETOOLONG;
        return -1;
    }
    if (unlink(tmp) != 0 && errno != ENOENT) /* left by a dead process with our pid */
        return -1;
    int fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0644);
    if (fd < 0)
        return -1;
    if (fchmod(fd, 0644) != 0) /* the umask may have taken bits */
        goto fail_unlink;
    for (size_t off = 0; off < len;) {
        ssize_t w = write(fd, data + off, len - off);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            goto fail_unlink;
        off += (size_t)w;
    }
    if (close_fd(fd) != 0) {
        fd = -1;
        goto fail_unlink;
    }
    fd = -1;
    if (rename(tmp, path) != 0)
        goto fail_unlink;
    return 0;

fail_unlink : {
    int saved = errno;
    if (fd >= 0)
        (void)close_fd(fd);
    (void)unlink(tmp);
    errno = saved;
}
    return -1;
}

/* --- NODE_EXTRA_CA_CERTS ------------------------------------------------------------- */

int aor_trust_node_value(const char *data_dir, const char *user, const char *ca, char *out,
                         size_t outlen) {
    int saved = errno, rc = 0, has, nl, n = -1;
    char *ubuf = NULL, *cbuf = NULL, *merged = NULL;
    size_t ulen = 0, clen = 0, mlen;
    char name[64], path[PATH_MAX];

    if (strcmp(user, ca) == 0)
        goto out;
    if (read_file(user, AOR_TRUST_FILE_MAX, &ubuf, &ulen) != 0) {
        int e = errno;
        if (e == EFBIG || e == ENOMEM || e == EINVAL) {
            /* EINVAL: not a regular file (a pipe, `<(cat corp.pem)`): Node reads it, the
             * shim cannot without taking its data. */
            aor_debug("trust: NODE_EXTRA_CA_CERTS=%s: %s, left alone (Node will not trust "
                      "aor; see aor doctor)",
                      user,
                      e == EFBIG    ? "file over 1 MiB"
                      : e == EINVAL ? "not a regular file"
                                    : "out of memory");
            goto out;
        }
        n = snprintf(out, outlen, "%s", ca);
        if (n < 0 || (size_t)n >= outlen)
            goto out;
        aor_debug("trust: NODE_EXTRA_CA_CERTS=%s cannot be read (%s): using %s", user, strerror(e),
                  ca);
        rc = 1;
        goto out;
    }
    if (read_file(ca, AOR_TRUST_FILE_MAX, &cbuf, &clen) != 0) {
        aor_debug("trust: cannot read %s (%s): NODE_EXTRA_CA_CERTS left alone", ca,
                  strerror(errno));
        goto out;
    }
    has = aor_trust_pem_contains(ubuf, ulen, cbuf, clen);
    if (has < 0) {
        aor_debug("trust: %s holds no PEM block: NODE_EXTRA_CA_CERTS left alone", ca);
        goto out;
    }
    if (has == 1) {
        aor_debug("trust: NODE_EXTRA_CA_CERTS=%s already holds the aor CA", user);
        goto out;
    }
    nl = ulen > 0 && ubuf[ulen - 1] != '\n';
    mlen = ulen + (size_t)nl + clen;
    merged = malloc(mlen);
    if (merged == NULL)
        goto out;
    memcpy(merged, ubuf, ulen);
    if (nl)
        merged[ulen] = '\n';
    memcpy(merged + ulen + (size_t)nl, cbuf, clen);
    if (aor_trust_merged_name(merged, mlen, name, sizeof name) == 0)
        n = snprintf(path, sizeof path, "%s/%s", data_dir, name);
    if (n < 0 || (size_t)n >= sizeof path || (size_t)n >= outlen)
        goto out;
    if (!file_equals(path, merged, mlen) && write_atomic(path, merged, mlen) != 0) {
        aor_debug("trust: cannot write %s (%s): NODE_EXTRA_CA_CERTS left alone", path,
                  strerror(errno));
        goto out;
    }
    memcpy(out, path, (size_t)n + 1);
    aor_debug("trust: NODE_EXTRA_CA_CERTS=%s merged with %s into %s", user, ca, path);
    rc = 1;
out:
    free(merged);
    free(cbuf);
    free(ubuf);
    errno = saved;
    return rc;
}

/* --- the variables ------------------------------------------------------------------- */

static int unset(const char *name) {
    const char *v = getenv(name);
    return v == NULL || v[0] == '\0';
}

/* 1 when the bundle variable name may point at bundle.pem: unset, empty, or naming the
 * system's CA bundle, which bundle.pem holds with aor's CA (common/sysca.h). */
static int replaceable(const char *name) {
    return unset(name) || aor_sysca_is_bundle(getenv(name));
}

int aor_trust_apply(const char *data_dir) {
    static const char *const bundle_vars[] = {"SSL_CERT_FILE", "REQUESTS_CA_BUNDLE",
                                              "CURL_CA_BUNDLE"};
    int saved = errno;
    int set = 0;
    char bundle[PATH_MAX], ca[PATH_MAX], node[PATH_MAX];
    int nb = snprintf(bundle, sizeof(bundle), "%s/bundle.pem", data_dir);
    int nc = snprintf(ca, sizeof(ca), "%s/ca.pem", data_dir);
    if (nb < 0 || (size_t)nb >= sizeof(bundle) || nc < 0 || (size_t)nc >= sizeof(ca))
        goto out;

    if (access(bundle, R_OK) == 0) {
        for (size_t i = 0; i < sizeof(bundle_vars) / sizeof(bundle_vars[0]); i++) {
            if (replaceable(bundle_vars[i])) {
                if (setenv(bundle_vars[i], bundle, 1) == 0) {
                    set++;
                    aor_debug("trust: %s=%s", bundle_vars[i], bundle);
                }
            } else {
                aor_debug("trust: %s already set, left alone", bundle_vars[i]);
            }
        }
    }
    if (access(ca, R_OK) == 0) {
        if (unset("NODE_EXTRA_CA_CERTS")) {
            if (setenv("NODE_EXTRA_CA_CERTS", ca, 1) == 0) {
                set++;
                aor_debug("trust: NODE_EXTRA_CA_CERTS=%s", ca);
            }
        } else if (aor_trust_node_value(data_dir, getenv("NODE_EXTRA_CA_CERTS"), ca, node,
                                        sizeof(node)) == 1 &&
                   setenv("NODE_EXTRA_CA_CERTS", node, 1) == 0) {
            set++;
        }
    }
out:
    errno = saved;
    return set;
}

void aor_trust_setup(void) {
    const aor_shim_env *env = aor_env();
    char dir[PATH_MAX];
    if (env->disabled || env->no_trust)
        return;
    if (aor_trust_data_dir(getenv("XDG_DATA_HOME"), getenv("HOME"), dir, sizeof(dir)) != 0)
        return;
    aor_trust_apply(dir);
}
