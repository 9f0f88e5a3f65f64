/* Value syntax, secret detection, "did you mean" and the error list of the config
 * loader. Source: spec §3, §3.1 (rules 6, 7), §3.2; docs/config.md. */
#include "config_int.h"
#include "paths.h"
#include "utf8.h"

#include <arpa/inet.h>
#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <stdint.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* ---- error list ------------------------------------------------------------------ */

static void err_add(aor_cfg_errs *errs, const char *file, size_t line, const char *fmt,
                    va_list ap) {
    char *text = NULL;
    if (vasprintf(&text, fmt, ap) < 0) {
        errs->oom = 1;
        return;
    }
    if (errs->n == errs->cap) {
        size_t ncap = errs->cap ? errs->cap * 2 : 8;
        aor_cfg_err_line *nv = realloc(errs->v, ncap * sizeof *nv);
        if (!nv) {
            free(text);
            errs->oom = 1;
            return;
        }
        errs->v = nv;
        errs->cap = ncap;
    }
    errs->v[errs->n] = (aor_cfg_err_line){file, line, errs->n, text};
    errs->n++;
}

void aor_cfg_err(aor_cfg_errs *errs, size_t line, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    err_add(errs, NULL, line, fmt, ap);
    va_end(ap);
}

void aor_cfg_err_in(aor_cfg_errs *errs, const char *file, size_t line, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    err_add(errs, file, line, fmt, ap);
    va_end(ap);
}

static int err_cmp(const void *pa, const void *pb) {
    const aor_cfg_err_line *a = pa, *b = pb;
    int fa = a->file != NULL, fb = b->file != NULL;
    if (fa != fb)
        return fa - fb;
    if (a->line != b->line)
        return a->line < b->line ? -1 : 1;
    return a->seq < b->seq ? -1 : (a->seq > b->seq);
}

char *aor_cfg_errs_text(const aor_cfg_errs *errs) {
    if (errs->n == 0 && !errs->oom)
        return NULL;
    aor_cfg_err_line *sorted = NULL;
    if (errs->n) {
        sorted = malloc(errs->n * sizeof *sorted);
        if (!sorted)
            return NULL;
        memcpy(sorted, errs->v, errs->n * sizeof *sorted);
        qsort(sorted, errs->n, sizeof *sorted, err_cmp);
    }
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    if (!f) {
        free(sorted);
        return NULL;
    }
    const char *main_file = errs->file ? errs->file : AOR_CFG_ENV_NAME;
    for (size_t i = 0; i < errs->n; i++) {
        const char *file = sorted[i].file ? sorted[i].file : main_file;
        if (!*file) /* aor_cfg_err_in with "": the text names its own source */
            fprintf(f, "%s\n", sorted[i].text);
        else if (sorted[i].line)
            fprintf(f, "%s:%zu: %s\n", file, sorted[i].line, sorted[i].text);
        else
            fprintf(f, "%s: %s\n", file, sorted[i].text);
    }
    if (errs->oom)
        fprintf(f, "%s: out of memory while loading the configuration\n", main_file);
    free(sorted);
    if (fclose(f) != 0) {
        free(buf);
        return NULL;
    }
    return buf;
}

void aor_cfg_errs_free(aor_cfg_errs *errs) {
    for (size_t i = 0; i < errs->n; i++)
        free(errs->v[i].text);
    free(errs->v);
    errs->v = NULL;
    errs->n = errs->cap = 0;
}

/* ---- words and secrets -------------------------------------------------------------- */

int aor_cfg_ieq(const char *a, const char *b) {
    return strcasecmp(a, b) == 0;
}

static int is_tok_char(int c) {
    return isalnum(c) || c == '_' || c == '-' || c == '+' || c == '=';
}

static const char *const secret_prefixes[] = {"sk-",         "sk_",    "AIza", "gsk_",
                                              "xai-",        "pplx-",  "hf_",  "ghp_",
                                              "github_pat_", "nvapi-", "fw_",  "eyJ" /* JWT */};

