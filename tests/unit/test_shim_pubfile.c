/* Unit tests: shim/pubfile.c (the daemon-published address set, spec §2 step 2) and the
 * live reload in shim/hosts.c. */
#include <arpa/inet.h>
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "hostlist.h"
#include "env.h"
#include "hosts.h"
#include "ipaddr.h"
#include "pubfile.h"

static aor_pubset *parse(const char *text, int *nbad) {
    return aor_pubset_parse(text, strlen(text), nbad);
}

static aor_ip ip_of(const char *text) {
    aor_ip ip;
    assert_int_equal(aor_ip_parse(text, strlen(text), &ip), 0);
    return ip;
}

static int match(const aor_pubset *s, const char *ip, int port, char *host) {
    aor_ip a = ip_of(ip);
    return aor_pubset_match(s, &a, port, host, 254);
}

static const char good[] = "aor-hosts 1\n"
                           "# comment\n"
                           "\n"
                           "h api.openai.com 443\n"
                           "h mock.test 8443\n"
                           "a 162.159.140.245 443 api.openai.com\n"
                           "a 2606:4700::6810:1 443 api.openai.com\n"
                           "a 127.0.0.9 8443 mock.test\r\n"
                           "a 10.0.0.1 443 only-a-line.test\n";

static void test_parse_good(void **state) {
    int nbad = -1;
    char host[254];
    aor_pubset *s = parse(good, &nbad);
    assert_non_null(s);
    assert_int_equal(nbad, 0);
    assert_int_equal(aor_pubset_addr_count(s), 4);
    const aor_hostlist *hl = aor_pubset_hosts(s);
    assert_int_equal(aor_hostlist_count(hl), 3);
    int k = aor_hostlist_find(hl, "mock.test", 9);
    assert_true(k >= 0);
    assert_int_equal(aor_hostlist_port(hl, (size_t)k), 8443);
    assert_true(aor_hostlist_find(hl, "only-a-line.test", 16) >= 0);

    assert_int_equal(match(s, "162.159.140.245", 443, host), 1);
    assert_string_equal(host, "api.openai.com");
    assert_int_equal(match(s, "2606:4700::6810:1", 443, host), 1);
    assert_int_equal(match(s, "::ffff:162.159.140.245", 443, host), 1); /* v4-mapped */
    assert_int_equal(match(s, "127.0.0.9", 8443, host), 1);
    assert_string_equal(host, "mock.test");
    assert_int_equal(match(s, "127.0.0.9", 443, host), 1); /* 443 always */
    assert_int_equal(match(s, "127.0.0.9", 80, host), 0);  /* other ports: no */
    assert_int_equal(match(s, "162.159.140.245", 8443, host), 0);
    assert_int_equal(match(s, "162.159.140.246", 443, host), 0);
    aor_pubset_free(s);
}

static void test_ambiguous(void **state) {
    char host[254] = "x";
    aor_pubset *s = parse("aor-hosts 1\n"
                          "a 1.1.1.1 443 one.test\n"
                          "a 1.1.1.1 443 two.test\n"
                          "a 1.1.1.1 443 one.test\n",
                          NULL);
    assert_non_null(s);
    assert_int_equal(match(s, "1.1.1.1", 443, host), 2);
    assert_string_equal(host, "");
    aor_pubset_free(s);
}

/* aord writes one "h" line per (host, port): an intercept name with a base_url port gets
 * both 443 and that port. */
static void test_host_with_two_ports(void **state) {
    char host[254];
    aor_pubset *s = parse("aor-hosts 1\n"
                          "h multi.test 443\n"
                          "h multi.test 8443\n"
                          "a 1.2.3.4 443 multi.test\n",
                          NULL);
    assert_non_null(s);
    assert_int_equal(match(s, "1.2.3.4", 443, host), 1);
    assert_int_equal(match(s, "1.2.3.4", 8443, host), 1);
    assert_string_equal(host, "multi.test");
    assert_int_equal(match(s, "1.2.3.4", 9443, host), 0);
    aor_pubset_free(s);
}

