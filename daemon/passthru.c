#include "passthru.h"

#include "log.h"

#include <arpa/inet.h>
#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/event.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#define PIPE_HIGH (1024 * 1024) /* bytes queued toward one side before reading pauses */
#define HUP_CHECK_S 1           /* how often a half-closed client is looked at */
#define FLUSH_MAX_S 60          /* how long a broken pair flushes toward the other side */

typedef struct pipe_pair {
    struct pipe_pair *prev, *next; /* every open pair, for aor_passthru_close_all */
    struct bufferevent *side[2];   /* 0: client, 1: upstream */
    int eof[2];                    /* side i sent EOF: nothing more to read from it */
    int shut[2];                   /* side i's sending direction was shut down (SHUT_WR) */
    int broken;                    /* a side failed: flush what is queued, then close all */
    struct event *hup_ev;          /* after the client's EOF, or while its reading is paused:
                                      is it gone for good? */
    int hup_ticks;                 /* ticks since the pair broke with bytes still queued */
} pipe_pair;

static pipe_pair *g_pairs; /* aord's one event-loop thread only */

static void pair_free(pipe_pair *pp) {
    if (pp->prev)
        pp->prev->next = pp->next;
    else if (g_pairs == pp)
        g_pairs = pp->next;
    if (pp->next)
        pp->next->prev = pp->prev;
    if (pp->hup_ev)
        event_free(pp->hup_ev);
    for (int i = 0; i < 2; i++) {
        if (pp->side[i])
            bufferevent_free(pp->side[i]);
    }
    free(pp);
}

static int index_of(pipe_pair *pp, struct bufferevent *bev) {
    return pp->side[0] == bev ? 0 : 1;
}

static size_t queued(pipe_pair *pp, int i) {
    return evbuffer_get_length(bufferevent_get_output(pp->side[i]));
}

/* Passes side i's end on once everything toward it is written: shuts down the writing
 * direction of side i when side 1-i has ended (a half-close, spec §2: the bytes and
 * their order are the client's), or frees the pair when a side broke. Returns 1 when
 * the pair was freed. */
static int settle(pipe_pair *pp, int i) {
    if (queued(pp, i) > 0)
        return 0;
    if (pp->broken) {
        pair_free(pp);
        return 1;
    }
    if (pp->eof[1 - i] && !pp->shut[i]) {
        shutdown(bufferevent_getfd(pp->side[i]), SHUT_WR);
        pp->shut[i] = 1;
    }
    if (pp->shut[0] && pp->shut[1]) {
        pair_free(pp); /* both directions are done */
        return 1;
    }
    return 0;
}

static void watch_client(pipe_pair *pp);

static void on_read(struct bufferevent *bev, void *arg) {
    pipe_pair *pp = arg;
    int i = index_of(pp, bev);
    struct bufferevent *other = pp->side[1 - i];
    evbuffer_add_buffer(bufferevent_get_output(other), bufferevent_get_input(bev));
    if (evbuffer_get_length(bufferevent_get_output(other)) > PIPE_HIGH) {
        bufferevent_disable(bev, EV_READ);
        if (i == 0)
            watch_client(pp); /* not read now: its close would go unseen (QA) */
    }
}

/* Everything queued toward side i is written. */
static void on_write(struct bufferevent *bev, void *arg) {
    pipe_pair *pp = arg;
    int i = index_of(pp, bev);
    if (settle(pp, i))
        return;
    if (!pp->eof[1 - i] && !pp->broken)
        bufferevent_enable(pp->side[1 - i], EV_READ);
}

/* 1 when the client (side 0, the shim's Unix socket) closed its connection, not only
 * its sending side: a Unix socket shows POLLHUP once its peer is closed. */
static int client_gone(pipe_pair *pp) {
    struct pollfd pfd = {.fd = bufferevent_getfd(pp->side[0]), .events = 0};
    return poll(&pfd, 1, 0) == 1 && (pfd.revents & POLLHUP);
}

/* Side i is gone both ways (an error, a timeout, a client closed for good): what it sent
 * goes on to the other side, then the pair is closed. Returns 1 when it was freed. */
static int side_broken(pipe_pair *pp, int i) {
    struct bufferevent *bev = pp->side[i], *other = pp->side[1 - i];
    pp->broken = 1;
    bufferevent_disable(bev, EV_READ | EV_WRITE);
    evbuffer_drain(bufferevent_get_output(bev), queued(pp, i));
    bufferevent_disable(other, EV_READ);
    if (settle(pp, 1 - i))
        return 1;
    watch_client(pp); /* bounds the flush of what is left (on_hup_check) */
    return 0;
}

/* Every HUP_CHECK_S once watch_client started it (after the client's EOF, while its
 * reading is paused, or once the pair broke): a client that closed for good takes the
 * pair with it (QA: a target that kept its side open and silent held both descriptors of
 * every such connection for as long as it liked), and a broken pair's flush is bounded. */
static void on_hup_check(evutil_socket_t fd, short what, void *arg) {
    (void)fd;
    (void)what;
    pipe_pair *pp = arg;
    if (!pp->broken) {
        if (client_gone(pp))
            side_broken(pp, 0);
        return;
    }
    /* Broken, and what the client sent is still queued toward a target that does not
     * read it: given up after FLUSH_MAX_S, as the kernel gives up on an orphaned socket
     * (QA: both descriptors and 2 MB were kept for good). */
    if (++pp->hup_ticks * HUP_CHECK_S >= FLUSH_MAX_S)
        pair_free(pp);
}

/* Looks at the client every HUP_CHECK_S from now on (once started, until the pair ends). */
static void watch_client(pipe_pair *pp) {
    if (pp->hup_ev)
        return;
    pp->hup_ev = event_new(bufferevent_get_base(pp->side[0]), -1, EV_PERSIST, on_hup_check, pp);
    struct timeval tv = {HUP_CHECK_S, 0};
    if (pp->hup_ev)
        event_add(pp->hup_ev, &tv);
}

static void on_event(struct bufferevent *bev, short what, void *arg) {
    pipe_pair *pp = arg;
    int i = index_of(pp, bev);
    if (what & BEV_EVENT_CONNECTED)
        return;
    if (what & BEV_EVENT_ERROR && i == 1)
        aor_debug("pass-through: upstream connection failed");
    /* Move what is left toward the other side. */
    struct bufferevent *other = pp->side[1 - i];
    evbuffer_add_buffer(bufferevent_get_output(other), bufferevent_get_input(bev));
    if ((what & BEV_EVENT_EOF) && (what & BEV_EVENT_READING) && !(what & BEV_EVENT_ERROR) &&
        !(i == 0 && client_gone(pp))) {
        /* A half-close: the other direction stays open until its sender ends too. */
        pp->eof[i] = 1;
        bufferevent_disable(bev, EV_READ);
        if (settle(pp, 1 - i))
            return;
        if (i == 0)
            watch_client(pp);
        return;
    }
    /* An error (or a timeout, or a client closed for good): side i is gone both ways.
     * Flush the rest, then close. */
    side_broken(pp, i);
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
    pp->next = g_pairs;
    if (g_pairs)
        g_pairs->prev = pp;
    g_pairs = pp;
    pp->side[0] = bufferevent_socket_new(d->base, fd, BEV_OPT_CLOSE_ON_FREE);
    if (!pp->side[0]) {
        close(fd);
        pair_free(pp);
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

void aor_passthru_close_all(void) {
    while (g_pairs)
        pair_free(g_pairs); /* unlinks itself */
}
