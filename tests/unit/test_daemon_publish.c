/* Unit tests for daemon/publish.c: which `hosts` files aord may replace or remove (only
 * its own address set, never a file of someone else's); what a rewrite after a reload
 * keeps; that the two writers (reload, resolver thread) never garble the file; which
 * SNI / preamble hosts count as routed. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "publish.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

/* ---- a resolver the test controls ---------------------------------------------------------
 * The resolver thread of publish.c calls getaddrinfo: these definitions replace libc's in
 * this test binary (no DNS). "hN.pub.test" resolves to 10.0.N.1 .. 10.0.N.<gai_count> and
 * 2001:db8::N:1 .. (N < 256); every other name fails. While gai_hold is set, a look-up of
 * a .pub.test name waits until it is cleared. */

static pthread_mutex_t gai_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t gai_cond = PTHREAD_COND_INITIALIZER;
static int gai_hold;
static unsigned gai_hold_only; /* with gai_hold: only hN.pub.test for this N waits (0: all) */
static int gai_count = 2;
static atomic_int gai_waiting; /* look-ups waiting on gai_hold */

static void gai_set_hold(int hold) {
    pthread_mutex_lock(&gai_lock);
    gai_hold = hold;
    pthread_cond_broadcast(&gai_cond);
    pthread_mutex_unlock(&gai_lock);
}

static void gai_set_count(int count) {
    pthread_mutex_lock(&gai_lock);
    gai_count = count;
    pthread_mutex_unlock(&gai_lock);
}

static struct addrinfo *gai_entry(int family, const void *addr) {
    struct addrinfo *ai = calloc(1, sizeof *ai + sizeof(struct sockaddr_in6));
    if (!ai)
        return NULL;
    ai->ai_family = family;
    ai->ai_socktype = SOCK_STREAM;
    ai->ai_protocol = IPPROTO_TCP;
    ai->ai_addr = (struct sockaddr *)(ai + 1);
    if (family == AF_INET) {
        struct sockaddr_in *sin = (struct sockaddr_in *)ai->ai_addr;
        sin->sin_family = AF_INET;
        memcpy(&sin->sin_addr, addr, 4);
        ai->ai_addrlen = sizeof *sin;
    } else {
        struct sockaddr_in6 *sin6 = (struct sockaddr_in6 *)ai->ai_addr;
        sin6->sin6_family = AF_INET6;
        memcpy(&sin6->sin6_addr, addr, 16);
        ai->ai_addrlen = sizeof *sin6;
    }
    return ai;
}

void freeaddrinfo(struct addrinfo *res) {
    while (res) {
        struct addrinfo *next = res->ai_next;
        free(res);
        res = next;
    }
}

int getaddrinfo(const char *node, const char *service, const struct addrinfo *hints,
                struct addrinfo **res) {
    unsigned n = 0;
    char rest[32] = "";
    *res = NULL;
    if (!node || sscanf(node, "h%u.%31s", &n, rest) != 2 || strcmp(rest, "pub.test") != 0 ||
        n > 255)
        return EAI_NONAME;
    pthread_mutex_lock(&gai_lock);
    atomic_fetch_add(&gai_waiting, 1);
    while (gai_hold && (gai_hold_only == 0 || gai_hold_only == n))
        pthread_cond_wait(&gai_cond, &gai_lock);
    atomic_fetch_sub(&gai_waiting, 1);
    int count = gai_count;
    pthread_mutex_unlock(&gai_lock);
    struct addrinfo **tail = res;
    for (int k = 1; k <= count; k++) {
        unsigned char v4[4] = {10, 0, (unsigned char)n, (unsigned char)k};
        unsigned char v6[16] = {0x20, 0x01, 0x0d, 0xb8};
        v6[13] = (unsigned char)n;
        v6[15] = (unsigned char)k;
        for (int fam = 0; fam < 2; fam++) {
            *tail = fam == 0 ? gai_entry(AF_INET, v4) : gai_entry(AF_INET6, v6);
            if (!*tail) {
                freeaddrinfo(*res);
                *res = NULL;
                return EAI_MEMORY;
            }
            tail = &(*tail)->ai_next;
        }
    }
    return 0;
}

