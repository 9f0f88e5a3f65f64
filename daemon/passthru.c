#include "passthru.h"

#include "log.h"

#include <arpa/inet.h>
#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define PIPE_HIGH (1024 * 1024) /* bytes queued toward one side before reading pauses */

typedef struct {
    struct bufferevent *side[2]; /* 0: client, 1: upstream */
    int closing[2];              /* side i got EOF/error: close the other once flushed */
} pipe_pair;

static void pair_free(pipe_pair *pp) {
    for (int i = 0; i < 2; i++) {
        if (pp->side[i])
            bufferevent_free(pp->side[i]);
    }
    free(pp);
}

static int index_of(pipe_pair *pp, struct bufferevent *bev) {
    return pp->side[0] == bev ? 0 : 1;
}

static void on_read(struct bufferevent *bev, void *arg) {
    pipe_pair *pp = arg;
    int i = index_of(pp, bev);
    struct bufferevent *other = pp->side[1 - i];
    evbuffer_add_buffer(bufferevent_get_output(other), bufferevent_get_input(bev));
    if (evbuffer_get_length(bufferevent_get_output(other)) > PIPE_HIGH)
        bufferevent_disable(bev, EV_READ);
}

static void on_write(struct bufferevent *bev, void *arg) {
    pipe_pair *pp = arg;
    int i = index_of(pp, bev);
    if (pp->closing[1 - i] && evbuffer_get_length(bufferevent_get_output(bev)) == 0) {
        pair_free(pp);
        return;
    }
    if (!pp->closing[1 - i])
        bufferevent_enable(pp->side[1 - i], EV_READ);
}

static void on_event(struct bufferevent *bev, short what, void *arg) {
    pipe_pair *pp = arg;
    int i = index_of(pp, bev);
    if (what & BEV_EVENT_CONNECTED)
        return;
    if (what & BEV_EVENT_ERROR && i == 1)
        aor_debug("pass-through: upstream connection failed");
    /* Move what is left, then close the other side once it is flushed. */
    struct bufferevent *other = pp->side[1 - i];
    evbuffer_add_buffer(bufferevent_get_output(other), bufferevent_get_input(bev));
    pp->closing[i] = 1;
    if (pp->closing[1 - i] || evbuffer_get_length(bufferevent_get_output(other)) == 0) {
        pair_free(pp);
        return;
    }
    bufferevent_disable(bev, EV_READ | EV_WRITE);
}

void aor_passthru_start(aor_daemon *d, int fd, const char *ip, int port) {
    struct sockaddr_storage ss;
    memset(&ss, 0, sizeof ss);
    socklen_t sl;
    struct sockaddr_in *s4 = (struct sockaddr_in *)&ss;
    struct sockaddr_in6 *s6 = (struct sockaddr_in6 *)&ss;
    if (inet_pton(AF_INET, ip, &s4->sin_addr) == 1) {
        s4->sin_family = AF_INET;
        s4->sin_port = htons((unsigned short)port);
        sl = sizeof *s4;
    } else if (inet_pton(AF_INET6, ip, &s6->sin6_addr) == 1) {
        s6->sin6_family = AF_INET6;
        s6->sin6_port = htons((unsigned short)port);
        sl = sizeof *s6;
    } else {
        close(fd);
        return;
    }
    pipe_pair *pp = calloc(1, sizeof *pp);
    if (!pp) {
        close(fd);
        return;
    }
    pp->side[0] = bufferevent_socket_new(d->base, fd, BEV_OPT_CLOSE_ON_FREE);
    if (!pp->side[0]) {
        close(fd);
        free(pp);
        return;
    }
    pp->side[1] = bufferevent_socket_new(d->base, -1, BEV_OPT_CLOSE_ON_FREE);
    if (!pp->side[1] ||
        bufferevent_socket_connect(pp->side[1], (struct sockaddr *)&ss, (int)sl) < 0) {
        aor_warn("pass-through to %s:%d failed to start", ip, port);
        pair_free(pp);
        return;
    }
    for (int i = 0; i < 2; i++) {
        bufferevent_setcb(pp->side[i], on_read, on_write, on_event, pp);
        bufferevent_enable(pp->side[i], EV_READ | EV_WRITE);
    }
}
