#include "upstream_h1.h"

#include "clock.h"
#include "config.h"
#include "curl_api.h"
#include "http.h"
#include "log.h"
#include "pool.h"
#include "tls_io.h"

#include <arpa/inet.h>
#include <errno.h>
#include <event2/buffer.h>
#include <event2/dns.h>
#include <event2/util.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#define IDLE_MAX 128          /* idle connections kept for reuse, all origins together */
#define IDLE_MAX_AGE_MS 60000 /* an idle connection older than this is closed, not reused */
/* A request sent whole on a reused connection that then ends without an answer is sent
 * again on a new one only when the connection had been idle this long, ms (retry_fresh). */
#define RETRY_IDLE_MIN_MS 1000
#define READ_CHUNK 16384         /* bytes per recv() or SSL_read (a whole TLS record) */
#define READS_PER_EVENT 4        /* recv() or SSL_read calls per readable event before yielding */
#define CONNECT_TIMEOUT_MS 10000 /* default: name lookup + TCP + TLS handshake */
#define MIN_ATTEMPT_MS 250       /* least time one address gets when more remain */
#define LINE_MAX_BYTES (256 * 1024) /* one header line (HEAD_MAX_BYTES stops it sooner) */
#define HEAD_MAX_BYTES (80 * 1024)  /* status line and header fields of an answer */
#define HEAD_MAX_LINES AOR_H1_HEAD_MAX_LINES
#define BODY_REF_MIN 16384 /* TLS: larger bodies are referenced, not copied */
#define SWEEP_MS 1000      /* how often transfers are checked for a stall */

typedef struct h1_origin h1_origin;
typedef struct h1_conn h1_conn;
typedef struct h1_xfer h1_xfer;
typedef struct h1_trust h1_trust;

/* A verify store (the system store, plus one ca_file), loaded on first need and shared
 * by the contexts of every TLS origin that uses it: loading the system bundle takes
 * ~50 ms of the loop and ~0.8 MiB (docs/performance.md), once, not once per origin. */
struct h1_trust {
    h1_trust *next;
    char *ca_file; /* NULL: the system store alone */
    X509_STORE *store;
};

struct h1_origin {
    h1_origin *next;
    char *prefix; /* "scheme://authority" exactly as in the URL */
    size_t prefix_len;
    char *ca_file; /* NULL: the system store */
    int tls;
    int host_is_ip;
    char *host;      /* for the lookup, SNI and the certificate check (no brackets) */
    char port[8];    /* decimal */
    char *authority; /* the Host header: what follows "scheme://" in prefix */
    SSL_CTX *ctx;    /* TLS origins */
    int trust_stale; /* the CA files may have changed (SIGHUP): ctx is made again */
};

struct h1_conn {
    aor_h1 *h;
    h1_origin *o;
    h1_conn *inext, *iprev; /* h->idle, most recently used first */
    int idle;
    evutil_socket_t fd;
    struct event *rev;        /* persistent read event once TCP is connected */
    struct event *wev;        /* connect completion, then the handshake or unsent request bytes */
    SSL *ssl;                 /* TLS origins, once TCP is connected (handshake: !connected) */
    int tls_write_wants_read; /* an SSL_write waits for the socket to be readable */
    int tls_read_wants_write; /* an SSL_read waits for the socket to be writable */
    struct event *timer;      /* connect phase: the current address's time */
    struct evutil_addrinfo *ai, *ai_next;
    struct evdns_getaddrinfo_request *dnsreq; /* a lookup in flight */
    int ai_left;
    long long deadline_ms; /* connect phase ends (monotonic ms) */
    long long idle_since_ms;
    long long idle_ms;    /* how long it had been idle when taken for its current request */
    struct evbuffer *out; /* request bytes not yet written */
    llhttp_t parser;
    h1_xfer *x;
    int served; /* answers completed on this connection */
    int connected;
    int last_read_full; /* the latest read filled its buffer: more may wait in the socket */
    char last_err[160];
    /* A send failed: nothing more goes out; the answer the upstream may have sent before
     * it closed is read (send_failed), else x ends with this text. */
    int send_failed;
    char send_err[160];
};

enum { DEFER_NONE = 0, DEFER_FAIL, DEFER_CONTINUE };

struct h1_xfer {
    struct aor_xfer base; /* backend tag; first member */
    h1_xfer *prev, *next; /* h->xfers */
    h1_xfer *dnext;       /* h->deferred */
    int defer;
    aor_h1 *h;
    h1_origin *o;
    h1_conn *c;
    aor_xfer_callbacks cb;
    void *arg;
    char *head; /* the request head */
    size_t head_len, head_cap;
    const char *body;
    size_t body_len;
    long connect_timeout_ms;
    int is_head;
    int in_cb;     /* a callback of the caller is running */
    int cancelled; /* cancelled from inside a callback: free when it returns */
    int got_bytes; /* a byte of the answer arrived */
    int complete;  /* the answer is complete */
    int cut;       /* on_data refused bytes: stop */
    int retried;
    int switched;       /* the upstream answered 101 Switching Protocols */
    int head_too_big;   /* the answer's header section passed HEAD_MAX_BYTES */
    int head_lines;     /* header lines of the answer so far (HEAD_MAX_LINES) */
    int head_too_many;  /* ... passed HEAD_MAX_LINES */
    int te_unsupported; /* a transfer coding other than chunked */
    int head_nul;       /* a header value held a NUL byte */
    int bad_status;     /* the status code was not 100-599 */
    int keep_alive;     /* the complete answer lets the connection carry another request */
    size_t head_bytes;  /* bytes of status line and fields seen (HEAD_MAX_BYTES) */
    int leftover;       /* bytes followed the answer: the connection is not reusable */
    long status;
    int lstate; /* header line being built: LS_* */
    char *line;
    size_t line_len, line_cap;
    /* The header line being built when it lies whole in the bytes being parsed: "Name:
     * value" as received, handed on without a copy; copied into line when the parse call
     * ends before the line does (docs/performance.md). NULL: none (line has it). */
    const char *raw;
    size_t raw_len;
    char *held; /* body bytes on_data has not taken (it paused) */
    size_t held_len, held_cap;
    int paused;
    /* Stall check (aor_h1_sweep): progress counts reads and writes on the connection;
     * quiet_since is the time (stall_now) from which it has been quiet: its start, or
     * the last sweep before bytes moved (to within one sweep interval). */
    unsigned long progress, seen_progress;
    double quiet_since;
    CURLcode fail_code;
    char errtext[256];
};

/* LS_TRAILER: the header block was handed on; fields now are a chunked body's trailer
 * section, which is not passed on (on_header has no place for it after the empty line). */
enum { LS_NONE = 0, LS_STATUS_START, LS_STATUS, LS_FIELD, LS_VALUE, LS_TRAILER };

/* Which /etc/resolv.conf or /etc/hosts the resolver read: a file changed in place (DHCP,
 * a VPN, an edit) or replaced has another size, time or inode. known 0: there was none. */
typedef struct {
    int known;
    dev_t dev;
    ino_t ino;
    off_t size;
    struct timespec mtim;
} resolv_id;

#define RESOLV_CONF "/etc/resolv.conf" /* what evdns reads (EVDNS_BASE_INITIALIZE_...) */
#define HOSTS_FILE "/etc/hosts"        /* what it reads with it (DNS_OPTION_HOSTSFILE) */

static void resolv_id_of(const char *path, resolv_id *id) {
    struct stat st;
    memset(id, 0, sizeof *id);
    if (stat(path, &st) != 0)
        return;
    id->known = 1;
    id->dev = st.st_dev;
    id->ino = st.st_ino;
    id->size = st.st_size;
    id->mtim = st.st_mtim;
}

static int resolv_same(const resolv_id *a, const resolv_id *b) {
    return a->known == b->known && a->dev == b->dev && a->ino == b->ino && a->size == b->size &&
           a->mtim.tv_sec == b->mtim.tv_sec && a->mtim.tv_nsec == b->mtim.tv_nsec;
}

struct aor_h1 {
    struct event_base *base;
    struct evdns_base *dns; /* made on the first host name to resolve */
    resolv_id resolv;       /* the resolv.conf dns was set up from */
    resolv_id hosts;        /* the /etc/hosts it read */
    h1_origin *origins;
    h1_trust *trusts; /* loaded verify stores; dropped on a trust reload (SIGHUP) */
    h1_xfer *xfers;
    h1_conn *idle; /* most recently used first */
    h1_conn *idle_tail;
    size_t nidle;
    h1_xfer *deferred, *deferred_tail;
    struct event *defer_ev;
    struct event *sweep_ev;      /* every SWEEP_MS while transfers or idle connections exist */
    long long idle_max_ms;       /* IDLE_MAX_AGE_MS (aor_h1_set_idle_max_ms in tests) */
    long long retry_idle_min_ms; /* RETRY_IDLE_MIN_MS (aor_h1_set_retry_idle_min_ms) */
    double swept_at;             /* stall_now() at the last sweep (0: none yet) */
    llhttp_settings_t settings;  /* every connection's parser keeps a pointer to it */
    aor_pool spares; /* ended transfers kept with their head and line buffers (pool.h) */
    char scratch[READ_CHUNK];
};

#define XFER_KEEP_BYTES 8192 /* a kept transfer keeps head and line buffers up to this */

