/* The system's CA bundle (common/sysca.h). */
#include "sysca.h"

#include <errno.h>
#include <stddef.h>
#include <sys/stat.h>

/* Only the file bundle.pem is built from when it exists (daemon/tls_ca.c): another
 * distribution's place may hold a bundle of the user's own on this machine. */
static const char *const places[] = {AOR_SYSCA_BUNDLE};

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
