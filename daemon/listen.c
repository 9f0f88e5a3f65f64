#include "listen.h"

#include "conn.h"
#include "log.h"
#include "paths.h"
#include "publish.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/inet_diag.h>
#include <linux/netlink.h>
#include <linux/sock_diag.h>
#include <netdb.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

static void on_accept_resume(evutil_socket_t fd, short what, void *arg) {
    aor_daemon *d = arg;
    if (d->unix_listener)
        evconnlistener_enable(d->unix_listener);
    if (d->tcp_listener)
        evconnlistener_enable(d->tcp_listener);
}

/* accept() failed. libevent calls this instead of logging each failure itself: out of
 * descriptors or memory, the listening sockets stay readable and it would call accept()
 * again at once, spinning a CPU and writing a warning per try (QA: ~1 GB of stderr in
 * 5 s). Both listeners pause for 100 ms instead (the connections wait in the backlog),
 * with one warning a minute; other errors are logged, as libevent did. */
static void on_accept_error(struct evconnlistener *l, void *arg) {
    aor_daemon *d = arg;
    int e = EVUTIL_SOCKET_ERROR();
    long now = (long)time(NULL);
    int limit = e == EMFILE || e == ENFILE || e == ENOBUFS || e == ENOMEM;
    if (!limit || now - d->accept_warned_at >= 60) {
        aor_warn("cannot accept a connection: %s%s", strerror(e),
                 limit ? "; new connections wait 100 ms at a time until descriptors are free "
                         "(this is said once a minute)"
                       : "");
        if (limit)
            d->accept_warned_at = now;
    }
    if (!limit)
        return;
    if (!d->accept_pause_ev)
        d->accept_pause_ev = evtimer_new(d->base, on_accept_resume, d);
    struct timeval tv = {0, 100000};
    if (!d->accept_pause_ev || evtimer_add(d->accept_pause_ev, &tv) != 0)
        return; /* no timer: stay enabled rather than stop accepting for good */
    if (d->unix_listener)
        evconnlistener_disable(d->unix_listener);
    if (d->tcp_listener)
        evconnlistener_disable(d->tcp_listener);
}

static void on_unix_accept(struct evconnlistener *l, evutil_socket_t fd, struct sockaddr *sa,
                           int salen, void *arg) {
    aor_daemon *d = arg;
    struct ucred cred;
    socklen_t len = sizeof cred;
    if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) < 0) {
        aor_warn("shim socket: cannot tell the owner of a connection (%s); refused",
                 strerror(errno));
        d->m.rejected_peers++;
        close(fd);
        return;
    }
    if (cred.uid != getuid()) {
        aor_warn("shim socket: refused a peer of uid %d (only uid %d may connect)", (int)cred.uid,
                 (int)getuid());
        d->m.rejected_peers++;
        close(fd);
        return;
    }
    aor_conn_accept_unix(d, fd);
}

static void diag_open(void);

static void on_tcp_accept(struct evconnlistener *l, evutil_socket_t fd, struct sockaddr *sa,
                          int salen, void *arg) {
    aor_daemon *d = arg;
    unsigned uid = 0;
    int held = 1;
    if (aor_listen_peer(fd, &uid, &held) < 0) {
        /* ENOTCONN/ENOENT: the peer closed already (connect-then-close); not worth a
         * warning each time, which any local user could have aord write at will. */
        int e = errno;
        long now = (long)time(NULL);
        if (e == ENOTCONN || e == ENOENT) {
            aor_debug("sidecar: a connection closed before its owner could be told; dropped");
        } else if (!(e == EMFILE || e == ENFILE) || now - d->accept_warned_at >= 60) {
            /* Out of descriptors: said once a minute, with the accept errors. */
            aor_warn("sidecar: cannot tell the owner of a connection (%s); refused", strerror(e));
            if (e == EMFILE || e == ENFILE)
                d->accept_warned_at = now;
        }
        d->m.rejected_peers++;
        close(fd);
        return;
    }
    if (!held) { /* connect, send, close before the accept: nobody to answer */
        aor_debug("sidecar: a connection closed by its client before it was accepted; "
                  "dropped");
        close(fd);
        return;
    }
    if (uid != (unsigned)getuid()) {
        /* Said at most once a minute, with how many went unsaid: any local user can make
         * these at will (QA: 20,000 lines, 1.9 MB of aord.log, in 3 s). /metrics counts
         * every one (rejected_peers). */
        long now = (long)time(NULL);
        if (d->foreign_warned_at == 0 || now - d->foreign_warned_at >= 60) {
            char more[64] = "";
            if (d->foreign_quiet)
                snprintf(more, sizeof more, "; %lu more since the last such line",
                         d->foreign_quiet);
            aor_warn("sidecar: refused a connection of uid %u (only uid %d may use it)%s; "
                     "said at most once a minute",
                     uid, (int)getuid(), more);
            d->foreign_warned_at = now;
            d->foreign_quiet = 0;
        } else {
            d->foreign_quiet++;
        }
        d->m.rejected_peers++;
        close(fd);
        return;
    }
    aor_conn_accept_tcp(d, fd);
}

