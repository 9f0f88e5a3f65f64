/* The system's CA bundle (common/sysca.h). */
#include "sysca.h"

#include <errno.h>
#include <stddef.h>
#include <sys/stat.h>

static const char *const places[] = {AOR_SYSCA_BUNDLE, "/etc/pki/tls/certs/ca-bundle.crt",
                                     "/etc/pki/tls/cert.pem", "/etc/ssl/cert.pem"};

int aor_sysca_is_bundle(const char *path) {
    if (path == NULL || path[0] == '\0')
        return 0;
    int saved = errno;
    struct stat want;
    int hit = 0;
    if (stat(path, &want) == 0 && S_ISREG(want.st_mode)) {
        for (size_t i = 0; i < sizeof places / sizeof places[0] && !hit; i++) {
            struct stat st;
            hit = stat(places[i], &st) == 0 && st.st_dev == want.st_dev && st.st_ino == want.st_ino;
        }
    }
    errno = saved;
    return hit;
}
