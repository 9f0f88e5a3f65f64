/* Plain-HTTP test client that registers its socket with epoll only AFTER connect()
 * (tests/e2e/test_shim_clients.py): the pattern libaor.so supports, since its
 * redirect replaces the file description behind the fd inside connect().
 *
 *   http_epoll_after HOST PORT
 *
 * Resolves HOST with getaddrinfo, connects the first address (blocking), makes the
 * socket non-blocking, adds it to an epoll set (EPOLLOUT), writes a chat-completion
 * request, then waits for EPOLLIN and reads the answer to its end. Output: see
 * http_probe.h. */
#include "http_probe.h"

#include <fcntl.h>
#include <sys/epoll.h>

static void wait_for(int ep, int fd, unsigned events) {
    struct epoll_event ev = {.events = events, .data.fd = fd}, out;
    if (epoll_ctl(ep, EPOLL_CTL_MOD, fd, &ev) != 0)
        hp_fail("epoll_ctl MOD: %s", strerror(errno));
    int n;
    do {
        n = epoll_wait(ep, &out, 1, HP_WAIT_MS);
    } while (n < 0 && errno == EINTR);
    if (n < 0)
        hp_fail("epoll_wait: %s", strerror(errno));
    if (n == 0)
        hp_fail("epoll_wait: no event within %d ms (events 0x%x)", HP_WAIT_MS, events);
}

int main(int argc, char **argv) {
    if (argc != 3) {
        fprintf(stderr, "usage: http_epoll_after HOST PORT\n");
        return 2;
    }
    alarm(HP_DEADLINE_S);
    struct addrinfo *res = hp_resolve(argv[1], argv[2]);
    int fd = socket(res->ai_family, res->ai_socktype | SOCK_CLOEXEC, res->ai_protocol);
    if (fd < 0)
        hp_fail("socket: %s", strerror(errno));
    if (connect(fd, res->ai_addr, res->ai_addrlen) != 0)
        hp_fail("connect: %s", strerror(errno));
    freeaddrinfo(res);
    printf("connect immediate\n");
    int fl = fcntl(fd, F_GETFL);
    if (fl < 0 || fcntl(fd, F_SETFL, fl | O_NONBLOCK) != 0)
        hp_fail("fcntl O_NONBLOCK: %s", strerror(errno));

    /* Registered after connect(): the fd now refers to the redirected socket. */
    int ep = epoll_create1(EPOLL_CLOEXEC);
    if (ep < 0)
        hp_fail("epoll_create1: %s", strerror(errno));
    struct epoll_event ev = {.events = EPOLLOUT, .data.fd = fd};
    if (epoll_ctl(ep, EPOLL_CTL_ADD, fd, &ev) != 0)
        hp_fail("epoll_ctl ADD: %s", strerror(errno));

    char req[1024];
    size_t len = hp_request(req, sizeof req, argv[1]), off = 0;
    while (off < len) {
        wait_for(ep, fd, EPOLLOUT);
        ssize_t w = write(fd, req + off, len - off);
        if (w < 0 && (errno == EAGAIN || errno == EINTR))
            continue;
        if (w < 0)
            hp_fail("write: %s", strerror(errno));
        off += (size_t)w;
    }

    hp_answer a = {0};
    char buf[4096];
    while (!hp_complete(&a)) {
        wait_for(ep, fd, EPOLLIN);
        ssize_t r = read(fd, buf, sizeof buf);
        if (r < 0 && (errno == EAGAIN || errno == EINTR))
            continue;
        if (r < 0)
            hp_fail("read: %s", strerror(errno));
        if (r == 0)
            break; /* EOF ends an answer without a length */
        hp_append(&a, buf, (size_t)r);
    }
    hp_report(&a);
    free(a.data);
    close(ep);
    close(fd);
    return 0;
}
