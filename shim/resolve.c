/* libaor.so: name resolution hooks (spec §2 steps 1 and 3): getaddrinfo, gethostbyname,
 * gethostbyname_r. The real answer is returned unchanged and its addresses recorded
 * for intercepted hosts; when the real resolver fails for an intercepted host and the
 * daemon is up (its socket takes a connection: aor_fallback_daemon_up), a stable
 * 198.18.0.0/15 address is answered instead. */
#include "env.h"
#include "fallback.h"
#include "hosts.h"
#include "preamble.h"
#include "real.h"

#include <errno.h>
#include <netdb.h>
#include <string.h>

/* 1 when the daemon is up (spec §2 step 3): its socket takes a connection now. A socket
 * file alone is not enough: a daemon killed with SIGKILL leaves its socket behind, and
 * a fallback address then leads nowhere. Only on the resolver-failure path. */
static int daemon_up(void) {
    const aor_shim_env *env = aor_env();
    return env->sock_ok && aor_fallback_daemon_up(env->sock_path);
}

/* Resolver failures after which the offline fallback may answer. Argument errors
 * (bad flags, family, socktype, service) and EAI_MEMORY are returned as they are. */
static int fallback_worthy(int rc) {
    switch (rc) {
    case EAI_NONAME:
    case EAI_AGAIN:
    case EAI_FAIL:
#ifdef EAI_NODATA
    case EAI_NODATA:
#endif
#ifdef EAI_ADDRFAMILY
    case EAI_ADDRFAMILY:
#endif
    case EAI_SYSTEM:
        return 1;
    default:
        return 0;
    }
}

static void record_addrinfo(const struct addrinfo *res, const char *host) {
    int n = 0;
    char first[46] = "";
    aor_ip last = {0};
    for (const struct addrinfo *ai = res; ai != NULL; ai = ai->ai_next) {
        aor_ip ip;
        if (aor_ip_from_sockaddr(ai->ai_addr, ai->ai_addrlen, &ip, NULL) != 0)
            continue;
        if (n > 0 && aor_ip_cmp(&ip, &last) == 0)
            continue; /* same address for another socktype */
        aor_hosts_record(&ip, host, 0);
        if (n == 0)
            aor_ip_format(&ip, first, sizeof(first));
        last = ip;
        n++;
    }
    aor_debug("resolve %s: recorded %d address%s (first %s)", host, n, n == 1 ? "" : "es",
              n > 0 ? first : "-");
}

static void record_hostent(const struct hostent *he, const char *host) {
    int n = 0;
    if (he->h_addr_list == NULL)
        return;
    for (char **a = he->h_addr_list; *a != NULL; a++) {
        aor_ip ip;
        if ((he->h_addrtype == AF_INET && he->h_length == 4) ||
            (he->h_addrtype == AF_INET6 && he->h_length == 16)) {
            if (aor_ip_from_raw(he->h_addrtype, *a, &ip) == 0) {
                aor_hosts_record(&ip, host, 0);
                n++;
            }
        }
    }
    aor_debug("resolve %s: recorded %d address%s", host, n, n == 1 ? "" : "es");
}

/* getaddrinfo for an intercepted host (normalised in host): the real answer, recorded, or
 * the offline fallback. Apart from the hook so the hook's common path (a name aor does
 * not route) has a small frame. */
__attribute__((noinline)) static int resolve_intercepted(const char *node, const char *service,
                                                         const struct addrinfo *hints,
                                                         struct addrinfo **res) {
    char host[AOR_HOST_MAX + 1];
    if (!aor_hosts_intercepted(node, host, sizeof(host))) /* not a valid name after all */
        return aor_real.getaddrinfo(node, service, hints, res);
    int saved = errno;
    int rc = aor_real.getaddrinfo(node, service, hints, res);
    if (rc == 0) {
        int after = errno;
        record_addrinfo(*res, host);
        errno = after;
        return 0;
    }
    int after = errno;
    if (!fallback_worthy(rc) || !daemon_up()) {
        aor_debug("resolve %s: resolver failed (%s), no fallback (%s)", host, gai_strerror(rc),
                  fallback_worthy(rc) ? "daemon not up: its socket takes no connection"
                                      : "not a lookup failure");
        errno = after;
        return rc;
    }
    aor_ip ip;
    aor_hosts_fallback(host, &ip);
    struct addrinfo *fb = NULL;
    int frc = aor_fallback_addrinfo(host, service, hints, &ip, &fb);
    char ipbuf[46] = "?";
    aor_ip_format(&ip, ipbuf, sizeof(ipbuf));
    if (frc != 0) {
        aor_debug("resolve %s: resolver failed (%s), fallback not possible (%s)", host,
                  gai_strerror(rc), gai_strerror(frc));
        errno = after;
        return frc == EAI_MEMORY ? EAI_MEMORY : rc;
    }
    aor_debug("resolve %s: resolver failed (%s), offline fallback %s", host, gai_strerror(rc),
              ipbuf);
    *res = fb;
    errno = saved;
    return 0;
}

