/* libaor.so: real-symbol lookup, one-time init, fork handlers, constructor.
 * Pattern of proxychains-ng src/libproxychains.c (dlsym(RTLD_NEXT), self-reference
 * check, pthread_once), without its exit() calls or fixed buffers. */
#include "real.h"

#include "env.h"
#include "fdtab.h"
#include "hosts.h"
#include "tick.h"
#include "trust.h"

#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdarg.h>
#include <sys/syscall.h>
#include <unistd.h>

/* Raw-syscall stand-ins, used until init found libc's functions, while init itself
 * runs (a hook re-entered from dlsym or an allocator), or when dlsym finds only the
 * shim itself. They do exactly the system call, which is what libc's versions do. */
static int sys_connect(int fd, const struct sockaddr *a, socklen_t l) {
    return (int)syscall(SYS_connect, fd, a, l);
}

static int sys_close(int fd) {
    return (int)syscall(SYS_close, fd);
}

static int sys_close_range(unsigned int lo, unsigned int hi, int flags) {
#ifdef SYS_close_range
    return (int)syscall(SYS_close_range, lo, hi, flags);
#else
    errno = ENOSYS;
    return -1;
#endif
}

static void sys_closefrom(int lo) {
    if (sys_close_range((unsigned int)lo, ~0u, 0) == 0)
        return;
    long max = sysconf(_SC_OPEN_MAX);
    for (long fd = lo; fd < max; fd++)
        syscall(SYS_close, (int)fd);
}

static int sys_dup(int fd) {
    return (int)syscall(SYS_dup, fd);
}

static int sys_dup3(int a, int b, int flags) {
    return (int)syscall(SYS_dup3, a, b, flags);
}

static int sys_dup2(int a, int b) {
    if (a == b)
        return syscall(SYS_fcntl, a, F_GETFD) < 0 ? -1 : b;
    return sys_dup3(a, b, 0);
}

static int sys_fcntl(int fd, int cmd, ...) {
    va_list ap;
    va_start(ap, cmd);
    void *arg = va_arg(ap, void *);
    va_end(ap);
    return (int)syscall(SYS_fcntl, fd, cmd, arg);
}

static int sys_getpeername(int fd, struct sockaddr *a, socklen_t *l) {
    return (int)syscall(SYS_getpeername, fd, a, l);
}

static int sys_getsockname(int fd, struct sockaddr *a, socklen_t *l) {
    return (int)syscall(SYS_getsockname, fd, a, l);
}

static int sys_getsockopt(int fd, int lv, int opt, void *v, socklen_t *l) {
    return (int)syscall(SYS_getsockopt, fd, lv, opt, v, l);
}

static int sys_setsockopt(int fd, int lv, int opt, const void *v, socklen_t l) {
    return (int)syscall(SYS_setsockopt, fd, lv, opt, v, l);
}

static ssize_t sys_sendto(int fd, const void *b, size_t n, int fl, const struct sockaddr *a,
                          socklen_t l) {
    return syscall(SYS_sendto, fd, b, n, fl, a, l);
}

static ssize_t sys_sendmsg(int fd, const struct msghdr *m, int fl) {
    return syscall(SYS_sendmsg, fd, m, fl);
}

static int sys_prctl(int option, ...) {
    va_list ap;
    va_start(ap, option);
    unsigned long a2 = va_arg(ap, unsigned long), a3 = va_arg(ap, unsigned long),
                  a4 = va_arg(ap, unsigned long), a5 = va_arg(ap, unsigned long);
    va_end(ap);
    return (int)syscall(SYS_prctl, option, a2, a3, a4, a5);
}

static int none_getaddrinfo(const char *n, const char *s, const struct addrinfo *h,
                            struct addrinfo **r) {
    errno = ENOSYS;
    return EAI_SYSTEM;
}

static struct hostent *none_gethostbyname(const char *n) {
    h_errno = NO_RECOVERY;
    return NULL;
}

static int none_gethostbyname_r(const char *n, struct hostent *h, char *b, size_t l,
                                struct hostent **r, int *e) {
    *r = NULL;
    *e = NO_RECOVERY;
    return ENOSYS;
}

