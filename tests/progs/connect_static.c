/* A statically linked client (tests/e2e/test_shim_basic.py): LD_PRELOAD cannot reach it,
 * so it is never redirected (docs/shim.md "Static binaries").
 *
 *   connect_static IPV4 PORT
 *
 * Connects to the numeric address, prints "peer IP PORT" and "connect ok" or
 * "connect failed <error>"; exit 0 when connected. No name resolution (a static glibc
 * cannot use NSS). */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

int main(int argc, char **argv) {
    if (argc != 3) {
        fprintf(stderr, "usage: connect_static IPV4 PORT\n");
        return 2;
    }
    struct sockaddr_in sin;
    memset(&sin, 0, sizeof(sin));
    sin.sin_family = AF_INET;
    char *end = NULL;
    long port = strtol(argv[2], &end, 10);
    if (inet_pton(AF_INET, argv[1], &sin.sin_addr) != 1 || *end != '\0' || port < 1 ||
        port > 65535) {
        fprintf(stderr, "connect_static: bad address\n");
        return 2;
    }
    sin.sin_port = htons((uint16_t)port);
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    if (fd < 0 || connect(fd, (struct sockaddr *)&sin, sizeof(sin)) != 0) {
        printf("connect failed %s\n", strerror(errno));
        return 1;
    }
    struct sockaddr_in peer;
    socklen_t pl = sizeof(peer);
    char buf[32];
    getpeername(fd, (struct sockaddr *)&peer, &pl);
    inet_ntop(AF_INET, &peer.sin_addr, buf, sizeof(buf));
    printf("peer %s %d\nconnect ok\n", buf, ntohs(peer.sin_port));
    close(fd);
    return 0;
}
