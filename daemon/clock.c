#include "clock.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <time.h>

static int fake;
static double fake_now;

int aor_clock_init(const char **err) {
    const char *v = getenv("AOR_FAKE_CLOCK");
    fake = 0;
    if (!v || !*v)
        return 0;
    char *end;
    errno = 0;
    double d = strtod(v, &end);
    if (errno || *end || !isfinite(d) || d < 0) {
        *err = "AOR_FAKE_CLOCK must be Unix seconds (a number >= 0)";
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
    if (!fake || !isfinite(s) || s < 0)
        return -1;
    fake_now += s;
    return 0;
}
