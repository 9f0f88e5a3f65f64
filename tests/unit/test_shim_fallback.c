/* Unit tests: shim/fallback.c (offline fallback addresses and answers, spec §2 step 3). */
#include <arpa/inet.h>
#include <errno.h>
#include <netdb.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cmocka.h>

#include "fallback.h"
#include "hosts.h"
#include "ipaddr.h"

static void test_stable_and_in_range(void **state) {
    aor_ip a, b;
    aor_fallback_ip("api.openai.com", 0, &a);
    aor_fallback_ip("api.openai.com", 0, &b);
    assert_int_equal(aor_ip_cmp(&a, &b), 0);
    assert_true(aor_fallback_in_range(&a));
    aor_fallback_ip("api.anthropic.com", 0, &b);
    assert_int_not_equal(aor_ip_cmp(&a, &b), 0);
    aor_fallback_ip("api.openai.com", 1, &b); /* the next attempt differs */
    assert_int_not_equal(aor_ip_cmp(&a, &b), 0);
    assert_true(aor_fallback_in_range(&b));

    /* Many names: all inside 198.18.0.0/15, never .0 or .255, few collisions. */
    int collisions = 0;
    static aor_ip seen[5000];
    for (int i = 0; i < 5000; i++) {
        char name[64];
        snprintf(name, sizeof(name), "host%d.example.test", i);
        aor_fallback_ip(name, 0, &seen[i]);
        assert_int_equal(seen[i].family, AF_INET);
        assert_int_equal(seen[i].bytes[0], 198);
        assert_true(seen[i].bytes[1] == 18 || seen[i].bytes[1] == 19);
        assert_int_not_equal(seen[i].bytes[3], 0);
        assert_int_not_equal(seen[i].bytes[3], 255);
        for (int j = 0; j < i; j++)
            collisions += aor_ip_cmp(&seen[i], &seen[j]) == 0;
    }
    assert_true(collisions < 300); /* ~95 expected for 5000 names in 2^17 addresses */
}

static void test_in_range(void **state) {
    aor_ip ip;
    aor_ip_parse("198.18.0.1", 10, &ip);
    assert_true(aor_fallback_in_range(&ip));
    aor_ip_parse("198.19.255.254", 14, &ip);
    assert_true(aor_fallback_in_range(&ip));
    aor_ip_parse("198.20.0.1", 10, &ip);
    assert_false(aor_fallback_in_range(&ip));
    aor_ip_parse("198.17.255.255", 14, &ip);
    assert_false(aor_fallback_in_range(&ip));
}

static int count(const struct addrinfo *ai) {
    int n = 0;
    for (; ai != NULL; ai = ai->ai_next)
        n++;
    return n;
}

