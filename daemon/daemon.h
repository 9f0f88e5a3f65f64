/* aord's shared context: one per process, owned by main.c. Internal to the daemon. */
#ifndef AOR_DAEMON_H
#define AOR_DAEMON_H

#include "cfgref.h"
#include "config.h"
#include "rstate.h"
#include "sse_end.h"
#include "tls.h"
#include "upstream.h"

#include <event2/event.h>
#include <event2/listener.h>

typedef struct {
    unsigned long connections;    /* accepted client connections */
    unsigned long requests;       /* requests handled (proxied + local) */
    unsigned long proxied;        /* requests that went through the walk */
    unsigned long attempts;       /* upstream attempts */
    unsigned long attempt_fail;   /* retryable upstream failures */
    unsigned long all_backed_off; /* terminal aor_all_backed_off answers */
    unsigned long rejected_peers; /* connections refused by the uid check */
    unsigned long bad_preambles;
} aor_metrics;

typedef struct aor_daemon {
    struct event_base *base;
    aor_config *cfg;  /* the current config (owned by cfgs) */
    aor_cfgref *cfgs; /* the current config and replaced ones requests still hold */
    /* The places aord started with stay in use until the next start, whatever a reload
     * says: listen (NULL: off) and state; the socket is socket_path. */
    char *boot_listen;
    char *boot_state;
    const char *config_arg; /* --config value or NULL */
    aor_tls *tls;
    aor_rstate *rs;
    aor_sse_ends *sse_ends; /* upstreams seen to end their streams well (sse_end.h) */
    aor_upstream *up;
    struct evconnlistener *unix_listener;
    struct evconnlistener *tcp_listener;
    char *socket_path;
    char *runtime_dir;    /* directory of the socket; hosts file lives here */
    char *state_dir;      /* $XDG_STATE_HOME/aor */
    char *data_dir;       /* $XDG_DATA_HOME/aor */
    char admin_token[65]; /* hex */
    int tcp_port;         /* bound sidecar port (0 when off) */
    char sidecar_url[64]; /* "http://127.0.0.1:8787" as bound ("" when off), for hints */
    aor_metrics m;
    double started;
    struct aor_conn *conns;            /* open client connections (daemon/conn.c), for shutdown */
    struct aor_conn_pending *pendings; /* shim connections before their preamble, too */
    int stopping;                      /* SIGTERM/SIGINT seen: draining (daemon/main.c) */
    struct event *accept_pause_ev;     /* listeners paused: out of descriptors (listen.c) */
    long accept_warned_at;             /* time() of the last such warning */
    long foreign_warned_at;            /* time() of the last "refused uid" warning */
    unsigned long foreign_quiet;       /* refusals not said since then */
    struct event *drain_ev;            /* the drain's check, every 100 ms */
    double drain_until;                /* CLOCK_MONOTONIC seconds: the drain's end */
} aor_daemon;

#endif