/* One token of a value (no separators inside). */
static int secret_token(const char *s, size_t len, int allow_prefix_only) {
    for (size_t i = 0; i < sizeof secret_prefixes / sizeof secret_prefixes[0]; i++) {
        size_t pl = strlen(secret_prefixes[i]);
        if (len >= pl + 8 && strncmp(s, secret_prefixes[i], pl) == 0) {
            size_t rest = 0;
            while (pl + rest < len &&
                   (is_tok_char((unsigned char)s[pl + rest]) || s[pl + rest] == '.'))
                rest++;
            if (rest >= 8)
                return 1;
        }
    }
    if (allow_prefix_only || len < 32)
        return 0;
    int letter = 0, digit = 0;
    size_t run = 0, best_run = 0;
    for (size_t i = 0; i < len; i++) {
        unsigned char c = (unsigned char)s[i];
        if (!is_tok_char(c))
            return 0; /* dots, slashes, colons: a path, URL or host name */
        letter |= isalpha(c) != 0;
        digit |= isdigit(c) != 0;
        run = isalnum(c) ? run + 1 : 0;
        if (run > best_run)
            best_run = run;
    }
    return letter && digit && best_run >= 20;
}

/* Walks s in tokens split at any byte of seps and at any byte that is not printable ASCII
 * (a pasted no-break space or ellipsis after a key must not hide it); 1 when one looks
 * secret. */
static int scan_tokens(const char *s, const char *seps, int prefix_only) {
    const char *p = s;
    while (*p) {
        p += strspn(p, seps);
        size_t len = 0;
        while (p[len] && !strchr(seps, p[len]) && (unsigned char)p[len] > 0x20 &&
               (unsigned char)p[len] < 0x7f)
            len++;
        if (len && secret_token(p, len, prefix_only))
            return 1;
        p += len;
        if (!len && *p)
            p++; /* a byte that is not printable ASCII */
    }
    return 0;
}

int aor_cfg_looks_secret(const char *s) {
    if (!s)
        return 0;
    /* Long random tokens between spaces, commas, '=' and quotes; key prefixes also
     * inside URLs (user:sk-...@host) and paths. */
    return scan_tokens(s, " \t\r\n,=;\"'", 0) || scan_tokens(s, " \t\r\n,=;\"':/@?&#", 1);
}

/* A word of a comment that is a key: a known prefix, then 20+ key characters (no dots:
 * "sk-ant-api03-..." is a placeholder) with a run of 16+ letters and digits. Real keys
 * are far longer; names in prose ("pplx-70b-online", "hf_transfer") are not. */
static int comment_key(const char *s, size_t len) {
    for (size_t i = 0; i < sizeof secret_prefixes / sizeof secret_prefixes[0]; i++) {
        size_t pl = strlen(secret_prefixes[i]);
        if (len < pl + 20 || strncmp(s, secret_prefixes[i], pl) != 0)
            continue;
        size_t rest = 0, run = 0, best = 0;
        while (pl + rest < len && is_tok_char((unsigned char)s[pl + rest])) {
            run = isalnum((unsigned char)s[pl + rest]) ? run + 1 : 0;
            best = run > best ? run : best;
            rest++;
        }
        if (rest >= 20 && best >= 16)
            return 1;
    }
    return 0;
}

int aor_cfg_comment_looks_secret(const char *s, size_t n) {
    static const char seps[] = " \t\r\n,=;\"':/@?&#.";
    size_t i = 0;
    while (i < n) {
        while (i < n &&
               (strchr(seps, s[i]) || (unsigned char)s[i] <= 0x20 || (unsigned char)s[i] >= 0x7f))
            i++;
        size_t len = 0;
        while (i + len < n && !strchr(seps, s[i + len]) && (unsigned char)s[i + len] > 0x20 &&
               (unsigned char)s[i + len] < 0x7f)
            len++;
        if (len && comment_key(s + i, len))
            return 1;
        i += len;
    }
    return 0;
}

static const char *const secret_names[] = {
    "api_key",    "apikey",    "api-key",      "key",        "secret",        "token",
    "password",   "passwd",    "access_token", "auth_token", "authorization", "bearer",
    "secret_key", "x-api-key", "credential",   "credentials"};

int aor_cfg_secret_option_name(const char *name) {
    for (size_t i = 0; i < sizeof secret_names / sizeof secret_names[0]; i++)
        if (aor_cfg_ieq(name, secret_names[i]))
            return 1;
    size_t n = strlen(name);
    static const char *const suffixes[] = {"_key", "-key", "_token", "-token", "_secret"};
    for (size_t i = 0; i < sizeof suffixes / sizeof suffixes[0]; i++) {
        size_t sl = strlen(suffixes[i]);
        if (n > sl && strcasecmp(name + n - sl, suffixes[i]) == 0)
            return 1;
    }
    return 0;
}