static void conn_close(h1_conn *c);
static void conn_start(aor_h1 *h, h1_xfer *x);
/* Reads /etc/resolv.conf again into h's resolver when it changed since it was read:
 * aord's upstream lookups follow the system's name servers, as glibc's do (QA: after a
 * network change rewrote it, every new upstream connection failed with "the DNS server
 * failed" until a restart, and the failures backed the keys off). Lookups in flight are
 * sent again to the new servers. The same for /etc/hosts, whose entries evdns answers
 * from (QA: a host added there was published to the shim, which redirected to aord,
 * while aord's own lookup of it failed until a restart). Two stat(2) per lookup, and
 * lookups happen for new upstream connections only. */
static void dns_follow_system_files(aor_h1 *h) {
    resolv_id now, hosts;
    resolv_id_of(RESOLV_CONF, &now);
    resolv_id_of(HOSTS_FILE, &hosts);
    if (!resolv_same(&now, &h->resolv)) {
        h->resolv = now;
        h->hosts = hosts;
        evdns_base_clear_nameservers_and_suspend(h->dns);
        evdns_base_search_clear(h->dns);
        /* The parse reads /etc/hosts too, adding to the entries it has: start empty. */
        evdns_base_clear_host_addresses(h->dns);
        int r = evdns_base_resolv_conf_parse(h->dns, DNS_OPTIONS_ALL, RESOLV_CONF);
        evdns_base_resume(h->dns);
        if (r != 0)
            aor_warn("upstream DNS: %s changed and could not be read whole (evdns error %d); "
                     "the name servers it names, or 127.0.0.1, are used",
                     RESOLV_CONF, r);
        else
            aor_info("upstream DNS: %s changed: its name servers are used from now on",
                     RESOLV_CONF);
    } else if (!resolv_same(&hosts, &h->hosts)) {
        h->hosts = hosts;
        evdns_base_clear_host_addresses(h->dns);
        /* Missing or unreadable: evdns then adds the localhost entries alone. */
        if (evdns_base_load_hosts(h->dns, hosts.known ? HOSTS_FILE : NULL) != 0 || !hosts.known)
            aor_warn("upstream DNS: %s changed and could not be read: only localhost is "
                     "known from it",
                     HOSTS_FILE);
        else
            aor_info("upstream DNS: %s changed: its entries are used from now on", HOSTS_FILE);
    }
}