static void test_addrinfo_hints(void **state) {
    aor_ip ip;
    aor_ip_parse("198.18.7.9", 10, &ip);
    struct addrinfo hints, *res = NULL;
    char buf[64];

    /* hints NULL: like glibc, STREAM/tcp and DGRAM/udp for a service */
    assert_int_equal(aor_fallback_addrinfo("api.openai.com", "443", NULL, &ip, &res), 0);
    assert_int_equal(count(res), 2);
    assert_int_equal(res->ai_family, AF_INET);
    assert_int_equal(res->ai_socktype, SOCK_STREAM);
    assert_int_equal(res->ai_protocol, IPPROTO_TCP);
    assert_int_equal(res->ai_next->ai_socktype, SOCK_DGRAM);
    const struct sockaddr_in *in = (const struct sockaddr_in *)res->ai_addr;
    assert_int_equal(res->ai_addrlen, sizeof(*in));
    assert_int_equal(ntohs(in->sin_port), 443);
    assert_string_equal(inet_ntop(AF_INET, &in->sin_addr, buf, sizeof(buf)), "198.18.7.9");
    assert_null(res->ai_canonname);
    freeaddrinfo(res); /* glibc frees what we built: ASan checks the layout */

    /* no service: RAW too, port 0 */
    assert_int_equal(aor_fallback_addrinfo("h.test", NULL, NULL, &ip, &res), 0);
    assert_int_equal(count(res), 3);
    freeaddrinfo(res);

    memset(&hints, 0, sizeof(hints));
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    hints.ai_flags = AI_CANONNAME;
    assert_int_equal(aor_fallback_addrinfo("api.openai.com", "https", &hints, &ip, &res), 0);
    assert_int_equal(count(res), 1);
    assert_string_equal(res->ai_canonname, "api.openai.com");
    assert_int_equal(ntohs(((struct sockaddr_in *)res->ai_addr)->sin_port), 443);
    freeaddrinfo(res);

    /* IPv6 only with AI_V4MAPPED: the mapped address */
    hints.ai_family = AF_INET6;
    hints.ai_flags = AI_V4MAPPED;
    assert_int_equal(aor_fallback_addrinfo("h.test", "8443", &hints, &ip, &res), 0);
    assert_int_equal(res->ai_family, AF_INET6);
    const struct sockaddr_in6 *in6 = (const struct sockaddr_in6 *)res->ai_addr;
    assert_string_equal(inet_ntop(AF_INET6, &in6->sin6_addr, buf, sizeof(buf)),
                        "::ffff:198.18.7.9");
    assert_int_equal(ntohs(in6->sin6_port), 8443);
    freeaddrinfo(res);

    /* IPv6 only without it: cannot answer */
    hints.ai_flags = 0;
    assert_int_equal(aor_fallback_addrinfo("h.test", "443", &hints, &ip, &res), EAI_FAMILY);
    assert_null(res);

    /* protocol selects the matching socktype */
    memset(&hints, 0, sizeof(hints));
    hints.ai_protocol = IPPROTO_UDP;
    assert_int_equal(aor_fallback_addrinfo("h.test", "53", &hints, &ip, &res), 0);
    assert_int_equal(count(res), 1);
    assert_int_equal(res->ai_socktype, SOCK_DGRAM);
    freeaddrinfo(res);
}

static void test_addrinfo_errors(void **state) {
    aor_ip ip;
    aor_ip_parse("198.18.7.9", 10, &ip);
    struct addrinfo hints, *res = NULL;
    memset(&hints, 0, sizeof(hints));
    hints.ai_flags = AI_NUMERICSERV;
    assert_int_equal(aor_fallback_addrinfo("h.test", "https", &hints, &ip, &res), EAI_NONAME);
    hints.ai_flags = 0;
    assert_int_equal(aor_fallback_addrinfo("h.test", "70000", &hints, &ip, &res), EAI_SERVICE);
    assert_int_equal(aor_fallback_addrinfo("h.test", "no-such-service-x", &hints, &ip, &res),
                     EAI_SERVICE);
    hints.ai_socktype = SOCK_SEQPACKET;
    assert_int_equal(aor_fallback_addrinfo("h.test", "443", &hints, &ip, &res), EAI_SOCKTYPE);
    hints.ai_socktype = 0;
    hints.ai_family = AF_UNIX;
    assert_int_equal(aor_fallback_addrinfo("h.test", "443", &hints, &ip, &res), EAI_FAMILY);
    assert_null(res);
}

static void test_hostent(void **state) {
    aor_ip ip;
    aor_ip_parse("198.19.1.2", 10, &ip);
    struct hostent he;
    char small[16], buf[512];
    assert_int_equal(aor_fallback_hostent("api.openai.com", &ip, &he, small, sizeof(small)),
                     ERANGE);
    assert_int_equal(aor_fallback_hostent("api.openai.com", &ip, &he, buf + 1, sizeof(buf) - 1), 0);
    assert_string_equal(he.h_name, "api.openai.com");
    assert_int_equal(he.h_addrtype, AF_INET);
    assert_int_equal(he.h_length, 4);
    assert_null(he.h_aliases[0]);
    assert_non_null(he.h_addr_list[0]);
    assert_null(he.h_addr_list[1]);
    assert_memory_equal(he.h_addr_list[0], ip.bytes, 4);
    /* everything lives in the caller's buffer */
    assert_true(he.h_name >= buf && he.h_name < buf + sizeof(buf));
    assert_true((char *)he.h_addr_list >= buf && (char *)he.h_addr_list < buf + sizeof(buf));
}

