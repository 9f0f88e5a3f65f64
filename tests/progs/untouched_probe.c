/* Test client for "nothing else changes" (issue 4 item 4): under LD_PRELOAD=libaor.so,
 * with aord running, none of these may be redirected or altered:
 *   numeric   getaddrinfo("127.0.0.1", "443", AI_NUMERICHOST) answers that address
 *   nullhints getaddrinfo("localhost", NULL, NULL) answers (hints == NULL is allowed)
 *   loopback  a TCP listener bound to 127.0.0.1 and a client connecting to it: peer and
 *             socket names are the real ones, bytes flow
 *   bind      a client that binds 127.0.0.1:0 before connecting keeps that address
 *   udp       a UDP datagram to a local UDP socket arrives
 *   tsc       (x86-64) lookups and connects for 300 ms, then prctl(PR_SET_TSC,
 *             PR_TSC_SIGSEGV) and 200 ms more: the shim's counter gate (shim/tick.c)
 *             must not read the TSC after that (it crashed the program)
 * Prints "<name> ok" per check and "ok" at the end (exit 0), or "FAIL <why>" (exit 1). */
#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

static void fail(const char *why) {
    printf("FAIL %s\n", why);
    exit(1);
}

static int listener(struct sockaddr_in *addr) {
    int s = socket(AF_INET, SOCK_STREAM, 0);
    socklen_t len = sizeof *addr;
    memset(addr, 0, sizeof *addr);
    addr->sin_family = AF_INET;
    addr->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (s < 0 || bind(s, (struct sockaddr *)addr, sizeof *addr) < 0 || listen(s, 4) < 0 ||
        getsockname(s, (struct sockaddr *)addr, &len) < 0)
        fail("listener");
    return s;
}

static void check_pair(int cli, int srv, const struct sockaddr_in *to, const char *name) {
    struct sockaddr_in peer, self;
    socklen_t pl = sizeof peer, sl = sizeof self;
    if (getpeername(cli, (struct sockaddr *)&peer, &pl) < 0 || peer.sin_port != to->sin_port ||
        peer.sin_addr.s_addr != to->sin_addr.s_addr)
        fail("getpeername is not the listener");
    if (getsockname(cli, (struct sockaddr *)&self, &sl) < 0 || self.sin_family != AF_INET)
        fail("getsockname");
    int a = accept(srv, NULL, NULL);
    char buf[8] = {0};
    if (a < 0 || write(cli, "ping", 4) != 4 || read(a, buf, sizeof buf) != 4 ||
        memcmp(buf, "ping", 4) != 0)
        fail("bytes over loopback");
    close(a);
    printf("%s ok\n", name);
}

/* Unrouted lookups and connects (the shim's hooks) for ms milliseconds, timed with the
 * clock_gettime system call itself (the vDSO's reads the TSC too). */
static void lookups_for(long ms) {
    struct sockaddr_in to;
    int srv = listener(&to);
    struct timespec t0, t;
    syscall(SYS_clock_gettime, CLOCK_MONOTONIC, &t0);
    do {
        struct addrinfo *res = NULL;
        if (getaddrinfo("localhost", "80", NULL, &res) == 0)
            freeaddrinfo(res);
        int c = socket(AF_INET, SOCK_STREAM, 0);
        if (c < 0 || connect(c, (struct sockaddr *)&to, sizeof to) < 0)
            fail("connect in the lookup loop");
        close(c);
        int a = accept(srv, NULL, NULL);
        if (a >= 0)
            close(a);
        syscall(SYS_clock_gettime, CLOCK_MONOTONIC, &t);
    } while ((t.tv_sec - t0.tv_sec) * 1000 + (t.tv_nsec - t0.tv_nsec) / 1000000 < ms);
    close(srv);
}

int main(void) {
    struct addrinfo hints, *res = NULL;
    memset(&hints, 0, sizeof hints);
    hints.ai_flags = AI_NUMERICHOST;
    hints.ai_socktype = SOCK_STREAM;
    if (getaddrinfo("127.0.0.1", "443", &hints, &res) != 0 || !res ||
        ((struct sockaddr_in *)res->ai_addr)->sin_addr.s_addr != htonl(INADDR_LOOPBACK))
        fail("AI_NUMERICHOST");
    freeaddrinfo(res);
    printf("numeric ok\n");

    res = NULL;
    if (getaddrinfo("localhost", NULL, NULL, &res) != 0 || !res)
        fail("hints == NULL");
    freeaddrinfo(res);
    printf("nullhints ok\n");

    struct sockaddr_in to;
    int srv = listener(&to);
    int cli = socket(AF_INET, SOCK_STREAM, 0);
    if (cli < 0 || connect(cli, (struct sockaddr *)&to, sizeof to) < 0)
        fail("loopback connect");
    check_pair(cli, srv, &to, "loopback");
    close(cli);

    cli = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in local;
    memset(&local, 0, sizeof local);
    local.sin_family = AF_INET;
    local.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (cli < 0 || bind(cli, (struct sockaddr *)&local, sizeof local) < 0)
        fail("bind to localhost");
    socklen_t ll = sizeof local;
    getsockname(cli, (struct sockaddr *)&local, &ll);
    if (connect(cli, (struct sockaddr *)&to, sizeof to) < 0)
        fail("connect after bind");
    struct sockaddr_in after;
    socklen_t al = sizeof after;
    if (getsockname(cli, (struct sockaddr *)&after, &al) < 0 || after.sin_port != local.sin_port)
        fail("bound address changed");
    check_pair(cli, srv, &to, "bind");
    close(cli);
    close(srv);

    int u1 = socket(AF_INET, SOCK_DGRAM, 0), u2 = socket(AF_INET, SOCK_DGRAM, 0);
    struct sockaddr_in ua;
    memset(&ua, 0, sizeof ua);
    ua.sin_family = AF_INET;
    ua.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t ul = sizeof ua;
    char buf[8] = {0};
    if (u1 < 0 || u2 < 0 || bind(u1, (struct sockaddr *)&ua, sizeof ua) < 0 ||
        getsockname(u1, (struct sockaddr *)&ua, &ul) < 0 ||
        connect(u2, (struct sockaddr *)&ua, sizeof ua) < 0 || send(u2, "dgram", 5, 0) != 5 ||
        recv(u1, buf, sizeof buf, 0) != 5)
        fail("udp");
    printf("udp ok\n");

#if defined(__x86_64__) && defined(PR_SET_TSC)
    lookups_for(300);
    if (prctl(PR_SET_TSC, PR_TSC_SIGSEGV, 0, 0, 0) != 0)
        fail("prctl PR_SET_TSC");
    lookups_for(200);
    printf("tsc ok\n");
#endif
    printf("ok\n");
    return 0;
}