static void xfer_fail_later(h1_xfer *x, CURLcode code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* Frees a header list a caller built with libcurl (tests; proxy.c sends a block). */
static void free_slist(struct curl_slist *sl) {
    const aor_curl_api *api = sl ? aor_curl_api_get() : NULL;
    if (api)
        api->slist_free_all(sl);
}

/* ---- transfers: end, defer ------------------------------------------------------ */

static void unlink_xfer(h1_xfer *x) {
    if (x->prev)
        x->prev->next = x->next;
    else if (x->h->xfers == x)
        x->h->xfers = x->next;
    if (x->next)
        x->next->prev = x->prev;
    x->prev = x->next = NULL;
}

static void undefer(h1_xfer *x) {
    if (!x->defer)
        return;
    aor_h1 *h = x->h;
    h1_xfer *prev = NULL;
    for (h1_xfer *d = h->deferred; d; prev = d, d = d->dnext) {
        if (d != x)
            continue;
        if (prev)
            prev->dnext = d->dnext;
        else
            h->deferred = d->dnext;
        if (h->deferred_tail == d)
            h->deferred_tail = prev;
        break;
    }
    x->dnext = NULL;
    x->defer = DEFER_NONE;
}

static void defer(h1_xfer *x, int kind) {
    aor_h1 *h = x->h;
    if (x->defer) {
        if (kind == DEFER_FAIL)
            x->defer = kind;
        return;
    }
    x->defer = kind;
    x->dnext = NULL;
    if (h->deferred_tail)
        h->deferred_tail->dnext = x;
    else
        h->deferred = x;
    h->deferred_tail = x;
    event_active(h->defer_ev, EV_TIMEOUT, 0);
}

static void xfer_free(h1_xfer *x) {
    undefer(x);
    unlink_xfer(x);
    free(x->held);
    aor_h1 *h = x->h;
    if (x->head)
        explicit_bzero(x->head, x->head_len); /* holds the upstream key's header */
    char *head = x->head, *line = x->line;
    size_t head_cap = x->head_cap, line_cap = x->line_cap;
    if (head_cap <= XFER_KEEP_BYTES && line_cap <= XFER_KEEP_BYTES) {
        /* Kept for the next transfer (pool.h): zero but for the two buffers. */
        memset(x, 0, sizeof *x);
        x->head = head;
        x->head_cap = head_cap;
        x->line = line;
        x->line_cap = line_cap;
        aor_pool_poison(head, head_cap);
        aor_pool_poison(line, line_cap);
        if (aor_pool_keep(&h->spares, x, sizeof *x))
            return;
        aor_pool_unpoison(head, head_cap);
        aor_pool_unpoison(line, line_cap);
    }
    free(head);
    free(line);
    free(x);
}

/* A zeroed transfer (a kept one with its head and line buffers), or NULL. */
static h1_xfer *xfer_new(aor_h1 *h) {
    h1_xfer *x = aor_pool_take(&h->spares, sizeof *x);
    if (x) {
        aor_pool_unpoison(x->head, x->head_cap);
        aor_pool_unpoison(x->line, x->line_cap);
        return x;
    }
    return calloc(1, sizeof *x); /* the pool, not this, is the fast path (proxy_new) */
}

/* Detaches x from its connection: the connection goes to the idle pool when reusable,
 * otherwise it is closed. */
static void detach_conn(h1_xfer *x, int reusable);

/* Ends x: frees it, then calls on_done (x must not be used after). */
static void xfer_end(h1_xfer *x, CURLcode code, const char *errtext) {
    if (x->c)
        detach_conn(x, 0);
    aor_xfer_callbacks cb = x->cb;
    void *arg = x->arg;
    long status = x->status;
    char text[sizeof x->errtext];
    size_t tl = errtext ? strnlen(errtext, sizeof text - 1) : 0;
    memcpy(text, errtext ? errtext : "", tl); /* errtext may live in x */
    text[tl] = '\0';
    xfer_free(x);
    cb.on_done(arg, code, status, text);
}

/* Frees x without a callback and closes its connection. */
static void xfer_kill(h1_xfer *x) {
    h1_conn *c = x->c;
    x->c = NULL;
    if (c) {
        c->x = NULL;
        conn_close(c);
    }
    xfer_free(x);
}

static void xfer_fail_later(h1_xfer *x, CURLcode code, const char *fmt, ...) {
    if (x->defer == DEFER_FAIL)
        return; /* the first reason stands */
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(x->errtext, sizeof x->errtext, fmt, ap);
    va_end(ap);
    x->fail_code = code;
    if (x->c)
        detach_conn(x, 0);
    defer(x, DEFER_FAIL);
}

/* ---- idle pool -------------------------------------------------------------------- */

static void idle_unlink(h1_conn *c) {
    aor_h1 *h = c->h;
    if (!c->idle)
        return;
    if (c->iprev)
        c->iprev->inext = c->inext;
    else
        h->idle = c->inext;
    if (c->inext)
        c->inext->iprev = c->iprev;
    else
        h->idle_tail = c->iprev;
    c->inext = c->iprev = NULL;
    c->idle = 0;
    h->nidle--;
}

static void idle_push(h1_conn *c) {
    aor_h1 *h = c->h;
    while (h->nidle >= IDLE_MAX && h->idle_tail)
        conn_close(h->idle_tail);
    c->idle = 1;
    c->iprev = NULL;
    c->inext = h->idle;
    if (h->idle)
        h->idle->iprev = c;
    else
        h->idle_tail = c;
    h->idle = c;
    h->nidle++;
    c->idle_since_ms = aor_clock_mono_ms();
}

/* 1 when idle connection c is past its age at now (monotonic ms): closed, not reused. */
static int idle_too_old(const aor_h1 *h, const h1_conn *c, long long now) {
    return now - c->idle_since_ms > h->idle_max_ms;
}

/* The most recently used idle connection to o that is not too old, or NULL. */
static h1_conn *idle_take(aor_h1 *h, h1_origin *o) {
    long long now = -1;
    for (h1_conn *c = h->idle; c;) {
        h1_conn *next = c->inext;
        if (c->o == o) {
            if (now < 0)
                now = aor_clock_mono_ms();
            if (idle_too_old(h, c, now)) {
                conn_close(c);
            } else {
                idle_unlink(c);
                c->idle_ms = now - c->idle_since_ms;
                return c;
            }
        }
        c = next;
    }
    return NULL;
}

static void detach_conn(h1_xfer *x, int reusable) {
    h1_conn *c = x->c;
    x->c = NULL;
    if (!c)
        return;
    c->x = NULL;
    if (reusable && c->connected && c->fd >= 0) {
        c->served++;
        if (c->rev)
            event_add(c->rev, NULL);
        idle_push(c);
    } else {
        conn_close(c);
    }
}

static void conn_close(h1_conn *c) {
    idle_unlink(c);
    if (c->x)
        c->x->c = NULL;
    if (c->timer)
        event_free(c->timer);
    if (c->rev)
        event_free(c->rev);
    if (c->wev)
        event_free(c->wev);
    SSL_free(c->ssl); /* no close_notify: the connection is dropped, as curl does */
    if (c->fd >= 0)
        close(c->fd);
    if (c->dnsreq) {
        struct evdns_getaddrinfo_request *r = c->dnsreq;
        c->dnsreq = NULL;
        c->x = NULL;
        evdns_getaddrinfo_cancel(r); /* its callback sees EVUTIL_EAI_CANCEL */
    }
    if (c->ai)
        evutil_freeaddrinfo(c->ai);
    if (c->out)
        evbuffer_free(c->out);
    free(c);
}

/* ---- answer parsing (llhttp callbacks; parser->data is the connection) ----------- */

static int line_add(h1_xfer *x, const char *s, size_t n) {
    if (x->line_len + n + 1 > x->line_cap) {
        if (x->line_len + n + 1 > LINE_MAX_BYTES)
            return -1;
        size_t cap = x->line_cap ? x->line_cap : 256;
        while (cap < x->line_len + n + 1)
            cap *= 2;
        char *l = realloc(x->line, cap);
        if (!l)
            return -1;
        x->line = l;
        x->line_cap = cap;
    }
    memcpy(x->line + x->line_len, s, n);
    x->line_len += n;
    return 0;
}

/* "HTTP/x.y NNN " (llhttp bounds the version digits and the 3-digit status). */
static int status_prefix(h1_xfer *x, const llhttp_t *p) {
    char pre[16];
    if (p->status_code < 100 || p->status_code > 599) { /* RFC 9110 §15: 3 digits, 1xx-5xx */
        x->bad_status = 1;
        return -1;
    }
    unsigned st = p->status_code % 1000;
    memcpy(pre, "HTTP/", 5);
    pre[5] = (char)('0' + p->http_major % 10);
    pre[6] = '.';
    pre[7] = (char)('0' + p->http_minor % 10);
    pre[8] = ' ';
    pre[9] = (char)('0' + st / 100);
    pre[10] = (char)('0' + st / 10 % 10);
    pre[11] = (char)('0' + st % 10);
    pre[12] = ' ';
    x->lstate = LS_STATUS;
    return line_add(x, pre, 13);
}

/* Moves the pending raw line into line. Returns 0, or -1 (out of memory). */
static int raw_to_line(h1_xfer *x) {
    const char *r = x->raw;
    x->raw = NULL;
    return line_add(x, r, x->raw_len);
}

/* 1 when from..to (the bytes between a field name and its value, as received) is ": ":
 * then the received bytes are the line line_add would build, byte for byte. */
static int plain_separator(const char *from, const char *to) {
    return to - from == 2 && from[0] == ':' && from[1] == ' ';
}

/* 1 when line (n bytes) is a Transfer-Encoding field with a coding other than chunked
 * (RFC 9112 §6.1: aor asks for none, and decodes none). */
static int unsupported_coding(const char *line, size_t n) {
    static const char name[] = "transfer-encoding:";
    /* Cheap tests first: this runs for every header line of every answer. */
    if (n < sizeof name - 1 || line[sizeof name - 2] != ':' || (line[0] | 0x20) != 't' ||
        strncasecmp(line, name, sizeof name - 1) != 0)
        return 0;
    const char *v = line + sizeof name - 1, *end = line + n;
    while (v < end && (*v == ' ' || *v == '\t'))
        v++;
    while (end > v && (end[-1] == ' ' || end[-1] == '\t'))
        end--;
    return !((size_t)(end - v) == 7 && strncasecmp(v, "chunked", 7) == 0);
}

/* Hands the line built so far to on_header. Returns nonzero to stop the parser. */
static int emit_line(h1_xfer *x, const llhttp_t *p) {
    if (x->lstate == LS_NONE)
        return 0;
    if (x->lstate == LS_STATUS_START && status_prefix(x, p) != 0)
        return -1;
    if (x->lstate != LS_STATUS && x->lstate != LS_STATUS_START &&
        ++x->head_lines > HEAD_MAX_LINES) {
        /* Every line counts (a retry hint may be the last): too many is a bad answer, not
         * one with lines silently dropped. */
        x->head_too_many = 1;
        return -1;
    }
    const char *line = x->line ? x->line : "";
    size_t n = x->line_len;
    if (x->raw) {
        line = x->raw;
        n = x->raw_len;
        x->raw = NULL;
    } else if (x->lstate == LS_STATUS && n && x->line[n - 1] == ' ') {
        n--; /* no reason phrase */
    }
    if (x->lstate != LS_STATUS && unsupported_coding(line, n)) {
        /* llhttp takes the chunked framing off and would hand on the body still in the
         * other coding (gzip), which the client, told nothing, takes as it is. */
        x->te_unsupported = 1;
        return -1;
    }
    x->in_cb++;
    x->cb.on_header(x->arg, line, n);
    x->in_cb--;
    x->line_len = 0;
    x->lstate = LS_NONE;
    return x->cancelled;
}

static h1_xfer *parser_xfer(llhttp_t *p) {
    h1_conn *c = p->data;
    return c->x;
}

/* Counts len more bytes of the header section. Returns nonzero (stop) past HEAD_MAX_BYTES:
 * llhttp, unlike http_parser before it, has no limit of its own. */
static int head_count(h1_xfer *x, size_t len) {
    x->head_bytes += len;
    if (x->head_bytes <= HEAD_MAX_BYTES)
        return 0;
    x->head_too_big = 1;
    return -1;
}

static int on_message_begin(llhttp_t *p) {
    h1_xfer *x = parser_xfer(p);
    x->head_bytes = 0;
    x->head_lines = 0;
    x->line_len = 0;
    x->raw = NULL;
    x->lstate = LS_STATUS_START;
    x->status = 0;
    return 0;
}

static int on_status(llhttp_t *p, const char *at, size_t len) {
    h1_xfer *x = parser_xfer(p);
    if (head_count(x, len) != 0)
        return -1;
    if (x->lstate == LS_STATUS_START && status_prefix(x, p) != 0)
        return -1;
    return line_add(x, at, len);
}

static int on_header_field(llhttp_t *p, const char *at, size_t len) {
    h1_xfer *x = parser_xfer(p);
    if (x->lstate == LS_TRAILER)
        return 0;
    if (head_count(x, len) != 0)
        return -1;
    if (x->lstate != LS_FIELD) {
        if (emit_line(x, p) != 0)
            return -1;
        x->lstate = LS_FIELD;
        x->raw = at; /* a new line: no copy while it stays in one piece */
        x->raw_len = len;
        return 0;
    }
    if (x->raw && raw_to_line(x) != 0)
        return -1;
    return line_add(x, at, len);
}

static int on_header_value(llhttp_t *p, const char *at, size_t len) {
    h1_xfer *x = parser_xfer(p);
    if (x->lstate == LS_TRAILER)
        return 0;
    if (head_count(x, len) != 0)
        return -1;
    if (memchr(at, '\0', len)) { /* lenient parsing lets it through; lines are text */
        x->head_nul = 1;
        return -1;
    }
    if (x->lstate == LS_FIELD) {
        x->lstate = LS_VALUE;
        /* Whitespace between the name and its colon: lenient llhttp takes the name without
         * it ("Content-Length : 2" frames the body); the line handed on drops it too, so
         * the caller sees the field the body was framed by (RFC 9112 §5.1: a proxy removes
         * it). */
        size_t *nl = x->raw ? &x->raw_len : &x->line_len;
        const char *nm = x->raw ? x->raw : x->line;
        while (*nl > 0 && (nm[*nl - 1] == ' ' || nm[*nl - 1] == '\t'))
            (*nl)--;
        if (x->raw && plain_separator(x->raw + x->raw_len, at)) {
            x->raw_len = (size_t)(at + len - x->raw); /* "Name: value" as received */
            return 0;
        }
        if ((x->raw && raw_to_line(x) != 0) || line_add(x, ": ", 2) != 0)
            return -1;
        return line_add(x, at, len);
    }
    if (x->raw && raw_to_line(x) != 0)
        return -1;
    return line_add(x, at, len);
}

static int on_headers_complete(llhttp_t *p) {
    h1_xfer *x = parser_xfer(p);
    if (x->lstate == LS_FIELD && ((x->raw && raw_to_line(x) != 0) || line_add(x, ":", 1) != 0))
        return -1; /* a name without a value */
    if (emit_line(x, p) != 0)
        return -1;
    x->status = p->status_code;
    x->lstate = LS_TRAILER;
    x->in_cb++;
    x->cb.on_header(x->arg, "", 0);
    x->in_cb--;
    if (x->cancelled)
        return -1;
    /* 1: no body. RFC 9112 §6.3: the answer to HEAD and every 1xx, 204 or 304 answer end
     * at the empty line whatever their fields say; llhttp would read a body announced by
     * Content-Length or chunked Transfer-Encoding on some of these. */
    unsigned st = p->status_code;
    return x->is_head || st / 100 == 1 || st == 204 || st == 304 ? 1 : 0;
}

static int hold(h1_xfer *x, const char *at, size_t len) {
    if (x->held_len + len > x->held_cap) {
        size_t cap = x->held_cap ? x->held_cap : READ_CHUNK;
        while (cap < x->held_len + len)
            cap *= 2;
        char *n = realloc(x->held, cap);
        if (!n)
            return -1;
        x->held = n;
        x->held_cap = cap;
    }
    memcpy(x->held + x->held_len, at, len);
    x->held_len += len;
    return 0;
}

static int on_body(llhttp_t *p, const char *at, size_t len) {
    h1_xfer *x = parser_xfer(p);
    if (x->held_len)
        return hold(x, at, len); /* paused: keep the order */
    x->in_cb++;
    size_t r = x->cb.on_data(x->arg, at, len);
    x->in_cb--;
    if (x->cancelled)
        return -1;
    if (r == CURL_WRITEFUNC_PAUSE) {
        x->paused = 1;
        return hold(x, at, len);
    }
    if (r != len) {
        x->cut = 1;
        return -1;
    }
    return 0;
}

static int on_message_complete(llhttp_t *p) {
    h1_xfer *x = parser_xfer(p);
    if (p->status_code == 101) {
        x->switched = 1; /* aor never asks to switch protocols: not an answer */
        return -1;
    }
    if (p->status_code >= 100 && p->status_code < 200)
        return 0; /* an interim answer: the real one follows */
    x->complete = 1;
    x->keep_alive = llhttp_should_keep_alive(p); /* llhttp resets it after this message */
    return HPE_PAUSED; /* stop here: execute stops after the bytes of this answer */
}

/* ---- reading ---------------------------------------------------------------------- */

/* 1 when OpenSSL holds more than protocol records after an answer: bytes of a next
 * "answer", or the end of the connection (close_notify). With read-ahead they came in
 * with the answer's last record, so the idle connection's socket would never show them
 * and the next request would get them. Session tickets and key updates are consumed
 * here and leave the connection reusable. */
static int tls_more_after_answer(h1_conn *c) {
    if (!c->ssl || !SSL_has_pending(c->ssl))
        return 0;
    char b;
    ERR_clear_error();
    int r = SSL_peek(c->ssl, &b, 1);
    int e = r > 0 ? SSL_ERROR_NONE : SSL_get_error(c->ssl, r);
    ERR_clear_error();
    return r > 0 || e != SSL_ERROR_WANT_READ;
}

/* 1 when bytes (or the end) wait in c's socket after a complete answer whose last read
 * filled its buffer. The read event of an idle connection would see them, but the next
 * request may take the connection from the pool in this same loop pass and would read
 * them as its answer (an upstream whose body outran its Content-Length). A read that
 * did not fill its buffer emptied the socket: no system call then (as nginx decides
 * whether to keep an upstream connection). */
static int socket_more_after_answer(h1_conn *c) {
    if (!c->last_read_full)
        return 0;
    char b;
    ssize_t r = recv(c->fd, &b, 1, MSG_PEEK | MSG_DONTWAIT);
    return r >= 0 || (errno != EAGAIN && errno != EWOULDBLOCK);
}

/* Ends x after its answer is complete and on_data has taken every byte. */
static void finish_ok(h1_xfer *x) {
    h1_conn *c = x->c;
    int reusable = c && !c->send_failed && !x->cut && !x->leftover && x->keep_alive &&
                   x->status >= 200 && (!c->out || evbuffer_get_length(c->out) == 0) &&
                   !tls_more_after_answer(c) && !socket_more_after_answer(c);
    detach_conn(x, reusable);
    xfer_end(x, CURLE_OK, NULL);
}

/* After a failure of a reused connection before any byte of the answer: once more on a
 * new connection, when the upstream cannot have acted on the request. sent_whole: 0 when
 * the failure came while the request was being written (a send fails only on a
 * connection that was already closed or reset: the request never arrived whole), 1 when
 * it had been written whole and the connection then ended without an answer: sent again
 * only when the connection had been idle for RETRY_IDLE_MIN_MS or more, so that the
 * upstream's keep-alive timeout may have closed it just as the request went out (as
 * libcurl does). A connection that answered moments before and then drops a request it
 * read is a failed attempt like any other: sending it again would make the same
 * (provider, key) try it twice (§5.3) and might bill a completion twice (QA). Returns 1
 * when it sent again. */
static int retry_fresh(h1_xfer *x, int sent_whole) {
    h1_conn *c = x->c;
    if (!c || x->got_bytes || x->retried || c->served == 0)
        return 0;
    if (sent_whole && c->idle_ms < x->h->retry_idle_min_ms)
        return 0;
    x->retried = 1;
    detach_conn(x, 0);
    aor_debug("upstream %s: kept-alive connection was closed; sending on a new one", x->o->prefix);
    conn_start(x->h, x);
    return 1;
}

/* The connection ended (EOF, or err != 0) while x was on it. */
static void conn_lost(h1_xfer *x, int err, const char *tls_err) {
    h1_conn *c = x->c;
    if (!x->complete && x->got_bytes && !err) {
        /* An answer delimited by the end of the connection ends here. */
        x->in_cb++;
        llhttp_finish(&c->parser);
        x->in_cb--;
        if (x->cancelled) {
            xfer_kill(x);
            return;
        }
    }
    if (x->complete) {
        x->leftover = 1; /* closed: not reusable */
        if (!x->held_len)
            finish_ok(x);
        return;
    }
    if (!(c && c->send_failed) && retry_fresh(x, !c || !c->out || evbuffer_get_length(c->out) == 0))
        return;
    char text[256];
    CURLcode code;
    if (x->cut) {
        code = CURLE_WRITE_ERROR;
        snprintf(text, sizeof text, "transfer stopped by aor");
    } else if (!x->got_bytes && c && c->send_failed) {
        code = CURLE_SEND_ERROR; /* no answer came before the connection ended */
        snprintf(text, sizeof text, "sending to %s failed: %s", x->o->prefix, c->send_err);
    } else if (!x->got_bytes) {
        code = err ? CURLE_RECV_ERROR : CURLE_GOT_NOTHING;
        snprintf(text, sizeof text, "%s from %s",
                 err ? (tls_err ? tls_err : strerror(err)) : "Empty reply", x->o->prefix);
    } else {
        code = err ? CURLE_RECV_ERROR : CURLE_PARTIAL_FILE;
        snprintf(text, sizeof text, "connection to %s ended before the answer was complete%s%s",
                 x->o->prefix, err ? ": " : "", err ? (tls_err ? tls_err : strerror(err)) : "");
    }
    xfer_end(x, code, text);
}

/* Feeds answer bytes to the parser. Returns the bytes taken; sets x->complete at the end
 * of the answer. On a parse error or a cut, ends x (with on_done) and returns -1; when x
 * was cancelled meanwhile, frees it and returns -1. The connection is then gone too. */
static ssize_t feed(h1_conn *c, const char *data, size_t len) {
    h1_xfer *x = c->x;
    x->got_bytes = 1;
    x->progress++;
    x->in_cb++;
    llhttp_errno_t e = llhttp_execute(&c->parser, data, len);
    size_t n = aor_http_parsed(&c->parser, e, data, len);
    x->in_cb--;
    if (x->cancelled) {
        xfer_kill(x);
        return -1;
    }
    /* A header line the next read goes on with: copied before data is reused. */
    if (x->raw && raw_to_line(x) != 0) {
        xfer_end(x, CURLE_OUT_OF_MEMORY, "out of memory reading an answer's header");
        return -1;
    }
    if (e == HPE_PAUSED) {
        llhttp_resume(&c->parser);
        if (n < len)
            x->leftover = 1;
        return (ssize_t)n;
    }
    if (e != HPE_OK) {
        char text[256];
        if (x->cut)
            snprintf(text, sizeof text, "transfer stopped by aor");
        else if (x->bad_status)
            snprintf(text, sizeof text,
                     "not a valid HTTP/1.1 answer from %s: status code %d is not 100-599",
                     x->o->prefix, (int)c->parser.status_code);
        else if (x->head_nul)
            snprintf(text, sizeof text,
                     "not a valid HTTP/1.1 answer from %s: NUL byte in a header value",
                     x->o->prefix);
        else if (x->te_unsupported)
            snprintf(text, sizeof text,
                     "not a usable HTTP/1.1 answer from %s: a transfer coding other than "
                     "chunked (aor asks for none)",
                     x->o->prefix);
        else if (x->head_too_many)
            snprintf(text, sizeof text, "not a valid HTTP/1.1 answer from %s: over %d header lines",
                     x->o->prefix, HEAD_MAX_LINES);
        else if (x->head_too_big)
            snprintf(text, sizeof text,
                     "not a valid HTTP/1.1 answer from %s: header section over %d KiB",
                     x->o->prefix, HEAD_MAX_BYTES / 1024);
        else if (x->switched)
            snprintf(text, sizeof text,
                     "%s answered 101 Switching Protocols to a request that asked for no "
                     "protocol switch",
                     x->o->prefix);
        else
            snprintf(text, sizeof text, "not a valid HTTP/1.1 answer from %s: %s", x->o->prefix,
                     aor_http_parse_error(&c->parser, e));
        xfer_end(x, x->cut ? CURLE_WRITE_ERROR : CURLE_WEIRD_SERVER_REPLY, text);
        return -1;
    }
    return (ssize_t)n;
}

static void tls_handshake(h1_conn *c);
static int tls_flush(h1_conn *c);
static void send_failed(h1_conn *c, const char *why);

/* The first OpenSSL error queued as text, and the queue cleared; NULL if none. */
static const char *tls_error(char *buf, size_t cap) {
    unsigned long e = ERR_get_error();
    ERR_clear_error();
    if (!e)
        return NULL;
    ERR_error_string_n(e, buf, cap);
    return buf;
}

/* One read from c: recv, or SSL_read with TLS. Returns the bytes read, 0 at the end of
 * the connection, or -1 with errno (EAGAIN: nothing now; EIO: a TLS error, its text in
 * ebuf). */
static ssize_t conn_read(h1_conn *c, char *buf, size_t cap, char *ebuf, size_t ecap) {
    if (!c->ssl)
        return recv(c->fd, buf, cap, 0);
    aor_tls_io_clear_errors();
    int n = SSL_read(c->ssl, buf, (int)cap);
    if (n > 0)
        return n;
    switch (SSL_get_error(c->ssl, n)) {
    case SSL_ERROR_WANT_READ:
        errno = EAGAIN;
        return -1;
    case SSL_ERROR_WANT_WRITE:
        /* OpenSSL has an answer of its own to send (a TLS 1.3 key update) and the socket
         * is full: the write event reads again once it has gone. */
        c->tls_read_wants_write = 1;
        event_add(c->wev, NULL);
        errno = EAGAIN;
        return -1;
    case SSL_ERROR_ZERO_RETURN: /* close_notify, or EOF (SSL_OP_IGNORE_UNEXPECTED_EOF) */
        return 0;
    case SSL_ERROR_SYSCALL:
        if (!ERR_peek_error()) {
            if (errno == 0)
                return 0;
            return -1;
        }
        /* fall through */
    default:
        if (!tls_error(ebuf, ecap))
            snprintf(ebuf, ecap, "TLS error");
        errno = EIO;
        return -1;
    }
}

static void on_read(evutil_socket_t fd, short what, void *arg) {
    h1_conn *c = arg;
    aor_h1 *h = c->h;
    char ebuf[200] = "";
    if (c->ssl && !c->connected) {
        tls_handshake(c);
        return;
    }
    if (c->tls_write_wants_read && c->x) {
        c->tls_write_wants_read = 0;
        if (tls_flush(c) < 0)
            return;
    }
    if (!c->x) {
        /* Idle: the server closed it, or sent something unasked. Either way it is done.
         * With TLS, records of the protocol itself (session tickets) are read and fine. */
        if (c->ssl) {
            ssize_t n = conn_read(c, h->scratch, sizeof h->scratch, ebuf, sizeof ebuf);
            if (n < 0 && errno == EAGAIN)
                return;
        }
        conn_close(c);
        return;
    }
    for (int i = 0; i < READS_PER_EVENT; i++) {
        ssize_t n = conn_read(c, h->scratch, sizeof h->scratch, ebuf, sizeof ebuf);
        if (n < 0) {
            if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)
                return;
            conn_lost(c->x, errno, ebuf[0] ? ebuf : NULL);
            return;
        }
        if (n == 0) {
            conn_lost(c->x, 0, NULL);
            return;
        }
        h1_xfer *x = c->x;
        c->last_read_full = (size_t)n == sizeof h->scratch;
        if (feed(c, h->scratch, (size_t)n) < 0)
            return;
        if (x->complete) {
            if (x->held_len)
                event_del(c->rev); /* on_data paused: resume finishes */
            else
                finish_ok(x);
            return;
        }
        if (x->held_len) {
            event_del(c->rev); /* paused: aor_h1_resume reads on */
            return;
        }
        /* Less than a full read: the socket is empty, and with TLS (read-ahead) OpenSSL
         * holds nothing more either: no read() that finds nothing; rev fires again if
         * more came meanwhile. A full read (or record) means more may wait: read on. */
        if ((size_t)n < sizeof h->scratch && (!c->ssl || !SSL_has_pending(c->ssl)))
            return;
    }
    /* More may be there: go on in the next loop pass, after other connections. */
    if (c->ssl && SSL_has_pending(c->ssl))
        event_active(c->rev, EV_READ, 0);
}

