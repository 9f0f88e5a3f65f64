/* libaor.so: the real libc functions behind the hooks, and the shim's one-time init.
 * Source: spec §2 (interception), design.md "Preload hooks". Internal to the shim. */
#ifndef AOR_SHIM_REAL_H
#define AOR_SHIM_REAL_H

#include <netdb.h>
#include <stdatomic.h>
#include <sys/socket.h>
#include <sys/types.h>

/* Marks a hooked libc symbol: the shim is built with -fvisibility=hidden. */
#define AOR_EXPORT __attribute__((visibility("default")))

/* The next definition of each hooked symbol (libc's), found with dlsym(RTLD_NEXT).
 * A lookup that finds the shim itself or nothing falls back to a raw-syscall version
 * (the socket/fd calls) or to one that fails with ENOSYS / EAI_SYSTEM (the resolver). */
typedef struct {
    int (*connect)(int, const struct sockaddr *, socklen_t);
    int (*close)(int);
    int (*close_range)(unsigned int, unsigned int, int);
    void (*closefrom)(int);
    int (*dup)(int);
    int (*dup2)(int, int);
    int (*dup3)(int, int, int);
    int (*fcntl)(int, int, ...);
    int (*fcntl64)(int, int, ...);
    int (*getpeername)(int, struct sockaddr *, socklen_t *);
    int (*getsockname)(int, struct sockaddr *, socklen_t *);
    int (*getsockopt)(int, int, int, void *, socklen_t *);
    int (*setsockopt)(int, int, int, const void *, socklen_t);
    ssize_t (*sendto)(int, const void *, size_t, int, const struct sockaddr *, socklen_t);
    ssize_t (*sendmsg)(int, const struct msghdr *, int);
    int (*getaddrinfo)(const char *, const char *, const struct addrinfo *, struct addrinfo **);
    struct hostent *(*gethostbyname)(const char *);
    int (*gethostbyname_r)(const char *, struct hostent *, char *, size_t, struct hostent **,
                           int *);
    int (*prctl)(int, ...);
} aor_real_fns;

/* Filled by aor_shim_init(); read-only afterwards. */
extern aor_real_fns aor_real;

/* 1 once aor_shim_init() finished (acquire load). */
extern atomic_int aor_shim_ready;

/* 1 once aor_shim_init() finished with the shim not disabled (AOR_DISABLE, AOR_DAEMON,
 * aord itself: env.c); set once, before aor_shim_ready. */
extern atomic_int aor_shim_active;

/* Runs the one-time init (pthread_once): real symbols, environment (env.c), built-in or
 * AOR_HOSTS host list, fork handlers. Safe to call from every hook and from several
 * threads; returns at once after the first call finished. Can't fail: on any problem
 * the shim ends up disabled (pass-through). Preserves errno. */
void aor_shim_init(void);

/* Inline fast check used first by every hook. */
static inline void aor_shim_ensure(void) {
    if (!atomic_load_explicit(&aor_shim_ready, memory_order_acquire))
        aor_shim_init();
}

/* 1 when the hooks may act: init finished and the shim is not disabled (AOR_DISABLE,
 * the daemon itself). 0 also while init runs (a hook re-entered from inside init). */
static inline int aor_shim_on(void) {
    return atomic_load_explicit(&aor_shim_active, memory_order_acquire);
}

#endif