aor_real_fns aor_real = {
    .connect = sys_connect,
    .close = sys_close,
    .close_range = sys_close_range,
    .closefrom = sys_closefrom,
    .dup = sys_dup,
    .dup2 = sys_dup2,
    .dup3 = sys_dup3,
    .fcntl = sys_fcntl,
    .fcntl64 = sys_fcntl,
    .getpeername = sys_getpeername,
    .getsockname = sys_getsockname,
    .getsockopt = sys_getsockopt,
    .setsockopt = sys_setsockopt,
    .sendto = sys_sendto,
    .sendmsg = sys_sendmsg,
    .getaddrinfo = none_getaddrinfo,
    .gethostbyname = none_gethostbyname,
    .gethostbyname_r = none_gethostbyname_r,
    .prctl = sys_prctl,
};

atomic_int aor_shim_ready;
atomic_int aor_shim_active;
static pthread_once_t g_once = PTHREAD_ONCE_INIT;
static __thread int g_in_init;

/* dlsym(RTLD_NEXT, name), or NULL when that is the shim itself (loaded twice, or a
 * strange link order) so the stand-in stays in place. */
static void *next_symbol(const char *name) {
    void *p = dlsym(RTLD_NEXT, name);
    Dl_info mine, theirs;
    if (p == NULL)
        return NULL;
    if (dladdr((void *)aor_shim_init, &mine) != 0 && dladdr(p, &theirs) != 0 &&
        mine.dli_fbase == theirs.dli_fbase)
        return NULL;
    return p;
}

#define RESOLVE(field, name)                                                                       \
    do {                                                                                           \
        void *p_ = next_symbol(name);                                                              \
        if (p_ != NULL)                                                                            \
            *(void **)(&aor_real.field) = p_;                                                      \
    } while (0)

static void fork_prepare(void) {
    aor_hosts_lock_all();
    aor_fdtab_lock();
}

static void fork_release(void) {
    aor_fdtab_unlock();
    aor_hosts_unlock_all();
}

static void fork_child(void) {
    aor_fdtab_forked();
    aor_tick_forked();
    fork_release();
}

static void init_once(void) {
    g_in_init = 1;
    RESOLVE(connect, "connect");
    RESOLVE(close, "close");
    RESOLVE(close_range, "close_range");
    RESOLVE(closefrom, "closefrom");
    RESOLVE(dup, "dup");
    RESOLVE(dup2, "dup2");
    RESOLVE(dup3, "dup3");
    RESOLVE(fcntl, "fcntl");
    RESOLVE(fcntl64, "fcntl64");
    RESOLVE(getpeername, "getpeername");
    RESOLVE(getsockname, "getsockname");
    RESOLVE(getsockopt, "getsockopt");
    RESOLVE(setsockopt, "setsockopt");
    RESOLVE(sendto, "sendto");
    RESOLVE(sendmsg, "sendmsg");
    RESOLVE(getaddrinfo, "getaddrinfo");
    RESOLVE(gethostbyname, "gethostbyname");
    RESOLVE(gethostbyname_r, "gethostbyname_r");
    RESOLVE(prctl, "prctl");
    aor_env_load();
    aor_tick_init();
    aor_hosts_init();
    pthread_atfork(fork_prepare, fork_release, fork_child);
    const aor_shim_env *env = aor_env();
    if (env->disabled)
        aor_debug(
            "libaor loaded, disabled (AOR_DISABLE, AOR_DAEMON, or aord itself): pass-through");
    else
        aor_debug("libaor loaded, daemon socket %s%s%s", env->sock_path,
                  env->sock_ok         ? ""
                  : env->sock_relative ? " (not an absolute path: fail-open)"
                                       : "... (path too long for a Unix socket: fail-open)",
                  env->strict ? ", strict" : "");
    g_in_init = 0;
    atomic_store_explicit(&aor_shim_active, !env->disabled, memory_order_release);
    atomic_store_explicit(&aor_shim_ready, 1, memory_order_release);
}

void aor_shim_init(void) {
    if (g_in_init)
        return; /* re-entered from inside init: the caller uses the stand-ins */
    int saved = errno;
    pthread_once(&g_once, init_once);
    errno = saved;
}

__attribute__((constructor)) static void aor_constructor(void) {
    int saved = errno;
    aor_shim_init();
    aor_trust_setup();
    errno = saved;
}