static void send_request(h1_conn *c);

/* Goes on with the TLS handshake of c; once done, sends the request. */
static void tls_handshake(h1_conn *c) {
    h1_xfer *x = c->x;
    if (!x) {
        conn_close(c);
        return;
    }
    ERR_clear_error();
    int r = SSL_do_handshake(c->ssl);
    if (r == 1) {
        if (c->timer) {
            event_free(c->timer);
            c->timer = NULL;
        }
        c->connected = 1;
        send_request(c);
        return;
    }
    int e = SSL_get_error(c->ssl, r);
    if (e == SSL_ERROR_WANT_READ)
        return; /* rev is added */
    if (e == SSL_ERROR_WANT_WRITE) {
        event_add(c->wev, NULL);
        return;
    }
    char ebuf[200];
    int err = errno;
    long vr = SSL_get_verify_result(c->ssl);
    const char *te = tls_error(ebuf, sizeof ebuf);
    if (vr != X509_V_OK)
        xfer_fail_later(x, CURLE_PEER_FAILED_VERIFICATION,
                        "TLS certificate of %s not accepted: %s%s", x->o->prefix,
                        X509_verify_cert_error_string(vr),
                        vr == X509_V_ERR_UNABLE_TO_GET_ISSUER_CERT_LOCALLY ||
                                vr == X509_V_ERR_DEPTH_ZERO_SELF_SIGNED_CERT ||
                                vr == X509_V_ERR_SELF_SIGNED_CERT_IN_CHAIN
                            ? (x->o->ca_file ? " (not signed by a CA of ca_file or the system)"
                                             : " (a private CA? set ca_file)")
                            : "");
    else
        xfer_fail_later(x, CURLE_SSL_CONNECT_ERROR, "TLS handshake with %s failed: %s",
                        x->o->prefix,
                        te                                       ? te
                        : e == SSL_ERROR_ZERO_RETURN || err == 0 ? "connection closed"
                                                                 : strerror(err));
}