static void test_bad_lines_ignored(void **state) {
    int nbad = 0;
    char host[254];
    aor_pubset *s = parse("aor-hosts 1\n"
                          "h good.test 443\n"
                          "h bad host 443\n"
                          "h x.test 0\n"
                          "h y.test 65536\n"
                          "a 300.1.1.1 443 good.test\n"
                          "a 1.2.3.4 443\n"
                          "a 1.2.3.4 abc good.test\n"
                          "q what is this\n"
                          "a 1.2.3.4 443 good.test extra\n"
                          "a 5.6.7.8 443 good.test\n",
                          &nbad);
    assert_non_null(s);
    assert_int_equal(nbad, 8);
    assert_int_equal(aor_pubset_addr_count(s), 1);
    assert_int_equal(match(s, "5.6.7.8", 443, host), 1);
    assert_int_equal(match(s, "1.2.3.4", 443, host), 0);
    aor_pubset_free(s);
}

static void test_header_required(void **state) {
    errno = 0;
    assert_null(parse("", NULL));
    assert_int_equal(errno, EINVAL);
    assert_null(parse("h api.openai.com 443\n", NULL));
    assert_null(parse("aor-hosts 2\nh api.openai.com 443\n", NULL));
    assert_null(parse("aor-hosts\n", NULL));
    assert_null(parse("aor-hosts 1 extra\n", NULL));
    /* comments and blank lines may come first; no final newline is fine */
    aor_pubset *s = parse("# published by aord\n\naor-hosts 1\nh a.test 443", NULL);
    assert_non_null(s);
    assert_int_equal(aor_hostlist_count(aor_pubset_hosts(s)), 1);
    aor_pubset_free(s);
}

static void test_size_bounds(void **state) {
    size_t len = AOR_PUBFILE_MAX_BYTES + 1;
    char *big = malloc(len);
    assert_non_null(big);
    memset(big, '\n', len);
    memcpy(big, "aor-hosts 1\n", 12);
    errno = 0;
    assert_null(aor_pubset_parse(big, len, NULL));
    assert_int_equal(errno, EINVAL);
    free(big);

    /* More than AOR_PUBFILE_MAX_ADDRS "a" lines: the rest are ignored, the set works. */
    size_t cap = 64 + (AOR_PUBFILE_MAX_ADDRS + 100) * 32, off = 0;
    char *text = malloc(cap);
    assert_non_null(text);
    off += (size_t)snprintf(text, cap, "aor-hosts 1\n");
    for (int i = 0; i < AOR_PUBFILE_MAX_ADDRS + 100; i++)
        off += (size_t)snprintf(text + off, cap - off, "a 10.%d.%d.1 443 many.test\n",
                                (i >> 8) & 255, i & 255);
    int nbad = 0;
    aor_pubset *s = aor_pubset_parse(text, off, &nbad);
    assert_non_null(s);
    assert_int_equal(aor_pubset_addr_count(s), AOR_PUBFILE_MAX_ADDRS);
    assert_int_equal(nbad, 100);
    char host[254];
    /* lines were in a different order than the sorted table: binary search finds them */
    assert_int_equal(match(s, "10.0.0.1", 443, host), 1);
    assert_int_equal(match(s, "10.31.255.1", 443, host), 1);
    assert_int_equal(match(s, "10.32.0.1", 443, host), 0);
    aor_pubset_free(s);
    free(text);
}

static void write_file(const char *path, const char *text) {
    char tmp[512];
    snprintf(tmp, sizeof(tmp), "%s.tmp", path);
    FILE *f = fopen(tmp, "w");
    assert_non_null(f);
    fputs(text, f);
    fclose(f);
    assert_int_equal(rename(tmp, path), 0);
}

