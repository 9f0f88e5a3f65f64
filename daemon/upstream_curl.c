#include "upstream_curl.h"

#include "curl_api.h"
#include "upstream_h1.h"

/* Set by aor_upcurl_new before any other function here runs. */
static const aor_curl_api *curl_fns;
#define CURLAPI curl_fns

#include "log.h"
#include "sysca.h"

#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

/* Idle upstream connections curl keeps for reuse (CURLMOPT_MAXCONNECTS). curl's default
 * (4 x the easy handles currently added) shrinks whenever fewer transfers are in flight,
 * so a varying load kept closing and reopening upstream connections (bench: 60 new
 * connections in 800 requests at 64 clients). A fixed size keeps them. */
#define UPSTREAM_MAX_CONNS 128L
/* Easy handles kept for reuse (curl_easy_reset) instead of a curl_easy_init and
 * curl_easy_cleanup per attempt (docs/performance.md). */
#define EASY_POOL_MAX 64

struct aor_upcurl {
    struct event_base *base;
    CURLM *multi;
    struct event *timer;
    struct curl_xfer *head; /* active transfers */
    CURL *pool[EASY_POOL_MAX];
    size_t npool;
};

typedef struct curl_xfer {
    struct aor_xfer base; /* backend tag; first member */
    struct curl_xfer *prev, *next;
    aor_upcurl *u;
    CURL *easy;
    struct curl_slist *headers;
    aor_xfer_callbacks cb;
    void *arg;
    char errbuf[CURL_ERROR_SIZE];
    int paused;
    int head_lines; /* header lines of the current answer (1xx answers start it again) */
    int head_done;  /* its empty line came: what follows are trailers, not counted */
    int head_too_many;
} curl_xfer;

/* Per-socket event, attached to curl with curl_multi_assign. */
typedef struct {
    struct event *ev;
    aor_upcurl *u;
} sock_ctx;

static void unlink_xfer(curl_xfer *x) {
    if (x->prev)
        x->prev->next = x->next;
    else
        x->u->head = x->next;
    if (x->next)
        x->next->prev = x->prev;
    x->prev = x->next = NULL;
}

/* Takes an easy handle from the pool (options at their defaults) or makes one. */
static CURL *easy_get(aor_upcurl *u) {
    if (u->npool > 0)
        return u->pool[--u->npool];
    return CURLAPI->easy_init();
}

/* Returns an easy handle that is not added to the multi: reset to defaults and pooled
 * (its connection, if any, stays in the multi's cache), or cleaned up when the pool is
 * full. */
static void easy_put(aor_upcurl *u, CURL *easy) {
    if (u->npool < EASY_POOL_MAX) {
        CURLAPI->easy_reset(easy);
        u->pool[u->npool++] = easy;
    } else {
        CURLAPI->easy_cleanup(easy);
    }
}

static void check_done(aor_upcurl *u) {
    CURLMsg *msg;
    int left;
    while ((msg = CURLAPI->multi_info_read(u->multi, &left))) {
        if (msg->msg != CURLMSG_DONE)
            continue;
        CURL *easy = msg->easy_handle;
        CURLcode rc = msg->data.result;
        curl_xfer *x = NULL;
        CURLAPI->easy_getinfo(easy, CURLINFO_PRIVATE, (char **)&x);
        long status = 0;
        CURLAPI->easy_getinfo(easy, CURLINFO_RESPONSE_CODE, &status);
        long sent = 0;
        if ((rc == CURLE_UNSUPPORTED_PROTOCOL || rc == CURLE_OUT_OF_MEMORY) &&
            CURLAPI->easy_getinfo(easy, CURLINFO_REQUEST_SIZE, &sent) == CURLE_OK && sent > 0)
            /* After the request went out, libcurl gives these codes for what the upstream
             * answered (a status line it does not take, HTTP/0.9, a header block too
             * big): the upstream's fault, not aor's (proxy.c local_curl_error). */
            rc = CURLE_WEIRD_SERVER_REPLY;
        if (x && x->head_too_many) {
            rc = CURLE_WEIRD_SERVER_REPLY;
            snprintf(x->errbuf, sizeof x->errbuf,
                     "not a valid HTTP/1.1 answer: over %d header lines", AOR_H1_HEAD_MAX_LINES);
        }
        CURLAPI->multi_remove_handle(u->multi, easy);
        if (x) {
            unlink_xfer(x);
            const char *err = x->errbuf[0] ? x->errbuf : CURLAPI->easy_strerror(rc);
            aor_xfer_callbacks cb = x->cb;
            void *arg = x->arg;
            char errcopy[CURL_ERROR_SIZE];
            snprintf(errcopy, sizeof errcopy, "%s", err);
            easy_put(u, easy);
            CURLAPI->slist_free_all(x->headers);
            free(x);
            cb.on_done(arg, rc, status, errcopy);
        } else {
            CURLAPI->easy_cleanup(easy);
        }
    }
}