/* Creates the missing parents of dir (0700) and dir itself (mode). Sets *created when
 * dir did not exist before. Returns 0, or -1 with errno. */
static int mkdir_p(const char *dir, mode_t mode, int *created) {
    *created = 0;
    char *copy = strdup(dir);
    if (!copy)
        return -1;
    for (char *s = copy + 1; *s; s++) {
        if (*s == '/') {
            *s = '\0';
            if (mkdir(copy, 0700) < 0 && errno != EEXIST) {
                free(copy);
                return -1;
            }
            *s = '/';
        }
    }
    int r = mkdir(copy, mode);
    free(copy);
    if (r == 0)
        *created = 1;
    if (r < 0 && errno != EEXIST)
        return -1;
    return 0;
}

/* 1 when dir is aord's default socket directory (spec §7): $XDG_RUNTIME_DIR/aor or
 * /tmp/aor-<uid>, the only existing directories aord may tighten to 0700. */
static int is_default_dir(const char *dir) {
    /* NULL: the /tmp/aor-<uid> fallback (also what a relative XDG_RUNTIME_DIR gives). */
    const char *bases[2] = {getenv("XDG_RUNTIME_DIR"), NULL};
    int yes = 0;
    for (size_t i = 0; i < 2 && !yes; i++) {
        char *sock = aor_path_socket_for(NULL, bases[i], (unsigned long)getuid());
        char *slash = sock ? strrchr(sock, '/') : NULL;
        if (slash) {
            *slash = '\0';
            yes = strcmp(sock, dir) == 0;
        }
        free(sock);
    }
    return yes;
}

/* The socket directory must be ours and closed to others: whoever can write there can
 * replace the socket (and the published address set) under the shim. */
static int check_dir(const char *dir, char *err, size_t errlen) {
    int created = 0;
    if (mkdir_p(dir, 0700, &created) < 0) {
        snprintf(err, errlen, "cannot create the socket directory %s: %s", dir, strerror(errno));
        return -1;
    }
    int fix = created || is_default_dir(dir);
    /* The default directory sits in a shared place (/tmp): it must not be a link. */
    int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC | (fix ? O_NOFOLLOW : 0));
    struct stat st;
    if (fd < 0 || fstat(fd, &st) < 0) {
        snprintf(err, errlen, "socket directory %s: cannot open it: %s", dir,
                 errno == ELOOP ? "it is a symbolic link" : strerror(errno));
        if (fd >= 0)
            close(fd);
        return -1;
    }
    int rc = -1;
    if (st.st_uid != geteuid()) {
        snprintf(err, errlen,
                 "socket directory %s: owned by uid %u, not by you (uid %u); choose a socket "
                 "in a directory of your own",
                 dir, (unsigned)st.st_uid, (unsigned)geteuid());
        goto out_close;
    }
    if (fix && (st.st_mode & 077)) {
        if (fchmod(fd, 0700) < 0) {
            snprintf(err, errlen, "socket directory %s: cannot chmod 700 it: %s", dir,
                     strerror(errno));
            goto out_close;
        }
    } else if (st.st_mode & 022) {
        snprintf(err, errlen,
                 "socket directory %s: writable by group or others (mode %04o); chmod 700 it "
                 "or choose a socket in a directory of your own",
                 dir, (unsigned)(st.st_mode & 07777));
        goto out_close;
    }
    rc = 0;
