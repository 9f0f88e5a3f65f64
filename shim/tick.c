/* libaor.so: the counter gate of the once-a-second checks (see tick.h). */
#include "tick.h"

#include "real.h"

#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <time.h>

#include <sys/prctl.h>

#define QUIET_NS 100000000.0 /* the gate's period: 100 ms */
#define MEASURE_NS 20000000u /* the shortest interval the rate is measured over: 20 ms */
/* Counter ticks per nanosecond believed: 1 MHz .. 100 GHz. */
#define RATE_MIN 0.001
#define RATE_MAX 100.0

static uint64_t real_mono_ns(void) {
    struct timespec ts;
    if (clock_gettime(CLOCK_MONOTONIC, &ts) != 0)
        return 0;
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

aor_tick_gate aor_tick_g __attribute__((aligned(64)));

/* The measurement, changed by one aor_tick_mark at a time (g_busy). */
static atomic_int g_busy;
static int g_usable = AOR_TICK_HAVE_COUNTER;
static uint64_t (*g_mono)(void) = real_mono_ns;
static uint64_t g_base_t, g_base_ns; /* counter and clock at the measurement's start */
static uint64_t g_period;            /* ticks in QUIET_NS as last measured; 0: none */

static inline uint64_t read_counter(void) {
    uint64_t (*c)(void) = aor_tick_g.counter;
    return c != NULL ? c() : aor_tick_hw_counter();
}

void aor_tick_disable(void) {
    g_usable = 0;
    atomic_store_explicit(&aor_tick_g.until, 0, memory_order_relaxed);
}

void aor_tick_init(void) {
#if defined(__linux__) && defined(__x86_64__)
    int mode = 0;
    if (prctl(PR_GET_TSC, &mode, 0, 0, 0) == 0 && mode == PR_TSC_SIGSEGV)
        g_usable = 0; /* RDTSC would kill the program: the gate stays closed */
#endif
}

void aor_tick_mark(void) {
    int idle = 0;
    if (!g_usable || !atomic_compare_exchange_strong_explicit(
                         &g_busy, &idle, 1, memory_order_acquire, memory_order_relaxed))
        return;
    uint64_t t = read_counter(), ns = g_mono();
    if (ns == 0 || g_base_ns == 0 || t <= g_base_t || ns <= g_base_ns) {
        /* First mark, no clock, or the counter went back: measure from here. */
        g_base_t = t;
        g_base_ns = ns;
        g_period = 0;
    } else if (ns - g_base_ns >= MEASURE_NS) {
        double rate = (double)(t - g_base_t) / (double)(ns - g_base_ns);
        uint64_t period = rate >= RATE_MIN && rate <= RATE_MAX ? (uint64_t)(rate * QUIET_NS) : 0;
        /* A rate that moved by more than half is a jump (another CPU's counter, a
         * suspended VM), not a rate: measure again from here. */
        if (g_period != 0 && (period > 2 * g_period || 2 * period < g_period))
            period = 0;
        g_period = period;
        g_base_t = t;
        g_base_ns = ns;
    }
    atomic_store_explicit(&aor_tick_g.until, 0, memory_order_relaxed);
    atomic_store_explicit(&aor_tick_g.from, t, memory_order_relaxed);
    if (g_period != 0 && t < UINT64_MAX - g_period)
        atomic_store_explicit(&aor_tick_g.until, t + g_period, memory_order_relaxed);
    atomic_store_explicit(&g_busy, 0, memory_order_release);
}

void aor_tick_forked(void) {
    atomic_store(&g_busy, 0); /* a thread of the parent may have been measuring */
}

void aor_tick_set_source(uint64_t (*counter)(void), uint64_t (*mono_ns)(void)) {
    aor_tick_g.counter = counter;
    g_mono = mono_ns != NULL ? mono_ns : real_mono_ns;
    g_usable = counter != NULL ? 1 : AOR_TICK_HAVE_COUNTER;
    g_base_t = g_base_ns = g_period = 0;
    atomic_store(&aor_tick_g.until, 0);
    atomic_store(&aor_tick_g.from, 0);
    atomic_store(&g_busy, 0);
}

/* prctl(PR_SET_TSC, PR_TSC_SIGSEGV) makes RDTSC fault in the calling thread and the
 * threads and processes it starts: the gate closes for good before the call, so no hook
 * reads the counter afterwards (the check at init sees only the state at load). Every
 * call goes on to libc's prctl unchanged; the four further arguments are passed as
 * unsigned long, as glibc's own prctl takes them. A program that calls the prctl system
 * call itself (syscall(2), which the shim never hooks) is not seen. */
AOR_EXPORT int prctl(int option, ...) {
    va_list ap;
    va_start(ap, option);
    unsigned long a2 = va_arg(ap, unsigned long), a3 = va_arg(ap, unsigned long),
                  a4 = va_arg(ap, unsigned long), a5 = va_arg(ap, unsigned long);
    va_end(ap);
    if (option == PR_SET_TSC)
        aor_tick_disable();
    aor_shim_ensure();
    return aor_real.prctl(option, a2, a3, a4, a5);
}