typedef struct {
    char dir[64];
    char hosts[96];
} fixture;

static int setup(void **state) {
    fixture *f = calloc(1, sizeof *f);
    if (!f)
        return -1;
    memcpy(f->dir, "/tmp/aor-pub-XXXXXX", sizeof "/tmp/aor-pub-XXXXXX");
    if (!mkdtemp(f->dir)) {
        free(f);
        return -1;
    }
    snprintf(f->hosts, sizeof f->hosts, "%s/hosts", f->dir);
    *state = f;
    return 0;
}

static int teardown(void **state) {
    fixture *f = *state;
    char other[128];
    gai_set_hold(0);
    aor_publish_stop(f->dir); /* and no more writes there */
    snprintf(other, sizeof other, "%s/other", f->dir);
    unlink(f->hosts);
    unlink(other);
    rmdir(f->dir);
    free(f);
    return 0;
}

static void put(const char *path, const char *text) {
    FILE *fp = fopen(path, "w");
    assert_non_null(fp);
    fputs(text, fp);
    assert_int_equal(fclose(fp), 0);
}

static char *get(const char *path) {
    static char buf[256];
    FILE *fp = fopen(path, "r");
    assert_non_null(fp);
    size_t n = fread(buf, 1, sizeof buf - 1, fp);
    buf[n] = '\0';
    fclose(fp);
    return buf;
}

static void test_absent_is_fine(void **state) {
    fixture *f = *state;
    char err[512] = "";
    assert_int_equal(aor_publish_check_dir(f->dir, err, sizeof err), 0);
    assert_int_equal(aor_publish_stop(f->dir), 0);
}

/* An aord that did not publish (one that failed to start while another runs) leaves an
 * aord's file alone at its stop: it may be the running one's (review: it was removed). */
static void test_unpublished_stop_keeps_an_aord_file(void **state) {
    fixture *f = *state;
    char err[512] = "";
    put(f->hosts, "aor-hosts 1\nh api.openai.com 443\n");
    assert_int_equal(aor_publish_check_dir(f->dir, err, sizeof err), 0);
    assert_int_equal(aor_publish_stop(f->dir), 0);
    assert_string_equal(get(f->hosts), "aor-hosts 1\nh api.openai.com 443\n");
}

static void test_foreign_file_kept(void **state) {
    fixture *f = *state;
    char err[512] = "";
    put(f->hosts, "127.0.0.1 myhost\n");
    assert_int_equal(aor_publish_check_dir(f->dir, err, sizeof err), -1);
    assert_non_null(strstr(err, f->hosts));
    assert_non_null(strstr(err, "is not aord's published address set"));
    assert_int_equal(aor_publish_stop(f->dir), 0);
    assert_string_equal(get(f->hosts), "127.0.0.1 myhost\n");
}

static void test_short_and_empty_files_are_foreign(void **state) {
    fixture *f = *state;
    char err[512] = "";
    put(f->hosts, "aor-host");
    assert_int_equal(aor_publish_check_dir(f->dir, err, sizeof err), -1);
    put(f->hosts, "");
    assert_int_equal(aor_publish_check_dir(f->dir, err, sizeof err), -1);
    assert_int_equal(aor_publish_stop(f->dir), 0);
    assert_int_equal(access(f->hosts, F_OK), 0);
}

static void test_symlink_is_foreign(void **state) {
    fixture *f = *state;
    char err[512] = "", other[128];
    snprintf(other, sizeof other, "%s/other", f->dir);
    put(other, "aor-hosts 1\n");
    assert_int_equal(symlink(other, f->hosts), 0);
    assert_int_equal(aor_publish_check_dir(f->dir, err, sizeof err), -1);
    assert_non_null(strstr(err, f->hosts));
    assert_int_equal(aor_publish_stop(f->dir), 0);
    struct stat st;
    assert_int_equal(lstat(f->hosts, &st), 0);
    assert_true(S_ISLNK(st.st_mode));
}

