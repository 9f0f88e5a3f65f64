#include "admin.h"

#include "clock.h"
#include "log.h"
#include "utf8.h"

#define AOR_CLOCK_ADVANCE_MAX_S (10.0 * 365 * 86400) /* one advance, seconds */

#include <cjson/cJSON.h>
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <openssl/crypto.h>
#include <openssl/rand.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

int aor_admin_is_local(const char *url) {
    const char *u = url ? url : "/";
    size_t n = strcspn(u, "?#");
    return (n == 8 && (memcmp(u, "/healthz", 8) == 0 || memcmp(u, "/metrics", 8) == 0)) ||
           (n == 6 && memcmp(u, "/admin", 6) == 0) || (n >= 7 && memcmp(u, "/admin/", 7) == 0) ||
           (n == 1 && u[0] == '/');
}

int aor_admin_token_init(aor_daemon *d, char *err, size_t errlen) {
    char path[4096];
    if (snprintf(path, sizeof path, "%s/admin.token", d->state_dir) >= (int)sizeof path) {
        snprintf(err, errlen, "state directory path too long");
        return -1;
    }
    /* O_NONBLOCK: a FIFO put there must not hang the daemon (at start or on SIGHUP). */
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
    if (fd >= 0) {
        char buf[65];
        struct stat st;
        int have = fstat(fd, &st) == 0;
        int notreg = have && !S_ISREG(st.st_mode);
        int exposed = have && !notreg && (st.st_mode & 077);
        ssize_t n = exposed || notreg || !have ? 0 : read(fd, buf, 64);
        close(fd);
        if (notreg) {
            aor_warn("%s is not a regular file; writing a new token in its place", path);
        } else if (exposed) {
            /* Another user may have read it: a new token, not just a chmod. */
            aor_warn("%s was readable or writable by others (mode %03o); writing a new token", path,
                     (unsigned)(st.st_mode & 0777));
        } else if (n == 64) {
            int ok = 1;
            for (int i = 0; i < 64; i++)
                ok &= strchr("0123456789abcdef", buf[i]) != NULL && buf[i] != '\0';
            if (ok) {
                memcpy(d->admin_token, buf, 64);
                d->admin_token[64] = '\0';
                return 0;
            }
        }
        if (!exposed && !notreg)
            aor_warn("%s is not a valid token; writing a new one", path);
    }
    unsigned char raw[32];
    if (RAND_bytes(raw, sizeof raw) != 1) {
        snprintf(err, errlen, "no randomness for the admin token");
        return -1;
    }
    for (int i = 0; i < 32; i++)
        snprintf(d->admin_token + 2 * i, 3, "%02x", raw[i]);
    char tmp[4200];
    snprintf(tmp, sizeof tmp, "%s.tmp.%d", path, (int)getpid());
    fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600);
    if (fd < 0) {
        snprintf(err, errlen, "cannot write %s: %s", tmp, strerror(errno));
        return -1;
    }
    int ok = write(fd, d->admin_token, 64) == 64 && write(fd, "\n", 1) == 1;
    ok = close(fd) == 0 && ok;
    if (!ok || rename(tmp, path) < 0) {
        unlink(tmp);
        snprintf(err, errlen, "cannot write %s: %s", path, strerror(errno));
        return -1;
    }
    return 0;
}

/* The raw (still percent-encoded) value of query parameter name in url: a pointer into
 * url with its length in *vl, or NULL when the parameter is not there. */
static const char *param_at(const char *url, const char *name, size_t *vl) {
    const char *q = strchr(url, '?');
    if (!q)
        return NULL;
    q++;
    size_t nl = strlen(name);
    while (*q) {
        size_t l = strcspn(q, "&");
        if (l > nl && strncmp(q, name, nl) == 0 && q[nl] == '=') {
            *vl = l - nl - 1;
            return q + nl + 1;
        }
        q += l;
        if (*q == '&')
            q++;
    }
    return NULL;
}

/* Value of query parameter `name` (malloc'd, not decoded beyond %XX and '+'), or NULL
 * when it is not there or on ENOMEM. */