const char *aor_cfg_show(const char *s, char *buf, size_t cap) {
    if (aor_cfg_looks_secret(s)) {
        snprintf(buf, cap, "(hidden: looks like a secret)");
        return buf;
    }
    size_t max = 48, o = 0, i = 0, n = strlen(s);
    while (i < n && i < max && o + 1 < cap) {
        unsigned cp = 0;
        size_t l = aor_utf8_seq(s + i, n - i, &cp);
        if (l > 1 && cp >= 0xa0 && (o + l >= cap || i + l > max))
            break; /* a character that does not fit whole: "..." */
        if (l <= 1 || cp < 0xa0) {
            /* ASCII, or '?' for a control character or a byte that is not UTF-8 */
            unsigned char c = (unsigned char)s[i];
            buf[o++] = (c < 0x20 || c >= 0x7f) ? '?' : (char)c;
            i++;
            continue;
        }
        memcpy(buf + o, s + i, l);
        o += l;
        i += l;
    }
    if (i < n && o + 4 < cap) {
        memcpy(buf + o, "...", 3);
        o += 3;
    }
    buf[o] = '\0';
    return buf;
}

#define LEV_MAX 64

static size_t levenshtein_ci(const char *a, const char *b) {
    size_t la = strlen(a), lb = strlen(b);
    if (la > LEV_MAX || lb > LEV_MAX)
        return SIZE_MAX;
    size_t prev[LEV_MAX + 1], cur[LEV_MAX + 1];
    for (size_t j = 0; j <= lb; j++)
        prev[j] = j;
    for (size_t i = 1; i <= la; i++) {
        cur[0] = i;
        for (size_t j = 1; j <= lb; j++) {
            size_t cost = tolower((unsigned char)a[i - 1]) != tolower((unsigned char)b[j - 1]);
            size_t v = prev[j - 1] + cost;
            if (prev[j] + 1 < v)
                v = prev[j] + 1;
            if (cur[j - 1] + 1 < v)
                v = cur[j - 1] + 1;
            cur[j] = v;
        }
        memcpy(prev, cur, (lb + 1) * sizeof cur[0]);
    }
    return prev[lb];
}

#define WORDS_MAX 8 /* words (parts between '_' and '-') of a name compared */

/* Splits s at '_' and '-' into its non-empty words, each copied lower case into w[i]
 * (at most LEV_MAX bytes) with a plural ending taken off ("retries" -> "retry",
 * "keys" -> "key"). Returns the number of words, or 0 when there are more than
 * WORDS_MAX or one is longer than LEV_MAX. */
static size_t split_words(const char *s, char w[WORDS_MAX][LEV_MAX + 1]) {
    size_t nw = 0;
    while (*s) {
        size_t len = strcspn(s, "_-");
        if (len) {
            if (nw == WORDS_MAX || len > LEV_MAX)
                return 0;
            for (size_t i = 0; i < len; i++)
                w[nw][i] = (char)tolower((unsigned char)s[i]);
            w[nw][len] = '\0';
            if (len > 4 && strcmp(w[nw] + len - 3, "ies") == 0)
                memcpy(w[nw] + len - 3, "y", 2);
            else if (len > 3 && w[nw][len - 1] == 's' && w[nw][len - 2] != 's')
                w[nw][len - 1] = '\0';
            nw++;
        }
        s += len;
        if (*s)
            s++;
    }
    return nw;
}

/* How well word part a matches candidate part b: 2 the same word (up to a plural),
 * 1 one typo away (both 4+ letters) or a 3+ letter prefix of b, 0 no match. */
static int word_match(const char *a, const char *b) {
    size_t la = strlen(a), lb = strlen(b);
    if (strcmp(a, b) == 0)
        return 2;
    if (la >= 4 && lb >= 4 && levenshtein_ci(a, b) <= 1)
        return 1;
    return la >= 3 && la < lb && strncmp(a, b, la) == 0;
}

/* The hint by words: the one candidate of which every word of `word` (4+ characters)
 * matches some word, the best sum of matches winning ("max_retries" and "retry" ->
 * "max_opaque_retries"). NULL when none does, or when two tie (a guess would mislead:
 * "cooldown" could be quota_cooldown_s or auth_cooldown_s). */