static void test_directory_named_hosts_is_foreign(void **state) {
    fixture *f = *state;
    char err[512] = "";
    assert_int_equal(mkdir(f->hosts, 0700), 0);
    assert_int_equal(aor_publish_check_dir(f->dir, err, sizeof err), -1);
    assert_int_equal(aor_publish_stop(f->dir), 0);
    assert_int_equal(rmdir(f->hosts), 0);
}

/* The whole file at path (malloc'd, NUL-terminated; *len its size), or NULL. */
static char *slurp(const char *path, size_t *len) {
    FILE *fp = fopen(path, "r");
    if (!fp)
        return NULL;
    size_t cap = 4096, n = 0;
    char *buf = malloc(cap);
    while (buf) {
        n += fread(buf + n, 1, cap - 1 - n, fp);
        if (n < cap - 1)
            break;
        char *nb = realloc(buf, cap * 2);
        if (!nb) {
            free(buf);
            buf = NULL;
            break;
        }
        buf = nb;
        cap *= 2;
    }
    fclose(fp);
    if (buf) {
        buf[n] = '\0';
        if (len)
            *len = n;
    }
    return buf;
}

/* Waits (at most 10 s) until the file at path contains needle. */
static void wait_for(const char *path, const char *needle) {
    for (int i = 0; i < 1000; i++) {
        char *text = slurp(path, NULL);
        int hit = text && strstr(text, needle);
        free(text);
        if (hit)
            return;
        struct timespec ts = {0, 10 * 1000 * 1000};
        nanosleep(&ts, NULL);
    }
    fail_msg("%s never contained \"%s\"", path, needle);
}

/* A config of one provider, base_url https://h<base>.pub.test:<port>, with the intercept
 * names h<first>.pub.test .. h<first + n - 1>.pub.test. */
typedef struct {
    aor_config cfg;
    aor_provider_cfg prov;
    char host[32];
    char names[256][32];
    char *intercept[256];
} test_cfg;

static void make_cfg(test_cfg *t, int base, int port, int first, int n) {
    memset(t, 0, sizeof *t);
    snprintf(t->host, sizeof t->host, "h%d.pub.test", base);
    for (int i = 0; i < n; i++) {
        snprintf(t->names[i], sizeof t->names[i], "h%d.pub.test", first + i);
        t->intercept[i] = t->names[i];
    }
    t->prov.name = "p";
    t->prov.host = t->host;
    t->prov.port = port;
    t->prov.intercept = t->intercept;
    t->prov.nintercept = (size_t)n;
    t->cfg.providers = &t->prov;
    t->cfg.nproviders = 1;
}

/* A reload rewrites the file at once: the addresses already resolved for hosts still
 * published stay in it (on their new ports too), hosts gone lose theirs. Clients with a
 * resolver of their own (§2 step 2) would otherwise bypass aor until the next look-up. */
static void test_reload_keeps_resolved_addresses(void **state) {
    fixture *f = *state;
    static test_cfg one, two;
    make_cfg(&one, 1, 443, 2, 1);  /* h1, h2 */
    make_cfg(&two, 1, 8443, 3, 1); /* h1 on 8443 (and h3 on 443 and 8443) */
    assert_int_equal(aor_publish_start(f->dir, &one.cfg), 0);
    wait_for(f->hosts, "a 10.0.1.1 443 h1.pub.test\n");
    wait_for(f->hosts, "a 2001:db8::2:2 443 h2.pub.test\n");

    gai_set_hold(1); /* the look-ups after the reload wait: the file is the reload's */
    assert_int_equal(aor_publish_update(&two.cfg), 0);
    char *text = slurp(f->hosts, NULL);
    assert_non_null(text);
    assert_non_null(strstr(text, "aor-hosts 1\nh "));
    assert_non_null(strstr(text, "h h1.pub.test 8443\n"));
    assert_non_null(strstr(text, "a 10.0.1.1 8443 h1.pub.test\n"));
    assert_non_null(strstr(text, "a 10.0.1.2 8443 h1.pub.test\n"));
    assert_non_null(strstr(text, "a 2001:db8::1:1 8443 h1.pub.test\n"));
    assert_null(strstr(text, " 443 h1.pub.test")); /* its port changed */
    assert_null(strstr(text, "h2.pub.test"));
    assert_non_null(strstr(text, "h h3.pub.test 443\n"));
    assert_null(strstr(text, "a 10.0.3.")); /* not looked up yet */
    free(text);

    gai_set_hold(0);
    wait_for(f->hosts, "a 10.0.3.1 8443 h3.pub.test\n");
    text = slurp(f->hosts, NULL);
    assert_non_null(text);
    assert_non_null(strstr(text, "a 10.0.3.2 443 h3.pub.test\n"));
    assert_non_null(strstr(text, "a 10.0.1.1 8443 h1.pub.test\n"));
    free(text);
}