static char *query_param(const char *url, const char *name) {
    size_t vl = 0;
    const char *v = param_at(url, name, &vl);
    if (!v)
        return NULL;
    char *out = malloc(vl + 1);
    if (!out)
        return NULL;
    size_t o = 0;
    for (size_t i = 0; i < vl; i++) {
        if (v[i] == '%' && i + 2 < vl && isxdigit((unsigned char)v[i + 1]) &&
            isxdigit((unsigned char)v[i + 2])) {
            char hex[3] = {v[i + 1], v[i + 2], 0};
            /* %00 would end the string early: "openai%00x" was taken as "openai" (QA).
             * Kept as '?', so the value is refused as a whole. */
            char ch = (char)strtol(hex, NULL, 16);
            out[o++] = ch ? ch : '?';
            i += 2;
        } else {
            out[o++] = v[i] == '+' ? ' ' : v[i];
        }
    }
    out[o] = '\0';
    return out;
}

static int token_ok(aor_daemon *d, const aor_http_request *req) {
    const char *auth = aor_http_request_field(req, "authorization");
    if (auth && strncasecmp(auth, "Bearer ", 7) == 0) {
        const char *t = auth + 7;
        while (*t == ' ')
            t++;
        if (strlen(t) == 64 && CRYPTO_memcmp(t, d->admin_token, 64) == 0)
            return 1;
    }
    /* Cookie: name=value pairs separated by ";" and optional spaces (RFC 6265 §4.2.1);
     * the pair named exactly aor_admin, with exactly the token as its value. */
    const char *cookie = aor_http_request_field(req, "cookie");
    for (const char *s = cookie; s && *s;) {
        while (*s == ' ' || *s == ';')
            s++;
        size_t n = strcspn(s, ";");
        size_t vn = n;
        while (vn > 0 && s[vn - 1] == ' ')
            vn--;
        if (vn == 10 + 64 && strncmp(s, "aor_admin=", 10) == 0 &&
            CRYPTO_memcmp(s + 10, d->admin_token, 64) == 0)
            return 1;
        s += n;
    }
    return 0;
}

/* 0 when a browser sent req from a page of another origin: an Origin whose host:port is
 * not the Host the request went to, or Sec-Fetch-Site "same-site" / "cross-site". The
 * sidecar's guard (guard.c) lets any loopback page through; for the admin routes that is
 * not enough: the session cookie is SameSite=Strict, and cookies ignore ports, so a page
 * of any other local server (http://127.0.0.1:3000) would carry it and could reset
 * backoff (QA). Requests without these headers (curl, scripts) are not from a page. */
static int same_origin(const aor_http_request *req) {
    const char *site = aor_http_request_known(req, AOR_HF_SEC_FETCH_SITE);
    if (site && (strcasecmp(site, "same-site") == 0 || strcasecmp(site, "cross-site") == 0))
        return 0;
    const char *origin = aor_http_request_known(req, AOR_HF_ORIGIN);
    if (!origin)
        return 1;
    const char *host = aor_http_request_known(req, AOR_HF_HOST);
    if (strncasecmp(origin, "http://", 7) != 0 || !host)
        return 0;
    const char *oh = origin + 7;
    size_t ol = strcspn(oh, "/");
    return oh[ol] == '\0' && strlen(host) == ol && strncasecmp(oh, host, ol) == 0;
}

#define REPLY_EXTRA_MAX 4 /* header lines a reply adds besides the x-aor-* ones */

/* extra: up to REPLY_EXTRA_MAX header lines, NULL-terminated, or NULL. */
static void reply(aor_conn *c, const aor_http_request *req, int status, const char *ctype,
                  const char *const *extra, const char *body, size_t len) {
    /* §5.6: every answer carries the x-aor-* headers; aor's own answers name no provider
     * or key and no attempt (as the proxy's local answers do). */
    const char *hdrs[3 + REPLY_EXTRA_MAX + 1] = {"x-aor-provider: -", "x-aor-key: -",
                                                 "x-aor-attempts: 0"};
    for (size_t i = 0; extra && extra[i] && i < REPLY_EXTRA_MAX; i++)
        hdrs[3 + i] = extra[i];
    /* HEAD: the same head (Content-Length of the GET body), no body (RFC 9110 §9.3.2). */
    aor_http_write_response(aor_conn_output(c), status, ctype, hdrs,
                            req->method == HTTP_HEAD ? NULL : body, len,
                            aor_http_connection_line(req));
}

