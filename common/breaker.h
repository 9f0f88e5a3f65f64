/* Circuit breakers per (provider, model) (spec §4.4).
 * In memory; the caller writes events to the store first (§4.5). Times: Unix seconds. */
#ifndef AOR_BREAKER_H
#define AOR_BREAKER_H

typedef struct aor_breaker aor_breaker;

typedef struct {
    int failures;    /* breaker_failures (3) retryable failures ... */
    double window_s; /* ... within breaker_window_s (60) ... */
    double open_s;   /* ... open the circuit for breaker_open_s (30) */
} aor_breaker_params;

typedef enum { AOR_BREAKER_CLOSED = 0, AOR_BREAKER_OPEN, AOR_BREAKER_HALF_OPEN } aor_breaker_state;

typedef struct {
    const char *provider; /* owned by the table */
    const char *model;
    aor_breaker_state state; /* as of the `now` given to foreach/get */
    double until;            /* open until (Unix seconds); 0 when closed */
    int recent_failures;     /* failures inside the window */
    double probe_until;      /* half-open with a probe in flight: its lease ends (Unix
                                seconds); 0 otherwise (memory only, see allow) */
} aor_breaker_row;

/* Most failures a circuit counts (breaker_failures above this: EINVAL). */
#define AOR_BREAKER_FAILURES_MAX 1000

/* New table; params are copied. NULL with errno=ENOMEM, or errno=EINVAL when failures is
 * not in 1..AOR_BREAKER_FAILURES_MAX or window_s/open_s is negative or not finite. */
aor_breaker *aor_breaker_new(const aor_breaker_params *params);

/* Replaces the parameters (SIGHUP reload): the checks of aor_breaker_new. Open circuits
 * keep their until (and a probe in flight its lease); failures and window_s apply to the
 * next failure counted, open_s to the next circuit that opens and the next probe let
 * through. When failures grows, closed circuits forget the failure times they hold (their
 * memory was sized for the old count): at most failures-1 recent failures are lost, never
 * an open circuit. Returns 0, or -1 with errno=EINVAL (b NULL or a bad parameter; table
 * unchanged). */
int aor_breaker_set_params(aor_breaker *b, const aor_breaker_params *params);

/* Frees the table (NULL: no-op). */
void aor_breaker_free(aor_breaker *b);

/* State model (§4.4). Per circuit: closed (with the timestamps of recent failures),
 * open until `until`, or half-open. An open circuit whose `until` has passed (until <=
 * now) is half-open as of now: get/foreach report it so, a failure reopens it, a success
 * closes it, and allow() lets exactly one request through: the probe. A failure is
 * "within the window" when its time t >= now - window_s (sliding, both ends included:
 * failures exactly window_s apart are within it, so with 3 and 60 s failures at +40,
 * +80 and +100 open the circuit; a failure older than window_s no longer counts).
 * Failures recorded while the circuit is open and its time has not passed (late answers
 * of requests sent before it opened) change nothing.
 *
 * The probe's lease. While the probe is in flight every other request skips the circuit
 * as if it were open (§4.4: one probe, not a stampede onto a provider that just failed).
 * Its result is recorded as a failure (reopens) or a success (closes); when it never is
 * (the client went away and the attempt was cancelled — then aor_breaker_release_probe
 * hands the lease back at once —, a client or config error that records nothing, an aor
 * bug), the probe would wedge the circuit, so it holds the
 * circuit only for a lease of open_s seconds (breaker_open_s) from when it was let
 * through: after that the next request becomes the probe. open_s because a lost probe
 * then costs what one more failed probe would (the circuit held back for open_s), and a
 * slow probe still running lets at most one more probe through per open_s — the rate at
 * which a provider that keeps failing is probed. open_s = 0: no lease, every request
 * after the expiry goes through. The lease is memory only, like the move to half-open:
 * nothing is logged (§4.5 persists open-until; after a restart the first request after
 * the expiry is the probe again). */

/* 1 when a request may go to (provider, model) at `now`: closed, or open with its time
 * passed and no probe in flight — this caller is then the probe (state becomes
 * half-open, leased until now + open_s). 0 when open, or half-open with another probe in
 * flight whose lease has not ended (lease end: aor_breaker_get's probe_until). Memory
 * only (nothing to log). Unknown circuit: 1. Called when a request is about to be sent
 * (daemon/proxy.c start_next, through aor_breaker_allow_walk with chosen_at -INFINITY);
 * routing (aor_route_select) only looks with aor_breaker_get, so a fallback it lists but
 * never tries takes no probe. */
