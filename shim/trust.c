/* libaor.so: point TLS clients at the aor CA (spec §2 "Trust"). */
#include "trust.h"

#include "env.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

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

static int unset(const char *name) {
    const char *v = getenv(name);
    return v == NULL || v[0] == '\0';
}

int aor_trust_apply(const char *data_dir) {
    static const char *const bundle_vars[] = {"SSL_CERT_FILE", "REQUESTS_CA_BUNDLE",
                                              "CURL_CA_BUNDLE"};
    int saved = errno;
    int set = 0;
    char bundle[PATH_MAX], ca[PATH_MAX];
    int nb = snprintf(bundle, sizeof(bundle), "%s/bundle.pem", data_dir);
    int nc = snprintf(ca, sizeof(ca), "%s/ca.pem", data_dir);
    if (nb < 0 || (size_t)nb >= sizeof(bundle) || nc < 0 || (size_t)nc >= sizeof(ca))
        goto out;

    if (access(bundle, R_OK) == 0) {
        for (size_t i = 0; i < sizeof(bundle_vars) / sizeof(bundle_vars[0]); i++) {
            if (unset(bundle_vars[i])) {
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
        } else if (strcmp(getenv("NODE_EXTRA_CA_CERTS"), ca) != 0) {
            aor_debug("trust: NODE_EXTRA_CA_CERTS already names another file, left alone "
                      "(Node will not trust aor; see aor doctor)");
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