/* RFC 8259 §8.1: JSON goes out as UTF-8. Strings from requests (a model name) or the
 * config may hold other bytes; each such byte becomes U+FFFD. 0, or -1 out of memory. */
static int json_make_utf8(cJSON *j) {
    for (; j != NULL; j = j->next) {
        if (cJSON_IsString(j) && j->valuestring != NULL &&
            !aor_utf8_valid(j->valuestring, strlen(j->valuestring))) {
            char *fixed = aor_utf8_sanitize(j->valuestring);
            char *set = fixed ? cJSON_SetValuestring(j, fixed) : NULL;
            free(fixed);
            if (set == NULL)
                return -1;
        }
        if (j->child != NULL && json_make_utf8(j->child) < 0)
            return -1;
    }
    return 0;
}

static void reply_json_extra(aor_conn *c, const aor_http_request *req, int status, cJSON *j,
                             const char *const *extra) {
    char *s = j && json_make_utf8(j) == 0 ? cJSON_PrintUnformatted(j) : NULL;
    if (!s) {
        reply(c, req, 500, "application/json", NULL, "{\"error\":\"out of memory\"}", 25);
        return;
    }
    reply(c, req, status, "application/json", extra, s, strlen(s));
    free(s);
}

static void reply_json(aor_conn *c, const aor_http_request *req, int status, cJSON *j) {
    reply_json_extra(c, req, status, j, NULL);
}

static void reply_error_extra(aor_conn *c, const aor_http_request *req, int status, const char *msg,
                              const char *const *extra) {
    cJSON *j = cJSON_CreateObject();
    cJSON *e = cJSON_AddObjectToObject(j, "error");
    cJSON_AddStringToObject(e, "message", msg);
    reply_json_extra(c, req, status, j, extra);
    cJSON_Delete(j);
}

static void reply_error(aor_conn *c, const aor_http_request *req, int status, const char *msg) {
    reply_error_extra(c, req, status, msg, NULL);
}

/* 405 with the Allow header RFC 9110 §15.5.6 asks for: a GET route (post 0) or a POST one. */
static void reply_405(aor_conn *c, const aor_http_request *req, int post) {
    const char *extra[] = {post ? "Allow: POST" : "Allow: GET, HEAD", NULL};
    reply_error_extra(c, req, 405, post ? "use POST" : "use GET", extra);
}

typedef struct {
    cJSON *arr;
    double now;
    const aor_config *cfg;
} state_ctx;

/* 1 when (provider, key) is routable with the running config: a configured key of the
 * provider, or a pass-through credential of a provider without keys. Rows of keys that a
 * reload removed or renamed stay in the store (harmless, ignored by routing) but are not
 * shown. */
static int key_configured(const aor_config *cfg, const char *provider, const char *key) {
    int pi = aor_config_provider_index(cfg, provider);
    if (pi < 0)
        return 0;
    const aor_provider_cfg *p = &cfg->providers[pi];
    if (p->passthrough)
        return strncmp(key, "client-", 7) == 0;
    for (size_t k = 0; k < p->nkeys; k++) {
        if (strcmp(cfg->keys[p->key_idx[k]].name, key) == 0)
            return 1;
    }
    return 0;
}

static void add_backoff(const aor_backoff_row *r, void *arg) {
    state_ctx *s = arg;
    if (r->until <= s->now || !key_configured(s->cfg, r->provider, r->key))
        return; /* only active rows of configured keys */
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "provider", r->provider);
    cJSON_AddStringToObject(o, "key", r->key);
    cJSON_AddNumberToObject(o, "window_s", r->window_s);
    cJSON_AddNumberToObject(o, "failure_count", r->failure_count);
    cJSON_AddNumberToObject(o, "until", r->until);
    cJSON_AddStringToObject(o, "last_error_kind", aor_kind_name(r->last_error_kind));
    cJSON_AddNumberToObject(o, "last_failure", r->last_failure);
    cJSON_AddItemToArray(s->arr, o);
}

