/* libaor.so: a cheap gate for the hooks' once-a-second look at the published hosts
 * file (spec §2 step 2, §10 "non-intercepted traffic pays nothing measurable").
 *
 * Reading the clock in every hook was most of what an unrouted getaddrinfo()/connect()
 * paid for the shim: even time() reads the kernel's time page (vvar), a cache line the
 * timer tick rewrites, so after the system calls of a lookup it is a cache miss
 * (docs/performance.md, change 50). The gate reads the CPU's own counter instead (x86-64
 * TSC, AArch64 CNTVCT_EL0: a register, no memory) and says "quiet" while less than
 * about 100 ms of it passed since the caller last read the clock; the rate is measured
 * against CLOCK_MONOTONIC as the process runs. Anything unusual (no such counter, not
 * yet measured, a counter that went backwards or jumped, RDTSC disabled by
 * prctl(PR_SET_TSC) before the shim loaded or through libc's prctl later, which the
 * shim hooks for this) makes the gate say "not quiet", which is the behaviour without
 * it. */
#ifndef AOR_SHIM_TICK_H
#define AOR_SHIM_TICK_H

#include <stdatomic.h>
#include <stdint.h>

/* Checks once whether the counter may be read (Linux x86-64: prctl(PR_GET_TSC)); the
 * gate stays closed ("not quiet") when it may not. Called from the shim's init. */
void aor_tick_init(void);

#if defined(__x86_64__)
#include <x86intrin.h>
#define AOR_TICK_HAVE_COUNTER 1
static inline uint64_t aor_tick_hw_counter(void) {
    return __rdtsc();
}
#elif defined(__aarch64__)
#define AOR_TICK_HAVE_COUNTER 1
static inline uint64_t aor_tick_hw_counter(void) {
    uint64_t v;
    __asm__ volatile("mrs %0, cntvct_el0" : "=r"(v));
    return v;
}
#else
#define AOR_TICK_HAVE_COUNTER 0
static inline uint64_t aor_tick_hw_counter(void) {
    return 0;
}
#endif

/* What aor_tick_quiet reads, on one cache line; written by aor_tick_mark only. Inline
 * in the hooks: a call and a cold line more were a measurable part of the cost. */
typedef struct {
    _Atomic uint64_t until;    /* quiet while the counter is below this; 0: closed */
    _Atomic uint64_t from;     /* the counter at the last mark: below it, it went back */
    uint64_t (*counter)(void); /* tests (aor_tick_set_source); NULL: the CPU's */
} aor_tick_gate;
extern aor_tick_gate aor_tick_g;

/* 1 when, by the counter, less than about 100 ms have passed since the last
 * aor_tick_mark(): the caller need not read the clock. 0 otherwise, or when unsure.
 * Lock-free (two relaxed atomic loads and one counter read); async-signal-safe. */
static inline int aor_tick_quiet(void) {
    uint64_t until = atomic_load_explicit(&aor_tick_g.until, memory_order_relaxed);
    if (until == 0)
        return 0;
    uint64_t (*c)(void) = aor_tick_g.counter;
    uint64_t t = c != NULL ? c() : aor_tick_hw_counter();
    return t < until && t >= atomic_load_explicit(&aor_tick_g.from, memory_order_relaxed);
}

/* Says the caller just read the clock: the next ~100 ms are quiet. Measures the
 * counter's rate against CLOCK_MONOTONIC (from 20 ms of history on). Thread-safe (a
 * concurrent call is skipped); no allocation, no system call but clock_gettime. */
void aor_tick_mark(void);

/* Closes the gate for good: the counter may not be read any more (prctl PR_SET_TSC;
 * the shim's prctl hook calls it before libc's prctl). */
void aor_tick_disable(void);

/* In a fork() child: forgets a mark another thread of the parent was making. */
void aor_tick_forked(void);

/* Tests: replace the counter and the monotonic clock (nanoseconds) with the caller's
 * functions and forget what was measured; NULL, NULL restores the real ones. */
void aor_tick_set_source(uint64_t (*counter)(void), uint64_t (*mono_ns)(void));

#endif