/* Writes what c->out holds through TLS until the socket takes no more. 0, or -1 when
 * the connection failed (x is told). */
static int tls_flush(h1_conn *c) {
    if (!c->out || c->send_failed)
        return 0;
    if (c->x)
        c->x->progress++; /* called when the socket took bytes, or may take them */
    switch (aor_tls_io_write(c->ssl, c->out)) {
    case AOR_TLS_IO_DONE:
        return 0;
    case AOR_TLS_IO_WANT_WRITE:
        event_add(c->wev, NULL);
        return 0;
    case AOR_TLS_IO_WANT_READ:
        c->tls_write_wants_read = 1; /* on_read flushes again when rev fires */
        return 0;
    case AOR_TLS_IO_NOMEM:
        xfer_fail_later(c->x, CURLE_OUT_OF_MEMORY, "out of memory sending to %s", c->o->prefix);
        return -1;
    case AOR_TLS_IO_ERROR:
        break;
    }
    char ebuf[200];
    const char *te = tls_error(ebuf, sizeof ebuf);
    send_failed(c, te ? te : strerror(errno ? errno : EIO));
    return -1;
}

/* ---- sending ---------------------------------------------------------------------- */

/* A send on c failed (why: the error's text). A reused connection that the upstream
 * closed sends on a new one (retry_fresh). Otherwise nothing more is sent and the socket
 * is read first: an upstream may answer before reading the whole body and then close
 * with the rest unread, which resets the connection (an early 413 to a large upload,
 * RFC 9112 §9.6); the answer is still in the socket and goes to the client as it came.
 * Until 2026-12-03 the attempt failed as transient and the walk sent the body to every
 * key (QA: 3 keys backed off, the model's circuit open for everyone). With no answer
 * there, conn_lost ends x with this error. */
static void send_failed(h1_conn *c, const char *why) {
    h1_xfer *x = c->x;
    if (retry_fresh(x, 0))
        return;
    c->send_failed = 1;
    snprintf(c->send_err, sizeof c->send_err, "%s", why);
    event_del(c->wev);
    event_active(c->rev, EV_READ, 0);
}

static void on_write_ready(evutil_socket_t fd, short what, void *arg) {
    h1_conn *c = arg;
    if (c->ssl) {
        if (!c->connected) {
            tls_handshake(c);
            return;
        }
        if (c->tls_read_wants_write) {
            c->tls_read_wants_write = 0;
            event_active(c->rev, EV_READ, 0);
        }
        if (c->x)
            tls_flush(c);
        return;
    }
    if (!c->x || !c->out || c->send_failed)
        return;
    int n = evbuffer_write(c->out, fd);
    if (n < 0 && errno != EAGAIN && errno != EINTR) {
        send_failed(c, strerror(errno));
        return;
    }
    if (n > 0)
        c->x->progress++;
    if (evbuffer_get_length(c->out) > 0)
        event_add(c->wev, NULL);
}