static void add_breaker(const aor_breaker_row *r, void *arg) {
    state_ctx *s = arg;
    /* A provider a reload removed or renamed: its circuit, like its keys' rows, stays in
     * the store but is not shown (QA: listed, and `aor backoff reset` of its name said
     * "aord has no provider named ..."). */
    if (aor_config_provider_index(s->cfg, r->provider) < 0)
        return;
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "provider", r->provider);
    cJSON_AddStringToObject(o, "model", r->model);
    cJSON_AddStringToObject(o, "state", r->state == AOR_BREAKER_OPEN ? "open" : "half-open");
    cJSON_AddNumberToObject(o, "until", r->until);
    cJSON_AddItemToArray(s->arr, o);
}

static void add_sticky(const aor_sticky_row *r, void *arg) {
    state_ctx *s = arg;
    if (!key_configured(s->cfg, r->provider, r->key))
        return;
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "client", r->client);
    cJSON_AddStringToObject(o, "model", r->model);
    cJSON_AddStringToObject(o, "provider", r->provider);
    cJSON_AddStringToObject(o, "key", r->key);
    cJSON_AddNumberToObject(o, "last_success", r->last_success);
    cJSON_AddItemToArray(s->arr, o);
}

/* Exhausted usage windows (spec §6) of configured keys: each holds its key back until
 * reset_at, like a backoff row (one entry per window). */
static void add_usage(const char *provider, const char *key, const aor_usage_window *w, void *arg) {
    state_ctx *s = arg;
    if (!key_configured(s->cfg, provider, key))
        return;
    if (!aor_usage_windows_exhausted(w, s->now, NULL))
        return; /* not held back: a stale snapshot lists nothing */
    for (int i = 0; i < AOR_USAGE_NWINDOWS; i++) {
        if (!w[i].known || w[i].remaining != 0 || !(w[i].reset_at > s->now))
            continue;
        cJSON *o = cJSON_CreateObject();
        cJSON_AddStringToObject(o, "provider", provider);
        cJSON_AddStringToObject(o, "key", key);
        cJSON_AddStringToObject(o, "window", aor_usage_window_name((aor_usage_window_id)i));
        cJSON_AddNumberToObject(o, "remaining", w[i].remaining);
        cJSON_AddNumberToObject(o, "reset_at", w[i].reset_at);
        cJSON_AddNumberToObject(o, "observed_at", w[i].observed_at);
        cJSON_AddItemToArray(s->arr, o);
    }
}

static cJSON *state_json(aor_daemon *d) {
    double now = aor_clock_now();
    cJSON *j = cJSON_CreateObject();
    if (!j)
        return NULL;
    cJSON_AddNumberToObject(j, "now", now);
    state_ctx s = {cJSON_AddArrayToObject(j, "backoff"), now, d->cfg};
    aor_backoff_foreach(aor_rstate_backoff(d->rs), add_backoff, &s);
    s.arr = cJSON_AddArrayToObject(j, "breakers");
    aor_breaker_foreach(aor_rstate_breaker(d->rs), now, add_breaker, &s);
    s.arr = cJSON_AddArrayToObject(j, "sticky");
    aor_sticky_foreach(aor_rstate_sticky(d->rs), add_sticky, &s);
    s.arr = cJSON_AddArrayToObject(j, "usage");
    aor_usage_foreach(aor_rstate_usage(d->rs), add_usage, &s);
    cJSON *keys = cJSON_AddArrayToObject(j, "keys");
    const aor_config *cfg = d->cfg;
    for (size_t i = 0; i < cfg->nproviders; i++) {
        const aor_provider_cfg *p = &cfg->providers[i];
        for (size_t k = 0; k < p->nkeys; k++) {
            const aor_key_cfg *kc = &cfg->keys[p->key_idx[k]];
            cJSON *o = cJSON_CreateObject();
            cJSON_AddStringToObject(o, "provider", p->name);
            cJSON_AddStringToObject(o, "key", kc->name);
            cJSON_AddStringToObject(o, "name", kc->friendly ? kc->friendly : kc->name);
            cJSON_AddNumberToObject(o, "priority", kc->priority);
            cJSON_AddItemToArray(keys, o);
        }
    }
    cJSON *provs = cJSON_AddArrayToObject(j, "providers");
    for (size_t i = 0; i < cfg->nproviders; i++) {
        cJSON *o = cJSON_CreateObject();
        cJSON_AddStringToObject(o, "name", cfg->providers[i].name);
        cJSON_AddStringToObject(o, "dialect", aor_dialect_name(cfg->providers[i].dialect));
        cJSON_AddStringToObject(o, "base_url", cfg->providers[i].base_url);
        cJSON_AddNumberToObject(o, "priority", cfg->providers[i].priority);
        cJSON_AddBoolToObject(o, "passthrough", cfg->providers[i].passthrough);
        cJSON_AddBoolToObject(o, "implicit", cfg->providers[i].implicit);
        cJSON_AddItemToArray(provs, o);
    }
    cJSON_AddBoolToObject(j, "fake_clock", aor_clock_is_fake());
    cJSON_AddStringToObject(j, "config", cfg->source ? cfg->source : "<embedded default>");
    return j;
}