int aor_breaker_allow(aor_breaker *b, const char *provider, const char *model, double now);

/* allow() with the time to look again: for a caller that may already hold the probe.
 * chosen_at (Unix seconds): a probe let through at or after it counts as the caller's
 * own; daemon/proxy.c holds none when it asks and passes -INFINITY. Closed: 1. Open with
 * its time not passed: 0. Half-open with a probe in flight: 1 when the probe was let
 * through at or after chosen_at, else 0 (another request's probe: skip the circuit like
 * every other request). Half-open with no probe in flight: this caller becomes the probe,
 * as with allow, and 1. On 0 sets *until (when not NULL) to when to look again: the
 * open-until, or the probe's lease end. Unknown circuit: 1. */
int aor_breaker_allow_walk(aor_breaker *b, const char *provider, const char *model, double now,
                           double chosen_at, double *until);

/* Records a retryable failure at now. Closed: counts it; when that makes >= failures
 * within the window the circuit opens until now + open_s (failure times are forgotten).
 * Half-open (or open with its time passed): reopens at once until now + open_s, and the
 * probe's lease ends. Open: nothing changes.
 * Returns 1 when this failure opened the circuit (state changed to open: the caller logs
 * breaker_open with the until aor_breaker_preview_fail gave first), 0 when it only
 * counted, -1 with errno=ENOMEM (table unchanged) or errno=EINVAL (NULL name). */
int aor_breaker_fail(aor_breaker *b, const char *provider, const char *model, double now);

/* What aor_breaker_fail(b, provider, model, now) would do, without changing the table
 * (write-ahead, §4.5). Returns 1 when it would open the circuit and sets *until (when not
 * NULL) to the open-until it would set (now + open_s); 0 when it would only count (or
 * change nothing). The failure count itself is not persisted (spec: `breakers` holds only
 * until), so a 0 needs no log entry. Can't fail. */
int aor_breaker_preview_fail(const aor_breaker *b, const char *provider, const char *model,
                             double now, double *until);

/* Records a success: closes the circuit and forgets failures and any probe lease (the
 * circuit's memory is freed). Returns 1 when the state changed (it was open or half-open, whether
 * or not its time had passed: log breaker_close first), 0 otherwise. Can't fail. To know ahead of
 * time, aor_breaker_get(...) returning a state other than CLOSED means 1. */
int aor_breaker_success(aor_breaker *b, const char *provider, const char *model);

/* The probe whose lease ends at probe_until (aor_breaker_row.probe_until, read when it
 * was let through) will give no result: its attempt was cancelled because the client
 * went away. The lease ends now, so the next request is the probe instead of every
 * request skipping the circuit until the lease would have ended (§4.4: one probe in
 * flight, not none). Nothing happens when the circuit holds another lease (a later
 * probe), or is no longer half-open. Memory only, like the lease. Can't fail. */
void aor_breaker_release_probe(aor_breaker *b, const char *provider, const char *model,
                               double probe_until);

/* Puts an open circuit back as it was (replay): open until `until` (failure times and
 * any probe lease are forgotten). 0, or -1 with errno=ENOMEM (table unchanged) or errno=EINVAL
 * (NULL name). */
int aor_breaker_restore(aor_breaker *b, const char *provider, const char *model, double until);

/* Removes every circuit of provider (NULL: all), including closed ones that only hold
 * failure times (admin reset, §8). Returns how many of the removed circuits were open or
 * half-open (stored state; an open one whose time passed counts). Can't fail. */
int aor_breaker_reset(aor_breaker *b, const char *provider);

/* Looks up (provider, model) as of now. Returns 1 and fills *out (when not NULL; strings
 * owned by the table, valid until the circuit is removed) when the table has it, which
 * includes closed circuits with recent failures; 0 when it has nothing for it (closed, no
 * failures). Does not change the state. */
int aor_breaker_get(const aor_breaker *b, const char *provider, const char *model, double now,
                    aor_breaker_row *out);

/* Calls fn for each circuit that is open or half-open at `now` (row valid only during the
 * call), in no particular order. fn must not change the table. */
void aor_breaker_foreach(const aor_breaker *b, double now,
                         void (*fn)(const aor_breaker_row *row, void *arg), void *arg);

#endif