static void send_request(h1_conn *c) {
    h1_xfer *x = c->x;
    llhttp_init(&c->parser, HTTP_RESPONSE, &c->h->settings);
    /* Tolerant of what upstreams send, as http_parser was: bare LF line ends, control
     * characters in values (a lone CR is still an error; NUL is refused in
     * on_header_value), whitespace before a field's colon (removed in on_header_value). */
    llhttp_set_lenient_headers(&c->parser, 1);
    c->parser.data = c;
    x->got_bytes = 0;
    x->complete = 0;
    x->leftover = 0;
    if (c->ssl) {
        /* Head and a small body go out as one TLS record (tls_flush). */
        if (!c->out && !(c->out = evbuffer_new()))
            goto fail_mem;
        if (evbuffer_add(c->out, x->head, x->head_len) != 0)
            goto fail_mem;
        if (x->body_len >= BODY_REF_MIN) {
            if (evbuffer_add_reference(c->out, x->body, x->body_len, NULL, NULL) != 0)
                goto fail_mem;
        } else if (x->body_len && evbuffer_add(c->out, x->body, x->body_len) != 0) {
            goto fail_mem;
        }
        tls_flush(c);
        return;
    }
    /* Plain: straight to the socket; only what the kernel does not take waits. */
    struct iovec iov[2] = {{x->head, x->head_len}, {(void *)x->body, x->body_len}};
    struct msghdr mh = {.msg_iov = iov, .msg_iovlen = x->body_len ? 2 : 1};
    ssize_t n = sendmsg(c->fd, &mh, MSG_NOSIGNAL);
    if (n < 0) {
        if (errno != EAGAIN && errno != EINTR) {
            send_failed(c, strerror(errno));
            return;
        }
        n = 0;
    }
    size_t sent = (size_t)n, total = x->head_len + x->body_len;
    if (sent == total)
        return;
    if (!c->out && !(c->out = evbuffer_new()))
        goto fail_mem;
    if (sent < x->head_len) {
        if (evbuffer_add(c->out, x->head + sent, x->head_len - sent) != 0)
            goto fail_mem;
        sent = x->head_len;
    }
    if (evbuffer_add(c->out, x->body + (sent - x->head_len), total - sent) != 0)
        goto fail_mem;
    event_add(c->wev, NULL);
    return;
fail_mem:
    xfer_fail_later(x, CURLE_OUT_OF_MEMORY, "out of memory sending to %s", x->o->prefix);
}

/* ---- connecting ------------------------------------------------------------------- */

static void connect_next(h1_conn *c);
static void arm_timer(h1_conn *c);

static void tls_start(h1_conn *c) {
    h1_xfer *x = c->x;
    h1_origin *o = c->o;
    SSL *ssl = SSL_new(o->ctx);
    if (!ssl)
        goto fail;
    if (o->host_is_ip) {
        X509_VERIFY_PARAM *vp = SSL_get0_param(ssl);
        if (!X509_VERIFY_PARAM_set1_ip_asc(vp, o->host))
            goto fail_ssl;
    } else if (!SSL_set_tlsext_host_name(ssl, o->host) || !SSL_set1_host(ssl, o->host)) {
        goto fail_ssl;
    }
    if (aor_tls_io_attach(ssl, c->fd, 0) != 0)
        goto fail_ssl;
    c->ssl = ssl;
    tls_handshake(c); /* sends the ClientHello; rev and wev carry it on */
    return;
fail_ssl:
    SSL_free(ssl);
fail:
    xfer_fail_later(x, CURLE_OUT_OF_MEMORY, "could not start TLS with %s", o->prefix);
}

static void on_connected(h1_conn *c) {
    evutil_freeaddrinfo(c->ai);
    c->ai = c->ai_next = NULL;
    c->ai_left = 0;
    int one = 1;
    setsockopt(c->fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    setsockopt(c->fd, SOL_SOCKET, SO_KEEPALIVE, &one, sizeof one);
    event_assign(c->wev, c->h->base, c->fd, EV_WRITE, on_write_ready, c);
    c->rev = event_new(c->h->base, c->fd, EV_READ | EV_PERSIST, on_read, c);
    if (!c->rev || event_add(c->rev, NULL) != 0) {
        xfer_fail_later(c->x, CURLE_OUT_OF_MEMORY, "out of memory");
        return;
    }
    if (c->o->tls) {
        arm_timer(c); /* the handshake gets what is left of the connect time */
        tls_start(c);
        return;
    }
    if (c->timer) {
        event_free(c->timer);
        c->timer = NULL;
    }
    c->connected = 1;
    send_request(c);
}

static void on_connect_event(evutil_socket_t fd, short what, void *arg) {
    h1_conn *c = arg;
    int err = 0;
    socklen_t len = sizeof err;
    if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) != 0)
        err = errno;
    if (err == 0) {
        on_connected(c);
        return;
    }
    snprintf(c->last_err, sizeof c->last_err, "%s", strerror(err));
    event_free(c->wev);
    c->wev = NULL;
    close(c->fd);
    c->fd = -1;
    connect_next(c);
}

static void arm_timer(h1_conn *c) {
    long long left = c->deadline_ms - aor_clock_mono_ms();
    if (left < 1)
        left = 1;
    if (c->ai_left > 1 && left / c->ai_left > MIN_ATTEMPT_MS)
        left /= c->ai_left;
    else if (c->ai_left > 1 && left > MIN_ATTEMPT_MS)
        left = MIN_ATTEMPT_MS;
    struct timeval tv = {(time_t)(left / 1000), (suseconds_t)((left % 1000) * 1000)};
    evtimer_add(c->timer, &tv);
}

/* 1 for errors of socket()/connect() that are aord's own limits (file descriptors,
 * memory), which say nothing about the upstream. (Not EADDRNOTAVAIL: an address family
 * the host cannot reach gives it too, and the next address may work.) */
static int local_resource_errno(int e) {
    return e == EMFILE || e == ENFILE || e == ENOMEM || e == ENOBUFS;
}

static void connect_next(h1_conn *c) {
    h1_xfer *x = c->x;
    while (c->ai_next) {
        struct evutil_addrinfo *ai = c->ai_next;
        c->ai_next = ai->ai_next;
        c->ai_left--;
        int fd = socket(ai->ai_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, IPPROTO_TCP);
        if (fd < 0 && local_resource_errno(errno)) {
            /* aord's own limit, not the upstream's failure: no key is to blame (§4.1). */
            xfer_fail_later(x, CURLE_OUT_OF_MEMORY, "aord cannot open a socket: %s",
                            strerror(errno));
            return;
        }
        if (fd < 0) {
            snprintf(c->last_err, sizeof c->last_err, "%s", strerror(errno));
            continue;
        }
        if (connect(fd, ai->ai_addr, ai->ai_addrlen) != 0 && errno != EINPROGRESS) {
            int e = errno;
            close(fd);
            if (local_resource_errno(e)) {
                xfer_fail_later(x, CURLE_OUT_OF_MEMORY, "aord cannot connect: %s", strerror(e));
                return;
            }
            snprintf(c->last_err, sizeof c->last_err, "%s", strerror(e));
            continue;
        }
        c->fd = fd;
        c->wev = event_new(c->h->base, fd, EV_WRITE, on_connect_event, c);
        if (!c->wev || event_add(c->wev, NULL) != 0) {
            xfer_fail_later(x, CURLE_OUT_OF_MEMORY, "out of memory");
            return;
        }
        arm_timer(c);
        return;
    }
    xfer_fail_later(x, CURLE_COULDNT_CONNECT, "could not connect to %s: %s", x->o->prefix,
                    c->last_err[0] ? c->last_err : "no address");
}

static void on_connect_timeout(evutil_socket_t fd, short what, void *arg) {
    h1_conn *c = arg;
    h1_xfer *x = c->x;
    if (!x) {
        conn_close(c);
        return;
    }
    if (c->wev && !c->rev && !c->connected && c->ai_next && aor_clock_mono_ms() < c->deadline_ms) {
        /* This address is slow: try the next one. */
        snprintf(c->last_err, sizeof c->last_err, "timed out");
        event_free(c->wev);
        c->wev = NULL;
        close(c->fd);
        c->fd = -1;
        connect_next(c);
        return;
    }
    if (c->ssl)
        xfer_fail_later(x, CURLE_OPERATION_TIMEDOUT,
                        "TLS handshake with %s timed out (connect time %ld ms)", x->o->prefix,
                        x->connect_timeout_ms);
    else
        xfer_fail_later(x, CURLE_OPERATION_TIMEDOUT, "connecting to %s timed out after %ld ms",
                        x->o->prefix, x->connect_timeout_ms);
}

static void on_resolved(int result, struct evutil_addrinfo *res, void *arg) {
    if (result == EVUTIL_EAI_CANCEL) {
        if (res)
            evutil_freeaddrinfo(res);
        return; /* the connection is gone */
    }
    h1_conn *c = arg;
    h1_xfer *x = c->x;
    c->dnsreq = NULL;
    if (!x) {
        if (res)
            evutil_freeaddrinfo(res);
        conn_close(c);
        return;
    }
    if (result != 0 || !res) {
        if (res)
            evutil_freeaddrinfo(res);
        /* libevent's texts for these are the BSD ones; say it plainly. */
        const char *why = result == EVUTIL_EAI_NONAME  ? "no such host name"
                          : result == EVUTIL_EAI_AGAIN ? "temporary failure of the DNS lookup"
                          : result == EVUTIL_EAI_FAIL  ? "the DNS server failed"
                                                       : evutil_gai_strerror(result);
        xfer_fail_later(x, CURLE_COULDNT_RESOLVE_HOST, "could not resolve host %s: %s", c->o->host,
                        why);
        return;
    }
    c->ai = c->ai_next = res;
    c->ai_left = 0;
    for (struct evutil_addrinfo *a = res; a; a = a->ai_next)
        c->ai_left++;
    connect_next(c);
}

