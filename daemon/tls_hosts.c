/* The host names the local CA must permit (its name constraints), from the config:
 * spec §2 "Hosts to intercept", issue 4 item 7. Contract: tls.h. */
#include "builtin_hosts.h"
#include "publish.h"
#include "tls.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Appends the normalised name to the list unless it is there or invalid.
 * Returns 0, or -1 (ENOMEM). */
static int add_host(char ***list, size_t *n, size_t *cap, const char *name) {
    char host[AOR_TLS_HOST_MAX + 1];

    if (name == NULL || aor_tls_host_check(name, host) < 0)
        return 0;
    for (size_t i = 0; i < *n; i++) {
        if (strcmp((*list)[i], host) == 0)
            return 0;
    }
    if (*n + 2 > *cap) {
        size_t ncap = *cap ? *cap * 2 : 32;
        char **nl = realloc(*list, ncap * sizeof *nl);

        if (nl == NULL)
            return -1;
        *list = nl;
        *cap = ncap;
    }
    if (((*list)[*n] = strdup(host)) == NULL)
        return -1;
    (*n)++;
    (*list)[*n] = NULL;
    return 0;
}

char **aor_tls_hosts_for_config(const aor_config *cfg) {
    char **list = NULL;
    size_t n = 0, cap = 0;

    for (size_t i = 0; aor_builtin_hosts[i] != NULL; i++) {
        if (add_host(&list, &n, &cap, aor_builtin_hosts[i]) < 0)
            goto fail_free;
    }
    for (size_t i = 0; cfg != NULL && i < cfg->nproviders; i++) {
        const aor_provider_cfg *p = &cfg->providers[i];

        if (add_host(&list, &n, &cap, p->host) < 0)
            goto fail_free;
        for (size_t k = 0; k < p->nintercept; k++) {
            if (add_host(&list, &n, &cap, p->intercept[k]) < 0)
                goto fail_free;
        }
    }
    if (list == NULL) { /* no valid name at all: an empty list, not "no constraints" */
        list = calloc(1, sizeof *list);
        if (list == NULL)
            goto fail_free;
    }
    return list;

fail_free:
    aor_tls_hosts_free(list);
    errno = ENOMEM;
    return NULL;
}

void aor_tls_hosts_free(char **hosts) {
    if (hosts == NULL)
        return;
    for (size_t i = 0; hosts[i] != NULL; i++)
        free(hosts[i]);
    free(hosts);
}

aor_tls *aor_tls_new_for_config(const char *data_dir, const aor_config *cfg, char *err,
                                size_t errlen) {
    char **hosts = aor_tls_hosts_for_config(cfg);
    aor_tls *t;

    if (hosts == NULL) {
        if (err != NULL && errlen > 0)
            (void)snprintf(err, errlen, "out of memory");
        return NULL;
    }
    t = aor_tls_new(data_dir, (const char *const *)hosts, err, errlen);
    aor_tls_hosts_free(hosts);
    return t;
}

int aor_tls_reload_config(aor_tls *t, const aor_config *cfg, char *err, size_t errlen) {
    char **hosts = aor_tls_hosts_for_config(cfg);
    int rc;

    if (hosts == NULL) {
        if (err != NULL && errlen > 0)
            (void)snprintf(err, errlen, "out of memory");
        return -1;
    }
    rc = aor_tls_reload(t, (const char *const *)hosts, err, errlen);
    aor_tls_hosts_free(hosts);
    return rc;
}
