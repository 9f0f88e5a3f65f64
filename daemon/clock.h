/* The daemon's clock (spec §9 "Test clock"): real time, or with AOR_FAKE_CLOCK=<unix
 * seconds> a clock that starts there and moves only by aor_clock_advance (the admin
 * route POST /admin/api/clock/advance?s=N). */
#ifndef AOR_CLOCK_H
#define AOR_CLOCK_H

/* Reads AOR_FAKE_CLOCK. Returns 0, or -1 when it is set but not a number >= 0 (then the
 * message is in *err). */
int aor_clock_init(const char **err);

/* 1 when the fake clock is on. */
int aor_clock_is_fake(void);

/* Now in Unix seconds (fractions included). Can't fail. */
double aor_clock_now(void);

/* Moves the fake clock forward by s seconds (s >= 0). Returns 0, or -1 when the clock is
 * not fake or s is negative / not finite. */
int aor_clock_advance(double s);

#endif