out_close:
    close(fd);
    return rc;
}

int aor_listen_unix(aor_daemon *d, char *err, size_t errlen) {
    struct sockaddr_un sun;
    memset(&sun, 0, sizeof sun);
    sun.sun_family = AF_UNIX;
    if (strlen(d->socket_path) >= sizeof sun.sun_path) {
        snprintf(err, errlen, "socket path too long (max %zu bytes): %s", sizeof sun.sun_path - 1,
                 d->socket_path);
        return -1;
    }
    memcpy(sun.sun_path, d->socket_path, strlen(d->socket_path) + 1);
    if (check_dir(d->runtime_dir, err, errlen) < 0)
        return -1;
    /* Only a socket is ever replaced: anything else at that path is not aord's. */
    struct stat st;
    int exists = lstat(d->socket_path, &st) == 0;
    if (!exists && errno != ENOENT) {
        snprintf(err, errlen, "socket %s: %s", d->socket_path, strerror(errno));
        return -1;
    }
    if (exists && !S_ISSOCK(st.st_mode)) {
        snprintf(err, errlen,
                 "socket %s: the path exists and is not a socket; refusing to replace it "
                 "(remove it or choose another socket path)",
                 d->socket_path);
        return -1;
    }
    if (aor_publish_check_dir(d->runtime_dir, err, errlen) < 0)
        return -1;
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (fd < 0) {
        snprintf(err, errlen, "socket: %s", strerror(errno));
        return -1;
    }
    /* A socket file that answers belongs to a running aord: do not steal it. */
    int probe = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (probe >= 0) {
        if (connect(probe, (struct sockaddr *)&sun, sizeof sun) == 0) {
            close(probe);
            close(fd);
            snprintf(err, errlen, "another aord is already listening on %s", d->socket_path);
            return -1;
        }
        close(probe);
    }
    if (exists)
        unlink(d->socket_path); /* a stale socket: nobody answers on it */
    mode_t old = umask(0177);
    int r = bind(fd, (struct sockaddr *)&sun, sizeof sun);
    umask(old);
    if (r < 0) {
        snprintf(err, errlen, "bind %s: %s", d->socket_path, strerror(errno));
        close(fd);
        return -1;
    }
    chmod(d->socket_path, 0600);
    d->unix_listener = evconnlistener_new(d->base, on_unix_accept, d,
                                          LEV_OPT_CLOSE_ON_FREE | LEV_OPT_CLOSE_ON_EXEC, 512, fd);
    if (!d->unix_listener) {
        snprintf(err, errlen, "listen %s: %s", d->socket_path, strerror(errno));
        close(fd);
        return -1;
    }
    evconnlistener_set_error_cb(d->unix_listener, on_accept_error);
    return 0;
}

