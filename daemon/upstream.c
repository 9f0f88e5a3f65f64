#include "upstream.h"

#include "curl_api.h"
#include "log.h"
#include "upstream_curl.h"
#include "upstream_h1.h"

#include <stdlib.h>
#include <string.h>
#include <strings.h>

struct aor_upstream {
    struct event_base *base;
    aor_upcurl *curl; /* made when first needed: libcurl is loaded then (curl_api.h) */
    aor_h1 *h1;
    int all_curl;   /* AOR_UPSTREAM=curl */
    int proxy_http; /* a proxy variable applies to http:// upstreams */
    int proxy_tls;  /* ... to https:// upstreams */
};

static int env_set(const char *name) {
    const char *v = getenv(name);
    return v && *v;
}

aor_upstream *aor_upstream_new(struct event_base *base) {
    aor_upstream *u = calloc(1, sizeof *u);
    if (!u)
        return NULL;
    u->base = base;
    u->h1 = aor_h1_new(base);
    if (!u->h1)
        goto fail_u;
    const char *mode = getenv("AOR_UPSTREAM");
    u->all_curl = mode && strcmp(mode, "curl") == 0;
    /* The variables libcurl reads (curl's lib/url.c: http_proxy only in lower case). */
    int all = env_set("all_proxy") || env_set("ALL_PROXY");
    u->proxy_http = all || env_set("http_proxy");
    u->proxy_tls = all || env_set("https_proxy") || env_set("HTTPS_PROXY");
    if (u->all_curl || u->proxy_http || u->proxy_tls) {
        /* Load libcurl now, not on the first request (and fail at start if it is missing). */
        u->curl = aor_upcurl_new(base);
        if (!u->curl)
            goto fail_h1;
    }
    if (u->all_curl)
        aor_info("upstream: every transfer through libcurl (AOR_UPSTREAM=curl)");
    else if (u->proxy_http || u->proxy_tls)
        aor_info("upstream: a proxy variable is set; %s upstreams go through libcurl",
                 u->proxy_http && u->proxy_tls ? "all"
                 : u->proxy_tls                ? "https://"
                                               : "http://");
    return u;
fail_h1:
    aor_h1_free(u->h1);
fail_u:
    free(u);
    return NULL;
}

void aor_upstream_free(aor_upstream *u) {
    if (!u)
        return;
    aor_h1_free(u->h1);
    aor_upcurl_free(u->curl);
    free(u);
}

void aor_upstream_reload_trust(aor_upstream *u) {
    if (u && u->h1)
        aor_h1_reload_trust(u->h1);
}

aor_xfer *aor_xfer_start(aor_upstream *u, const aor_xfer_request *req, const aor_xfer_callbacks *cb,
                         void *arg) {
    int direct = 0;
    if (!u->all_curl) {
        if (strncasecmp(req->url, "https://", 8) == 0)
            direct = !u->proxy_tls;
        else if (strncasecmp(req->url, "http://", 7) == 0)
            direct = !u->proxy_http;
    }
    if (direct) {
        /* AOR_H1_UNSUPPORTED: a URL the direct path does not take (user info in it). */
        int why = 0;
        aor_xfer *x = aor_h1_start(u->h1, req, cb, arg, &why);
        if (x || why != AOR_H1_UNSUPPORTED)
            return x;
    }
    if (!u->curl && !(u->curl = aor_upcurl_new(u->base))) {
        /* A URL only libcurl takes (user info in it) and libcurl cannot be loaded. */
        if (req->headers) {
            const aor_curl_api *api = aor_curl_api_get();
            if (api)
                api->slist_free_all(req->headers);
        }
        return NULL;
    }
    return aor_upcurl_start(u->curl, req, cb, arg);
}

void aor_xfer_resume(aor_xfer *x) {
    if (x->backend == AOR_XFER_H1)
        aor_h1_resume(x);
    else
        aor_upcurl_resume(x);
}

void aor_xfer_cancel(aor_xfer *x) {
    if (!x)
        return;
    if (x->backend == AOR_XFER_H1)
        aor_h1_cancel(x);
    else
        aor_upcurl_cancel(x);
}