AOR_EXPORT int getaddrinfo(const char *node, const char *service, const struct addrinfo *hints,
                           struct addrinfo **res) {
    aor_shim_ensure();
    /* A program's own lookups end here, most in aor_hosts_intercepted's name filter. */
    if (!aor_shim_on() || node == NULL || res == NULL ||
        (hints != NULL && (hints->ai_flags & AI_NUMERICHOST)) ||
        !aor_hosts_intercepted(node, NULL, 0))
        return aor_real.getaddrinfo(node, service, hints, res);
    return resolve_intercepted(node, service, hints, res);
}

/* Per-thread storage for gethostbyname's fallback answer (that API returns storage
 * owned by the library; glibc's is static too). */
static __thread struct {
    struct hostent he;
    char buf[AOR_HOST_MAX + 1 + 4 + 4 * sizeof(char *)];
} g_tls_he;

AOR_EXPORT struct hostent *gethostbyname(const char *name) {
    char host[AOR_HOST_MAX + 1];
    aor_shim_ensure();
    if (!aor_shim_on() || name == NULL || !aor_hosts_intercepted(name, host, sizeof(host)))
        return aor_real.gethostbyname(name);
    int saved = errno;
    struct hostent *he = aor_real.gethostbyname(name);
    if (he != NULL) {
        int after = errno;
        record_hostent(he, host);
        errno = after;
        return he;
    }
    int herr = h_errno;
    int after = errno;
    if (!daemon_up()) {
        errno = after;
        h_errno = herr;
        return NULL;
    }
    aor_ip ip;
    aor_hosts_fallback(host, &ip);
    if (aor_fallback_hostent(host, &ip, &g_tls_he.he, g_tls_he.buf, sizeof(g_tls_he.buf)) != 0) {
        errno = after;
        h_errno = herr;
        return NULL;
    }
    char ipbuf[46] = "?";
    aor_ip_format(&ip, ipbuf, sizeof(ipbuf));
    aor_debug("gethostbyname %s: resolver failed, offline fallback %s", host, ipbuf);
    errno = saved;
    return &g_tls_he.he;
}

AOR_EXPORT int gethostbyname_r(const char *name, struct hostent *ret, char *buf, size_t buflen,
                               struct hostent **result, int *h_errnop) {
    char host[AOR_HOST_MAX + 1];
    aor_shim_ensure();
    if (!aor_shim_on() || name == NULL || ret == NULL || result == NULL || h_errnop == NULL ||
        !aor_hosts_intercepted(name, host, sizeof(host)))
        return aor_real.gethostbyname_r(name, ret, buf, buflen, result, h_errnop);
    int saved = errno;
    int rc = aor_real.gethostbyname_r(name, ret, buf, buflen, result, h_errnop);
    if (rc == 0 && *result != NULL) {
        int after = errno;
        record_hostent(*result, host);
        errno = after;
        return 0;
    }
    if (rc == ERANGE || !daemon_up())
        return rc; /* the caller retries with a bigger buffer / a real failure */
    aor_ip ip;
    aor_hosts_fallback(host, &ip);
    if (aor_fallback_hostent(host, &ip, ret, buf, buflen) != 0) {
        *result = NULL;
        *h_errnop = NETDB_INTERNAL;
        errno = ERANGE;
        return ERANGE;
    }
    char ipbuf[46] = "?";
    aor_ip_format(&ip, ipbuf, sizeof(ipbuf));
    aor_debug("gethostbyname_r %s: resolver failed, offline fallback %s", host, ipbuf);
    *result = ret;
    *h_errnop = 0;
    errno = saved;
    return 0;
}
