/* libaor.so: fd bookkeeping hooks (spec §2): close, close_range, closefrom, dup, dup2,
 * dup3, fcntl(F_DUPFD, F_DUPFD_CLOEXEC) keep the table of redirected fds right, so a
 * number closed and reused for another socket is never taken for a redirected one.
 * Processes that never redirected pay one atomic load. */
#include "fdtab.h"
#include "real.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

/* After newfd became a copy of fd: copy fd's entry, or clear a stale one of newfd. */
static void note_dup(int fd, int newfd) {
    if (newfd < 0 || !aor_fdtab_any() || !aor_fdtab_mine())
        return;
    int saved = errno;
    if (aor_fdtab_marked(fd) && aor_fdtab_get_checked(fd, NULL))
        aor_fdtab_copy(fd, newfd);
    else
        aor_fdtab_clear(newfd);
    errno = saved;
}

AOR_EXPORT int close(int fd) {
    aor_shim_ensure();
    /* Clear first: once the number is free another thread may reuse it. */
    if (aor_fdtab_any() && aor_fdtab_mine())
        aor_fdtab_clear(fd);
    return aor_real.close(fd);
}

AOR_EXPORT int close_range(unsigned int first, unsigned int last, int flags) {
    aor_shim_ensure();
#ifdef CLOSE_RANGE_CLOEXEC
    int only_cloexec = (flags & CLOSE_RANGE_CLOEXEC) != 0;
#else
    int only_cloexec = (flags & 4) != 0;
#endif
    /* Not when the call will fail with EINVAL (unknown flags, first > last): the fds
     * stay open. */
    if (aor_fdtab_any() && !only_cloexec && first <= last && (flags & ~6) == 0 && aor_fdtab_mine())
        aor_fdtab_clear_range(first, last);
    return aor_real.close_range(first, last, flags);
}

AOR_EXPORT void closefrom(int lowfd) {
    aor_shim_ensure();
    if (aor_fdtab_any() && lowfd >= 0 && aor_fdtab_mine())
        aor_fdtab_clear_range((unsigned int)lowfd, UINT_MAX);
    aor_real.closefrom(lowfd);
}

AOR_EXPORT int dup(int fd) {
    aor_shim_ensure();
    int r = aor_real.dup(fd);
    note_dup(fd, r);
    return r;
}

AOR_EXPORT int dup2(int fd, int newfd) {
    aor_shim_ensure();
    int r = aor_real.dup2(fd, newfd);
    if (fd != newfd)
        note_dup(fd, r);
    return r;
}

AOR_EXPORT int dup3(int fd, int newfd, int flags) {
    aor_shim_ensure();
    int r = aor_real.dup3(fd, newfd, flags);
    note_dup(fd, r);
    return r;
}

/* glibc's own fcntl reads the optional argument as a pointer for every command. */
AOR_EXPORT int fcntl(int fd, int cmd, ...) {
    va_list ap;
    va_start(ap, cmd);
    void *arg = va_arg(ap, void *);
    va_end(ap);
    aor_shim_ensure();
    int r = aor_real.fcntl(fd, cmd, arg);
    if (cmd == F_DUPFD || cmd == F_DUPFD_CLOEXEC)
        note_dup(fd, r);
    return r;
}

AOR_EXPORT int fcntl64(int fd, int cmd, ...) {
    va_list ap;
    va_start(ap, cmd);
    void *arg = va_arg(ap, void *);
    va_end(ap);
    aor_shim_ensure();
    int r = aor_real.fcntl64(fd, cmd, arg);
    if (cmd == F_DUPFD || cmd == F_DUPFD_CLOEXEC)
        note_dup(fd, r);
    return r;
}