static void on_socket_event(evutil_socket_t fd, short what, void *arg) {
    sock_ctx *s = arg;
    aor_upcurl *u = s->u;
    int flags = (what & EV_READ ? CURL_CSELECT_IN : 0) | (what & EV_WRITE ? CURL_CSELECT_OUT : 0);
    int running;
    CURLAPI->multi_socket_action(u->multi, fd, flags, &running);
    check_done(u);
}

static void on_timer(evutil_socket_t fd, short what, void *arg) {
    aor_upcurl *u = arg;
    int running;
    CURLAPI->multi_socket_action(u->multi, CURL_SOCKET_TIMEOUT, 0, &running);
    check_done(u);
}

static int socket_cb(CURL *easy, curl_socket_t fd, int what, void *userp, void *sockp) {
    aor_upcurl *u = userp;
    sock_ctx *s = sockp;
    if (what == CURL_POLL_REMOVE) {
        if (s) {
            event_free(s->ev);
            free(s);
            CURLAPI->multi_assign(u->multi, fd, NULL);
        }
        return 0;
    }
    short kind = EV_PERSIST;
    if (what & CURL_POLL_IN)
        kind |= EV_READ;
    if (what & CURL_POLL_OUT)
        kind |= EV_WRITE;
    if (!s) {
        s = calloc(1, sizeof *s);
        if (!s)
            return -1;
        s->u = u;
        s->ev = event_new(u->base, fd, kind, on_socket_event, s);
        if (!s->ev) {
            free(s);
            return -1;
        }
        CURLAPI->multi_assign(u->multi, fd, s);
    } else {
        event_del(s->ev);
        event_assign(s->ev, u->base, fd, kind, on_socket_event, s);
    }
    event_add(s->ev, NULL);
    return 0;
}

static int timer_cb(CURLM *multi, long timeout_ms, void *userp) {
    aor_upcurl *u = userp;
    if (timeout_ms < 0) {
        evtimer_del(u->timer);
        return 0;
    }
    struct timeval tv = {timeout_ms / 1000, (timeout_ms % 1000) * 1000};
    evtimer_add(u->timer, &tv);
    return 0;
}

aor_upcurl *aor_upcurl_new(struct event_base *base) {
    curl_fns = aor_curl_api_get();
    if (!curl_fns)
        return NULL;
    aor_upcurl *u = calloc(1, sizeof *u);
    if (!u)
        return NULL;
    u->base = base;
    u->multi = CURLAPI->multi_init();
    if (!u->multi)
        goto fail_free;
    u->timer = evtimer_new(base, on_timer, u);
    if (!u->timer)
        goto fail_multi;
    CURLAPI->multi_setopt(u->multi, CURLMOPT_SOCKETFUNCTION, socket_cb);
    CURLAPI->multi_setopt(u->multi, CURLMOPT_SOCKETDATA, u);
    CURLAPI->multi_setopt(u->multi, CURLMOPT_TIMERFUNCTION, timer_cb);
    CURLAPI->multi_setopt(u->multi, CURLMOPT_TIMERDATA, u);
    CURLAPI->multi_setopt(u->multi, CURLMOPT_PIPELINING, CURLPIPE_MULTIPLEX);
    CURLAPI->multi_setopt(u->multi, CURLMOPT_MAX_HOST_CONNECTIONS, 0L);
    CURLAPI->multi_setopt(u->multi, CURLMOPT_MAXCONNECTS, UPSTREAM_MAX_CONNS);
    return u;
fail_multi:
    CURLAPI->multi_cleanup(u->multi);
fail_free:
    free(u);
    return NULL;
}