static void test_fallback_picks_free_address(void **state) {
    /* aor_hosts_fallback is stable per name and records the address as synthetic. */
    aor_ip a, b, want;
    char host[254];
    int syn = 0;
    aor_hosts_fallback("fb-one.test", &a);
    aor_fallback_ip("fb-one.test", 0, &want);
    assert_int_equal(aor_ip_cmp(&a, &want), 0);
    aor_hosts_fallback("fb-one.test", &b);
    assert_int_equal(aor_ip_cmp(&a, &b), 0);
    assert_int_equal(aor_hosts_recognise(&a, 443, host, sizeof(host), &syn), 1);
    assert_string_equal(host, "fb-one.test");
    assert_int_equal(syn, 1);
    assert_int_equal(aor_hosts_recognise(&a, 80, host, sizeof(host), &syn), 0);
}

/* A Unix stream socket bound at path; listening with backlog when listen_q >= 0. */
static int unix_listener(const char *path, int listen_q) {
    struct sockaddr_un sun;
    memset(&sun, 0, sizeof(sun));
    sun.sun_family = AF_UNIX;
    snprintf(sun.sun_path, sizeof(sun.sun_path), "%s", path);
    int s = socket(AF_UNIX, SOCK_STREAM, 0);
    assert_true(s >= 0);
    assert_int_equal(bind(s, (struct sockaddr *)&sun, sizeof(sun)), 0);
    if (listen_q >= 0)
        assert_int_equal(listen(s, listen_q), 0);
    return s;
}

static void test_daemon_up(void **state) {
    char dir[] = "/tmp/aor-unit-fbXXXXXX", path[64], other[64];
    assert_non_null(mkdtemp(dir));
    snprintf(path, sizeof(path), "%s/aor.sock", dir);
    snprintf(other, sizeof(other), "%s/file", dir);

    /* no file */
    errno = 1234;
    assert_false(aor_fallback_daemon_up(path));
    assert_int_equal(errno, 1234); /* kept */
    /* a listener of this user: up; the probe's connection ends at once */
    int s = unix_listener(path, 16);
    assert_true(aor_fallback_daemon_up(path));
    int a = accept(s, NULL, NULL);
    assert_true(a >= 0);
    char c;
    assert_int_equal(recv(a, &c, 1, 0), 0); /* no byte, then the end */
    close(a);
    /* its queue full (backlog 0 takes one): still a listener, so up, never blocking */
    close(s);
    unlink(path);
    s = unix_listener(path, 0);
    int q = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0);
    struct sockaddr_un sun;
    memset(&sun, 0, sizeof(sun));
    sun.sun_family = AF_UNIX;
    snprintf(sun.sun_path, sizeof(sun.sun_path), "%s", path);
    assert_int_equal(connect(q, (struct sockaddr *)&sun, sizeof(sun)), 0);
    assert_true(aor_fallback_daemon_up(path));
    close(q);
    /* the daemon died (kill -9): the socket file stays, nobody listens */
    close(s);
    struct stat st;
    assert_int_equal(stat(path, &st), 0);
    assert_true(S_ISSOCK(st.st_mode));
    errno = 1234;
    assert_false(aor_fallback_daemon_up(path));
    assert_int_equal(errno, 1234);
    unlink(path);
    /* bound, never listening */
    s = unix_listener(path, -1);
    assert_false(aor_fallback_daemon_up(path));
    close(s);
    unlink(path);
    /* not a socket; no path; a path too long for sun_path */
    FILE *f = fopen(other, "w");
    assert_non_null(f);
    fclose(f);
    assert_false(aor_fallback_daemon_up(other));
    unlink(other);
    assert_false(aor_fallback_daemon_up(NULL));
    assert_false(aor_fallback_daemon_up(""));
    char longp[200];
    memset(longp, 'a', sizeof(longp) - 1);
    longp[0] = '/';
    longp[sizeof(longp) - 1] = '\0';
    assert_false(aor_fallback_daemon_up(longp));
    rmdir(dir);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_stable_and_in_range),
        cmocka_unit_test(test_in_range),
        cmocka_unit_test(test_addrinfo_hints),
        cmocka_unit_test(test_addrinfo_errors),
        cmocka_unit_test(test_hostent),
        cmocka_unit_test(test_fallback_picks_free_address),
        cmocka_unit_test(test_daemon_up),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