static void test_live_reload(void **state) {
    char dir[] = "/tmp/aor-test-pubXXXXXX";
    assert_non_null(mkdtemp(dir));
    char path[512], sock[512];
    snprintf(path, sizeof(path), "%s/hosts", dir);
    snprintf(sock, sizeof(sock), "%s/aor.sock", dir);
    /* The hooks re-check the file next to AOR_SOCKET on their own clock: point it here. */
    setenv("AOR_SOCKET", sock, 1);
    aor_env_load();
    char host[254];
    aor_ip ip = ip_of("192.0.2.77");

    /* missing file: nothing published, no error */
    assert_int_equal(aor_hosts_refresh_from(path, 100), 0);
    write_file(path, "aor-hosts 1\na 192.0.2.77 7443 live.test\n");
    /* same second: not re-checked */
    assert_int_equal(aor_hosts_refresh_from(path, 100), 0);
    /* next second: loaded, its port is a redirect port */
    assert_int_equal(aor_hosts_refresh_from(path, 101), 1);
    assert_int_equal(aor_hosts_port_candidate(7443), 1);
    assert_int_equal(aor_hosts_recognise(&ip, 7443, host, sizeof(host), NULL), 3);
    assert_string_equal(host, "live.test");
    assert_int_equal(aor_hosts_recognise(&ip, 7444, host, sizeof(host), NULL), 0);
    char norm[254];
    assert_int_equal(aor_hosts_intercepted("LIVE.test.", norm, sizeof(norm)), 1);
    assert_string_equal(norm, "live.test");
    /* malformed replacement: ignored entirely */
    write_file(path, "garbage\n");
    assert_int_equal(aor_hosts_refresh_from(path, 102), 0);
    assert_int_equal(aor_hosts_intercepted("live.test", norm, sizeof(norm)), 0);
    write_file(path, "aor-hosts 1\na 192.0.2.77 7443 live.test\n");
    assert_int_equal(aor_hosts_refresh_from(path, 103), 1);
    /* a host of another length replaces it: names are pre-filtered by length, and the
     * filter follows the published set both ways */
    write_file(path, "aor-hosts 1\na 192.0.2.78 7443 longer-live.test\n");
    assert_int_equal(aor_hosts_refresh_from(path, 104), 1);
    assert_int_equal(aor_hosts_intercepted("Longer-Live.test.", norm, sizeof(norm)), 1);
    assert_string_equal(norm, "longer-live.test");
    assert_int_equal(aor_hosts_intercepted("live.test", norm, sizeof(norm)), 0);
    /* the hooks' pre-check: the published host passes (in any case, with its trailing
     * dot too); a name of its length that is not it does not (the Bloom filter) */
    assert_int_equal(aor_hosts_maybe("longer-live.test"), 1);
    assert_int_equal(aor_hosts_maybe("LONGER-LIVE.TEST."), 1);
    assert_int_equal(aor_hosts_maybe("Longer-Live.test"), 1);
    assert_int_equal(aor_hosts_maybe("xxxxxxxxxxxxxxxx"), 0);
    assert_int_equal(aor_hosts_maybe("longer-live.tesu"), 0);
    assert_int_equal(aor_hosts_maybe("live.test"), 0); /* no longer published */
    assert_int_equal(aor_hosts_maybe(NULL), 0);
    assert_int_equal(aor_hosts_maybe(""), 0);
    assert_int_equal(aor_hosts_maybe("."), 0);
    char longname[300];
    memset(longname, 'a', sizeof longname - 1);
    longname[sizeof longname - 1] = '\0';
    assert_int_equal(aor_hosts_maybe(longname), 0);
    /* removed: nothing published */
    unlink(path);
    assert_int_equal(aor_hosts_refresh_from(path, 105), 0);
    assert_int_equal(aor_hosts_intercepted("longer-live.test", norm, sizeof(norm)), 0);
    rmdir(dir);
}

/* The built-in list through the hooks' pre-check: every built-in host passes in any
 * case and with a trailing dot; names of the same lengths that are not intercepted do
 * not (the Bloom filter), save a rare false positive, which the lists then refuse. */