int aor_listen_tcp(aor_daemon *d, char *err, size_t errlen) {
    if (!d->cfg->listen)
        return 0;
    const char *spec = d->cfg->listen;
    const char *colon = strrchr(spec, ':');
    if (!colon) {
        snprintf(err, errlen, "listen = %s: expected host:port", spec);
        return -1;
    }
    char host[256];
    size_t hl = (size_t)(colon - spec);
    if (hl >= sizeof host) {
        snprintf(err, errlen, "listen = %s: host too long", spec);
        return -1;
    }
    memcpy(host, spec, hl);
    host[hl] = '\0';
    if (hl >= 2 && host[0] == '[' && host[hl - 1] == ']') {
        memmove(host, host + 1, hl - 2);
        host[hl - 2] = '\0';
    }
    struct addrinfo hints = {0}, *res = NULL;
    hints.ai_socktype = SOCK_STREAM;
    hints.ai_flags = AI_PASSIVE;
    int gr = getaddrinfo(host, colon + 1, &hints, &res);
    if (gr != 0) {
        snprintf(err, errlen, "listen = %s: %s", spec, gai_strerror(gr));
        return -1;
    }
    d->tcp_listener =
        evconnlistener_new_bind(d->base, on_tcp_accept, d,
                                LEV_OPT_CLOSE_ON_FREE | LEV_OPT_REUSEABLE | LEV_OPT_CLOSE_ON_EXEC,
                                512, res->ai_addr, (int)res->ai_addrlen);
    if (!d->tcp_listener) {
        int e = errno;
        snprintf(err, errlen, "listen = %s: cannot bind: %s%s", spec, strerror(e),
                 e == EADDRINUSE ? " (another program, or another aord, holds it: stop it, or "
                                   "set [daemon] listen = 127.0.0.1:PORT with a free port, or "
                                   "listen = off)"
                                 : "");
        freeaddrinfo(res);
        return -1;
    }
    freeaddrinfo(res);
    diag_open(); /* before the first client: it may come with aord at its fd limit (QA) */
    evconnlistener_set_error_cb(d->tcp_listener, on_accept_error);
    struct sockaddr_storage ss;
    socklen_t sl = sizeof ss;
    getsockname(evconnlistener_get_fd(d->tcp_listener), (struct sockaddr *)&ss, &sl);
    d->tcp_port = ss.ss_family == AF_INET6 ? ntohs(((struct sockaddr_in6 *)&ss)->sin6_port)
                                           : ntohs(((struct sockaddr_in *)&ss)->sin_port);
    char ip[INET6_ADDRSTRLEN] = "127.0.0.1";
    if (ss.ss_family == AF_INET6)
        inet_ntop(AF_INET6, &((struct sockaddr_in6 *)&ss)->sin6_addr, ip, sizeof ip);
    else
        inet_ntop(AF_INET, &((struct sockaddr_in *)&ss)->sin_addr, ip, sizeof ip);
    snprintf(d->sidecar_url, sizeof d->sidecar_url,
             ss.ss_family == AF_INET6 ? "http://[%s]:%d" : "http://%s:%d", ip, d->tcp_port);
    return 0;
}

/* The NETLINK_SOCK_DIAG socket aor_listen_peer asks through (-1: none yet), and the
 * sequence number of its last question. Event loop thread only. */
static int g_diag_fd = -1;
static unsigned g_diag_seq;

static void diag_open(void) {
    if (g_diag_fd < 0)
        g_diag_fd = socket(AF_NETLINK, SOCK_DGRAM | SOCK_CLOEXEC, NETLINK_SOCK_DIAG);
}

static void diag_close(void) {
    if (g_diag_fd >= 0)
        close(g_diag_fd);
    g_diag_fd = -1;
}

/* Closes a socket that failed and opens the next one at once, while a descriptor is
 * free (the next connection's may not be). */
static void diag_renew(void) {
    diag_close();
    diag_open();
}

