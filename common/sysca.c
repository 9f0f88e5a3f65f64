/* The system's CA bundle (common/sysca.h). */
#include "sysca.h"

#include <errno.h>
#include <stddef.h>
#include <sys/stat.h>

int aor_sysca_is_bundle(const char *path) {
    if (path == NULL || path[0] == '\0')
        return 0;
    /* Only the file bundle.pem is built from when it exists (daemon/tls_ca.c): another
     * distribution's place may hold a bundle of the user's own on this machine. */
    int saved = errno;
    struct stat want, sys;
    int hit = stat(path, &want) == 0 && S_ISREG(want.st_mode) &&
              stat(AOR_SYSCA_BUNDLE, &sys) == 0 && sys.st_dev == want.st_dev &&
              sys.st_ino == want.st_ino;
    errno = saved;
    return hit;
}
