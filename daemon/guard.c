#include "guard.h"

#include <stdio.h>
#include <string.h>
#include <strings.h>

int aor_guard_loopback_host(const char *host, size_t len) {
    /* Strip an optional :port (digits only). */
    size_t n = len;
    for (size_t i = len; i > 0; i--) {
        char ch = host[i - 1];
        if (ch == ':') {
            n = i - 1;
            break;
        }
        if (ch < '0' || ch > '9' || ch == ']')
            break;
    }
    if (n == 9 && strncasecmp(host, "localhost", 9) == 0)
        return 1;
    if (n == 5 && strncmp(host, "[::1]", 5) == 0)
        return 1;
    if (n >= 7 && n <= 15 && strncmp(host, "127.", 4) == 0) {
        int dots = 0;
        for (size_t i = 0; i < n; i++) {
            if (host[i] == '.')
                dots++;
            else if (host[i] < '0' || host[i] > '9')
                return 0;
        }
        return dots == 3;
    }
    return 0;
}

static int loopback_origin(const char *origin) {
    static const char *const schemes[] = {"http://", "https://"};
    for (size_t i = 0; i < 2; i++) {
        size_t sl = strlen(schemes[i]);
        if (strncasecmp(origin, schemes[i], sl) == 0) {
            const char *h = origin + sl;
            size_t hl = strcspn(h, "/");
            return aor_guard_loopback_host(h, hl);
        }
    }
    return 0;
}

/* The hint of a refused proxy request (what: "CONNECT", "absolute-form request target"):
 * point the base URL at the sidecar as it is bound, or use the shim. */
static const char *not_a_proxy(const char *what, const char *base_url) {
    static _Thread_local char msg[192];
    if (base_url && *base_url)
        snprintf(msg, sizeof msg,
                 "%s: aor is not an HTTP proxy; point the client's base URL at it (e.g. "
                 "OPENAI_BASE_URL=%.64s/v1) or use the shim",
                 what, base_url);
    else
        snprintf(msg, sizeof msg,
                 "%s: aor is not an HTTP proxy; use the shim (`aor run -- PROGRAM`)", what);
    return msg;
}

int aor_guard_check(const aor_http_request *req, int sidecar, const char *base_url,
                    const char **why) {
    switch (req->method) {
    case HTTP_GET:
    case HTTP_HEAD:
    case HTTP_POST:
    case HTTP_PUT:
    case HTTP_PATCH:
    case HTTP_DELETE:
        break;
    case HTTP_CONNECT:
        *why = not_a_proxy("CONNECT", base_url);
        return 405;
    default:
        *why = "this method is not supported (GET, HEAD, POST, PUT, PATCH, DELETE are)";
        return 405;
    }
    if (!req->url || req->url[0] != '/') {
        *why = not_a_proxy("absolute-form request target", base_url);
        return 400;
    }
    /* RFC 9112 §3.2: a server responds 400 to an HTTP/1.1 request without Host. */
    const char *host = aor_http_request_known(req, AOR_HF_HOST);
    if (!host && req->http_major == 1 && req->http_minor >= 1) {
        *why = "an HTTP/1.1 request needs a Host header";
        return 400;
    }
    /* RFC 9110 §10.1.1: an expectation the server cannot meet gets 417. */
    const char *expect = aor_http_request_known(req, AOR_HF_EXPECT);
    if (expect && strcasecmp(expect, "100-continue") != 0) {
        *why = "the only expectation aor meets is Expect: 100-continue";
        return 417;
    }
    if (!sidecar)
        return 0;
    if (host && !aor_guard_loopback_host(host, strlen(host))) {
        *why = "the Host header is not a loopback name (127.0.0.1, localhost, [::1]); "
               "refused to protect against DNS rebinding";
        return 403;
    }
    const char *origin = aor_http_request_known(req, AOR_HF_ORIGIN);
    if (origin && !loopback_origin(origin)) {
        *why = "cross-origin request from a web page refused: a page must not spend your "
               "keys through the sidecar";
        return 403;
    }
    const char *site = aor_http_request_known(req, AOR_HF_SEC_FETCH_SITE);
    if (site && strcasecmp(site, "cross-site") == 0) {
        *why = "cross-site request from a web page refused (Sec-Fetch-Site: cross-site)";
        return 403;
    }
    return 0;
}
