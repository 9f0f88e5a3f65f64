/* Plain-HTTP test client with a non-blocking connect (tests/e2e/test_shim_clients.py):
 * socket(SOCK_NONBLOCK), connect() → 0 or EINPROGRESS, poll(POLLOUT), then
 * getsockopt(SO_ERROR) must be 0 — the way event-loop clients learn that a connect
 * finished. Then a chat-completion request, and the answer read with poll(POLLIN).
 *
 *   http_nonblock_poll HOST PORT
 *
 * Output: see http_probe.h ("connect immediate" when libaor.so redirected the connect:
 * a redirect completes at once). */
#include "http_probe.h"

#include <poll.h>

static void wait_for(int fd, short events) {
    struct pollfd p = {.fd = fd, .events = events};
    int n;
    do {
        n = poll(&p, 1, HP_WAIT_MS);
    } while (n < 0 && errno == EINTR);
    if (n < 0)
        hp_fail("poll: %s", strerror(errno));
    if (n == 0)
        hp_fail("poll: no event within %d ms (events 0x%x)", HP_WAIT_MS, (unsigned)events);
    if ((p.revents & (POLLERR | POLLNVAL)) && !(p.revents & events))
        hp_fail("poll: revents 0x%x", (unsigned)p.revents);
}

int main(int argc, char **argv) {
    if (argc != 3) {
        fprintf(stderr, "usage: http_nonblock_poll HOST PORT\n");
        return 2;
    }
    alarm(HP_DEADLINE_S);
    struct addrinfo *res = hp_resolve(argv[1], argv[2]);
    int fd =
        socket(res->ai_family, res->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, res->ai_protocol);
    if (fd < 0)
        hp_fail("socket: %s", strerror(errno));
    int rc = connect(fd, res->ai_addr, res->ai_addrlen);
    freeaddrinfo(res);
    if (rc != 0 && errno != EINPROGRESS)
        hp_fail("connect: %s", strerror(errno));
    printf("connect %s\n", rc == 0 ? "immediate" : "inprogress");
    wait_for(fd, POLLOUT);
    int soerr = -1;
    socklen_t sl = sizeof soerr;
    if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &soerr, &sl) != 0)
        hp_fail("getsockopt SO_ERROR: %s", strerror(errno));
    if (soerr != 0)
        hp_fail("connect failed: SO_ERROR %s", strerror(soerr));

    char req[1024];
    size_t len = hp_request(req, sizeof req, argv[1]), off = 0;
    while (off < len) {
        ssize_t w = send(fd, req + off, len - off, MSG_NOSIGNAL);
        if (w < 0 && (errno == EAGAIN || errno == EINTR)) {
            wait_for(fd, POLLOUT);
            continue;
        }
        if (w < 0)
            hp_fail("send: %s", strerror(errno));
        off += (size_t)w;
    }

    hp_answer a = {0};
    char buf[4096];
    while (!hp_complete(&a)) {
        wait_for(fd, POLLIN);
        ssize_t r = recv(fd, buf, sizeof buf, 0);
        if (r < 0 && (errno == EAGAIN || errno == EINTR))
            continue;
        if (r < 0)
            hp_fail("recv: %s", strerror(errno));
        if (r == 0)
            break;
        hp_append(&a, buf, (size_t)r);
    }
    hp_report(&a);
    free(a.data);
    close(fd);
    return 0;
}
