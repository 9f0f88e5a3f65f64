/* routebench — per-request routing cost at scale, for `make bench` (docs/performance.md).
 *
 *   routebench [--quick]
 *
 * Builds two configurations through aor_config_load (an INI file in a temp dir, secrets
 * in environment variables BENCH_RK_<name>):
 *   small: 1 provider, 2 keys (a typical user), a random client per call, and one
 *          client again and again (an agent process);
 *   large: 10 providers x 100 keys = 1,000 keys, all serving the model, 100 keys in a
 *          running backoff window; provider priorities 0..9 in list order, keys of equal
 *          priority (every candidate ties with the 99 others of its provider and gets a
 *          tie-break hash);
 *   reversed: the same, the providers listed in reverse priority order (the candidates
 *          must be sorted, not just checked);
 *   graded: the same as large, each provider's keys with priorities 0..99 (no ties, no
 *          tie-break hash);
 * and a sticky table of 100,000 rows (100,000 clients, one model, on the large config's
 * keys). Then times, in ns per call: aor_route_select (each config with the 100,000
 * sticky rows, a random client per call), aor_sticky_get on 100,000 rows,
 * aor_backoff_blocked on 1,000 keys, aor_breaker_allow, and the per-request client
 * identity aor_hash_sha256_hex.
 * Prints one JSON object. Links build/bench/libaorcommon.a. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "backoff.h"
#include "breaker.h"
#include "config.h"
#include "hash.h"
#include "route.h"
#include "sticky.h"

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define NPROV 10
#define KEYS_PER_PROV 100
#define NCLIENTS 100000
#define MODEL "gpt-4o"
#define NOW 1800000000.0

static double now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

static void die(const char *what) {
    fprintf(stderr, "routebench: %s\n", what);
    exit(1);
}

static uint64_t rng = 88172645463325252ull;
static uint64_t next_rand(void) {
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return rng;
}

enum { CFG_PLAIN = 0, CFG_REVERSED = 1, CFG_GRADED = 2 };

/* Writes an INI with nprov providers ("<pfx>p0"...) of kpp keys ("<pfx>k0"...) each to
 * dir/name; sets the variables. Provider p has priority p (CFG_REVERSED: nprov - 1 - p);
 * keys have priority 0 (CFG_GRADED: their position in the provider, 0..kpp-1). */
static aor_config *make_config(const char *dir, const char *name, const char *pfx, int nprov,
                               int kpp, int shape) {
    char path[512];
    int n = snprintf(path, sizeof path, "%s/%s", dir, name);
    if (n < 0 || (size_t)n >= sizeof path)
        die("path too long");
    FILE *f = fopen(path, "w");
    if (!f)
        die("cannot write the config");
    fprintf(f, "[daemon]\nlisten = off\n");
    for (int p = 0; p < nprov; p++) {
        for (int k = 0; k < kpp; k++) {
            int id = p * kpp + k;
            fprintf(f, "[key \"%sk%d\"]\nenv = BENCH_RK_%s%d\npriority = %d\n", pfx, id, pfx, id,
                    shape == CFG_GRADED ? k : 0);
            char var[64], val[64];
            snprintf(var, sizeof var, "BENCH_RK_%s%d", pfx, id);
            snprintf(val, sizeof val, "bench-route-secret-%s%d", pfx, id);
            setenv(var, val, 1);
        }
        fprintf(f, "[provider \"%sp%d\"]\ndialect = openai\nbase_url = https://p%d.example\n", pfx,
                p, p);
        fprintf(f, "priority = %d\nmodels = *\nkeys = ", shape == CFG_REVERSED ? nprov - 1 - p : p);
        for (int k = 0; k < kpp; k++)
            fprintf(f, "%s%sk%d", k ? ", " : "", pfx, p * kpp + k);
        fprintf(f, "\n");
    }
    fclose(f);
    char *errors = NULL;
    aor_config *cfg = aor_config_load(path, &errors);
    if (!cfg) {
        fprintf(stderr, "%s\n", errors ? errors : "?");
        die("config did not load");
    }
    return cfg;
}

/* Runs the statement block (the variadic part, commas allowed) iters times; ns per run. */
#define TIME_LOOP(iters, ...)                                                                      \
    ({                                                                                             \
        double t0_ = now_ns();                                                                     \
        for (long i_ = 0; i_ < (iters); i_++) {                                                    \
            __VA_ARGS__;                                                                           \
        }                                                                                          \
        (now_ns() - t0_) / (double)(iters);                                                        \
    })