int aor_listen_peer(int fd, unsigned *uid, int *held) {
    struct sockaddr_storage local, peer;
    socklen_t ll = sizeof local, pl = sizeof peer;
    if (getsockname(fd, (struct sockaddr *)&local, &ll) < 0 ||
        getpeername(fd, (struct sockaddr *)&peer, &pl) < 0)
        return -1;
    struct {
        struct nlmsghdr nlh;
        struct inet_diag_req_v2 r;
    } req;
    memset(&req, 0, sizeof req);
    req.nlh.nlmsg_len = sizeof req;
    req.nlh.nlmsg_type = SOCK_DIAG_BY_FAMILY;
    req.nlh.nlmsg_flags = NLM_F_REQUEST;
    req.r.sdiag_family = (unsigned char)local.ss_family;
    req.r.sdiag_protocol = IPPROTO_TCP;
    req.r.idiag_states = ~0u;
    req.r.id.idiag_cookie[0] = INET_DIAG_NOCOOKIE;
    req.r.id.idiag_cookie[1] = INET_DIAG_NOCOOKIE;
    /* The peer's socket: its source is our peer address, its destination is us. */
    if (local.ss_family == AF_INET) {
        struct sockaddr_in *l4 = (struct sockaddr_in *)&local, *p4 = (struct sockaddr_in *)&peer;
        req.r.id.idiag_sport = p4->sin_port;
        req.r.id.idiag_dport = l4->sin_port;
        memcpy(req.r.id.idiag_src, &p4->sin_addr, 4);
        memcpy(req.r.id.idiag_dst, &l4->sin_addr, 4);
    } else if (local.ss_family == AF_INET6) {
        struct sockaddr_in6 *l6 = (struct sockaddr_in6 *)&local, *p6 = (struct sockaddr_in6 *)&peer;
        req.r.id.idiag_sport = p6->sin6_port;
        req.r.id.idiag_dport = l6->sin6_port;
        memcpy(req.r.id.idiag_src, &p6->sin6_addr, 16);
        memcpy(req.r.id.idiag_dst, &l6->sin6_addr, 16);
    } else {
        errno = EAFNOSUPPORT;
        return -1;
    }
    /* One socket for every question, opened at the first and kept: a new one per
     * connection needed a descriptor more than the connection itself, so with aord one
     * descriptor short of its limit every sidecar client was accepted and then closed
     * unanswered (QA). A socket that failed is closed and made again at the next. */
    diag_open();
    int nl = g_diag_fd;
    if (nl < 0)
        return -1;
    req.nlh.nlmsg_seq = ++g_diag_seq;
    struct sockaddr_nl sa = {.nl_family = AF_NETLINK};
    if (sendto(nl, &req, sizeof req, 0, (struct sockaddr *)&sa, sizeof sa) < 0) {
        int e = errno;
        diag_renew();
        errno = e;
        return -1;
    }
    long buf[2048];
    int found = 0, err = ENOENT; /* the kernel's answer when no socket matches */
    for (;;) {
        ssize_t n = recv(nl, buf, sizeof buf, 0);
        if (n <= 0) { /* the kernel could not be asked: not a sign that the peer is gone */
            err = n < 0 && errno != ENOENT ? errno : EIO;
            diag_renew();
            break;
        }
        struct nlmsghdr *h = (struct nlmsghdr *)buf;
        int done = 0;
        for (; NLMSG_OK(h, (size_t)n); h = NLMSG_NEXT(h, n)) {
            if (h->nlmsg_seq != g_diag_seq)
                continue; /* the rest of an earlier question's answer */
            if (h->nlmsg_type == NLMSG_ERROR) {
                const struct nlmsgerr *e = NLMSG_DATA(h);
                /* -ENOENT: no such socket; anything else (ENOMEM...) is the query's */
                if (h->nlmsg_len >= NLMSG_LENGTH(sizeof *e) && e->error != 0)
                    err = -e->error;
                done = 1;
                break;
            }
            if (h->nlmsg_type == NLMSG_DONE) {
                done = 1;
                break;
            }
            if (h->nlmsg_type == SOCK_DIAG_BY_FAMILY) {
                struct inet_diag_msg *m = NLMSG_DATA(h);
                if (uid)
                    *uid = m->idiag_uid;
                if (held) /* closed by its process: orphaned, or TIME_WAIT's mini socket */
                    *held = m->idiag_inode != 0;
                found = 1;
                done = 1;
                break;
            }
        }
        if (done)
            break;
    }
    if (!found) {
        errno = err;
        return -1;
    }
    return 0;
}

void aor_listen_close(aor_daemon *d) {
    diag_close();
    if (d->accept_pause_ev) {
        event_free(d->accept_pause_ev);
        d->accept_pause_ev = NULL;
    }
    if (d->unix_listener) {
        evconnlistener_free(d->unix_listener);
        d->unix_listener = NULL;
        struct stat st;
        if (lstat(d->socket_path, &st) == 0 && S_ISSOCK(st.st_mode))
            unlink(d->socket_path);
    }
    if (d->tcp_listener) {
        evconnlistener_free(d->tcp_listener);
        d->tcp_listener = NULL;
    }
}