/* At shutdown the file keeps its host lines and loses its addresses (QA: it was removed,
 * and with aord down a host only the config names went direct without the fail-open
 * warning, also under AOR_STRICT=1); nothing writes the addresses back afterwards. */
static void test_stop_keeps_the_host_names(void **state) {
    fixture *f = *state;
    static test_cfg one, two;
    make_cfg(&one, 1, 443, 2, 1); /* h1, h2 */
    make_cfg(&two, 1, 8443, 3, 1);
    assert_int_equal(aor_publish_start(f->dir, &one.cfg), 0);
    wait_for(f->hosts, "a 10.0.1.1 443 h1.pub.test\n");
    assert_int_equal(aor_publish_stop(f->dir), 1);
    char *text = slurp(f->hosts, NULL);
    assert_non_null(text);
    assert_non_null(strstr(text, "aor-hosts 1\n"));
    assert_non_null(strstr(text, "h h1.pub.test 443\n"));
    assert_non_null(strstr(text, "h h2.pub.test 443\n"));
    assert_null(strstr(text, "\na "));
    free(text);
    /* A reload or a late look-up writes nothing any more. */
    assert_int_equal(aor_publish_update(&two.cfg), 0);
    struct timespec ts = {0, 200 * 1000 * 1000};
    nanosleep(&ts, NULL);
    text = slurp(f->hosts, NULL);
    assert_non_null(text);
    assert_null(strstr(text, "h3.pub.test"));
    assert_null(strstr(text, "\na "));
    free(text);
    /* A second stop (aord's exit after the signal's) leaves it as it is. */
    assert_int_equal(aor_publish_stop(f->dir), 1);
    assert_int_equal(access(f->hosts, F_OK), 0);
}

/* A reload while the resolver is looking the previous list up is not lost: the resolver
 * goes on with the new list at once instead of after AOR_PUBLISH_REFRESH_S, and never
 * writes the list it started with over the newer one. */
static void test_reload_during_lookup_not_lost(void **state) {
    fixture *f = *state;
    static test_cfg one, two, three;
    make_cfg(&one, 11, 443, 12, 1);   /* h11, h12 */
    make_cfg(&two, 11, 443, 13, 1);   /* h11, h13 */
    make_cfg(&three, 11, 443, 14, 1); /* h11, h14 */
    assert_int_equal(aor_publish_start(f->dir, &one.cfg), 0);
    wait_for(f->hosts, "a 10.0.12.1 443 h12.pub.test\n");

    gai_set_hold(1);
    assert_int_equal(aor_publish_update(&two.cfg), 0);
    for (int i = 0; i < 1000 && atomic_load(&gai_waiting) == 0; i++) {
        struct timespec ts = {0, 10 * 1000 * 1000};
        nanosleep(&ts, NULL);
    }
    assert_true(atomic_load(&gai_waiting) >= 1); /* the resolver is in its look-ups */
    assert_int_equal(aor_publish_update(&three.cfg), 0);
    gai_set_hold(0);
    wait_for(f->hosts, "a 10.0.14.1 443 h14.pub.test\n");
    char *text = slurp(f->hosts, NULL);
    assert_non_null(text);
    assert_null(strstr(text, "h13.pub.test"));
    free(text);
}