static void test_prefilter_builtin(void **state) {
    unsetenv("AOR_HOSTS");
    unsetenv("AOR_SOCKET");
    aor_env_load();
    aor_hosts_init();
    aor_hostlist *b = aor_hostlist_builtin();
    assert_non_null(b);
    assert_true(aor_hostlist_count(b) > 0);
    for (size_t i = 0; i < aor_hostlist_count(b); i++) {
        const char *h = aor_hostlist_name(b, i);
        char up[300];
        size_t n = strlen(h);
        assert_true(n + 2 < sizeof up);
        for (size_t k = 0; k < n; k++)
            up[k] = (h[k] >= 'a' && h[k] <= 'z') ? (char)(h[k] - 'a' + 'A') : h[k];
        up[n] = '.';
        up[n + 1] = '\0';
        assert_int_equal(aor_hosts_maybe(h), 1);
        assert_int_equal(aor_hosts_maybe(up), 1);
        assert_int_equal(aor_hosts_intercepted(up, NULL, 0), 1);
    }
    aor_hostlist_free(b);
    assert_int_equal(aor_hosts_maybe("api.github.com"), 0); /* api.openai.com's length */
    assert_int_equal(aor_hosts_maybe("localhost"), 0);
    /* 2,000 names of api.openai.com's length: false positives stay rare */
    int passed = 0;
    for (int i = 0; i < 2000; i++) {
        char name[32];
        snprintf(name, sizeof name, "api.q%05d.com", i);
        assert_int_equal((int)strlen(name), 14);
        if (aor_hosts_maybe(name)) {
            passed++;
            assert_int_equal(aor_hosts_intercepted(name, NULL, 0), 0);
        }
    }
    assert_true(passed < 20);
    /* a second init keeps what is published in the filter */
    char dir[] = "/tmp/aor-test-pubXXXXXX";
    assert_non_null(mkdtemp(dir));
    char path[512], sock[512];
    snprintf(path, sizeof(path), "%s/hosts", dir);
    snprintf(sock, sizeof(sock), "%s/aor.sock", dir);
    setenv("AOR_SOCKET", sock, 1); /* the hooks' own re-check reads the same file */
    aor_env_load();
    write_file(path, "aor-hosts 1\nh published.example 443\n");
    assert_int_equal(aor_hosts_refresh_from(path, 200), 1);
    assert_int_equal(aor_hosts_maybe("published.example"), 1);
    aor_hosts_init();
    assert_int_equal(aor_hosts_maybe("published.example"), 1);
    assert_int_equal(aor_hosts_intercepted("published.example", NULL, 0), 1);
    assert_int_equal(aor_hosts_maybe("api.openai.com"), 1);
    unlink(path);
    assert_int_equal(aor_hosts_refresh_from(path, 201), 0);
    assert_int_equal(aor_hosts_maybe("published.example"), 0);
    rmdir(dir);
}

/* AOR_HOSTS as a filter of the published set: only entries of hosts on the list. */
static void test_match_only(void **state) {
    aor_pubset *s = parse("aor-hosts 1\n"
                          "a 192.0.2.1 443 api.openai.com\n"
                          "a 192.0.2.2 443 api.anthropic.com\n"
                          "a 192.0.2.3 443 api.openai.com\n"
                          "a 192.0.2.3 443 api.anthropic.com\n"
                          "a 192.0.2.3 443 api.groq.com\n",
                          NULL);
    assert_non_null(s);
    char host[254];
    aor_ip a1 = ip_of("192.0.2.1"), a2 = ip_of("192.0.2.2"), a3 = ip_of("192.0.2.3");
    aor_hostlist *one = aor_hostlist_parse("api.anthropic.com", NULL);
    aor_hostlist *two = aor_hostlist_parse("API.Anthropic.com., api.groq.com", NULL);
    aor_hostlist *none = aor_hostlist_parse("", NULL);
    assert_non_null(one);
    assert_non_null(two);
    assert_non_null(none);
    assert_int_equal(aor_pubset_match_only(s, &a1, 443, one, host, sizeof(host)), 0);
    assert_int_equal(aor_pubset_match_only(s, &a2, 443, one, host, sizeof(host)), 1);
    assert_string_equal(host, "api.anthropic.com");
    /* a shared address: the one listed host is named, the others do not count */
    assert_int_equal(aor_pubset_match_only(s, &a3, 443, one, host, sizeof(host)), 1);
    assert_string_equal(host, "api.anthropic.com");
    assert_int_equal(aor_pubset_match_only(s, &a3, 443, two, host, sizeof(host)), 2);
    assert_string_equal(host, "");
    assert_int_equal(aor_pubset_match_only(s, &a1, 443, two, host, sizeof(host)), 0);
    /* an empty list counts nothing; NULL counts everything (= aor_pubset_match) */
    assert_int_equal(aor_pubset_match_only(s, &a2, 443, none, host, sizeof(host)), 0);
    assert_int_equal(aor_pubset_match_only(s, &a3, 443, none, host, sizeof(host)), 0);
    assert_int_equal(aor_pubset_match_only(s, &a1, 443, NULL, host, sizeof(host)), 1);
    assert_string_equal(host, "api.openai.com");
    assert_int_equal(aor_pubset_match_only(s, &a3, 443, NULL, host, sizeof(host)), 2);
    aor_hostlist_free(one);
    aor_hostlist_free(two);
    aor_hostlist_free(none);
    aor_pubset_free(s);
}

/* Spec §2 "AOR_HOSTS overrides": set, it is the whole list of intercepted hosts; what
 * aord publishes counts only for hosts on it (QA: AOR_HOSTS=api.anthropic.com still
 * redirected api.openai.com while aord ran). Empty: nothing is intercepted. */