/* Runs an admin reset (aor_rstate_reset) and answers {"removed": backoff rows and circuits,
 * "usage_cleared": exhausted usage windows dropped}. */
static void reset_reply(aor_daemon *d, aor_conn *c, const aor_http_request *req,
                        const char *provider, const char *key) {
    int usage = 0;
    int n = aor_rstate_reset(d->rs, provider, key, aor_clock_now(), &usage);
    cJSON *j = cJSON_CreateObject();
    cJSON_AddNumberToObject(j, "removed", n < 0 ? 0 : n);
    cJSON_AddNumberToObject(j, "usage_cleared", n < 0 ? 0 : usage);
    reply_json(c, req, n < 0 ? 500 : 200, j);
    cJSON_Delete(j);
}

static void metrics(aor_daemon *d, aor_conn *c, const aor_http_request *req) {
    struct evbuffer *b = evbuffer_new();
    if (!b) {
        reply_error(c, req, 500, "out of memory");
        return;
    }
    const aor_metrics *m = &d->m;
#define M(name, help, val)                                                                         \
    evbuffer_add_printf(b, "# HELP %s %s\n# TYPE %s counter\n%s %lu\n", name, help, name, name,    \
                        (unsigned long)(val))
    M("aor_connections_total", "Client connections accepted.", m->connections);
    M("aor_requests_total", "Requests handled.", m->requests);
    M("aor_proxied_requests_total", "Requests routed upstream.", m->proxied);
    M("aor_upstream_attempts_total", "Requests sent to a provider (each attempt of a walk).",
      m->attempts);
    M("aor_upstream_failures_total",
      "Failed upstream attempts (retryable, or cut after the answer started).", m->attempt_fail);
    M("aor_all_backed_off_total", "Terminal aor_all_backed_off answers.", m->all_backed_off);
    M("aor_rejected_peers_total",
      "Connections refused by the uid check (another uid, or an owner that could not be told).",
      m->rejected_peers);
    M("aor_bad_preambles_total", "Shim connections with a malformed preamble.", m->bad_preambles);
    M("aor_state_writes_total", "State events written to the store.", aor_rstate_writes(d->rs));
    M("aor_state_write_errors_total",
      "State events the store could not write (applied in memory only).",
      aor_rstate_write_errors(d->rs));
#undef M
    evbuffer_add_printf(b, "# HELP aor_up Whether aord is up.\n# TYPE aor_up gauge\naor_up 1\n");
    size_t len = evbuffer_get_length(b);
    reply(c, req, 200, "text/plain; version=0.0.4", NULL, (const char *)evbuffer_pullup(b, -1),
          len);
    evbuffer_free(b);
}