/* A name whose look-up hangs (split DNS, the offline case) does not hold back the
 * others: each is published when its own look-up is back (QA: one after the other, a
 * local base_url host waited 18-90 s behind the built-in hosts' time-outs). */
static void test_a_slow_lookup_holds_back_no_other(void **state) {
    fixture *f = *state;
    static test_cfg one;
    make_cfg(&one, 21, 443, 22, 1); /* h21, h22 */
    pthread_mutex_lock(&gai_lock);
    gai_hold_only = 21;
    pthread_mutex_unlock(&gai_lock);
    gai_set_hold(1);
    assert_int_equal(aor_publish_start(f->dir, &one.cfg), 0);
    wait_for(f->hosts, "a 10.0.22.1 443 h22.pub.test\n");
    assert_true(atomic_load(&gai_waiting) >= 1); /* h21's look-up still hangs */
    char *text = slurp(f->hosts, NULL);
    assert_non_null(text);
    assert_null(strstr(text, "a 10.0.21.1"));
    free(text);
    gai_set_hold(0);
    wait_for(f->hosts, "a 10.0.21.1 443 h21.pub.test\n");
    pthread_mutex_lock(&gai_lock);
    gai_hold_only = 0;
    pthread_mutex_unlock(&gai_lock);
}

static int port_ok(const char *s) {
    char *end = NULL;
    long v = strtol(s, &end, 10);
    return end != s && *end == '\0' && v > 0 && v <= 65535;
}

/* 1 when text (len bytes) is a whole address set: the header once, then only well-formed
 * "h" and "a" lines, the last one ending in a newline, no NUL byte. */
static int well_formed(const char *text, size_t len) {
    if (len == 0 || strlen(text) != len || text[len - 1] != '\n' ||
        strncmp(text, "aor-hosts 1\n", 12) != 0)
        return 0;
    for (const char *p = text + 12; *p;) {
        const char *nl = strchr(p, '\n');
        char line[256], kind[4], a1[64], a2[64], a3[64], extra[8];
        size_t ll = (size_t)(nl - p);
        if (ll >= sizeof line)
            return 0;
        memcpy(line, p, ll);
        line[ll] = '\0';
        p = nl + 1;
        int n = sscanf(line, "%3s %63s %63s %63s %7s", kind, a1, a2, a3, extra);
        unsigned char ip[16];
        if (n == 3 && strcmp(kind, "h") == 0 && port_ok(a2))
            continue;
        if (n == 4 && strcmp(kind, "a") == 0 && port_ok(a2) &&
            (inet_pton(AF_INET, a1, ip) == 1 || inet_pton(AF_INET6, a1, ip) == 1))
            continue;
        return 0;
    }
    return 1;
}

typedef struct {
    const char *path;
    atomic_int stop;
    atomic_int reads, bad;
} reader_arg;

static void *reader(void *p) {
    reader_arg *r = p;
    while (!atomic_load(&r->stop)) {
        size_t len = 0;
        char *text = slurp(r->path, &len);
        if (text) {
            atomic_fetch_add(&r->reads, 1);
            if (!well_formed(text, len))
                atomic_fetch_add(&r->bad, 1);
        }
        free(text);
    }
    return NULL;
}

/* Reloads and the resolver thread write at the same time; every file a reader sees is a
 * whole one (the rename is atomic and no two writers share the temporary file). */
