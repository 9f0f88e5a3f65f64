/* libaor.so: the table of redirected file descriptors (spec §2 "bookkeeping"): for each
 * fd that connect() handed to the daemon, the original peer address and the TCP view
 * the hooks keep up. Indexed by fd, grows as needed up to RLIMIT_NOFILE.
 *
 * Concurrency: set/copy/get take a mutex; aor_fdtab_any, aor_fdtab_marked and
 * aor_fdtab_clear are lock-free (atomics only), so close() stays async-signal-safe.
 * A table replaced by growth is kept (not freed) so lock-free readers never touch freed
 * memory; total memory stays under twice the final table. Every entry also remembers
 * the inode of the Unix socket it describes: a caller that finds an entry checks it
 * against fstat() (aor_fdtab_get_checked) so an fd closed behind the shim's back
 * (fclose, a raw syscall) and reused is never treated as redirected. */
#ifndef AOR_SHIM_FDTAB_H
#define AOR_SHIM_FDTAB_H

#include <netinet/in.h>
#include <stdatomic.h>
#include <sys/socket.h>
#include <sys/types.h>

typedef struct {
    unsigned long ino; /* inode of the Unix socket now at the fd (never 0) */
    int domain;        /* AF_INET or AF_INET6: the socket as the program made it */
    int protocol;      /* IPPROTO_TCP (or what SO_PROTOCOL said) */
    socklen_t peerlen; /* bytes of peer used */
    union {
        struct sockaddr sa;
        struct sockaddr_in in4;
        struct sockaddr_in6 in6;
    } peer;                           /* the address the program connected to, as it passed it */
    int local_port;                   /* reported by getsockname, host order */
    int nodelay;                      /* TCP_NODELAY as last set (reported by getsockopt) */
    int keepidle, keepintvl, keepcnt; /* TCP keep-alive options as last set */
} aor_fdinfo;

/* Sets info->ino to ino (the inode of the Unix socket at the fd, non-zero) and
 * info->local_port, which getsockname reports, to a port derived from it: stable for the
 * socket (also in a program that inherits it across exec), in the ephemeral range
 * 32768..60999. */
void aor_fdinfo_set_ino(aor_fdinfo *info, unsigned long ino);

/* 1 when at least one fd is (or was, until cleared) marked. Lock-free, cheap: hooks
 * call it first and pass through when it is 0. */
extern atomic_int aor_fdtab_any_flag;
static inline int aor_fdtab_any(void) {
    return atomic_load_explicit(&aor_fdtab_any_flag, memory_order_relaxed);
}

/* 1 when the calling process owns the table: it is the one that marked fds, or a
 * fork() child of it (aor_fdtab_forked). 0 in a vfork() child, which shares the parent's
 * memory (no fork handler runs there): its close/dup calls must not change the parent's
 * table (CPython's subprocess closes the parent's fds in a vfork child). One getpid()
 * system call: hooks ask only when aor_fdtab_any() said 1. */
int aor_fdtab_mine(void);

/* The fork() child handler: the child's copy of the table is its own. */
void aor_fdtab_forked(void);

/* 1 when fd carries a mark (lock-free; the mark may be stale, see aor_fdtab_get_checked). */
int aor_fdtab_marked(int fd);

/* Makes room for fd so a following aor_fdtab_set cannot fail. Returns 0, or -1 with
 * errno EBADF (fd < 0 or >= RLIMIT_NOFILE) or ENOMEM. */
int aor_fdtab_reserve(int fd);

/* Marks fd as redirected with info (info->ino must be non-zero). Returns 0, or -1 with
 * errno EBADF / ENOMEM / EINVAL. */
int aor_fdtab_set(int fd, const aor_fdinfo *info);

/* Copies fd's entry to the entry of newfd (dup family). When from is not marked, newfd
 * is cleared. Returns 0, or -1 with errno (EBADF, ENOMEM) and newfd cleared. */
int aor_fdtab_copy(int from, int newfd);

/* Clears fd's mark. Lock-free; can't fail (out-of-range fds are ignored). */
void aor_fdtab_clear(int fd);

/* Clears every mark in [lo, hi] (close_range/closefrom). Lock-free; can't fail. */
void aor_fdtab_clear_range(unsigned int lo, unsigned int hi);

/* Copies fd's entry into *out. Returns 1 when marked, 0 when not. */
int aor_fdtab_get(int fd, aor_fdinfo *out);

/* Like aor_fdtab_get, but also checks with fstat() that fd still is the Unix socket the
 * entry describes; a stale entry is cleared and 0 returned. Keeps errno. */
int aor_fdtab_get_checked(int fd, aor_fdinfo *out);

/* Stores one remembered TCP option of a marked fd (which: TCP_NODELAY, TCP_KEEPIDLE,
 * TCP_KEEPINTVL, TCP_KEEPCNT); other options and unmarked fds are ignored. */
void aor_fdtab_set_tcpopt(int fd, int which, int value);

/* Clears the whole table (tests). Not thread-safe against concurrent users. */
void aor_fdtab_reset(void);

/* pthread_atfork helpers for the table mutex. */
void aor_fdtab_lock(void);
void aor_fdtab_unlock(void);

#endif