int main(int argc, char **argv) {
    int quick = argc > 1 && strcmp(argv[1], "--quick") == 0;
    long iters_small = quick ? 20000 : 200000, iters_large = quick ? 100 : 1000;
    long iters_lookup = quick ? 200000 : 2000000;

    char dir[] = "/tmp/aor-routebench-XXXXXX";
    if (!mkdtemp(dir))
        die("mkdtemp failed");
    aor_config *small = make_config(dir, "small.ini", "s", 1, 2, CFG_PLAIN);
    aor_config *large = make_config(dir, "large.ini", "", NPROV, KEYS_PER_PROV, CFG_PLAIN);
    aor_config *reversed =
        make_config(dir, "reversed.ini", "r", NPROV, KEYS_PER_PROV, CFG_REVERSED);
    aor_config *graded = make_config(dir, "graded.ini", "g", NPROV, KEYS_PER_PROV, CFG_GRADED);

    aor_backoff_params bp = {5, 86400, 120, 120};
    aor_breaker_params kp = {3, 60, 30};
    aor_backoff *bo = aor_backoff_new(&bp), *bo2 = aor_backoff_new(&bp);
    aor_breaker *br = aor_breaker_new(&kp);
    aor_sticky *st = aor_sticky_new();
    if (!bo || !bo2 || !br || !st)
        die("out of memory");
    aor_sticky_set_max(st, NCLIENTS); /* aord keeps AOR_STICKY_MAX_DEFAULT (the same) */

    /* 100 keys of each 1,000-key config backed off (every 10th); the large config's in bo
     * alone (the table backoff_blocked is timed on), the others' in bo2. */
    static const char *const large_pfx[] = {"", "r", "g"};
    for (size_t c = 0; c < sizeof large_pfx / sizeof large_pfx[0]; c++) {
        for (int i = 0; i < NPROV * KEYS_PER_PROV; i += 10) {
            char prov[16], key[16];
            snprintf(prov, sizeof prov, "%sp%d", large_pfx[c], i / KEYS_PER_PROV);
            snprintf(key, sizeof key, "%sk%d", large_pfx[c], i);
            if (aor_backoff_fail(c == 0 ? bo : bo2, prov, key, AOR_KIND_RATE, -1, NOW, NULL) < 0)
                die("backoff_fail");
        }
    }
    /* 100,000 clients with a sticky (provider, key) each. */
    static char clients[NCLIENTS][65];
    double t0 = now_ns();
    for (int i = 0; i < NCLIENTS; i++) {
        char cred[64];
        int cl = snprintf(cred, sizeof cred, "Bearer client-%d", i);
        aor_hash_sha256_hex(cred, (size_t)cl, clients[i]);
    }
    double hash_ns = (now_ns() - t0) / NCLIENTS;
    t0 = now_ns();
    for (int i = 0; i < NCLIENTS; i++) {
        int k = (int)(next_rand() % (NPROV * KEYS_PER_PROV));
        char prov[16], key[16];
        snprintf(prov, sizeof prov, "p%d", k / KEYS_PER_PROV);
        snprintf(key, sizeof key, "k%d", k);
        if (aor_sticky_success(st, clients[i], MODEL, prov, key, NOW - 10) < 0)
            die("sticky_success");
    }
    double sticky_insert_ns = (now_ns() - t0) / NCLIENTS;

    aor_route_ctx cs = {small, bo, br, st, NULL};
    aor_route_ctx cl = {large, bo, br, st, NULL};
    aor_sequence seq;
    size_t sink = 0;
    double sel_small = TIME_LOOP(iters_small, {
        const char *c = clients[next_rand() % NCLIENTS];
        if (aor_route_select(&cs, MODEL, c, NULL, AOR_DIALECT_OPENAI, NOW, &seq) < 0)
            die("route_select");
        sink += seq.n;
        aor_sequence_free(&seq);
    });
    size_t small_n = sink / (size_t)iters_small;
    /* One client again and again, as an agent process with one credential sends. */
    const char *one = clients[7];
    double sel_small_one = TIME_LOOP(iters_small, {
        if (aor_route_select(&cs, MODEL, one, NULL, AOR_DIALECT_OPENAI, NOW, &seq) < 0)
            die("route_select");
        sink += seq.n;
        aor_sequence_free(&seq);
    });
    sink = 0;
    double sel_large = TIME_LOOP(iters_large, {
        const char *c = clients[next_rand() % NCLIENTS];
        if (aor_route_select(&cl, MODEL, c, NULL, AOR_DIALECT_OPENAI, NOW, &seq) < 0)
            die("route_select");
        sink += seq.n;
        aor_sequence_free(&seq);
    });
    size_t large_n = sink / (size_t)iters_large;
    aor_route_ctx cr = {reversed, bo2, br, st, NULL};
    aor_route_ctx cg = {graded, bo2, br, st, NULL};
    sink = 0;
    double sel_reversed = TIME_LOOP(iters_large, {
        const char *c = clients[next_rand() % NCLIENTS];
        if (aor_route_select(&cr, MODEL, c, NULL, AOR_DIALECT_OPENAI, NOW, &seq) < 0)
            die("route_select");
        sink += seq.n;
        aor_sequence_free(&seq);
    });
    double sel_graded = TIME_LOOP(iters_large, {
        const char *c = clients[next_rand() % NCLIENTS];
        if (aor_route_select(&cg, MODEL, c, NULL, AOR_DIALECT_OPENAI, NOW, &seq) < 0)
            die("route_select");
        sink += seq.n;
        aor_sequence_free(&seq);
    });
    if (sink != 2 * large_n * (size_t)iters_large)
        die("the reversed and graded configs should keep as many candidates as the large one");
    double sticky_get = TIME_LOOP(iters_lookup, {
        aor_sticky_row row;
        sink += (size_t)aor_sticky_get(st, clients[next_rand() % NCLIENTS], MODEL, &row);
    });
    double backoff_blocked = TIME_LOOP(iters_lookup, {
        int k = (int)(next_rand() % (NPROV * KEYS_PER_PROV));
        char prov[16], key[16];
        snprintf(prov, sizeof prov, "p%d", k / KEYS_PER_PROV);
        snprintf(key, sizeof key, "k%d", k);
        double until;
        sink += (size_t)aor_backoff_blocked(bo, prov, key, NOW, &until);
    });
    double snprintf_ns = TIME_LOOP(iters_lookup, {
        int k = (int)(next_rand() % (NPROV * KEYS_PER_PROV));
        char prov[16], key[16];
        snprintf(prov, sizeof prov, "p%d", k / KEYS_PER_PROV);
        snprintf(key, sizeof key, "k%d", k);
        sink += (size_t)prov[1] + (size_t)key[1];
    });
    double breaker_allow =
        TIME_LOOP(iters_lookup, { sink += (size_t)aor_breaker_allow(br, "p3", MODEL, NOW); });

    printf("{\"route_select_small_ns\":%.0f,\"route_select_small_one_client_ns\":%.0f,"
           "\"route_select_small_candidates\":%zu,"
           "\"route_select_1000keys_ns\":%.0f,\"route_select_1000keys_candidates\":%zu,"
           "\"route_select_1000keys_reversed_ns\":%.0f,\"route_select_1000keys_graded_ns\":%.0f,"
           "\"sticky_get_100k_rows_ns\":%.0f,\"backoff_blocked_1000_keys_ns\":%.0f,"
           "\"breaker_allow_ns\":%.0f,\"client_id_sha256_ns\":%.0f,"
           "\"sticky_insert_ns\":%.0f,\"sticky_rows\":%zu,\"sink\":%zu}\n",
           sel_small, sel_small_one, small_n, sel_large, large_n, sel_reversed, sel_graded,
           sticky_get,
           backoff_blocked - snprintf_ns > 0 ? backoff_blocked - snprintf_ns : backoff_blocked,
           breaker_allow, hash_ns, sticky_insert_ns, aor_sticky_count(st), sink % 7);
    aor_sticky_free(st);
    aor_breaker_free(br);
    aor_backoff_free(bo);
    aor_backoff_free(bo2);
    aor_config_free(small);
    aor_config_free(large);
    aor_config_free(reversed);
    aor_config_free(graded);
    static const char *const files[] = {"small.ini", "large.ini", "reversed.ini", "graded.ini"};
    for (size_t i = 0; i < sizeof files / sizeof files[0]; i++) {
        char path[512];
        snprintf(path, sizeof path, "%s/%s", dir, files[i]);
        unlink(path);
    }
    rmdir(dir);
    return 0;
}