/* Opens a new connection for x. Every failure comes through xfer_fail_later. */
static void conn_start(aor_h1 *h, h1_xfer *x) {
    h1_origin *o = x->o;
    h1_conn *c = calloc(1, sizeof *c);
    if (!c) {
        xfer_fail_later(x, CURLE_OUT_OF_MEMORY, "out of memory");
        return;
    }
    c->h = h;
    c->o = o;
    c->fd = -1;
    c->x = x;
    x->c = c;
    c->deadline_ms = aor_clock_mono_ms() + x->connect_timeout_ms;
    c->timer = evtimer_new(h->base, on_connect_timeout, c);
    if (!c->timer) {
        xfer_fail_later(x, CURLE_OUT_OF_MEMORY, "out of memory");
        return;
    }
    struct evutil_addrinfo hints;
    memset(&hints, 0, sizeof hints);
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    hints.ai_protocol = IPPROTO_TCP;
    if (o->host_is_ip) {
        hints.ai_flags = EVUTIL_AI_NUMERICHOST | EVUTIL_AI_NUMERICSERV;
        struct evutil_addrinfo *res = NULL;
        int r = evutil_getaddrinfo(o->host, o->port, &hints, &res);
        on_resolved(r, res, c);
        return;
    }
    if (!h->dns) {
        resolv_id_of(RESOLV_CONF, &h->resolv);
        resolv_id_of(HOSTS_FILE, &h->hosts);
        h->dns = evdns_base_new(h->base, EVDNS_BASE_INITIALIZE_NAMESERVERS |
                                             EVDNS_BASE_DISABLE_WHEN_INACTIVE);
        if (!h->dns) {
            xfer_fail_later(x, CURLE_COULDNT_RESOLVE_HOST,
                            "could not resolve host %s: no resolver (/etc/resolv.conf)", o->host);
            return;
        }
    } else {
        dns_follow_system_files(h);
    }
    hints.ai_flags = EVUTIL_AI_ADDRCONFIG;
    struct timeval tv = {(time_t)(x->connect_timeout_ms / 1000),
                         (suseconds_t)((x->connect_timeout_ms % 1000) * 1000)};
    evtimer_add(c->timer, &tv);
    /* The callback may run before this returns (then NULL is returned and c may be
     * gone): c is used after the call only when the lookup is still in flight. */
    struct evdns_getaddrinfo_request *r =
        evdns_getaddrinfo(h->dns, o->host, o->port, &hints, on_resolved, c);
    if (r)
        c->dnsreq = r;
}

/* ---- origins ---------------------------------------------------------------------- */

static void origin_free(h1_origin *o) {
    free(o->prefix);
    free(o->ca_file);
    free(o->host);
    if (o->ctx)
        SSL_CTX_free(o->ctx);
    free(o);
}

/* 1 when two ca_file settings name the same file (NULL: none, the system store alone). */
static int same_ca_file(const char *a, const char *b) {
    return a == b || (a && b && strcmp(a, b) == 0);
}

static void trusts_free(aor_h1 *h) {
    while (h->trusts) {
        h1_trust *t = h->trusts;
        h->trusts = t->next;
        X509_STORE_free(t->store); /* contexts made with it hold their own reference */
        free(t->ca_file);
        free(t);
    }
}

/* The verify store for ca_file (NULL: the system store alone), loaded now unless an
 * origin loaded it already since the last reload. NULL on ENOMEM. */
static X509_STORE *trust_get(aor_h1 *h, const char *ca_file) {
    for (h1_trust *t = h->trusts; t; t = t->next)
        if (same_ca_file(t->ca_file, ca_file))
            return t->store;
    h1_trust *t = calloc(1, sizeof *t);
    if (!t || (ca_file && !(t->ca_file = strdup(ca_file))) || !(t->store = X509_STORE_new()))
        goto fail;
    /* The system store, and ca_file as an extra CA (spec §3: "optional extra CA"). */
    long long t0 = aor_clock_mono_ms();
    if (!X509_STORE_set_default_paths(t->store)) {
        aor_warn("upstream TLS: could not load the system CA store");
        ERR_clear_error();
    }
    if (ca_file && !X509_STORE_load_file(t->store, ca_file)) {
        aor_warn("upstream TLS: could not load %s", ca_file);
        ERR_clear_error();
    }
    aor_debug("upstream TLS: loaded the system CA store%s%s (%lld ms)", ca_file ? " and " : "",
              ca_file ? ca_file : "", aor_clock_mono_ms() - t0);
    t->next = h->trusts;
    h->trusts = t;
    return t->store;
fail:
    if (t) {
        free(t->ca_file);
        free(t);
    }
    return NULL;
}

static SSL_CTX *client_ctx(aor_h1 *h, const char *ca_file) {
    X509_STORE *store = trust_get(h, ca_file);
    SSL_CTX *ctx = store ? SSL_CTX_new(TLS_client_method()) : NULL;
    if (!ctx)
        return NULL;
    SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION);
    SSL_CTX_set_options(ctx, SSL_OP_IGNORE_UNEXPECTED_EOF | SSL_OP_NO_RENEGOTIATION);
    SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER, NULL);
    static const unsigned char alpn[] = {8, 'h', 't', 't', 'p', '/', '1', '.', '1'};
    SSL_CTX_set_alpn_protos(ctx, alpn, sizeof alpn);
    SSL_CTX_set1_cert_store(ctx, store);
    return ctx;
}

/* Length of "scheme://authority" at the start of url, or 0. */
static size_t origin_len(const char *url) {
    const char *s = strstr(url, "://");
    if (!s)
        return 0;
    s += 3;
    size_t n = strcspn(s, "/?#");
    if (n == 0)
        return 0;
    return (size_t)(s - url) + n;
}

/* The origin of url (made on first use); NULL with *why set when the URL is not one for
 * this path, or on ENOMEM. */
static h1_origin *origin_get(aor_h1 *h, const char *url, const char *ca_file, int *why) {
    size_t n = origin_len(url);
    if (!n) {
        *why = AOR_H1_UNSUPPORTED;
        return NULL;
    }
    for (h1_origin *o = h->origins; o; o = o->next) {
        if (o->prefix_len == n && memcmp(o->prefix, url, n) == 0 &&
            same_ca_file(o->ca_file, ca_file)) {
            if (o->trust_stale) {
                /* New connections verify with the files as they are now; pooled ones
                 * (verified already) and those using the old context keep it. */
                SSL_CTX *fresh = client_ctx(h, o->ca_file);
                if (fresh) {
                    SSL_CTX_free(o->ctx);
                    o->ctx = fresh;
                    o->trust_stale = 0;
                }
            }
            return o;
        }
    }
    h1_origin *o = calloc(1, sizeof *o);
    if (!o)
        goto fail;
    o->prefix = strndup(url, n);
    o->ca_file = ca_file ? strdup(ca_file) : NULL;
    if (!o->prefix || (ca_file && !o->ca_file))
        goto fail;
    o->prefix_len = n;
    o->authority = strstr(o->prefix, "://") + 3;
    /* The base_url syntax of the config (aor_config_url_split): no credentials; an IPv6
     * zone id ('%') is not an address it takes, so libcurl gets that URL. */
    const char *uwhy;
    int port;
    if (aor_config_url_split(o->prefix, &o->host, &port, &o->tls, &uwhy) != 0) {
        *why = AOR_H1_UNSUPPORTED;
        goto fail;
    }
    snprintf(o->port, sizeof o->port, "%d", port);
    unsigned char buf[sizeof(struct in6_addr)];
    o->host_is_ip = inet_pton(AF_INET, o->host, buf) == 1 || inet_pton(AF_INET6, o->host, buf) == 1;
    if (o->tls && !(o->ctx = client_ctx(h, ca_file)))
        goto fail;
    o->next = h->origins;
    h->origins = o;
    return o;
fail:
    if (o)
        origin_free(o);
    return NULL;
}

/* ---- request head ----------------------------------------------------------------- */

static int skip_header_line(const char *line) {
    const char *colon = strchr(line, ':');
    if (!colon || colon == line || strpbrk(line, "\r\n"))
        return 1;
    const char *v = colon + 1;
    while (*v == ' ' || *v == '\t')
        v++;
    if (*v == '\0')
        return 1; /* "Name:" removes a header in libcurl's syntax: nothing to send */
    size_t nl = (size_t)(colon - line);
    return (nl == 4 && strncasecmp(line, "host", 4) == 0) ||
           (nl == 14 && strncasecmp(line, "content-length", 14) == 0) ||
           (nl == 17 && strncasecmp(line, "transfer-encoding", 17) == 0);
}

/* Writes the request head into x->head (grown when too small); its length goes to
 * x->head_len. Returns 0, or -1 when out of memory. */
static int build_head(h1_xfer *x, const h1_origin *o, const aor_xfer_request *req) {
    const char *path = req->url + o->prefix_len;
    int slash = *path != '/';
    int with_length = strcmp(req->method, "GET") != 0 && strcmp(req->method, "HEAD") != 0;
    size_t need = strlen(req->method) + 1 + (size_t)slash + strlen(path) + 11;
    need += 6 + strlen(o->authority) + 2;
    for (const struct curl_slist *s = req->headers; s; s = s->next) {
        if (!skip_header_line(s->data))
            need += strlen(s->data) + 2;
    }
    if (req->header_block)
        need += req->header_block_len;
    need += with_length || req->body_len ? 40 : 0;
    need += 3;
    if (need > x->head_cap) {
        char *n = malloc(need);
        if (!n)
            return -1;
        free(x->head);
        x->head = n;
        x->head_cap = need;
    }
    char *head = x->head;
    size_t at = 0;
#define HEAD_PUT(s, n)                                                                             \
    do {                                                                                           \
        memcpy(head + at, (s), (n));                                                               \
        at += (n);                                                                                 \
    } while (0)
    HEAD_PUT(req->method, strlen(req->method));
    HEAD_PUT(" /", slash ? 2 : 1);
    HEAD_PUT(path, strlen(path));
    HEAD_PUT(" HTTP/1.1\r\nHost: ", sizeof " HTTP/1.1\r\nHost: " - 1);
    HEAD_PUT(o->authority, strlen(o->authority));
    HEAD_PUT("\r\n", 2);
    for (const struct curl_slist *s = req->headers; s; s = s->next) {
        if (skip_header_line(s->data))
            continue;
        size_t l = strlen(s->data);
        memcpy(head + at, s->data, l);
        memcpy(head + at + l, "\r\n", 2);
        at += l + 2;
    }
    if (req->header_block)
        HEAD_PUT(req->header_block, req->header_block_len);
    if (with_length || req->body_len) {
        HEAD_PUT("Content-Length: ", sizeof "Content-Length: " - 1);
        at = (size_t)(aor_http_put_dec(head + at, req->body_len) - head);
        HEAD_PUT("\r\n", 2);
    }
    HEAD_PUT("\r\n", 3);
#undef HEAD_PUT
    x->head_len = at - 1;
    return 0;
}