static const char admin_page[] =
    "<!DOCTYPE html><html><head><meta charset=\"utf-8\"><title>aor</title>"
    "<style>body{font:14px system-ui,sans-serif;margin:2em}table{border-collapse:collapse}"
    "td,th{border:1px solid #ccc;padding:4px 8px;text-align:left}</style></head><body>"
    "<h1>aor</h1><p id=\"msg\"></p><div id=\"out\"></div>"
    "<p><button onclick=\"clearAll()\">Clear all backoff</button></p>"
    "<script>"
    "function esc(s){return String(s).replace(/[&<>\"]/g,c=>({'&':'&amp;','<':'&lt;','>':"
    "'&gt;','\"':'&quot;'}[c]))}"
    "function table(t,rows){if(!rows.length)return '<h2>'+t+'</h2><p>none</p>';"
    "let k=Object.keys(rows[0]);return '<h2>'+t+'</h2><table><tr>'+k.map(x=>'<th>'+esc(x)+"
    "'</th>').join('')+'</tr>'+rows.map(r=>'<tr>'+k.map(x=>'<td>'+esc(r[x])+'</td>').join('')"
    "+'</tr>').join('')+'</table>'}"
    "async function load(){let r=await fetch('/admin/api/state');if(!r.ok){document."
    "getElementById('msg').textContent='Open /admin?token=TOKEN once (the token is in "
    "$XDG_STATE_HOME/aor/admin.token).';return}let s=await r.json();document.getElementById("
    "'out').innerHTML=table('Backoff',s.backoff)+table('Circuit breakers',s.breakers)+"
    "table('Sticky',s.sticky)+table('Usage exhausted',s.usage||[])+table('Keys',s.keys)}"
    "async function clearAll(){await fetch('/admin/api/backoff/clear',{method:'POST'});load()}"
    "load();setInterval(load,5000)</script></body></html>";

/* GET /admin without the token: how to get in, nothing else. */
static const char admin_login_page[] =
    "<!DOCTYPE html><html><head><meta charset=\"utf-8\"><title>aor</title></head><body>"
    "<h1>aor</h1><p>The admin page needs the admin token. Open <code>/admin?token=TOKEN</code> "
    "once (the token is the content of <code>$XDG_STATE_HOME/aor/admin.token</code>, "
    "usually <code>~/.local/state/aor/admin.token</code>); the browser then keeps a "
    "session cookie.</p></body></html>";