static const char *suggest_by_words(const char *word, const char *const *cands, size_t n) {
    char ww[WORDS_MAX][LEV_MAX + 1], cw[WORDS_MAX][LEV_MAX + 1];
    size_t nww = strlen(word) >= 4 ? split_words(word, ww) : 0;
    if (!nww)
        return NULL;
    const char *best = NULL;
    int best_score = 0, tie = 0;
    for (size_t i = 0; i < n; i++) {
        size_t ncw = split_words(cands[i], cw);
        int score = 0;
        for (size_t a = 0; a < nww && score >= 0; a++) {
            int m = 0;
            for (size_t b = 0; b < ncw; b++) {
                int v = word_match(ww[a], cw[b]);
                if (v > m)
                    m = v;
            }
            score = m ? score + m : -1;
        }
        if (score > best_score) {
            best = cands[i];
            best_score = score;
            tie = 0;
        } else if (score > 0 && score == best_score) {
            tie = 1;
        }
    }
    return tie ? NULL : best;
}

const char *aor_cfg_suggest(const char *word, const char *const *cands, size_t n) {
    size_t wl = strlen(word);
    const char *best = NULL;
    size_t best_d = SIZE_MAX;
    for (size_t i = 0; i < n; i++) {
        size_t d = levenshtein_ci(word, cands[i]);
        size_t limit = wl >= 4 ? 2 : 1;
        if (d <= limit && d < best_d && d < strlen(cands[i])) {
            best = cands[i];
            best_d = d;
        }
    }
    if (best)
        return best;
    if (wl < 3)
        return NULL;
    for (size_t i = 0; i < n; i++) {
        size_t cl = strlen(cands[i]);
        if ((cl > wl && strncasecmp(cands[i], word, wl) == 0) ||
            (cl >= 3 && wl > cl && strncasecmp(word, cands[i], cl) == 0))
            return cands[i];
    }
    return suggest_by_words(word, cands, n);
}

/* ---- value syntax ------------------------------------------------------------------- */

int aor_cfg_read_fd(int fd, size_t size, char **out, size_t *len) {
    char *buf = malloc(size + 1);
    if (!buf) {
        errno = ENOMEM;
        return -1;
    }
    size_t got = 0;
    while (got < size) {
        ssize_t r = read(fd, buf + got, size - got);
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0) {
            int saved = errno;
            explicit_bzero(buf, size + 1);
            free(buf);
            errno = saved;
            return -1;
        }
        if (r == 0)
            break;
        got += (size_t)r;
    }
    buf[got] = '\0';
    *out = buf;
    *len = got;
    return 0;
}

int aor_cfg_parse_bool(const char *v, int *out) {
    static const char *const yes[] = {"true", "yes", "on", "1"};
    static const char *const no[] = {"false", "no", "off", "0"};
    for (size_t i = 0; i < 4; i++) {
        if (aor_cfg_ieq(v, yes[i])) {
            *out = 1;
            return 0;
        }
        if (aor_cfg_ieq(v, no[i])) {
            *out = 0;
            return 0;
        }
    }
    return -1;
}

int aor_cfg_parse_long(const char *v, long min, long max, long *out) {
    const char *p = v;
    if (*p == '+' || *p == '-')
        p++;
    if (!isdigit((unsigned char)*p))
        return -1;
    for (const char *q = p; *q; q++)
        if (!isdigit((unsigned char)*q))
            return -1;
    errno = 0;
    char *end = NULL;
    long n = strtol(v, &end, 10);
    if (errno || !end || *end || n < min || n > max)
        return -1;
    *out = n;
    return 0;
}

int aor_cfg_parse_retries(const char *v, long *out) {
    if (aor_cfg_ieq(v, "unlimited")) {
        *out = AOR_RETRIES_UNLIMITED;
        return 0;
    }
    return aor_cfg_parse_long(v, 0, 1000000, out);
}

int aor_cfg_parse_seconds(const char *v, double *out) {
    size_t digits = 0, dots = 0;
    for (const char *p = v; *p; p++) {
        if (isdigit((unsigned char)*p))
            digits++;
        else if (*p == '.')
            dots++;
        else
            return -1;
    }
    if (!digits || dots > 1 || strlen(v) > 32)
        return -1;
    errno = 0;
    char *end = NULL;
    double d = strtod(v, &end);
    if (errno || !end || *end || !isfinite(d) || d < 0 || d > 1e9)
        return -1;
    *out = d;
    return 0;
}