void aor_upcurl_free(aor_upcurl *u) {
    if (!u)
        return;
    while (u->head)
        aor_upcurl_cancel(&u->head->base);
    while (u->npool > 0)
        CURLAPI->easy_cleanup(u->pool[--u->npool]);
    CURLAPI->multi_cleanup(u->multi);
    event_free(u->timer);
    free(u);
}

/* One line of an answer's head. More header lines than the direct path takes
 * (AOR_H1_HEAD_MAX_LINES) end the transfer as a bad answer there does: proxy.c keeps no
 * more, and a retry hint or the framing may be in the lines it would drop (QA: with 300
 * lines the client got 255 and no Content-Length). */
static size_t header_cb(char *data, size_t size, size_t n, void *arg) {
    curl_xfer *x = arg;
    size_t len = size * n;
    size_t l = len;
    while (l && (data[l - 1] == '\n' || data[l - 1] == '\r'))
        l--;
    if (l >= 5 && memcmp(data, "HTTP/", 5) == 0) {
        x->head_lines = 0; /* a status line: a new answer (after a 1xx) */
        x->head_done = 0;
    } else if (l == 0) {
        x->head_done = 1; /* trailer lines of a chunked body come here too (QA) */
    } else if (!x->head_done && ++x->head_lines > AOR_H1_HEAD_MAX_LINES) {
        x->head_too_many = 1;
        return 0;
    }
    x->cb.on_header(x->arg, data, l);
    return len;
}

static size_t write_cb(char *data, size_t size, size_t n, void *arg) {
    curl_xfer *x = arg;
    size_t r = x->cb.on_data(x->arg, data, size * n);
    if (r == CURL_WRITEFUNC_PAUSE)
        x->paused = 1;
    return r;
}

/* 1 when the header line s (len bytes) is a Content-Type field. */
static int is_content_type(const char *s, size_t len) {
    return len >= 13 && strncasecmp(s, "content-type:", 13) == 0;
}

/* The slist for req: its headers, or its header block split into lines; with "Expect:"
 * so libcurl sends no "Expect: 100-continue" for large bodies, and "Content-Type:" when
 * the request has none, so libcurl adds no application/x-www-form-urlencoded to a body
 * the client did not label (QA: the direct path sends none either). NULL on ENOMEM. */
static struct curl_slist *request_headers(const aor_xfer_request *req) {
    struct curl_slist *h = req->headers, *t;
    const char *s = req->header_block, *end = s ? s + req->header_block_len : NULL;
    int has_ct = 0;
    for (const struct curl_slist *i = req->headers; i; i = i->next)
        has_ct |= i->data && is_content_type(i->data, strlen(i->data));
    while (s && s < end) {
        const char *nl = memchr(s, '\n', (size_t)(end - s));
        size_t l = (size_t)((nl ? nl : end) - s);
        if (l && s[l - 1] == '\r')
            l--;
        has_ct |= is_content_type(s, l);
        if (l) {
            char *line = strndup(s, l);
            t = line ? CURLAPI->slist_append(h, line) : NULL;
            free(line);
            if (!t)
                goto fail;
            h = t;
        }
        s = nl ? nl + 1 : end;
    }
    t = CURLAPI->slist_append(h, "Expect:");
    if (!t)
        goto fail;
    h = t;
    if (!has_ct) {
        t = CURLAPI->slist_append(h, "Content-Type:");
        if (!t)
            goto fail;
    }
    return t;
fail:
    CURLAPI->slist_free_all(h);
    return NULL;
}