static void test_concurrent_writes_never_garble(void **state) {
    fixture *f = *state;
    static test_cfg a, b;
    gai_set_count(8); /* 16 addresses a name: a file of about 60 KiB */
    make_cfg(&a, 100, 443, 101, 120);
    make_cfg(&b, 100, 443, 102, 120);
    assert_int_equal(aor_publish_start(f->dir, &a.cfg), 0);
    wait_for(f->hosts, "a 10.0.220.8 443 h220.pub.test\n");
    reader_arg r = {.path = f->hosts};
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, reader, &r), 0);
    struct timespec start, now;
    clock_gettime(CLOCK_MONOTONIC, &start);
    int i = 0, failed = 0; /* a reload's write lost to the other writer's rename */
    do {
        failed += aor_publish_update(i++ % 2 ? &a.cfg : &b.cfg) != 0;
        clock_gettime(CLOCK_MONOTONIC, &now);
    } while (now.tv_sec - start.tv_sec < 2 && atomic_load(&r.bad) == 0);
    atomic_store(&r.stop, 1);
    pthread_join(t, NULL);
    print_message("%d reloads (%d failed), %d reads (%d not well formed)\n", i, failed,
                  atomic_load(&r.reads), atomic_load(&r.bad));
    assert_true(atomic_load(&r.reads) > 0);
    assert_int_equal(atomic_load(&r.bad), 0);
    assert_int_equal(failed, 0);

    /* Once both writers are done, the file is the last list with all its addresses. */
    assert_int_equal(aor_publish_update(&b.cfg), 0);
    wait_for(f->hosts, "a 10.0.221.8 443 h221.pub.test\n");
    gai_set_count(2);
    size_t len = 0;
    char *text = slurp(f->hosts, &len);
    assert_non_null(text);
    assert_true(well_formed(text, len));
    assert_null(strstr(text, "h101.pub.test"));
    free(text);
}

/* SNI and preamble hosts as clients send them: upper case, or the fully qualified form
 * with its trailing dot, mean the same host (built-in or configured). */
static void test_host_intercepted_normalised(void **state) {
    static test_cfg one;
    aor_config empty = {0};
    assert_true(aor_publish_host_intercepted(&empty, "api.openai.com"));
    assert_true(aor_publish_host_intercepted(&empty, "api.openai.com."));
    assert_true(aor_publish_host_intercepted(&empty, "API.OpenAI.com"));
    assert_true(aor_publish_host_intercepted(&empty, "Api.Anthropic.Com."));
    assert_true(aor_publish_host_intercepted(&empty, "api.fireworks.ai"));
    assert_false(aor_publish_host_intercepted(&empty, "api.openai.com.."));
    assert_false(aor_publish_host_intercepted(&empty, "api.openai.co"));
    assert_false(aor_publish_host_intercepted(&empty, "xapi.openai.com"));
    assert_false(aor_publish_host_intercepted(&empty, "openai.com"));
    assert_false(aor_publish_host_intercepted(&empty, ""));
    make_cfg(&one, 31, 443, 32, 1);
    assert_true(aor_publish_host_intercepted(&one.cfg, "H31.pub.test."));
    assert_true(aor_publish_host_intercepted(&one.cfg, "h32.PUB.test"));
    assert_true(aor_publish_host_intercepted(&one.cfg, "API.GROQ.COM."));
    assert_false(aor_publish_host_intercepted(&one.cfg, "h33.pub.test"));
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_absent_is_fine, setup, teardown),
        cmocka_unit_test_setup_teardown(test_unpublished_stop_keeps_an_aord_file, setup, teardown),
        cmocka_unit_test_setup_teardown(test_foreign_file_kept, setup, teardown),
        cmocka_unit_test_setup_teardown(test_short_and_empty_files_are_foreign, setup, teardown),
        cmocka_unit_test_setup_teardown(test_symlink_is_foreign, setup, teardown),
        cmocka_unit_test_setup_teardown(test_directory_named_hosts_is_foreign, setup, teardown),
        cmocka_unit_test(test_host_intercepted_normalised),
        cmocka_unit_test_setup_teardown(test_reload_keeps_resolved_addresses, setup, teardown),
        cmocka_unit_test_setup_teardown(test_reload_during_lookup_not_lost, setup, teardown),
        cmocka_unit_test_setup_teardown(test_a_slow_lookup_holds_back_no_other, setup, teardown),
        cmocka_unit_test_setup_teardown(test_stop_keeps_the_host_names, setup, teardown),
        cmocka_unit_test_setup_teardown(test_concurrent_writes_never_garble, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