int aor_cfg_parse_bytes(const char *v, long min, long max, long *out) {
    size_t n = 0;
    while (isdigit((unsigned char)v[n]))
        n++;
    if (n == 0 || n > 18)
        return -1;
    static const struct {
        const char *s;
        long mult;
    } units[] = {{"", 1},
                 {"k", 1024L},
                 {"kib", 1024L},
                 {"m", 1024L * 1024},
                 {"mib", 1024L * 1024},
                 {"g", 1024L * 1024 * 1024},
                 {"gib", 1024L * 1024 * 1024}};
    long mult = 0;
    for (size_t i = 0; i < sizeof units / sizeof units[0]; i++)
        if (aor_cfg_ieq(v + n, units[i].s))
            mult = units[i].mult;
    if (!mult)
        return -1;
    char digits[20];
    memcpy(digits, v, n);
    digits[n] = '\0';
    long base;
    if (aor_cfg_parse_long(digits, 0, LONG_MAX, &base) != 0)
        return -1;
    if (base > LONG_MAX / mult)
        return -1;
    long total = base * mult;
    if (total < min || total > max)
        return -1;
    *out = total;
    return 0;
}

void aor_cfg_url_free(aor_cfg_url *u) {
    free(u->base);
    free(u->host);
    u->base = u->host = NULL;
}

static char *lower_dup(const char *s, size_t n) {
    char *d = malloc(n + 1);
    if (!d)
        return NULL;
    for (size_t i = 0; i < n; i++)
        d[i] = (char)tolower((unsigned char)s[i]);
    d[n] = '\0';
    return d;
}

static int valid_reg_name(const char *s, size_t n) {
    if (n == 0 || n > 253)
        return 0;
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if (!isalnum(c) && c != '-' && c != '.' && c != '_')
            return 0;
    }
    return s[0] != '.' && s[0] != '-';
}

int aor_cfg_parse_url(const char *v, aor_cfg_url *out, const char **why) {
    memset(out, 0, sizeof *out);
    const char *scheme;
    int def_port;
    if (strncasecmp(v, "https://", 8) == 0) {
        scheme = "https";
        def_port = 443;
        v += 8;
    } else if (strncasecmp(v, "http://", 7) == 0) {
        scheme = "http";
        def_port = 80;
        v += 7;
    } else {
        *why = "must start with https:// or http://";
        return -1;
    }
    size_t alen = strcspn(v, "/?#");
    const char *path = v + alen;
    if (memchr(v, '@', alen)) {
        *why = "must not contain credentials (user:password@); keep secrets in the environment";
        return -1;
    }
    for (const char *p = v; *p; p++) {
        if (*p == '?' || *p == '#') {
            *why = "must not contain a query (?...) or fragment (#...)";
            return -1;
        }
        if ((unsigned char)*p <= 0x20 || (unsigned char)*p >= 0x7f) {
            *why = "must not contain spaces, control or non-ASCII characters";
            return -1;
        }
    }
    const char *host = v, *port_s = NULL;
    size_t hlen;
    int ipv6 = 0;
    if (*host == '[') {
        const char *close = memchr(host, ']', alen);
        if (!close) {
            *why = "has an unterminated [IPv6] address";
            return -1;
        }
        hlen = (size_t)(close - host - 1);
        char tmp[INET6_ADDRSTRLEN + 1];
        struct in6_addr a6;
        if (hlen == 0 || hlen >= sizeof tmp) {
            *why = "has an invalid IPv6 address";
            return -1;
        }
        memcpy(tmp, host + 1, hlen);
        tmp[hlen] = '\0';
        if (inet_pton(AF_INET6, tmp, &a6) != 1) {
            *why = "has an invalid IPv6 address";
            return -1;
        }
        host++;
        ipv6 = 1;
        if (close + 1 < v + alen) {
            if (close[1] != ':') {
                *why = "has unexpected text after the IPv6 address";
                return -1;
            }
            port_s = close + 2;
        }
    } else {
        const char *colon = memchr(host, ':', alen);
        hlen = colon ? (size_t)(colon - host) : alen;
        if (colon)
            port_s = colon + 1;
        if (!valid_reg_name(host, hlen)) {
            *why = "has no valid host name";
            return -1;
        }
    }
    int port = def_port;
    if (port_s) {
        size_t plen = (size_t)(v + alen - port_s);
        char pbuf[8];
        long pn;
        if (plen == 0 || plen > 5) {
            *why = "has an invalid port (1..65535)";
            return -1;
        }
        memcpy(pbuf, port_s, plen);
        pbuf[plen] = '\0';
        if (aor_cfg_parse_long(pbuf, 1, 65535, &pn) != 0 || pbuf[0] == '+' || pbuf[0] == '-') {
            *why = "has an invalid port (1..65535)";
            return -1;
        }
        port = (int)pn;
    }
    size_t plen = strlen(path);
    while (plen > 0 && path[plen - 1] == '/')
        plen--;
    out->host = lower_dup(host, hlen);
    if (!out->host)
        goto fail_oom;
    char portbuf[16] = "";
    if (port_s)
        snprintf(portbuf, sizeof portbuf, ":%d", port);
    if (asprintf(&out->base, "%s://%s%s%s%s%.*s", scheme, ipv6 ? "[" : "", out->host,
                 ipv6 ? "]" : "", portbuf, (int)plen, path) < 0) {
        out->base = NULL;
        goto fail_oom;
    }
    out->port = port;
    return 0;

fail_oom:
    aor_cfg_url_free(out);
    *why = "could not be stored (out of memory)";
    return -1;
}