static void test_aor_hosts_is_whole_list(void **state) {
    char dir[] = "/tmp/aor-test-pubXXXXXX";
    assert_non_null(mkdtemp(dir));
    char path[512], sock[512], host[254];
    snprintf(path, sizeof(path), "%s/hosts", dir);
    snprintf(sock, sizeof(sock), "%s/aor.sock", dir);
    setenv("AOR_SOCKET", sock, 1); /* the hooks' own re-check reads the same file */
    aor_env_load();
    write_file(path, "aor-hosts 1\n"
                     "h pubonly.test 9443\n"
                     "a 192.0.2.1 443 api.openai.com\n"
                     "a 192.0.2.2 443 api.anthropic.com\n"
                     "a 192.0.2.3 443 api.openai.com\n"
                     "a 192.0.2.3 443 api.anthropic.com\n"
                     "a 192.0.2.4 9443 pubonly.test\n");
    aor_ip a1 = ip_of("192.0.2.1"), a2 = ip_of("192.0.2.2"), a3 = ip_of("192.0.2.3");
    aor_ip a4 = ip_of("192.0.2.4");

    /* AOR_HOSTS unset: built-in list plus everything published */
    unsetenv("AOR_HOSTS");
    aor_hosts_init();
    assert_int_equal(aor_hosts_refresh_from(path, 300), 1);
    assert_int_equal(aor_hosts_recognise(&a1, 443, host, sizeof(host), NULL), 3);
    assert_string_equal(host, "api.openai.com");
    assert_int_equal(aor_hosts_recognise(&a3, 443, host, sizeof(host), NULL), 2);
    assert_int_equal(aor_hosts_recognise(&a4, 9443, host, sizeof(host), NULL), 3);
    assert_int_equal(aor_hosts_intercepted("pubonly.test", NULL, 0), 1);

    /* AOR_HOSTS=api.anthropic.com: only its entries */
    setenv("AOR_HOSTS", "api.anthropic.com", 1);
    aor_hosts_init();
    assert_int_equal(aor_hosts_refresh_from(path, 301), 1);
    assert_int_equal(aor_hosts_recognise(&a1, 443, host, sizeof(host), NULL), 0);
    assert_int_equal(aor_hosts_recognise(&a2, 443, host, sizeof(host), NULL), 3);
    assert_string_equal(host, "api.anthropic.com");
    assert_int_equal(aor_hosts_recognise(&a3, 443, host, sizeof(host), NULL), 3);
    assert_string_equal(host, "api.anthropic.com");
    assert_int_equal(aor_hosts_recognise(&a4, 9443, host, sizeof(host), NULL), 0);
    assert_int_equal(aor_hosts_intercepted("api.openai.com", NULL, 0), 0);
    assert_int_equal(aor_hosts_intercepted("pubonly.test", NULL, 0), 0);
    assert_int_equal(aor_hosts_maybe("pubonly.test"), 0);
    assert_int_equal(aor_hosts_intercepted("api.anthropic.com", NULL, 0), 1);

    /* AOR_HOSTS="": nothing at all */
    setenv("AOR_HOSTS", "", 1);
    aor_hosts_init();
    assert_int_equal(aor_hosts_refresh_from(path, 302), 1);
    assert_int_equal(aor_hosts_recognise(&a1, 443, host, sizeof(host), NULL), 0);
    assert_int_equal(aor_hosts_recognise(&a2, 443, host, sizeof(host), NULL), 0);
    assert_int_equal(aor_hosts_recognise(&a3, 443, host, sizeof(host), NULL), 0);
    assert_int_equal(aor_hosts_intercepted("api.anthropic.com", NULL, 0), 0);
    assert_int_equal(aor_hosts_intercepted("pubonly.test", NULL, 0), 0);

    unsetenv("AOR_HOSTS");
    aor_hosts_init();
    unlink(path);
    assert_int_equal(aor_hosts_refresh_from(path, 303), 0);
    rmdir(dir);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_parse_good),          cmocka_unit_test(test_ambiguous),
        cmocka_unit_test(test_host_with_two_ports), cmocka_unit_test(test_bad_lines_ignored),
        cmocka_unit_test(test_header_required),     cmocka_unit_test(test_size_bounds),
        cmocka_unit_test(test_live_reload),         cmocka_unit_test(test_prefilter_builtin),
        cmocka_unit_test(test_match_only),          cmocka_unit_test(test_aor_hosts_is_whole_list),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
