#include "clock.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static int fake;
static double fake_now;
static char init_err[160]; /* aor_clock_init's message (names the value, cut) */

int aor_clock_init(const char **err) {
    const char *v = getenv("AOR_FAKE_CLOCK");
    fake = 0;
    if (!v || !*v)
        return 0;
    char *end;
    errno = 0;
    double d = strtod(v, &end);
    /* !(d <= MAX) also refuses NaN; ERANGE: an overflow (inf) or a value too small to hold */
    if (errno || end == v || *end || !(d >= 0) || !(d <= AOR_CLOCK_FAKE_MAX)) {
        snprintf(init_err, sizeof init_err,
                 "AOR_FAKE_CLOCK must be Unix seconds from 0 to %.0f (9999-12-31T23:59:59Z), "
                 "got '%.40s%s'",
                 AOR_CLOCK_FAKE_MAX, v, strlen(v) > 40 ? "..." : "");
        *err = init_err;
        return -1;
    }
    fake = 1;
    fake_now = d;
    return 0;
}

int aor_clock_is_fake(void) {
    return fake;
}

double aor_clock_now(void) {
    if (fake)
        return fake_now;
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

int aor_clock_advance(double s) {
    if (!fake || !isfinite(s) || s < 0 || !(fake_now + s <= AOR_CLOCK_FAKE_MAX))
        return -1;
    fake_now += s;
    return 0;
}

long long aor_clock_mono_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}