/* ---- public ----------------------------------------------------------------------- */

static void on_deferred(evutil_socket_t fd, short what, void *arg);

/* The stall checks' clock, seconds: the daemon's fake clock in tests (so they move it),
 * else CLOCK_MONOTONIC (a step of the wall clock must neither cut nor spare a
 * transfer). */
static double stall_now(void) {
    if (aor_clock_is_fake())
        return aor_clock_now();
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

static void on_sweep(evutil_socket_t fd, short what, void *arg) {
    aor_h1_sweep(arg);
}

/* Arms the sweep timer unless it is pending (while transfers exist, it re-arms itself). */
static void sweep_arm(aor_h1 *h) {
    if (!event_pending(h->sweep_ev, EV_TIMEOUT, NULL)) {
        struct timeval tv = {SWEEP_MS / 1000, (SWEEP_MS % 1000) * 1000};
        event_add(h->sweep_ev, &tv);
    }
}

void aor_h1_reload_trust(aor_h1 *h) {
    trusts_free(h); /* loaded again, from the files as they are now, on the next need */
    for (h1_origin *o = h->origins; o; o = o->next)
        o->trust_stale = o->tls;
}

void aor_h1_sweep(aor_h1 *h) {
    double now = stall_now();
    for (h1_xfer *x = h->xfers; x; x = x->next) {
        h1_conn *c = x->c;
        /* Not the upstream's silence: ending already, still connecting (its own timer),
         * a tunnel, or held back because the client reads slowly (its write timeout). */
        if (x->defer || !c || !c->connected || x->switched || x->held_len) {
            x->quiet_since = now;
            continue;
        }
        if (x->progress != x->seen_progress) {
            /* The bytes moved after the last sweep: counted from then (from the last
             * byte, to within one sweep interval). */
            x->seen_progress = x->progress;
            if (h->swept_at > x->quiet_since)
                x->quiet_since = h->swept_at;
        } else if (now - x->quiet_since >= AOR_H1_STALL_S) {
            xfer_fail_later(x, CURLE_OPERATION_TIMEDOUT, "%s sent nothing for %.0f s", x->o->prefix,
                            AOR_H1_STALL_S);
        }
    }
    h->swept_at = now;
    /* Idle connections past their age are closed here too, not only when the next
     * request to their origin passes by (the list is newest first). */
    long long mono = aor_clock_mono_ms();
    while (h->idle_tail && idle_too_old(h, h->idle_tail, mono))
        conn_close(h->idle_tail);
    if (h->xfers || h->idle)
        sweep_arm(h);
}

aor_h1 *aor_h1_new(struct event_base *base) {
    aor_h1 *h = calloc(1, sizeof *h);
    if (!h)
        return NULL;
    h->base = base;
    h->idle_max_ms = IDLE_MAX_AGE_MS;
    h->retry_idle_min_ms = RETRY_IDLE_MIN_MS;
    h->defer_ev = event_new(base, -1, 0, on_deferred, h);
    h->sweep_ev = evtimer_new(base, on_sweep, h);
    if (!h->defer_ev || !h->sweep_ev) {
        if (h->defer_ev)
            event_free(h->defer_ev);
        if (h->sweep_ev)
            event_free(h->sweep_ev);
        free(h);
        return NULL;
    }
    llhttp_settings_init(&h->settings);
    h->settings.on_message_begin = on_message_begin;
    h->settings.on_status = on_status;
    h->settings.on_header_field = on_header_field;
    h->settings.on_header_value = on_header_value;
    h->settings.on_headers_complete = on_headers_complete;
    h->settings.on_body = on_body;
    h->settings.on_message_complete = on_message_complete;
    return h;
}

void aor_h1_free(aor_h1 *h) {
    if (!h)
        return;
    while (h->xfers)
        aor_h1_cancel(&h->xfers->base);
    h1_xfer *x;
    while ((x = aor_pool_take(&h->spares, sizeof *x))) {
        aor_pool_unpoison(x->head, x->head_cap);
        aor_pool_unpoison(x->line, x->line_cap);
        free(x->head);
        free(x->line);
        free(x);
    }
    while (h->idle)
        conn_close(h->idle);
    while (h->origins) {
        h1_origin *o = h->origins;
        h->origins = o->next;
        origin_free(o);
    }
    trusts_free(h);
    if (h->dns)
        evdns_base_free(h->dns, 0);
    event_free(h->defer_ev);
    event_free(h->sweep_ev);
    free(h);
}

void aor_h1_set_idle_max_ms(aor_h1 *h, long long ms) {
    h->idle_max_ms = ms;
}

void aor_h1_set_retry_idle_min_ms(aor_h1 *h, long long ms) {
    h->retry_idle_min_ms = ms;
}

size_t aor_h1_idle_count(const aor_h1 *h) {
    return h->nidle;
}

aor_xfer *aor_h1_start(aor_h1 *h, const aor_xfer_request *req, const aor_xfer_callbacks *cb,
                       void *arg, int *why) {
    *why = 0;
    h1_origin *o = origin_get(h, req->url, req->ca_file, why);
    if (!o) {
        if (*why == AOR_H1_UNSUPPORTED)
            return NULL; /* headers stay with the caller */
        goto fail_headers;
    }
    h1_xfer *x = xfer_new(h);
    if (!x)
        goto fail_headers;
    x->base.backend = AOR_XFER_H1;
    x->h = h;
    x->o = o;
    x->cb = *cb;
    x->arg = arg;
    x->body = req->body ? req->body : "";
    x->body_len = req->body_len;
    x->is_head = strcmp(req->method, "HEAD") == 0;
    x->connect_timeout_ms =
        req->connect_timeout_ms > 0 ? req->connect_timeout_ms : CONNECT_TIMEOUT_MS;
    int built = build_head(x, o, req);
    free_slist(req->headers); /* copied into the head */
    if (built < 0) {
        free(x->head);
        free(x->line);
        free(x);
        return NULL;
    }
    x->next = h->xfers;
    if (h->xfers)
        h->xfers->prev = x;
    h->xfers = x;
    x->quiet_since = stall_now();
    sweep_arm(h);
    h1_conn *c = idle_take(h, o);
    if (c) {
        c->x = x;
        x->c = c;
        send_request(c);
    } else {
        conn_start(h, x);
    }
    return &x->base;
fail_headers:
    free_slist(req->headers);
    return NULL;
}

static void on_deferred(evutil_socket_t fd, short what, void *arg) {
    aor_h1 *h = arg;
    while (h->deferred) {
        h1_xfer *x = h->deferred;
        h->deferred = x->dnext;
        if (!h->deferred)
            h->deferred_tail = NULL;
        int kind = x->defer;
        x->defer = DEFER_NONE;
        x->dnext = NULL;
        if (kind == DEFER_FAIL) {
            xfer_end(x, x->fail_code, x->errtext);
            continue;
        }
        h1_conn *c = x->c;
        if (!c)
            continue;
        if (x->complete) {
            finish_ok(x);
        } else if (c->rev) {
            event_add(c->rev, NULL);
            /* Bytes OpenSSL decrypted already raise no readiness of the socket. */
            if (c->ssl && SSL_has_pending(c->ssl))
                event_active(c->rev, EV_READ, 0);
        }
    }
}

void aor_h1_resume(aor_xfer *xfer) {
    h1_xfer *x = (h1_xfer *)xfer;
    if (!x->paused || x->in_cb)
        return;
    x->paused = 0;
    if (x->held_len) {
        x->in_cb++;
        size_t r = x->cb.on_data(x->arg, x->held, x->held_len);
        x->in_cb--;
        if (x->cancelled) {
            xfer_kill(x);
            return;
        }
        if (r == CURL_WRITEFUNC_PAUSE) {
            x->paused = 1;
            return;
        }
        if (r != x->held_len) {
            x->cut = 1;
            xfer_fail_later(x, CURLE_WRITE_ERROR, "transfer stopped by aor");
            return;
        }
        x->held_len = 0;
    }
    /* Reading on (or finishing) from the loop, not from inside the caller's callback. */
    defer(x, DEFER_CONTINUE);
}

void aor_h1_cancel(aor_xfer *xfer) {
    h1_xfer *x = (h1_xfer *)xfer;
    if (!x)
        return;
    if (x->in_cb) {
        x->cancelled = 1; /* the code that called the callback frees x */
        return;
    }
    xfer_kill(x);
}