aor_xfer *aor_upcurl_start(aor_upcurl *u, const aor_xfer_request *req, const aor_xfer_callbacks *cb,
                           void *arg) {
    struct curl_slist *headers = request_headers(req);
    if (!headers)
        return NULL;
    curl_xfer *x = calloc(1, sizeof *x);
    if (!x)
        goto fail_headers;
    x->easy = easy_get(u);
    if (!x->easy)
        goto fail_x;
    x->base.backend = AOR_XFER_CURL;
    x->u = u;
    x->cb = *cb;
    x->arg = arg;
    x->headers = headers;
    CURL *e = x->easy;
    CURLAPI->easy_setopt(e, CURLOPT_URL, req->url);
    CURLAPI->easy_setopt(e, CURLOPT_PRIVATE, x);
    CURLAPI->easy_setopt(e, CURLOPT_ERRORBUFFER, x->errbuf);
    CURLAPI->easy_setopt(e, CURLOPT_HTTPHEADER, x->headers);
    CURLAPI->easy_setopt(e, CURLOPT_HEADERFUNCTION, header_cb);
    CURLAPI->easy_setopt(e, CURLOPT_HEADERDATA, x);
    CURLAPI->easy_setopt(e, CURLOPT_WRITEFUNCTION, write_cb);
    CURLAPI->easy_setopt(e, CURLOPT_WRITEDATA, x);
    CURLAPI->easy_setopt(e, CURLOPT_NOSIGNAL, 1L);
    CURLAPI->easy_setopt(e, CURLOPT_TCP_NODELAY, 1L);
    CURLAPI->easy_setopt(e, CURLOPT_TCP_KEEPALIVE, 1L);
    CURLAPI->easy_setopt(e, CURLOPT_CONNECTTIMEOUT_MS,
                         req->connect_timeout_ms > 0 ? req->connect_timeout_ms : 10000L);
    /* A stall ends the transfer as on the direct path (AOR_H1_STALL_S, upstream_h1.h):
     * less than a byte a second for that long; real time (libcurl's own clock). */
    CURLAPI->easy_setopt(e, CURLOPT_LOW_SPEED_LIMIT, 1L);
    CURLAPI->easy_setopt(e, CURLOPT_LOW_SPEED_TIME, (long)AOR_H1_STALL_S);
    CURLAPI->easy_setopt(e, CURLOPT_HTTP_VERSION, (long)CURL_HTTP_VERSION_2TLS);
    CURLAPI->easy_setopt(e, CURLOPT_PROTOCOLS_STR, "http,https");
    CURLAPI->easy_setopt(e, CURLOPT_FOLLOWLOCATION, 0L);
    /* Through an HTTPS proxy, the proxy's own "200 Connection established" to CONNECT is
     * not the upstream's answer: the header callback must see only the latter. */
    CURLAPI->easy_setopt(e, CURLOPT_SUPPRESS_CONNECT_HEADERS, 1L);
    if (req->ca_file) {
        /* An extra CA (spec §3): the file, and the system's hashed certificate directory
         * beside it. Read for each new connection (no CA cache), so a file replaced
         * before a SIGHUP is used at once; the connections themselves are reused. */
        CURLAPI->easy_setopt(e, CURLOPT_CAINFO, req->ca_file);
        if (access(AOR_SYSCA_DIR, X_OK) == 0)
            CURLAPI->easy_setopt(e, CURLOPT_CAPATH, AOR_SYSCA_DIR);
        CURLAPI->easy_setopt(e, CURLOPT_CA_CACHE_TIMEOUT, 0L);
    }
    if (strcmp(req->method, "GET") == 0 && req->body_len == 0) {
        CURLAPI->easy_setopt(e, CURLOPT_HTTPGET, 1L);
    } else if (strcmp(req->method, "HEAD") == 0) {
        CURLAPI->easy_setopt(e, CURLOPT_NOBODY, 1L);
    } else {
        CURLAPI->easy_setopt(e, CURLOPT_POST, 1L);
        CURLAPI->easy_setopt(e, CURLOPT_POSTFIELDS, req->body ? req->body : "");
        CURLAPI->easy_setopt(e, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)req->body_len);
        if (strcmp(req->method, "POST") != 0)
            CURLAPI->easy_setopt(e, CURLOPT_CUSTOMREQUEST, req->method);
    }
    if (CURLAPI->multi_add_handle(u->multi, e) != CURLM_OK)
        goto fail_easy;
    x->next = u->head;
    if (u->head)
        u->head->prev = x;
    u->head = x;
    return &x->base;
fail_easy:
    easy_put(u, x->easy);
fail_x:
    free(x);
fail_headers:
    CURLAPI->slist_free_all(headers);
    return NULL;
}

void aor_upcurl_resume(aor_xfer *xfer) {
    curl_xfer *x = (curl_xfer *)xfer;
    if (!x->paused)
        return;
    x->paused = 0;
    CURLAPI->easy_pause(x->easy, CURLPAUSE_CONT);
}

void aor_upcurl_cancel(aor_xfer *xfer) {
    curl_xfer *x = (curl_xfer *)xfer;
    if (!x)
        return;
    unlink_xfer(x);
    CURLAPI->multi_remove_handle(x->u->multi, x->easy);
    easy_put(x->u, x->easy);
    CURLAPI->slist_free_all(x->headers);
    free(x);
}
