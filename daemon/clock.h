/* The daemon's clock (spec §9 "Test clock"): real time, or with AOR_FAKE_CLOCK=<unix
 * seconds> a clock that starts there and moves only by aor_clock_advance (the admin
 * route POST /admin/api/clock/advance?s=N). */
#ifndef AOR_CLOCK_H
#define AOR_CLOCK_H

/* Latest time the test clock may show: 9999-12-31T23:59:59Z (Unix seconds). Beyond it a
 * date has five digits, and near 1e16 a double no longer tells now + 1 s from now. */
#define AOR_CLOCK_FAKE_MAX 253402300799.0

/* Reads AOR_FAKE_CLOCK: unset or empty, the real clock; else a number of Unix seconds
 * from 0 to AOR_CLOCK_FAKE_MAX (fractions allowed), where the test clock starts.
 * Returns 0, or -1 when it is set to anything else (not a number, trailing junk,
 * negative, NaN, inf, past the year 9999); then *err is a message naming the variable,
 * the accepted range and the value given (static storage: valid until the next call). */
int aor_clock_init(const char **err);

/* 1 when the fake clock is on. */
int aor_clock_is_fake(void);

/* Now in Unix seconds (fractions included). Can't fail. */
double aor_clock_now(void);

/* CLOCK_MONOTONIC in milliseconds: for deadlines and timeouts, which a step of the wall
 * clock (or the test clock) must neither cut nor stretch. Can't fail. */
long long aor_clock_mono_ms(void);

/* Moves the fake clock forward by s seconds (s >= 0). Returns 0, or -1 (clock unchanged)
 * when the clock is not fake, s is negative / not finite, or the clock would pass
 * AOR_CLOCK_FAKE_MAX. */
int aor_clock_advance(double s);

#endif