int aor_config_url_split(const char *url, char **host, int *port, int *tls, const char **why) {
    aor_cfg_url u;
    *host = NULL;
    if (aor_cfg_parse_url(url, &u, why) != 0)
        return -1;
    *host = u.host; /* handed over */
    u.host = NULL;
    *port = u.port;
    *tls = strncasecmp(url, "https://", 8) == 0;
    aor_cfg_url_free(&u);
    return 0;
}

int aor_cfg_parse_listen(const char *v, char **out, const char **why) {
    *out = NULL;
    if (aor_cfg_ieq(v, "off"))
        return 0;
    const char *colon = strrchr(v, ':');
    if (!colon || colon == v || !colon[1]) {
        *why = "expected host:port (e.g. 127.0.0.1:8787) or off";
        return -1;
    }
    long port;
    if (aor_cfg_parse_long(colon + 1, 1, 65535, &port) != 0 || colon[1] == '+' || colon[1] == '-') {
        *why = "has an invalid port (1..65535)";
        return -1;
    }
    size_t hlen = (size_t)(colon - v);
    char host[INET6_ADDRSTRLEN + 3];
    if (hlen >= sizeof host) {
        *why = "only loopback addresses are allowed (127.0.0.0/8, [::1], localhost)";
        return -1;
    }
    memcpy(host, v, hlen);
    host[hlen] = '\0';
    int ok = 0, ipv6 = 0;
    if (host[0] == '[' && hlen > 2 && host[hlen - 1] == ']') {
        struct in6_addr a6;
        host[hlen - 1] = '\0';
        memmove(host, host + 1, hlen - 1);
        ipv6 = 1;
        ok = inet_pton(AF_INET6, host, &a6) == 1 && IN6_IS_ADDR_LOOPBACK(&a6);
    } else if (strchr(host, ':')) {
        *why = "write IPv6 addresses in brackets, e.g. [::1]:8787";
        return -1;
    } else if (aor_cfg_ieq(host, "localhost")) {
        snprintf(host, sizeof host, "127.0.0.1");
        ok = 1;
    } else {
        struct in_addr a4;
        ok = inet_pton(AF_INET, host, &a4) == 1 && (ntohl(a4.s_addr) >> 24) == 127;
    }
    if (!ok && !ipv6) {
        /* QA: "127.1" is loopback, but inet_pton takes only the four-part form. */
        struct in_addr a4;
        if (inet_aton(host, &a4) != 0 && (ntohl(a4.s_addr) >> 24) == 127) {
            *why = "is a short form of a loopback address; write all four parts, e.g. "
                   "127.0.0.1:8787";
            return -1;
        }
    }
    if (!ok) {
        *why = "only loopback addresses are allowed (127.0.0.0/8, [::1], localhost); aor "
               "never listens on the network";
        return -1;
    }
    if (asprintf(out, ipv6 ? "[%s]:%ld" : "%s:%ld", ipv6 ? "::1" : host, port) < 0) {
        *out = NULL;
        *why = "could not be stored (out of memory)";
        return -1;
    }
    return 0;
}