void aor_admin_handle(aor_daemon *d, aor_conn *c, aor_http_request *req) {
    char *path = aor_http_request_path(req);
    int is_get = req->method == HTTP_GET || req->method == HTTP_HEAD;
    int is_post = req->method == HTTP_POST;
    if (!path) {
        reply_error(c, req, 500, "out of memory");
        goto done;
    }
    if (strcmp(path, "/healthz") == 0 || strcmp(path, "/") == 0) {
        if (!is_get) {
            reply_405(c, req, 0);
            goto done;
        }
        reply(c, req, 200, "text/plain", NULL, "ok\n", 3);
        goto done;
    }
    if (strcmp(path, "/metrics") == 0) {
        if (!is_get) {
            reply_405(c, req, 0);
            goto done;
        }
        metrics(d, c, req);
        goto done;
    }
    /* "/admin/" is the page too (a browser adds the slash). */
    int page = strcmp(path, "/admin") == 0 || strcmp(path, "/admin/") == 0;
    if (page && is_get) {
        char *tok = query_param(req->url, "token");
        if (tok && strlen(tok) == 64 && CRYPTO_memcmp(tok, d->admin_token, 64) == 0) {
            char cookie[160];
            snprintf(cookie, sizeof cookie,
                     "Set-Cookie: aor_admin=%s; Path=/admin; HttpOnly; SameSite=Strict",
                     d->admin_token);
            const char *extra[] = {cookie, "Cache-Control: no-store", NULL};
            reply(c, req, 200, "text/html; charset=utf-8", extra, admin_page,
                  sizeof admin_page - 1);
        } else if (token_ok(d, req)) {
            const char *extra[] = {"Cache-Control: no-store", NULL};
            reply(c, req, 200, "text/html; charset=utf-8", extra, admin_page,
                  sizeof admin_page - 1);
        } else {
            /* Spec §8: admin routes need the token, the page too. */
            const char *extra[] = {"WWW-Authenticate: Bearer realm=\"aor\"",
                                   "Cache-Control: no-store", NULL};
            reply(c, req, 401, "text/html; charset=utf-8", extra, admin_login_page,
                  sizeof admin_login_page - 1);
        }
        free(tok);
        goto done;
    }
    if (page) {
        reply_405(c, req, 0);
        goto done;
    }
    if (strcmp(path, "/admin/api/clock/advance") == 0 && !aor_clock_is_fake()) {
        reply_error(c, req, 404, "no such route (the test clock is off)");
        goto done;
    }
    if (strncmp(path, "/admin", 6) == 0 && !same_origin(req)) {
        reply_error(c, req, 403,
                    "cross-origin admin request refused: only the admin page itself (the same "
                    "host and port) may call the admin routes from a browser");
        goto done;
    }
    if (!token_ok(d, req)) {
        const char *extra[] = {"WWW-Authenticate: Bearer realm=\"aor\"", NULL};
        const char *auth = aor_http_request_field(req, "authorization");
        /* A token that was sent but is not this aord's: most often one read from another
         * state directory (another XDG_STATE_HOME than aord's). */
        const char *msg = auth ? "{\"error\":{\"message\":\"admin token not accepted: it is "
                                 "not the one in this aord's $XDG_STATE_HOME/aor/admin.token "
                                 "(read from another XDG_STATE_HOME? aord writes a new token "
                                 "when the file is open to others)\"}}"
                               : "{\"error\":{\"message\":\"admin token required: send "
                                 "'Authorization: Bearer <token>' with the token from "
                                 "$XDG_STATE_HOME/aor/admin.token\"}}";
        reply(c, req, 401, "application/json", extra, msg, strlen(msg));
        goto done;
    }
    if (strcmp(path, "/admin/api/state") == 0 && is_get) {
        cJSON *j = state_json(d);
        reply_json(c, req, 200, j);
        cJSON_Delete(j);
    } else if (strcmp(path, "/admin/api/backoff/reset") == 0 && is_post) {
        char *prov = query_param(req->url, "provider");
        char *key = query_param(req->url, "key");
        size_t raw_len = 0;
        if ((!prov || !*prov) && (!param_at(req->url, "provider", &raw_len) || raw_len == 0)) {
            reply_error(c, req, 400, "provider=NAME is required");
        } else if (!prov || !*prov || aor_config_provider_index(d->cfg, prov) < 0) {
            /* (a value that decodes to a NUL byte first, "%00...", names no provider: QA) */
            reply_error(c, req, 404, "no such provider");
        } else if (key && !*key && (!param_at(req->url, "key", &raw_len) || raw_len == 0)) {
            reply_error(c, req, 400, "key=KEY must not be empty (leave it out for every key)");
        } else if (key && !*key) {
            reply_error(c, req, 404, "no such key of that provider");
        } else if (key && !key_configured(d->cfg, prov, key)) {
            reply_error(c, req, 404, "no such key of that provider");
        } else {
            reset_reply(d, c, req, prov, key);
        }
        free(key);
        free(prov);
    } else if (strcmp(path, "/admin/api/backoff/clear") == 0 && is_post) {
        reset_reply(d, c, req, NULL, NULL);
    } else if (strcmp(path, "/admin/api/clock/advance") == 0 && is_post) {
        char *sv = query_param(req->url, "s");
        char *end = NULL;
        errno = 0;
        double s = sv ? strtod(sv, &end) : NAN;
        /* Bounded: the test clock must stay a plausible Unix time (state written at an
         * absurd time would replay for ever). */
        if (!sv || !*sv || errno || !end || *end || !isfinite(s) || s < 0 ||
            s > AOR_CLOCK_ADVANCE_MAX_S || aor_clock_now() + s > AOR_CLOCK_FAKE_MAX ||
            aor_clock_advance(s) < 0) {
            reply_error(c, req, 400, "s=N (seconds, 0 to 10 years) is required");
        } else {
            cJSON *j = cJSON_CreateObject();
            cJSON_AddNumberToObject(j, "now", aor_clock_now());
            reply_json(c, req, 200, j);
            cJSON_Delete(j);
        }
        free(sv);
    } else if (strcmp(path, "/admin/api/state") == 0) {
        reply_405(c, req, 0);
    } else if (strcmp(path, "/admin/api/backoff/reset") == 0 ||
               strcmp(path, "/admin/api/backoff/clear") == 0 ||
               strcmp(path, "/admin/api/clock/advance") == 0) {
        reply_405(c, req, 1);
    } else {
        reply_error(c, req, 404, "no such admin route");
    }
done:
    free(path);
    int ka = req->keep_alive;
    aor_http_request_free(req);
    aor_conn_response_done(c, ka);
}