int aor_cfg_valid_env_name(const char *s) {
    size_t n = strlen(s);
    if (n == 0 || n > 128 || isdigit((unsigned char)s[0]))
        return 0;
    for (size_t i = 0; i < n; i++)
        if (!isalnum((unsigned char)s[i]) && s[i] != '_')
            return 0;
    return 1;
}

int aor_cfg_valid_name(const char *s) {
    size_t n = strlen(s);
    if (n == 0 || n > AOR_CFG_NAME_MAX)
        return 0;
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if (!isalnum(c) && !strchr("._@+-", c))
            return 0;
    }
    return 1;
}

int aor_cfg_valid_model(const char *s) {
    size_t n = strlen(s);
    if (n == 0 || n > AOR_CFG_MODEL_MAX)
        return 0;
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c <= 0x20 || c == 0x7f || c == ',' || c == '=' || c == ';' || c == '"')
            return 0;
    }
    return 1;
}

int aor_cfg_valid_host(const char *s) {
    return valid_reg_name(s, strlen(s)) && !strchr(s, '_');
}

long aor_cfg_split_list(const char *v, char ***items) {
    size_t n = 1;
    for (const char *p = v; *p; p++)
        n += *p == ',';
    char **out = calloc(n, sizeof *out);
    if (!out)
        return -1;
    const char *p = v;
    for (size_t i = 0; i < n; i++) {
        size_t len = strcspn(p, ",");
        const char *s = p, *e = p + len;
        while (s < e && isspace((unsigned char)*s))
            s++;
        while (e > s && isspace((unsigned char)e[-1]))
            e--;
        out[i] = strndup(s, (size_t)(e - s));
        if (!out[i]) {
            aor_cfg_list_free(out, i);
            return -1;
        }
        p += len + (p[len] == ',');
    }
    *items = out;
    return (long)n;
}

void aor_cfg_list_free(char **items, size_t n) {
    if (!items)
        return;
    for (size_t i = 0; i < n; i++)
        free(items[i]);
    free(items);
}

int aor_cfg_clean_secret(char *s, const char **why) {
    const char *dummy;
    if (!why)
        why = &dummy;
    size_t n = strlen(s), start = 0;
    while (start < n && isspace((unsigned char)s[start]))
        start++;
    while (n > start && isspace((unsigned char)s[n - 1]))
        n--;
    memmove(s, s + start, n - start);
    n -= start;
    explicit_bzero(s + n, strlen(s + n));
    s[n] = '\0';
    if (n == 0) {
        *why = "is empty after trimming white space";
        return -1;
    }
    if (n > AOR_CFG_SECRET_MAX) {
        *why = "is longer than " AOR_CFG_STR(AOR_CFG_SECRET_MAX) " bytes";
        return -1;
    }
    for (size_t i = 0; i < n; i++) {
        if ((unsigned char)s[i] == ' ') {
            *why = "contains a space (an API key is one word: is a second value or a comment "
                   "on the same line?)";
            return -1;
        }
        if ((unsigned char)s[i] < 0x20 || (unsigned char)s[i] == 0x7f) {
            *why = "contains a control character (a tab, a line break or another byte below "
                   "0x20)";
            return -1;
        }
    }
    return 0;
}

int aor_cfg_blank(const char *v) {
    return !v || v[strspn(v, " \t\n\v\f\r")] == '\0'; /* isspace() in the C locale */
}

/* malloc'd a + b + c (c may be NULL); NULL on ENOMEM. */
static char *cfg_join(const char *a, const char *b, const char *c) {
    char *out = NULL;
    if (asprintf(&out, "%s%s%s", a, b, c ? c : "") < 0)
        return NULL;
    return out;
}

char *aor_cfg_resolve_path(const char *v, const char *dir) {
    if (v[0] == '~' && (v[1] == '/' || v[1] == '\0')) {
        char *home = aor_path_home();
        if (!home)
            return NULL;
        char *out = cfg_join(home, v + 1, NULL);
        free(home);
        return out;
    }
    if (v[0] == '/' || !dir)
        return strdup(v);
    return cfg_join(dir, "/", v);
}
