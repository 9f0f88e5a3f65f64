#include "proxy.h"

#include "classify.h"
#include "clock.h"
#include "dialect.h"
#include "hash.h"
#include "log.h"
#include "pool.h"
#include "route.h"
#include "sse_peek.h"
#include "textfind.h"
#include "upstream_h1.h"

#include <event2/event.h>

#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <stdint.h>
#include <string.h>
#include <strings.h>

#define ERROR_BODY_MAX (1024 * 1024) /* error answers buffered for classification */
#define HELD_CUT_SIZE 1              /* aor_proxy.held_cut: over ERROR_BODY_MAX */
#define HELD_CUT_STREAM 2            /* ... a stream that ended before its first event */
#define SSE_PEEK_MAX (256 * 1024)    /* bytes held while looking for the first event */
#define PRELUDE_HOLD_S 3             /* seconds an SSE answer's opening events are held at most */
#define SSE_TAIL_MAX 4096 /* bytes of a forwarded SSE answer's end kept for its last event */
#define OUT_HIGH_WATERMARK (1024 * 1024)
/* Header lines of an answer kept; both upstream paths refuse an answer with more. */
#define MAX_RESP_HEADERS AOR_H1_HEAD_MAX_LINES
#define AOR_MODEL_MAX 256 /* bytes; a longer model name is refused (state rows are per model) */

/* Headers of an upstream answer: each name and value in one block ("name\0value"),
 * split once when the line arrives, so routing, usage and classification read them
 * without copies (docs/performance.md). */
typedef struct hdr_chunk {
    struct hdr_chunk *next;
    size_t used, cap;
    char data[];
} hdr_chunk;

typedef struct {
    aor_header *h;
    struct hdr_len {
        uint32_t name, value; /* strlen of h[i].name and h[i].value */
        int fwd;              /* goes to the client (forward_header) */
    } * len;
    size_t n, cap;
    size_t ct, cl;   /* 1 + index of the first Content-Type / Content-Length; 0: none */
    int te;          /* a Transfer-Encoding header: it frames the body, not Content-Length */
    int cl_conflict; /* a second Content-Length with another value: no framing to trust */
    int conn_names;  /* a Connection header lists names besides keep-alive and close */
    hdr_chunk *mem;  /* where the names and values live: one malloc for most answers */
} hdr_set;

/* A growing block of header lines; every piece is checked for CR/LF (an injected line).
 * Also the upstream URL's buffer. Kept with the proxy between attempts and requests. */
typedef struct {
    char *b;
    size_t len, cap;
} hblock;

#define HB_KEEP_MAX 4096 /* a kept proxy keeps header-block and URL buffers up to this */

typedef enum {
    MODE_HEADERS = 0, /* waiting for the header block */
    MODE_BUFFER,      /* error (or suspicious) answer: buffer, classify at the end */
    MODE_SSE_PEEK,    /* 200 SSE: hold until the first event is seen */
    MODE_HEAD_HELD,   /* other 2xx with a body: the head waits for its first byte */
    MODE_STREAM       /* committed: bytes go to the client as they arrive */
} attempt_mode;

struct aor_proxy {
    /* The configuration this request started with, held (daemon/cfgref.h): its
     * candidates index it. A SIGHUP swaps d->cfg; the old one lives until the last
     * request that holds it ends, so a request in flight over a reload stays with its
     * own. */
    const aor_config *cfg;
    aor_daemon *d;
    aor_conn *c;
    aor_http_request *req;
    const char *path; /* request path without query: req->url itself, or path_own */
    char *path_own;   /* the path copied (the target has a query or fragment), or NULL */
    char *query;      /* query without '?', or NULL */
    char *host;       /* intercepted host or NULL (sidecar) */
    aor_dialect dialect;
    const char *model; /* canonical model: model_buf, model_own, or NULL */
    char *model_own;   /* a model that did not fit model_buf (or from a Gemini path) */
    char model_buf[64];
    char client[65];  /* hex SHA-256 of the client's credential */
    const char *body; /* request body (contiguous) */
    size_t body_len;
    long allowed; /* attempts allowed (-1 unlimited) */
    aor_sequence seq;
    size_t next; /* next index in seq */
    int attempts;
    size_t skipped; /* candidates skipped during the walk (backed off meanwhile) */
    double skipped_until;
    double attempt_started; /* clock when the current attempt was sent */
    const char *cred;       /* the client's credential: a header value of req, or cred_own */
    char *cred_own;         /* a copied credential (a ?key= parameter): wiped on free */

    /* current attempt */
    aor_xfer *x;
    const aor_candidate *cand;
    attempt_mode mode;
    long status;
    hdr_set hdrs; /* the answer's headers */
    struct evbuffer *held;
    int chunked_out;
    int no_body;   /* the answer has no body: to HEAD, or a 204 (RFC 9110 §6.4.1) */
    int committed; /* a byte went to the client */
    /* A 2xx answer forwarded as it comes (MODE_STREAM) whose usage headers and success
     * are not recorded yet: done right after the answer is sent (flush_bookkeeping). */
    int ok_pending;
    /* The success of such an answer was recorded when it ended, before its last bytes
     * went out (§4.5); only its usage headers wait for the flush. */
    int usage_pending;
    /* A forwarded 2xx answer counts as a success only once it has ended cleanly (§5.3: a
     * stream cut after its first byte is a failure, not a success and then a failure). */
    int answer_done;  /* the upstream answer ended cleanly */
    int ok_at_end;    /* record the success when it does */
    int end_failed;   /* recorded at the stream's terminator as failed: its last event was an
                         error event; the response ends unfinished (record_at_terminator) */
    int end_recorded; /* the attempt was recorded at its terminator: not again at its end */
    int sse_error;    /* first event was an error: attempt failed */
    int sse_sniffed;  /* the first byte of an SSE answer was looked at (sse_is_html) */
    aor_verdict sse_verdict;
    /* A forwarded 2xx SSE answer: its last SSE_TAIL_MAX bytes (a ring; tail_total bytes
     * went in), so its clean end can tell a last error event (an overloaded_error in the
     * middle of an Anthropic stream) from a success (sse_tail_failed). NULL otherwise. */
    char *sse_tail;
    /* A forwarded 2xx SSE answer: has the terminator of its endpoint's streams gone by?
     * (sse_end.h; kind NONE for endpoints without one, and before the commit) */
    aor_sse_end_scan end_scan;
    aor_sse_peek peek; /* MODE_SSE_PEEK: where the first event is (sse_peek.h) */
    /* MODE_SSE_PEEK: opening events held (aor_sse_peek_prelude), sent with the first event
     * that counts or when prelude_ev fires, PRELUDE_HOLD_S after the first of them. */
    int prelude_held;
    struct event *prelude_ev; /* made at the first hold, freed with the request */
    int out_broken;           /* the timer's send failed (out of memory): the attempt ends */
    /* The end of a forwarded answer that could be the start of the configured secret
     * (write_stream): held back until the next bytes tell, rd_len bytes in rd_hold. */
    char *rd_hold;
    size_t rd_len;
    size_t tail_total;
    int cut;             /* we stopped the transfer */
    int bad_framing;     /* the answer's Content-Length headers disagree: a failed attempt */
    double probe_until;  /* the attempt in flight is its circuit's probe: the lease's end */
    int held_cut;        /* held is unfinished: HELD_CUT_SIZE (only the first
                          * ERROR_BODY_MAX bytes of the body) or HELD_CUT_STREAM (a stream
                          * that ended before its first event) */
    int err_stream;      /* an error body forwarded as it comes (commit_large_answer) */
    char *upstream_body; /* rewritten body when the model id differs */
    hblock hb;           /* the attempt's request headers for the upstream (wiped after) */
    hblock url;          /* the attempt's upstream URL */

    /* last failed answer, returned as it came when the walk runs out */
    long last_status;
    hdr_set last_hdrs;
    struct evbuffer *last_body;
    int last_cut; /* last_body is cut (held_cut) */
    aor_verdict last_verdict;
    const aor_candidate *last_cand;
};

/* Spare proxies (pool.h): aord's requests all run on one thread. */
static _Thread_local aor_pool spares;
static void proxy_release(aor_proxy *p);
static void kept_poison(const aor_proxy *p, int poison);
static void hb_wipe(hblock *hb);
static void hb_free(hblock *hb);

/* Starts the next attempt; returns 1 when one is in flight, 0 when it answered (p freed). */
static int start_next(aor_proxy *p);
static void flush_bookkeeping(aor_proxy *p);
static void record(aor_proxy *p, const aor_candidate *cand, aor_kind kind, double hint_s);
static int record_stream_end(aor_proxy *p, const aor_candidate *cand, aor_kind otherwise);
static void redact(const aor_proxy *p, char *text, size_t cap);

#define HDR_CHUNK 2048  /* bytes of names and values in a header set's first block */
#define HDR_KEEP_MAX 64 /* a recycled set keeps arrays of up to this many headers */

static void hset_clear(hdr_set *s) {
    for (hdr_chunk *c = s->mem; c;) {
        hdr_chunk *next = c->next;
        free(c);
        c = next;
    }
    free(s->h);
    free(s->len);
    memset(s, 0, sizeof *s);
}

/* Empties s but keeps its memory for the next answer: the arrays (up to HDR_KEEP_MAX
 * entries) and the first block of HDR_CHUNK bytes; bigger or further blocks are freed.
 * Nothing may point into the old headers afterwards. */
static void hset_reset(hdr_set *s) {
    hdr_chunk *keep = NULL;
    for (hdr_chunk *c = s->mem; c;) {
        hdr_chunk *next = c->next;
        if (!next && c->cap == HDR_CHUNK) {
            keep = c; /* the oldest block: the one made with the default size */
        } else {
            free(c);
        }
        c = next;
    }
    if (keep)
        keep->used = 0;
    s->mem = keep;
    s->n = 0;
    s->ct = s->cl = 0;
    s->te = s->cl_conflict = 0;
    s->conn_names = 0;
    if (s->cap > HDR_KEEP_MAX) {
        free(s->h);
        free(s->len);
        s->h = NULL;
        s->len = NULL;
        s->cap = 0;
    }
}

/* Poisons (AddressSanitizer) the memory s keeps while its proxy waits in the pool. */
static void hset_poison(const hdr_set *s, int poison) {
    aor_pool_mark(s->h, s->cap * sizeof *s->h, poison);
    aor_pool_mark(s->len, s->cap * sizeof *s->len, poison);
    if (s->mem)
        aor_pool_mark(s->mem->data, s->mem->cap, poison);
}

/* Headers of an upstream answer that go to the client: not hop-by-hop, not x-aor-*, not
 * Alt-Svc. name is nl bytes (strlen). */
static int forward_header(const char *name, size_t nl) {
    if (aor_http_is_hop_header_len(name, nl))
        return 0;
    /* Alt-Svc (RFC 7838) offers the provider's HTTP/3 over UDP: a client that took it up
     * would go around the shim, which redirects TCP connections only (QA). */
    if (nl == 7 && (name[0] | 0x20) == 'a' && strncasecmp(name, "alt-svc", 7) == 0)
        return 0;
    /* x-ratelimit-* and x-request-id are common: they differ at the third letter. */
    if (nl >= 6 && (name[0] | 0x20) == 'x' && name[1] == '-' && (name[2] | 0x20) == 'a' &&
        strncasecmp(name, "x-aor-", 6) == 0)
        return 0;
    return 1;
}

/* The next token of a Connection value at *s (a comma list, spaces around items): its
 * start, with its length in *len and *s past it; NULL at the end. */
static const char *conn_token(const char **s, size_t *len) {
    const char *t = *s + strspn(*s, ", \t");
    if (!*t)
        return NULL;
    *len = strcspn(t, ", \t");
    *s = t + *len;
    return t;
}

/* 1 when name is one of the tokens of a Connection header value: a header meant for
 * this hop only (RFC 9110 §7.6.1), not to be forwarded. */
static int listed_in_connection(const char *conn, const char *name) {
    size_t nl = strlen(name), l;
    for (const char *t; (t = conn_token(&conn, &l)) != NULL;)
        if (l == nl && strncasecmp(t, name, nl) == 0)
            return 1;
    return 0;
}

/* 1 when a Connection value lists a token other than keep-alive and close (headers of
 * those names are hop-by-hop anyway): only then must an answer's headers be checked. */
static int conn_lists_names(const char *v) {
    size_t l;
    for (const char *t; (t = conn_token(&v, &l)) != NULL;)
        if (!(l == 10 && strncasecmp(t, "keep-alive", 10) == 0) &&
            !(l == 5 && strncasecmp(t, "close", 5) == 0))
            return 1;
    return 0;
}

/* 1 when name is listed in one of hs's Connection headers. */
static int hset_conn_lists(const hdr_set *hs, const char *name) {
    for (size_t i = 0; i < hs->n; i++)
        if (hs->len[i].name == 10 && strncasecmp(hs->h[i].name, "connection", 10) == 0 &&
            listed_in_connection(hs->h[i].value, name))
            return 1;
    return 0;
}

/* 1 when name is listed in one of the Connection fields of req's header section. */
static int req_conn_lists(const aor_http_request *req, const char *name) {
    for (size_t i = 0; i < req->nheaders; i++)
        if (strcasecmp(req->fields[i].name, "connection") == 0 &&
            listed_in_connection(req->fields[i].value, name))
            return 1;
    return 0;
}

/* Adds the line "Name: value" (len bytes, no CRLF). Lines without a name are dropped;
 * so is everything past MAX_RESP_HEADERS. Out of memory drops the line. */
static void hset_add(hdr_set *s, const char *line, size_t len) {
    const char *colon = memchr(line, ':', len);
    if (!colon || colon == line || s->n >= MAX_RESP_HEADERS || len > UINT32_MAX)
        return;
    if (s->n == s->cap) {
        size_t cap = s->cap ? s->cap * 2 : 16;
        aor_header *h = realloc(s->h, cap * sizeof *h);
        if (!h)
            return;
        s->h = h;
        struct hdr_len *l = realloc(s->len, cap * sizeof *l);
        if (!l)
            return; /* s->cap unchanged: the next add retries both */
        s->len = l;
        s->cap = cap;
    }
    hdr_chunk *c = s->mem;
    if (!c || c->cap - c->used < len + 1) {
        size_t cap = len + 1 > HDR_CHUNK ? len + 1 : HDR_CHUNK;
        hdr_chunk *n = malloc(sizeof *n + cap);
        if (!n)
            return;
        n->next = c;
        n->used = 0;
        n->cap = cap;
        s->mem = c = n;
    }
    char *blk = c->data + c->used;
    c->used += len + 1;
    memcpy(blk, line, len);
    blk[len] = '\0';
    size_t nl = (size_t)(colon - line), v = nl + 1;
    blk[nl] = '\0';
    while (v < len && (blk[v] == ' ' || blk[v] == '\t'))
        v++;
    s->h[s->n].name = blk;
    s->h[s->n].value = blk + v;
    /* strlen, not the offsets: a NUL inside the line (possible from libcurl) ends the
     * name or value here, as it does for every other reader of h[]. */
    size_t name_len = strlen(blk);
    s->len[s->n].name = (uint32_t)name_len;
    s->len[s->n].value = (uint32_t)strlen(blk + v);
    /* Classified once here, for write_head and the framing (docs/performance.md). */
    s->len[s->n].fwd = forward_header(blk, name_len);
    if (name_len == 12 && !s->ct && strncasecmp(blk, "content-type", 12) == 0)
        s->ct = s->n + 1;
    else if (name_len == 14 && strncasecmp(blk, "content-length", 14) == 0) {
        if (!s->cl)
            s->cl = s->n + 1;
        else if (strcmp(s->h[s->cl - 1].value, blk + v) != 0)
            s->cl_conflict = 1;
    } else if (name_len == 17 && strncasecmp(blk, "transfer-encoding", 17) == 0)
        s->te = 1;
    else if (name_len == 10 && strncasecmp(blk, "connection", 10) == 0 && conn_lists_names(blk + v))
        s->conn_names = 1;
    s->n++;
}

/* The value of the first Content-Type / Content-Length of s, or NULL. */
static const char *hset_content_type(const hdr_set *s) {
    return s->ct ? s->h[s->ct - 1].value : NULL;
}

/* The Content-Length that frames the body, NULL when none does: with a Transfer-Encoding
 * (libcurl decoded it) the Content-Length is not the length of what comes, and an
 * intermediary removes it (RFC 9112 §6.3); else the client would read the body's start
 * as the whole answer and the rest as the start of its next one. */
static const char *hset_content_length(const hdr_set *s) {
    return s->cl && !s->te ? s->h[s->cl - 1].value : NULL;
}

static void proxy_free(aor_proxy *p) {
    flush_bookkeeping(p);
    if (p->ok_at_end) {
        /* The client left while a 2xx answer was still coming: no sign of an upstream
         * failure, so it counts as the success it was so far (unless its last event was
         * an error event: an SDK closes as soon as it reads one). */
        p->ok_at_end = 0;
        record_stream_end(p, p->cand, AOR_KIND_OK);
    }
    if (p->x && p->probe_until > 0) {
        /* The client went away during its circuit's probe: no result will come, so the
         * next request probes instead of all waiting out the lease (breaker.h). */
        aor_breaker_release_probe(aor_rstate_breaker(p->d->rs),
                                  p->cfg->providers[p->cand->provider].name,
                                  p->model ? p->model : "", p->probe_until);
    }
    if (p->x)
        aor_xfer_cancel(p->x);
    aor_http_request_free(p->req);
    free(p->path_own);
    free(p->query);
    free(p->host);
    free(p->model_own);
    if (p->cred_own) {
        explicit_bzero(p->cred_own, strlen(p->cred_own));
        free(p->cred_own);
    }
    free(p->upstream_body);
    if (p->prelude_ev)
        event_free(p->prelude_ev);
    p->prelude_ev = NULL;
    free(p->sse_tail);
    p->sse_tail = NULL;
    if (p->rd_hold) {
        explicit_bzero(p->rd_hold, p->rd_len);
        free(p->rd_hold);
        p->rd_hold = NULL;
    }
    aor_sequence_free(&p->seq);
    hset_clear(&p->last_hdrs);
    if (p->last_body)
        evbuffer_free(p->last_body);
    aor_cfgref_release(p->d->cfgs, p->cfg);
    p->cfg = NULL;
    /* Kept for the next request with its header memory, held buffer, header-block and
     * URL buffers (pool.h). */
    hset_reset(&p->hdrs);
    hb_wipe(&p->hb);
    if (p->hb.cap > HB_KEEP_MAX)
        hb_free(&p->hb);
    if (p->url.cap > HB_KEEP_MAX)
        hb_free(&p->url);
    if (p->held && evbuffer_drain(p->held, evbuffer_get_length(p->held)) == 0) {
        kept_poison(p, 1);
        if (aor_pool_keep(&spares, p, sizeof *p))
            return;
        kept_poison(p, 0);
    }
    proxy_release(p);
}

/* Frees what a proxy keeps in the pool, then the proxy. */
static void proxy_release(aor_proxy *p) {
    hset_clear(&p->hdrs);
    hb_free(&p->hb);
    hb_free(&p->url);
    if (p->held)
        evbuffer_free(p->held);
    free(p);
}

/* Poisons or unpoisons (AddressSanitizer) the buffers a kept proxy holds. */
static void kept_poison(const aor_proxy *p, int poison) {
    hset_poison(&p->hdrs, poison);
    aor_pool_mark(p->hb.b, p->hb.cap, poison);
    aor_pool_mark(p->url.b, p->url.cap, poison);
}

void aor_proxy_spares_free(void) {
    aor_proxy *p;
    while ((p = aor_pool_take(&spares, sizeof *p))) {
        kept_poison(p, 0);
        proxy_release(p);
    }
}

/* A proxy for a new request: a kept one (its header memory and held buffer reused, the
 * rest zero), or a new one without them. NULL when out of memory. */
static aor_proxy *proxy_new(void) {
    aor_proxy *p = aor_pool_take(&spares, sizeof *p);
    if (p) {
        kept_poison(p, 0);
        hdr_set hdrs = p->hdrs;
        struct evbuffer *held = p->held;
        hblock hb = p->hb, url = p->url;
        memset(p, 0, sizeof *p);
        p->hdrs = hdrs;
        p->held = held;
        p->hb = hb;
        p->url = url;
        return p;
    }
    /* glibc's calloc skips its thread cache (GCC makes one of malloc + memset too): the
     * pool is what makes the common case cheap (docs/performance.md, 24 and 34). */
    return calloc(1, sizeof *p);
}

void aor_proxy_cancel(aor_proxy *p) {
    p->c = NULL; /* the connection is going away: not touched from here on */
    proxy_free(p);
}

static const char *cand_provider(const aor_proxy *p, const aor_candidate *c) {
    return p->cfg->providers[c->provider].name;
}

/* Ends the request: the connection goes on (keep-alive) or closes. */
static void finish(aor_proxy *p, int keep_alive) {
    aor_conn *c = p->c;
    int ka = keep_alive && p->req->keep_alive;
    /* The answer is complete: send it now, before the clean-up below, not at the end
     * of this loop pass (the client waits for it; docs/performance.md). */
    aor_conn_flush(c);
    proxy_free(p);
    aor_conn_response_done(c, ka);
}

static void abort_client(aor_proxy *p) {
    aor_conn *c = p->c;
    proxy_free(p);
    aor_conn_abort(c);
}

static void add_aor_headers(struct evbuffer *out, const char *provider, const char *key,
                            int attempts) {
    evbuffer_add_printf(out, "x-aor-provider: %s\r\nx-aor-key: %s\r\nx-aor-attempts: %d\r\n",
                        provider, key, attempts);
}

/* Answers an error made by aor itself in the request's dialect. */
static void answer_local_error(aor_proxy *p, int status, const char *code, const char *message,
                               const char *retry_after) {
    size_t len = 0;
    char *body = aor_dialect_error_body(p->dialect, status, code, message, &len);
    struct evbuffer *out = aor_conn_output(p->c);
    const char *prov = p->last_cand ? cand_provider(p, p->last_cand) : "-";
    const char *key = p->last_cand ? p->last_cand->key_name : "-";
    evbuffer_add_printf(out, "HTTP/1.1 %d %s\r\nContent-Type: application/json\r\n", status,
                        aor_http_reason(status));
    if (retry_after)
        evbuffer_add_printf(out, "Retry-After: %s\r\n", retry_after);
    add_aor_headers(out, prov, key, p->attempts);
    /* 426: RFC 9110 §15.5.22 wants Upgrade with the protocol to use (this one), and
     * §7.8 the "upgrade" option in Connection. */
    if (aor_conn_last(p->c))
        p->req->keep_alive = 0; /* aord is stopping: this answer is the connection's last */
    const char *conn =
        status == 426 ? (p->req->keep_alive ? "Upgrade: HTTP/1.1\r\nConnection: upgrade\r\n"
                                            : "Upgrade: HTTP/1.1\r\nConnection: upgrade, close\r\n")
                      : aor_http_connection_line(p->req);
    evbuffer_add_printf(out, "Content-Length: %zu\r\n%s\r\n", body ? len : 0, conn);
    if (body && p->req->method != HTTP_HEAD) /* HEAD: the head only (RFC 9110 §9.3.2) */
        evbuffer_add(out, body, len);
    free(body);
    finish(p, 1);
}

/* Appends "<len in hex>\r\n", a chunk header (RFC 9112 §7.1), without printf. */
static void add_chunk_size(struct evbuffer *out, size_t len) {
    char buf[2 * sizeof len + 2];
    size_t i = sizeof buf;
    buf[--i] = '\n';
    buf[--i] = '\r';
    do {
        buf[--i] = "0123456789abcdef"[len & 0xf];
        len >>= 4;
    } while (len);
    evbuffer_add(out, buf + i, sizeof buf - i);
}

static char *put(char *d, const char *s, size_t n) {
    memcpy(d, s, n);
    return d + n;
}

#define PUT_LIT(d, lit) put((d), (lit), sizeof(lit) - 1)

/* Writes status line + headers of an upstream answer. content_length < 0: framing by
 * chunked encoding (or close for HTTP/1.0 clients). The head is measured, then written
 * into the output in one piece: no printf, one buffer operation (docs/performance.md). */
static void write_head(aor_proxy *p, long status, const hdr_set *hs, const aor_candidate *cand,
                       long long content_length) {
    struct evbuffer *out = aor_conn_output(p->c);
    const char *reason = aor_http_reason((int)status);
    const char *prov = cand_provider(p, cand);
    size_t lreason = strlen(reason), lprov = strlen(prov), lkey = strlen(cand->key_name);
    if (content_length >= 0 || p->no_body) {
        p->chunked_out = 0;
    } else if (aor_conn_http10(p->c)) {
        p->chunked_out = 0;
        p->req->keep_alive = 0;
    } else {
        p->chunked_out = 1;
    }
    size_t need = 9 + 24 + 1 + lreason + 2;
    for (size_t i = 0; i < hs->n; i++)
        need += (size_t)hs->len[i].name + 2 + hs->len[i].value + 2;
    need += 16 + lprov + 2 + 11 + lkey + 2 + 16 + 24 + 2;
    need += 16 + 24 + 2 + 28 + 24 + 2; /* Content-Length, chunked, the longest Connection line */
    struct evbuffer_iovec v;
    if (evbuffer_reserve_space(out, (ev_ssize_t)need, &v, 1) < 1 || v.iov_len < need) {
        aor_error("out of memory writing an answer's head");
        abort(); /* the daemon stops on OOM (design.md); systemd/launchd restart it */
    }
    char *d = v.iov_base;
    d = PUT_LIT(d, "HTTP/1.1 ");
    d = aor_http_put_dec(d, (unsigned long long)status);
    *d++ = ' ';
    d = put(d, reason, lreason);
    d = PUT_LIT(d, "\r\n");
    /* Forwarded lines are copied as they are (docs/performance.md). */
    for (size_t i = 0; i < hs->n; i++) {
        if (hs->len[i].fwd && !(hs->conn_names && hset_conn_lists(hs, hs->h[i].name))) {
            d = put(d, hs->h[i].name, hs->len[i].name);
            d = PUT_LIT(d, ": ");
            d = put(d, hs->h[i].value, hs->len[i].value);
            d = PUT_LIT(d, "\r\n");
        }
    }
    d = PUT_LIT(d, "x-aor-provider: ");
    d = put(d, prov, lprov);
    d = PUT_LIT(d, "\r\nx-aor-key: ");
    d = put(d, cand->key_name, lkey);
    d = PUT_LIT(d, "\r\nx-aor-attempts: ");
    d = aor_http_put_dec(d, (unsigned long long)p->attempts);
    d = PUT_LIT(d, "\r\n");
    if (content_length >= 0) {
        d = PUT_LIT(d, "Content-Length: ");
        d = aor_http_put_dec(d, (unsigned long long)content_length);
        d = PUT_LIT(d, "\r\n");
    } else if (p->chunked_out) {
        d = PUT_LIT(d, "Transfer-Encoding: chunked\r\n");
    }
    if (aor_conn_last(p->c))
        p->req->keep_alive = 0; /* aord is stopping: this answer is the connection's last */
    if (!p->req->keep_alive)
        d = PUT_LIT(d, "Connection: close\r\n");
    else if (aor_conn_http10(p->c))
        d = PUT_LIT(d, "Connection: keep-alive\r\n"); /* RFC 9112 §9.3 */
    d = PUT_LIT(d, "\r\n");
    v.iov_len = (size_t)(d - (char *)v.iov_base);
    evbuffer_commit_space(out, &v, 1);
    p->committed = 1;
}

static void write_body(aor_proxy *p, const char *data, size_t len) {
    if (!len)
        return;
    struct evbuffer *out = aor_conn_output(p->c);
    if (p->chunked_out) {
        add_chunk_size(out, len);
        evbuffer_add(out, data, len);
        evbuffer_add(out, "\r\n", 2);
    } else {
        evbuffer_add(out, data, len);
    }
}

static void write_body_buffer(aor_proxy *p, struct evbuffer *b) {
    size_t len = evbuffer_get_length(b);
    if (!len)
        return;
    struct evbuffer *out = aor_conn_output(p->c);
    if (p->chunked_out)
        add_chunk_size(out, len);
    evbuffer_add_buffer(out, b);
    if (p->chunked_out)
        evbuffer_add(out, "\r\n", 2);
}

/* Shorter configured keys are not looked for in answers forwarded as they come: a
 * placeholder key for a local server ("ollama", "EMPTY", "lm-studio", "sk-1234") is an
 * everyday word that model output may contain, and masking it rewrote good answers
 * (QA). Real provider keys are 32 to 110 characters. Error bodies, buffered, are still
 * looked at from 4 characters on (redact_body). */
#define STREAM_SECRET_MIN 16

/* The configured secret an attempt sent upstream (length in *sl), which no answer may
 * carry to the client (§3.2), or NULL: the client's own credential, none, or one shorter
 * than STREAM_SECRET_MIN (4 for an error body forwarded as it comes, err_stream, as
 * redact_body does for the buffered ones). */
static const char *stream_secret(const aor_proxy *p, size_t *sl) {
    if (!p->cand || p->cand->key < 0)
        return NULL;
    const char *secret = p->cfg->keys[p->cand->key].secret;
    *sl = secret ? strlen(secret) : 0;
    return *sl >= (p->err_stream ? 4 : STREAM_SECRET_MIN) ? secret : NULL;
}

/* Keeps from the client every header of a forwarded answer's head (hs) that quotes the
 * configured secret (stream_secret), as redact_headers does for buffered answers. Most
 * values are shorter than a key and are skipped by length alone. */
static void redact_stream_headers(const aor_proxy *p, hdr_set *hs) {
    size_t sl = 0;
    const char *secret = stream_secret(p, &sl);
    for (size_t i = 0; secret && i < hs->n; i++)
        if (hs->len[i].fwd && hs->len[i].value >= sl &&
            aor_text_find(hs->h[i].value, hs->len[i].value, secret, sl))
            hs->len[i].fwd = 0;
}

/* The length of the longest end of text (len bytes) that is a proper start of secret
 * (sl bytes): bytes that the next ones may complete into the secret. */
static size_t secret_start_at_end(const char *text, size_t len, const char *secret, size_t sl) {
    size_t from = len > sl - 1 ? len - (sl - 1) : 0;
    const char *at = text + from, *end = text + len;
    while ((at = memchr(at, secret[0], (size_t)(end - at))) != NULL) {
        if (memcmp(at, secret, (size_t)(end - at)) == 0)
            return (size_t)(end - at);
        at++;
    }
    return 0;
}

/* Writes upstream answer bytes to the client as they come (MODE_STREAM), with every
 * occurrence of the configured secret the attempt sent masked, length kept (Content-Length
 * answers stay framed): "[redacted]" padded with '*' (or '*' only for a secret shorter than
 * that). An upstream error event in a stream may quote the key ("Incorrect API key
 * provided: sk-..."), as an error body may (redact_body). A secret cut across two reads
 * is caught: an end that could be its start is held back (rd_hold) until the next bytes
 * or the answer's clean end (write_stream_end); answer bytes do not end so (SSE events
 * end with a blank line), so nothing is delayed in practice. Returns 0, or -1 when out of
 * memory (nothing written: the caller ends the transfer, and so the answer, unfinished). */
static int write_stream(aor_proxy *p, const char *data, size_t len) {
    size_t sl = 0;
    const char *secret = stream_secret(p, &sl);
    if (!secret) {
        write_body(p, data, len);
        return 0;
    }
    char *w = NULL;
    if (p->rd_len || aor_text_find(data, len, secret, sl)) {
        w = malloc(p->rd_len + len);
        if (!w)
            return -1;
        if (p->rd_len)
            memcpy(w, p->rd_hold, p->rd_len);
        memcpy(w + p->rd_len, data, len);
        len += p->rd_len;
        p->rd_len = 0;
        char *at = w, *hit;
        while ((hit = (char *)aor_text_find(at, len - (size_t)(at - w), secret, sl)) != NULL) {
            static const char mask[] = "[redacted]";
            size_t ml = sl >= sizeof mask - 1 ? sizeof mask - 1 : 0;
            memcpy(hit, mask, ml);
            memset(hit + ml, '*', sl - ml);
            at = hit + sl;
        }
        data = w;
    }
    size_t keep = secret_start_at_end(data, len, secret, sl);
    if (keep) {
        if (!p->rd_hold && !(p->rd_hold = malloc(sl))) {
            free(w);
            return -1;
        }
        memcpy(p->rd_hold, data + len - keep, keep);
        p->rd_len = keep;
    }
    write_body(p, data, len - keep);
    free(w);
    return 0;
}

/* At the clean end of a forwarded answer: the bytes write_stream held back (the start of
 * the secret, but not the secret) go out. */
static void write_stream_end(aor_proxy *p) {
    if (p->rd_len) {
        write_body(p, p->rd_hold, p->rd_len);
        p->rd_len = 0;
    }
}

/* write_stream of what b holds (drained). Returns what write_stream returns. */
static int write_stream_buffer(aor_proxy *p, struct evbuffer *b) {
    size_t len = evbuffer_get_length(b);
    const char *h = len ? (const char *)evbuffer_pullup(b, -1) : NULL;
    int r = h ? write_stream(p, h, len) : 0;
    evbuffer_drain(b, len);
    return r;
}

/* Replaces the configured secret that cand sent upstream wherever it appears in b by
 * "[redacted]": an upstream error body may quote the key ("Incorrect API key provided:
 * sk-...") and the client never had it (§3.2: no secret in an error body). The client's
 * own credential (cand->key < 0) is its own. Buffered answers only (send_buffered:
 * errors, and the rare 2xx that is not forwarded as it comes), never the stream path. */
static void redact_body(const aor_proxy *p, struct evbuffer *b, const aor_candidate *cand) {
    if (!cand || cand->key < 0)
        return;
    const char *secret = p->cfg->keys[cand->key].secret;
    size_t sl = secret ? strlen(secret) : 0, len = evbuffer_get_length(b);
    if (sl < 4 || len < sl)
        return;
    const char *s = (const char *)evbuffer_pullup(b, -1);
    if (!s || !memmem(s, len, secret, sl))
        return;
    struct evbuffer *out = evbuffer_new();
    if (!out)
        return;
    const char *at = s, *end = s + len, *hit;
    while ((hit = memmem(at, (size_t)(end - at), secret, sl)) != NULL) {
        evbuffer_add(out, at, (size_t)(hit - at));
        evbuffer_add(out, "[redacted]", 10);
        at = hit + sl;
    }
    evbuffer_add(out, at, (size_t)(end - at));
    evbuffer_drain(b, len);
    evbuffer_add_buffer(b, out);
    evbuffer_free(out);
}

/* Keeps from the client every header of hs whose value quotes the configured secret that
 * cand sent upstream (as redact_body does for the body). Buffered answers only. */
static void redact_headers(const aor_proxy *p, hdr_set *hs, const aor_candidate *cand) {
    if (!cand || cand->key < 0)
        return;
    const char *secret = p->cfg->keys[cand->key].secret;
    size_t sl = secret ? strlen(secret) : 0;
    for (size_t i = 0; sl >= 4 && i < hs->n; i++)
        if (hs->len[i].fwd && memmem(hs->h[i].value, hs->len[i].value, secret, sl))
            hs->len[i].fwd = 0;
}

/* The kept part of a cut answer (b) may end inside the configured key, whose rest was
 * never read: those last bytes, which could be its start, are dropped (QA: 28 of a
 * key's 32 characters went out at the cut). */
static void drop_secret_start(const aor_proxy *p, struct evbuffer *b, const aor_candidate *cand) {
    if (!cand || cand->key < 0)
        return;
    const char *secret = p->cfg->keys[cand->key].secret;
    size_t sl = secret ? strlen(secret) : 0, len = evbuffer_get_length(b);
    if (sl < 4 || len == 0)
        return;
    size_t tail = len < sl ? len : sl - 1;
    struct evbuffer_ptr at;
    if (evbuffer_ptr_set(b, &at, len - tail, EVBUFFER_PTR_SET) < 0)
        return;
    char *end = malloc(tail);
    if (!end || evbuffer_copyout_from(b, &at, end, tail) != (ev_ssize_t)tail) {
        free(end);
        evbuffer_drain(b, len); /* cannot tell: nothing rather than part of the key */
        return;
    }
    size_t keep = secret_start_at_end(end, tail, secret, sl);
    free(end);
    if (!keep)
        return;
    struct evbuffer *t = evbuffer_new();
    if (!t) {
        evbuffer_drain(b, len);
        return;
    }
    evbuffer_remove_buffer(b, t, len - keep);
    evbuffer_drain(b, evbuffer_get_length(b));
    evbuffer_add_buffer(b, t);
    evbuffer_free(t);
}

/* Sends a buffered answer as it came (but for the redactions), with a Content-Length;
 * cut (HELD_CUT_*): as an unfinished response instead. */
static void send_buffered(aor_proxy *p, long status, hdr_set *hs, struct evbuffer *b,
                          const aor_candidate *cand, int cut) {
    redact_body(p, b, cand);
    redact_headers(p, hs, cand);
    if (cut) {
        /* Only the first ERROR_BODY_MAX bytes were kept: the client gets them and an
         * unfinished response (chunked, no last chunk), never a short body framed as
         * whole. */
        if (cut == HELD_CUT_STREAM)
            aor_warn("%s: the last answer, %ld, was a stream that ended before its first "
                     "event: the client gets it unfinished",
                     cand_provider(p, cand), status);
        else
            aor_warn("%s: answer %ld of over %d bytes: the client gets its first %d and an "
                     "unfinished response",
                     cand_provider(p, cand), status, ERROR_BODY_MAX, ERROR_BODY_MAX);
        drop_secret_start(p, b, cand);
        write_head(p, status, hs, cand, -1);
        write_body_buffer(p, b);
        abort_client(p);
        return;
    }
    if (status == 304) { /* no body, no framing (RFC 9110 §15.4.5, RFC 9112 §6.3) */
        p->no_body = 1;
        evbuffer_drain(b, evbuffer_get_length(b));
        write_head(p, status, hs, cand, -1);
        finish(p, 1);
        return;
    }
    write_head(p, status, hs, cand, (long long)evbuffer_get_length(b));
    evbuffer_add_buffer(aor_conn_output(p->c), b);
    finish(p, 1);
}

/* ---- recording ---------------------------------------------------------------- */

/* Records the attempt's result: kind, hint_s (seconds, -1: none) and status, the HTTP
 * status the failure stands for (aor_verdict.status; for an error event in a 200 stream
 * the one its code maps to, so a stream's rate_limit_exceeded counts as the 429 it is:
 * QA, such streams opened the circuit for every key), 0 for a success. */
/* 1 when cand's key got a new secret by a reload while this request ran on the old one
 * (p->cfg is the configuration it started with): what that secret met says nothing about
 * the new credential (QA: the revoked secret's 401, arriving after the reload, backed the
 * new one off for 120 s). O(1) unless a reload happened meanwhile. */
static int secret_replaced(const aor_proxy *p, const aor_candidate *cand) {
    const aor_config *now = p->d->cfg;
    if (cand->key < 0 || now == p->cfg)
        return 0;
    const char *was = p->cfg->keys[cand->key].secret;
    for (size_t i = 0; i < now->nkeys; i++)
        if (strcmp(now->keys[i].name, cand->key_name) == 0)
            return (was == NULL) != (now->keys[i].secret == NULL) ||
                   (was && strcmp(was, now->keys[i].secret) != 0);
    return 0; /* no longer configured: its rows are not shown, and go at its return */
}

static void record_status(aor_proxy *p, const aor_candidate *cand, aor_kind kind, double hint_s,
                          long status) {
    flush_bookkeeping(p); /* an earlier success is recorded first */
    const aor_provider_cfg *pc = &p->cfg->providers[cand->provider];
    if (secret_replaced(p, cand)) {
        aor_info("%s/%s: %s with the key's secret a reload replaced: not recorded (a new "
                 "credential)",
                 pc->name, cand->key_name, aor_kind_name(kind));
        if (p->probe_until > 0) { /* no result for the circuit: the next request probes */
            aor_breaker_release_probe(aor_rstate_breaker(p->d->rs), pc->name,
                                      p->model ? p->model : "", p->probe_until);
            p->probe_until = 0;
        }
        return;
    }
    int own = cand->key < 0 ? AOR_RSTATE_OWN : 0; /* the client's own credential (§3.3) */
    if (status == 429)
        own |= AOR_RSTATE_429; /* a throttle of the key (of the client's account when own) */
    aor_rstate_record(p->d->rs, pc->name, cand->key_name, p->model ? p->model : "", p->client, kind,
                      hint_s, p->attempt_started, aor_clock_now(), own);
    if (p->probe_until > 0 && aor_kind_retryable(kind) && !aor_rstate_breaker_counts(kind, own)) {
        /* This attempt was its circuit's probe, and its failure says nothing of the
         * provider (one client's account): no result for the circuit, so the lease is
         * handed back and the next request probes (review: every client waited out the
         * lease with 429 aor_all_backed_off). */
        aor_breaker_release_probe(aor_rstate_breaker(p->d->rs), pc->name, p->model ? p->model : "",
                                  p->probe_until);
        p->probe_until = 0;
    }
}

/* A success, or a failure without a verdict of its own (its status: the answer's). */
static void record(aor_proxy *p, const aor_candidate *cand, aor_kind kind, double hint_s) {
    record_status(p, cand, kind, hint_s, kind == AOR_KIND_OK ? 0 : p->status);
}

/* ---- upstream callbacks ------------------------------------------------------- */

static void prelude_stop(aor_proxy *p);

static void reset_attempt(aor_proxy *p) {
    prelude_stop(p);
    p->prelude_held = 0;
    p->out_broken = 0;
    hset_reset(&p->hdrs);
    p->status = 0;
    p->mode = MODE_HEADERS;
    p->sse_error = 0;
    p->sse_sniffed = 0;
    p->cut = 0;
    p->bad_framing = 0;
    p->held_cut = 0;
    p->err_stream = 0;
    p->no_body = 0;
    p->end_failed = 0;
    p->end_recorded = 0;
    if (p->held)
        evbuffer_drain(p->held, evbuffer_get_length(p->held));
}

static void on_drain(void *arg) {
    aor_proxy *p = arg;
    if (p->x && aor_conn_output_len(p->c) < OUT_HIGH_WATERMARK / 2)
        aor_xfer_resume(p->x);
}

/* 1 when the media type ct (a Content-Type value, or NULL) starts with prefix. */
static int is_type(const char *ct, const char *prefix, size_t plen) {
    return ct && strncasecmp(ct, prefix, plen) == 0;
}

#define IS_TYPE(ct, lit) is_type((ct), (lit), sizeof(lit) - 1)

/* A decimal Content-Length value ("0" to 2^63-1, digits only), or -1 when it is not one
 * (RFC 9110 §8.6); no strtoll on the hot path (docs/performance.md). */
static long long content_length_of(const char *v) {
    if (!v || *v < '0' || *v > '9')
        return -1;
    long long n = 0;
    for (; *v >= '0' && *v <= '9'; v++) {
        if (n > (LLONG_MAX - (*v - '0')) / 10)
            return -1;
        n = n * 10 + (*v - '0');
    }
    return *v == '\0' ? n : -1;
}

/* Feeds the rate-limit headers of the answer to the usage snapshots (spec §6); called
 * once per attempt: when its header block is complete, or for a 2xx answer forwarded as
 * it comes, right after its head is sent (flush_bookkeeping). In memory only. */
static void observe_usage(aor_proxy *p) {
    const aor_provider_cfg *pc = &p->cfg->providers[p->cand->provider];
    /* retry_after = ignore "never derives timing from its headers" (§4.3): usage resets
     * are timing from its headers too. */
    if (pc->retry_after_ignore || secret_replaced(p, p->cand))
        return;
    if (p->hdrs.n &&
        aor_usage_observe(aor_rstate_usage(p->d->rs), pc->name, p->cand->key_name, p->status,
                          p->hdrs.h, p->hdrs.n, aor_clock_now(), p->cfg->backoff_max_s) < 0)
        aor_warn("usage: out of memory");
}

/* Records the usage headers and the success of a forwarded 2xx answer, if still to be
 * done. Runs once the answer's head has been sent (the client waits for the bytes, not
 * for the bookkeeping; docs/performance.md), before any later record of the attempt, and
 * at the latest when p is freed. The success itself waits for the answer's clean end
 * (ok_at_end): a small answer has usually ended by then. */
static void flush_bookkeeping(aor_proxy *p) {
    if (p->usage_pending) {
        p->usage_pending = 0;
        if (p->c)
            aor_conn_on_flushed(p->c, NULL, NULL);
        observe_usage(p);
    }
    if (!p->ok_pending)
        return;
    p->ok_pending = 0;
    if (p->c)
        aor_conn_on_flushed(p->c, NULL, NULL);
    observe_usage(p);
    if (p->answer_done)
        record(p, p->cand, AOR_KIND_OK, -1);
    else
        p->ok_at_end = 1;
}

static void on_flushed(void *arg) {
    flush_bookkeeping(arg);
}

/* The probe of a half-open circuit answered well (a 2xx now forwarded): the circuit
 * closes at once (§4.4 "any success closes it"), not at the end of a long stream while
 * every other request skips the provider. The attempt's own success still waits for the
 * clean end (ok_at_end). */
static void probe_answered(aor_proxy *p) {
    if (!p->cand->half_open)
        return;
    const aor_provider_cfg *pc = &p->cfg->providers[p->cand->provider];
    aor_rstate_close_circuit(p->d->rs, pc->name, p->cand->key_name, p->model ? p->model : "",
                             aor_clock_now());
}

/* Sends the head of a 2xx answer that is forwarded as it comes (not SSE): from here on
 * its bytes go to the client as they arrive (MODE_STREAM), and the attempt is over. Runs
 * at the answer's first body byte, or at once when it has none (HEAD, 204, a
 * Content-Length of 0), or at its clean end when it turned out empty: an upstream that
 * fails after its head but before any body byte is a failed attempt that walks on
 * (§4.1 transient, §5.3 "before the first byte reached the client"). */
static void commit_2xx(aor_proxy *p) {
    p->mode = MODE_STREAM;
    long long n = content_length_of(hset_content_length(&p->hdrs));
    if (p->status == 204)
        n = -1; /* a 204 carries no Content-Length (RFC 9110 §8.6) */
    /* observe_usage + record(OK) once the head is sent (flush_bookkeeping) */
    p->ok_pending = 1;
    probe_answered(p);
    aor_conn_on_flushed(p->c, on_flushed, p);
    redact_stream_headers(p, &p->hdrs);
    write_head(p, p->status, &p->hdrs, p->cand, n);
}

static void on_up_header(void *arg, const char *line, size_t len) {
    aor_proxy *p = arg;
    if (p->mode != MODE_HEADERS)
        return; /* after the final header block: trailers (libcurl reports them here) */
    if (len >= 5 && line[0] == 'H' && memcmp(line, "HTTP/", 5) == 0) {
        /* A new status line (also after 1xx): forget earlier headers. */
        hset_reset(&p->hdrs);
        const char *sp = memchr(line, ' ', len);
        p->status = 0;
        /* The 3-digit status code (RFC 9112 §4); both backends give it so. */
        for (size_t i = sp ? (size_t)(sp + 1 - line) : len; i < len && p->status < 1000; i++) {
            if (line[i] < '0' || line[i] > '9')
                break;
            p->status = p->status * 10 + (line[i] - '0');
        }
        return;
    }
    if (len == 0) {
        if (p->status >= 100 && p->status < 200)
            return;
        if (p->hdrs.cl_conflict) {
            /* RFC 9112 §6.3: no length to trust; a proxy discards the answer (the direct
             * backend's parser refuses it too). Its body is not read (on_up_data). */
            p->bad_framing = 1;
            p->mode = MODE_BUFFER;
            return;
        }
        int ok = p->status >= 200 && p->status < 300;
        const char *ct = hset_content_type(&p->hdrs);
        if (!ok || IS_TYPE(ct, "text/html")) {
            observe_usage(p);
            p->mode = MODE_BUFFER;
        } else if (IS_TYPE(ct, "text/event-stream") && p->req->method != HTTP_HEAD) {
            observe_usage(p);
            p->mode = MODE_SSE_PEEK;
            aor_sse_peek_init(&p->peek);
        } else {
            /* (a 304 is not 2xx: it is buffered, then sent without a body, send_buffered) */
            p->no_body = p->req->method == HTTP_HEAD || p->status == 204;
            if (p->no_body || content_length_of(hset_content_length(&p->hdrs)) == 0)
                commit_2xx(p);
            else
                p->mode = MODE_HEAD_HELD; /* commit_2xx at its first byte or clean end */
        }
        return;
    }
    hset_add(&p->hdrs, line, len);
}

/* The line at s (before end) of an SSE stream, whose lines end with "\r\n", "\n" or a
 * bare "\r" (WHATWG HTML, "Server-sent events": events end at an empty line, so
 * "\n\r\n", "\r\n\n" and "\r\r" end one too; QA: only "\n\n" and "\r\n\r\n" were
 * seen, and such a stream was held whole). Returns the line's length without its
 * terminator and sets *term to the terminator's length, 0 when the line has none before
 * end. A "\r" that is the last byte ends a line with text only when final (the end of a
 * whole event): its "\n" may come in the next read (*term 0: not ended yet). It ends an
 * empty line (the event's end) at once: a "\n" after it then reads as an empty line of
 * its own, a blank event that is skipped. */
static size_t sse_line(const char *s, const char *end, int final, size_t *term) {
    const char *p = s;
    while (p < end && *p != '\n' && *p != '\r')
        p++;
    if (p == end || (*p == '\r' && p + 1 == end && !final && p > s))
        *term = 0;
    else
        *term = *p == '\r' && p + 1 < end && p[1] == '\n' ? 2 : 1;
    return (size_t)(p - s);
}

/* Looks for the end of the SSE event that starts at off in held. Returns its length (up
 * to and including the empty line that ends it), or 0 when it is not complete yet. held
 * is at most SSE_PEEK_MAX bytes (the events before the first byte goes to the client). */
static size_t event_len_at(struct evbuffer *held, size_t off) {
    size_t total = evbuffer_get_length(held);
    if (off >= total)
        return 0;
    const char *buf = (const char *)evbuffer_pullup(held, -1);
    if (!buf)
        return 0;
    const char *s = buf + off, *end = buf + total;
    while (s < end) {
        size_t term, ll = sse_line(s, end, 0, &term);
        if (!term)
            return 0;
        s += ll + term;
        if (ll == 0)
            return (size_t)(s - (buf + off));
    }
    return 0;
}

/* 1 when the len bytes at ev hold no field: only comment lines (":" ...) and blank lines,
 * which an SSE client ignores (WHATWG HTML, "Server-sent events": OpenRouter sends
 * ": OPENROUTER PROCESSING" before the first event). */
static int event_is_comment(const char *ev, size_t len) {
    const char *s = ev, *end = ev + len;
    while (s < end) {
        size_t term, ll = sse_line(s, end, 1, &term);
        if (ll && s[0] != ':')
            return 0;
        s += ll + term;
    }
    return 1;
}

/* 1 when the SSE event ev (evlen bytes) is an error event of p's dialect, with its
 * verdict in *out (§5.3, §4.1); 0 otherwise or when out of memory. */
static int event_is_error(const aor_proxy *p, const char *ev, size_t evlen, aor_verdict *out) {
    /* Gather the data: lines. */
    char *data = malloc(evlen + 1);
    if (!data)
        return 0;
    size_t dl = 0;
    int event_error = 0;
    const char *s = ev, *end = ev + evlen;
    while (s < end) {
        size_t term, l2 = sse_line(s, end, 1, &term);
        if (l2 >= 5 && strncmp(s, "data:", 5) == 0) {
            const char *v = s + 5;
            size_t vl = l2 - 5;
            if (vl && *v == ' ') {
                v++;
                vl--;
            }
            memcpy(data + dl, v, vl);
            dl += vl;
        } else if (l2 >= 6 && strncmp(s, "event:", 6) == 0) {
            /* Bounded by the line: the buffer may end without a terminator. */
            size_t k = 6;
            while (k < l2 && s[k] == ' ')
                k++;
            if (l2 - k >= 5 && strncmp(s + k, "error", 5) == 0)
                event_error = 1;
        }
        s += l2 + term;
    }
    data[dl] = '\0';
    int is_err = aor_classify_sse_error(p->dialect, data, dl, out);
    if (!is_err && event_error) {
        out->kind = AOR_KIND_TRANSIENT;
        out->hint_s = -1;
        out->status = 500;
        snprintf(out->reason, sizeof out->reason, "SSE error event");
        is_err = 1;
    }
    /* retry_after = ignore never derives timing from the provider (§4.3): nor from a
     * RetryInfo in a stream's error event (QA: a Gemini stream's "60s" was taken). */
    if (is_err && p->cfg->providers[p->cand->provider].retry_after_ignore)
        out->hint_s = -1;
    free(data);
    return is_err;
}

/* 1 when an answer labelled text/event-stream is an HTML page (its first byte past
 * whitespace is '<', which starts no SSE line): a configuration error like an HTML 2xx
 * (§4.1), with the verdict in sse_verdict. Decides once, on the first such byte. */
static int sse_is_html(aor_proxy *p) {
    if (p->sse_sniffed)
        return 0;
    size_t n = evbuffer_get_length(p->held), look = n < 64 ? n : 64;
    const unsigned char *h = evbuffer_pullup(p->held, (ssize_t)look);
    size_t i = look >= 3 && h && memcmp(h, "\xEF\xBB\xBF", 3) == 0 ? 3 : 0;
    while (i < look && (h[i] == ' ' || h[i] == '\t' || h[i] == '\r' || h[i] == '\n'))
        i++;
    if (i == look)
        return 0; /* only whitespace so far */
    p->sse_sniffed = 1;
    if (h[i] != '<')
        return 0;
    p->sse_verdict.kind = AOR_KIND_CONFIG;
    p->sse_verdict.hint_s = -1;
    p->sse_verdict.status = p->status;
    snprintf(p->sse_verdict.reason, sizeof p->sse_verdict.reason,
             "%ld text/event-stream answer that is an HTML page, not the %s API: wrong "
             "base_url?",
             p->status, aor_dialect_name(p->cfg->providers[p->cand->provider].dialect));
    return 1;
}

/* Checks the events held before the first byte goes to the client for an error event,
 * from the first one (at off in held, evlen bytes) to the last complete one (§5.3: an
 * error event that arrives before any byte went to the client is a failed attempt; a
 * stream's first event and its error can come in one read, as the Responses API's
 * response.created and response.failed do). The verdict goes to sse_verdict. */
static int held_events_have_error(aor_proxy *p, size_t off, size_t evlen) {
    for (size_t at = off, n = evlen; n > 0; at += n, n = event_len_at(p->held, at)) {
        const char *ev = (const char *)evbuffer_pullup(p->held, (ssize_t)(at + n));
        if (!ev)
            return 0;
        if (!event_is_comment(ev + at, n) && event_is_error(p, ev + at, n, &p->sse_verdict))
            return 1;
    }
    return 0;
}

/* Adds len forwarded bytes to the SSE tail ring (only the last SSE_TAIL_MAX count). */
static void tail_add(aor_proxy *p, const char *data, size_t len) {
    p->tail_total += len;
    if (len > SSE_TAIL_MAX) {
        data += len - SSE_TAIL_MAX;
        len = SSE_TAIL_MAX;
    }
    size_t at = (p->tail_total - len) % SSE_TAIL_MAX;
    size_t first = len < SSE_TAIL_MAX - at ? len : SSE_TAIL_MAX - at;
    memcpy(p->sse_tail + at, data, first);
    memcpy(p->sse_tail, data + first, len - first);
}

/* 1 when the bytes kept in the tail end with an event's end: an empty line after a line
 * end ("\n\n", "\r\n\r\n", "\n\r\n", "\r\r": any SSE line ends, sse_line). */
static int tail_ends_event(const aor_proxy *p) {
    size_t n = p->tail_total < 3 ? p->tail_total : 3;
    char e[3] = {0, 0, 0}; /* the last n bytes, right-aligned: e[2] is the last */
    for (size_t i = 0; i < n; i++)
        e[3 - n + i] = p->sse_tail[(p->tail_total - n + i) % SSE_TAIL_MAX];
    int eol1 = e[1] == '\n' || e[1] == '\r';
    if (e[2] == '\r')
        return eol1; /* "\n\r", "\r\r": an empty line ended by CR */
    if (e[2] != '\n')
        return 0;
    if (e[1] == '\n')
        return 1;                                          /* "\n\n" */
    return e[1] == '\r' && (e[0] == '\n' || e[0] == '\r'); /* "\n\r\n", "\r\r\n" */
}

/* 1 when the event of len bytes at ev counts as the answer's last: not only comments or
 * blank lines, not OpenAI's "data: [DONE]" terminator. */
static int tail_event_counts(const char *ev, size_t len) {
    if (event_is_comment(ev, len))
        return 0;
    while (len && (ev[len - 1] == '\n' || ev[len - 1] == '\r'))
        len--;
    return !(len == 12 && memcmp(ev, "data: [DONE]", 12) == 0) &&
           !(len == 11 && memcmp(ev, "data:[DONE]", 11) == 0);
}

/* Keeps the text of a failed attempt (v->reason, redacted already) for the "last failure"
 * of a later all-backed-off answer (§5.6). */
static void note_failure(aor_proxy *p, const aor_candidate *cand, const aor_verdict *v) {
    char text[sizeof v->reason + 32];
    snprintf(text, sizeof text, "%s (%s)", aor_kind_name(v->kind), v->reason);
    if (aor_rstate_note_failure(p->d->rs, cand_provider(p, cand), cand->key_name, text) < 0)
        aor_warn("out of memory keeping a failure's text");
}

/* At the end of a forwarded SSE answer: 1 when its last event is an error event (verdict
 * in *v). A provider that fails in the middle of a stream sends one and ends it
 * (Anthropic's overloaded_error, OpenAI's {"error": ...}): the attempt failed, it is no
 * success (§4.1, §5.3). Only the last event is looked at, in the last SSE_TAIL_MAX
 * bytes. Else 2 when the answer ended cleanly (answer_done) without the terminator of
 * its endpoint's streams (end_scan: `data: [DONE]`, message_stop, response.completed),
 * where the same upstream, endpoint and model ended one with it before (sse_end.h): cut
 * short on the way, a transient failure (§4.1: "a stream that ends without its
 * terminator"; the verdict in *v). 0 otherwise. The client has the events already; its
 * response then ends without its own terminator (on_up_done). */
static int sse_tail_failed(aor_proxy *p, aor_verdict *v) {
    size_t n = p->tail_total < SSE_TAIL_MAX ? p->tail_total : SSE_TAIL_MAX;
    char *buf = n ? malloc(n) : NULL;
    if (!buf)
        return 0;
    size_t at = (p->tail_total - n) % SSE_TAIL_MAX;
    size_t first = n < SSE_TAIL_MAX - at ? n : SSE_TAIL_MAX - at;
    memcpy(buf, p->sse_tail + at, first);
    memcpy(buf + first, p->sse_tail, n - first);
    /* One pass over the bytes, an event ending at each LF LF or CRLF CRLF. When more went
     * in than the ring holds, its first 4 bytes only tell whether an event starts right
     * after them (start < 0: inside an event, not known where it began). */
    size_t from = p->tail_total > SSE_TAIL_MAX ? 4 : 0;
    long start = from ? -1 : 0;
    const char *last = NULL;
    size_t last_len = 0;
    for (size_t i = from ? from - 1 : 0; i < n; i++) {
        if (buf[i] != '\n')
            continue;
        int blank = (i >= 1 && buf[i - 1] == '\n') ||
                    (i >= 3 && buf[i - 1] == '\r' && buf[i - 2] == '\n' && buf[i - 3] == '\r');
        if (!blank)
            continue;
        if (start >= 0 && tail_event_counts(buf + start, i + 1 - (size_t)start)) {
            last = buf + start;
            last_len = i + 1 - (size_t)start;
        }
        start = (long)(i + 1);
    }
    /* A last event without its blank line (the stream ended right after it). */
    if (start >= 0 && (size_t)start < n && tail_event_counts(buf + start, n - (size_t)start)) {
        last = buf + start;
        last_len = n - (size_t)start;
    }
    int failed = last && event_is_error(p, last, last_len, v);
    free(buf);
    if (!failed && p->answer_done && p->end_scan.kind != AOR_SSE_END_NONE) {
        aor_sse_end kind = p->end_scan.kind;
        int terminated = aor_sse_end_scan_finish(&p->end_scan);
        if (aor_sse_ends_check(p->d->sse_ends, p->cfg->providers[p->cand->provider].base_url, kind,
                               p->model, p->end_scan.epoch, terminated)) {
            v->kind = AOR_KIND_TRANSIENT;
            v->hint_s = -1;
            v->status = 0;
            snprintf(v->reason, sizeof v->reason,
                     "the stream ended without its terminator (%s): cut short upstream",
                     aor_sse_end_name(kind));
            failed = 2;
        }
    }
    return failed;
}

/* Records the attempt of a forwarded answer at its end: the failure sse_tail_failed finds
 * (a last error event, a missing terminator), else `otherwise` (success at a clean end
 * or when the client left; transient when the upstream cut it). Returns 1 when such a
 * failure was recorded, else 0. */
static int record_stream_end(aor_proxy *p, const aor_candidate *cand, aor_kind otherwise) {
    aor_verdict ev;
    memset(&ev, 0, sizeof ev);
    int failed = p->sse_tail ? sse_tail_failed(p, &ev) : 0;
    if (failed) {
        redact(p, ev.reason, sizeof ev.reason);
        if (failed == 2)
            aor_warn("%s/%s: %s -> %s; ending the client's response without its terminator",
                     cand_provider(p, cand), cand->key_name, ev.reason, aor_kind_name(ev.kind));
        else
            aor_info("%s/%s: the stream ended with an error event -> %s (%s)",
                     cand_provider(p, cand), cand->key_name, aor_kind_name(ev.kind), ev.reason);
        if (otherwise == AOR_KIND_OK)
            p->d->m.attempt_fail++;
        note_failure(p, cand, &ev);
        record_status(p, cand, ev.kind, ev.hint_s, ev.status);
        return 1;
    }
    record(p, cand, otherwise, -1);
    return 0;
}

/* Once a forwarded stream's own terminator (`data: [DONE]`, message_stop,
 * response.completed) has gone through end_scan: its success is recorded now, and so
 * written ahead, before the bytes that hold it go to the client. An SDK takes the
 * stream as finished there, and the upstream may send the HTTP end (the last chunk)
 * later; until 2026-12-03 the success waited for it, and a kill -9 in between lost a
 * sticky move the client had seen (QA, §4.5). What comes after the terminator cannot
 * undo it: a cut there leaves the answer complete (on_up_done). The stream is noted as
 * terminated for its upstream (aor_sse_ends_check) here too. */
static int tail_ends_event(const aor_proxy *p);

static void record_at_terminator(aor_proxy *p) {
    /* Only a success's terminator (not response.failed), and only once its event is
     * whole: the data of `event: response.completed` may come in the next read (QA: a
     * response.failed whose data came later was recorded as a success). */
    if (!p->ok_at_end || !p->end_scan.seen || !p->end_scan.ok || !tail_ends_event(p))
        return;
    p->ok_at_end = 0;
    p->end_recorded = 1;
    aor_sse_ends_check(p->d->sse_ends, p->cfg->providers[p->cand->provider].base_url,
                       p->end_scan.kind, p->model, p->end_scan.epoch, 1);
    p->end_failed = record_stream_end(p, p->cand, AOR_KIND_OK);
}

static void classify_held(aor_proxy *p, aor_verdict *v);

/* A buffered answer (an error, or a 2xx that is not forwarded as it comes) has grown past
 * ERROR_BODY_MAX: it is classified by its first ERROR_BODY_MAX bytes (held). An answer that
 * goes to the client as it came whatever follows (§4.1 client kind: "returned to the
 * client as is, no walk") is sent now, head and held bytes, and the rest follows as it
 * comes (MODE_STREAM; the configured key masked as in every forwarded answer). Until
 * 2026-12-01 such an answer was cut after its first MiB (QA: a 422 that echoes a 2 MB
 * prompt). Returns 0 when committed, -1 when the attempt ends here (a retryable failure:
 * the walk goes on, or returns the cut answer if it runs out; on_up_done). */
static int commit_large_answer(aor_proxy *p) {
    aor_verdict v;
    memset(&v, 0, sizeof v);
    classify_held(p, &v);
    if (v.kind != AOR_KIND_CLIENT)
        return -1;
    aor_info("%s/%s: %ld -> %s (%s), an answer over %d bytes: passed on as it comes",
             cand_provider(p, p->cand), p->cand->key_name, p->status, aor_kind_name(v.kind),
             "classified by its start", ERROR_BODY_MAX);
    redact_headers(p, &p->hdrs, p->cand);
    p->mode = MODE_STREAM;
    p->err_stream = 1;
    write_head(p, p->status, &p->hdrs, p->cand, content_length_of(hset_content_length(&p->hdrs)));
    if (write_stream_buffer(p, p->held) < 0)
        return -1;
    return 0;
}

/* 1 when the len bytes at data (the start of a body) begin, past a UTF-8 BOM and
 * whitespace, with "<!doctype" or "<html" (any case): an HTML page. 0 otherwise, also
 * when too few bytes came to tell. */
static int starts_as_html(const char *data, size_t len) {
    size_t i = len >= 3 && memcmp(data, "\xEF\xBB\xBF", 3) == 0 ? 3 : 0;
    while (i < len && (data[i] == ' ' || data[i] == '\t' || data[i] == '\r' || data[i] == '\n'))
        i++;
    return (len - i >= 9 && strncasecmp(data + i, "<!doctype", 9) == 0) ||
           (len - i >= 5 && strncasecmp(data + i, "<html", 5) == 0);
}

/* Sends the held start of a 2xx SSE answer (the first event that counts and what came
 * before it) and forwards the rest as it comes (MODE_STREAM): from here on the walk is
 * over (§5.3). Returns -1 when out of memory (the answer then ends unfinished). */
static int sse_commit(aor_proxy *p) {
    prelude_stop(p);
    p->mode = MODE_STREAM;
    p->ok_at_end = 1; /* usage was observed with the head; success at the clean end */
    probe_answered(p);
    redact_stream_headers(p, &p->hdrs);
    write_head(p, p->status, &p->hdrs, p->cand, -1);
    if (!p->sse_tail)
        p->sse_tail = malloc(SSE_TAIL_MAX);
    p->tail_total = 0;
    aor_sse_end_scan_init(&p->end_scan, aor_sse_end_of(p->dialect, p->path));
    p->end_scan.epoch = aor_sse_ends_epoch(p->d->sse_ends);
    size_t hl = evbuffer_get_length(p->held);
    const char *h = hl ? (const char *)evbuffer_pullup(p->held, -1) : NULL;
    if (h) {
        if (p->sse_tail)
            tail_add(p, h, hl);
        aor_sse_end_scan_feed(&p->end_scan, h, hl);
        record_at_terminator(p);
    }
    return write_stream_buffer(p, p->held) < 0 ? -1 : 0;
}

/* The hold of an SSE answer's opening events ran PRELUDE_HOLD_S: they go to the client
 * (a model that thinks long before its first output must not leave the client without
 * even the answer's head). */
static void prelude_timeout(evutil_socket_t fd, short what, void *arg) {
    (void)fd;
    (void)what;
    aor_proxy *p = arg;
    if (p->mode == MODE_SSE_PEEK && !p->committed && sse_commit(p) < 0)
        p->out_broken = 1;
}

/* Holds an opening event (aor_sse_peek_prelude): arms the timer at the first one.
 * Returns 0, or -1 when no timer can be made (then the answer goes on at once, as it
 * would without the hold). */
static int prelude_hold(aor_proxy *p) {
    if (!p->prelude_ev)
        p->prelude_ev = evtimer_new(p->d->base, prelude_timeout, p);
    if (!p->prelude_ev)
        return -1;
    if (!p->prelude_held) {
        struct timeval tv = {PRELUDE_HOLD_S, 0};
        if (evtimer_add(p->prelude_ev, &tv) < 0)
            return -1;
        p->prelude_held = 1;
    }
    return 0;
}

/* Disarms the hold's timer (the hold ended: committed, failed, or the attempt is over). */
static void prelude_stop(aor_proxy *p) {
    if (p->prelude_ev)
        evtimer_del(p->prelude_ev);
}

/* Looks at the len new bytes at data (already added to held) of a 2xx SSE answer for the
 * first event that counts: not only comments (sse_peek.h), not an opening event that tells
 * the client nothing yet (aor_sse_peek_prelude: Anthropic's message_start and ping come
 * before its overloaded_error; QA: those were sent on at once, so such an error right
 * after them was never walked past). Returns 0 while it has not come (the bytes are
 * held), 1 when the answer goes to the client, -1 when an error event came before it or
 * with it (§5.3: a failed attempt; the verdict in sse_verdict). */
static int sse_peek_decide(aor_proxy *p, const char *data, size_t len) {
    size_t done = 0;
    for (;;) {
        size_t before = p->peek.pos, evoff = 0, evlen = 0;
        int found = aor_sse_peek_feed(&p->peek, data + done, len - done, &evoff, &evlen);
        done += p->peek.pos - before;
        if (!found) {
            size_t hl = evbuffer_get_length(p->held);
            if (hl <= SSE_PEEK_MAX)
                return 0;
            evoff = p->peek.ev_start; /* no event boundary: just go on */
            evlen = hl - evoff;
        } else {
            const char *h = (const char *)evbuffer_pullup(p->held, (ssize_t)(evoff + evlen));
            if (h && aor_sse_peek_prelude(p->dialect, h + evoff, evlen)) {
                /* An error in an event named as an opening one is still an error (QA: a
                 * ping whose data was an overloaded_error was held, then sent as a
                 * success); the verdict is in sse_verdict already. */
                if (event_is_error(p, h + evoff, evlen, &p->sse_verdict))
                    return -1;
                if (prelude_hold(p) == 0) {
                    aor_sse_peek_next(&p->peek);
                    continue;
                }
            }
        }
        return held_events_have_error(p, evoff, evlen) ? -1 : 1;
    }
}

static size_t on_up_data(void *arg, const char *data, size_t len) {
    aor_proxy *p = arg;
    if (p->out_broken)
        return 0; /* the held start could not be sent (prelude_timeout): end the attempt */
    /* Flow control: a paused transfer keeps the bytes and delivers them again on resume
     * (libcurl's CURL_WRITEFUNC_PAUSE), so pause before writing, never after. */
    if (p->mode == MODE_STREAM && aor_conn_output_len(p->c) > OUT_HIGH_WATERMARK)
        return CURL_WRITEFUNC_PAUSE;
    if (p->bad_framing) {
        p->cut = 1;
        return 0; /* end this attempt (on_up_done) */
    }
    switch (p->mode) {
    case MODE_HEADERS:
        return len; /* body of a 1xx: none */
    case MODE_BUFFER:
        if (evbuffer_get_length(p->held) + len > ERROR_BODY_MAX) {
            /* Keep exactly the first ERROR_BODY_MAX bytes: enough to classify. */
            size_t part = ERROR_BODY_MAX - evbuffer_get_length(p->held);
            evbuffer_add(p->held, data, part);
            if (commit_large_answer(p) == 0) {
                /* returned as it came: the rest follows as it comes */
                if (write_stream(p, data + part, len - part) < 0)
                    return 0;
                return len;
            }
            p->cut = 1;
            p->held_cut = HELD_CUT_SIZE;
            return 0;
        }
        evbuffer_add(p->held, data, len);
        return len;
    case MODE_SSE_PEEK: {
        evbuffer_add(p->held, data, len);
        if (sse_is_html(p)) {
            p->sse_error = 1;
            p->cut = 1;
            return 0; /* end this attempt: a configuration error (on_done) */
        }
        int decided = sse_peek_decide(p, data, len);
        if (decided == 0)
            return len;
        if (decided < 0) {
            p->sse_error = 1;
            p->cut = 1;
            return 0; /* end this attempt; on_done walks on */
        }
        if (sse_commit(p) < 0)
            return 0; /* out of memory: the answer ends unfinished (on_up_done) */
        break;
    }
    case MODE_HEAD_HELD:
        if (!hset_content_type(&p->hdrs) && starts_as_html(data, len)) {
            /* An HTML page without a Content-Type (QA: a wrong base_url's server that
             * labels nothing): held and classified like a text/html one, a configuration
             * error (§4.1), not a success sent on. */
            p->mode = MODE_BUFFER;
            evbuffer_add(p->held, data, len);
            return len;
        }
        commit_2xx(p); /* the first bytes of the body (no SSE: no tail to keep) */
        if (write_stream(p, data, len) < 0)
            return 0;
        break;
    case MODE_STREAM:
        if (p->sse_tail) {
            tail_add(p, data, len);
            if (aor_sse_end_scan_feed(&p->end_scan, data, len))
                record_at_terminator(p);
        }
        if (write_stream(p, data, len) < 0)
            return 0;
        break;
    }
    return len;
}

/* Keeps the failed answer to return it as it came if the walk runs out. */
static void keep_last(aor_proxy *p, const aor_verdict *v) {
    /* §5.6 returns the last upstream *response*: an attempt that got none (connect
     * failure, reset, timeout) does not hide one an earlier attempt got (its Retry-After
     * would be lost behind a 502). */
    if (p->status <= 0 && p->last_status > 0)
        return;
    hset_clear(&p->last_hdrs);
    p->last_hdrs = p->hdrs;
    memset(&p->hdrs, 0, sizeof p->hdrs);
    p->last_status = p->status;
    if (!p->last_body)
        p->last_body = evbuffer_new();
    if (p->last_body) {
        evbuffer_drain(p->last_body, evbuffer_get_length(p->last_body));
        evbuffer_add_buffer(p->last_body, p->held);
    }
    p->last_cut = p->held_cut;
    p->last_verdict = *v;
    p->last_cand = p->cand;
}

static void classify_held(aor_proxy *p, aor_verdict *v) {
    const aor_provider_cfg *pc = &p->cfg->providers[p->cand->provider];
    size_t blen = evbuffer_get_length(p->held);
    const char *body = blen ? (const char *)evbuffer_pullup(p->held, -1) : NULL;
    aor_classify(pc->dialect, p->status, p->hdrs.h, p->hdrs.n, body, blen, aor_clock_now(),
                 pc->retry_after_ignore, v);
    if (v->kind == AOR_KIND_CONFIG && p->status >= 400 && p->status != 407 &&
        p->req->method == HTTP_HEAD) {
        /* An answer to HEAD has no body to tell a wrong base_url's "no such page" from the
         * API's own answer: the status is the client's, as a GET's would be (QA: HEAD on
         * a path the provider does not have got 502 "wrong base_url?"). A 407 is aord's
         * own proxy's, never the client's. */
        v->kind = AOR_KIND_CLIENT;
        snprintf(v->reason, sizeof v->reason, "%ld answer to HEAD", p->status);
    }
}

/* 1 for curl errors that are aor's fault, not the upstream's. */
static int local_curl_error(CURLcode rc) {
    return rc == CURLE_URL_MALFORMAT || rc == CURLE_UNSUPPORTED_PROTOCOL ||
           rc == CURLE_OUT_OF_MEMORY || rc == CURLE_BAD_FUNCTION_ARGUMENT ||
           rc == CURLE_NOT_BUILT_IN;
}

/* Replaces every configured secret and the client's own credential that appears in
 * text (NUL-terminated, cap bytes) by "[redacted]": upstream error codes and headers are
 * upstream input and may echo a key (§3.2: never log a secret). */
static void redact(const aor_proxy *p, char *text, size_t cap) {
    const aor_config *cfg = p->cfg;
    for (size_t k = 0; k <= cfg->nkeys; k++) {
        const char *secret = k < cfg->nkeys ? cfg->keys[k].secret : p->cred;
        size_t sl = secret ? strlen(secret) : 0;
        if (sl < 4)
            continue;
        /* Searched on after each replacement: a secret that "[redacted]" contains (or
         * is) must not be found in its own replacement again, for ever. */
        char *from = text, *hit;
        while ((hit = strstr(from, secret)) != NULL) {
            char rest[512];
            snprintf(rest, sizeof rest, "%s", hit + sl);
            size_t head = (size_t)(hit - text);
            snprintf(text + head, cap - head, "[redacted]%s", rest);
            size_t after = head + sizeof "[redacted]" - 1;
            if (after >= strlen(text))
                break; /* the end, or cut short by cap */
            from = text + after;
        }
    }
}

static void on_up_done(void *arg, CURLcode rc, long status, const char *errtext) {
    aor_proxy *p = arg;
    p->x = NULL;
    const aor_candidate *cand = p->cand;
    const char *prov = cand_provider(p, cand);
    prelude_stop(p);
    if (p->out_broken) {
        /* The held start could not be sent (prelude_timeout): the client's answer is
         * missing bytes, so it must not end cleanly (§5.3). */
        if (!p->end_recorded)
            record_stream_end(p, cand, AOR_KIND_TRANSIENT);
        abort_client(p);
        return;
    }
    if (p->mode == MODE_HEAD_HELD && rc == CURLE_OK)
        commit_2xx(p); /* a 2xx that ended cleanly without a body byte */
    if (p->mode == MODE_SSE_PEEK && rc == CURLE_OK && !p->cut && p->prelude_held) {
        /* A stream that ended cleanly after its opening events: an error event after
         * them without the blank line that ends an event fails the attempt (as for a
         * first event, below); else it is the client's, as it would have been had they
         * been sent on, and its end is judged as a forwarded stream's (its terminator). */
        size_t hl = evbuffer_get_length(p->held), at = p->peek.ev_start;
        const char *h = hl > at ? (const char *)evbuffer_pullup(p->held, -1) : NULL;
        if (h && !event_is_comment(h + at, hl - at) &&
            event_is_error(p, h + at, hl - at, &p->sse_verdict)) {
            p->sse_error = 1;
        } else if (sse_commit(p) < 0) {
            abort_client(p);
            return;
        }
    }
    if (p->committed && rc != CURLE_OK && p->end_scan.seen && !hset_content_length(&p->hdrs)) {
        /* The stream's terminator came, then its framing broke (a reset instead of the
         * last chunk): the answer is whole, so it ends as it would have. */
        aor_info("%s/%s: upstream failed after its stream's terminator (%s); the answer was "
                 "complete",
                 prov, cand->key_name, errtext);
        rc = CURLE_OK;
    }
    if (p->committed) {
        if (rc != CURLE_OK) {
            aor_warn("%s/%s: upstream failed after the answer started (%s); ending the "
                     "client's response without its terminator",
                     prov, cand->key_name, errtext);
            p->d->m.attempt_fail++;
            aor_verdict cutv = {.kind = AOR_KIND_TRANSIENT, .hint_s = -1};
            snprintf(cutv.reason, sizeof cutv.reason, "cut after the answer started: %s", errtext);
            redact(p, cutv.reason, sizeof cutv.reason);
            note_failure(p, cand, &cutv);
            /* Recorded already at its terminator (a Content-Length answer cut after it):
             * the client still sees the cut, the attempt is not recorded twice (QA). */
            if (!p->end_recorded)
                record_stream_end(p, cand, AOR_KIND_TRANSIENT);
            p->ok_at_end = 0;
            abort_client(p);
            return;
        }
        p->answer_done = 1;
        if (p->ok_pending) {
            /* The answer is complete and its last bytes are still here: its success (a
             * sticky that moves, a backoff row it clears, a round-robin streak) is
             * recorded, and so written to the state store, before the client can have
             * them, so that a kill -9 right after the client read its answer loses
             * nothing (§4.5; QA: 12 of 25 round-robin streaks lost). The usage headers,
             * in memory only, still wait for the flush (flush_bookkeeping). */
            p->ok_pending = 0;
            record(p, cand, AOR_KIND_OK, -1);
            p->usage_pending = 1; /* after record(), which would run it now */
        }
        if (p->ok_at_end || p->end_failed) {
            int failed = p->end_failed || record_stream_end(p, cand, AOR_KIND_OK);
            p->ok_at_end = 0;
            if (failed) {
                /* The upstream failed after the answer started (its last event is an
                 * error event): the client has the event, and its response ends without
                 * its terminator, so that it sees an error, never a clean end (§5.3). */
                write_stream_end(p);
                abort_client(p);
                return;
            }
        }
        write_stream_end(p);
        if (p->chunked_out)
            evbuffer_add(aor_conn_output(p->c), "0\r\n\r\n", 5);
        finish(p, p->chunked_out || p->no_body || hset_content_length(&p->hdrs));
        return;
    }
    aor_verdict v;
    memset(&v, 0, sizeof v);
    if (p->bad_framing) {
        v.kind = AOR_KIND_TRANSIENT;
        v.hint_s = -1;
        snprintf(v.reason, sizeof v.reason, "answer with Content-Length headers that disagree");
        p->status = 0; /* no answer to pass on if the walk ends here: a 502, as on the
                          direct backend, whose parser refuses such an answer */
    } else if (p->sse_error) {
        v = p->sse_verdict;
    } else if (rc != CURLE_OK && !p->cut) {
        v.kind = AOR_KIND_TRANSIENT;
        v.hint_s = -1;
        snprintf(v.reason, sizeof v.reason, "network: %s", errtext);
        p->status = 0;
        if (local_curl_error(rc)) {
            /* aor's own fault (bad URL, out of memory): the key is not to blame. */
            aor_error("%s/%s: could not send the request: %s", prov, cand->key_name, errtext);
            p->last_cand = cand;
            answer_local_error(p, 502, "aor_internal", "aor: could not send the request upstream",
                               NULL);
            return;
        }
    } else if (p->mode == MODE_SSE_PEEK) {
        size_t hl = evbuffer_get_length(p->held);
        const char *h = hl ? (const char *)evbuffer_pullup(p->held, -1) : NULL;
        if (!h || event_is_comment(h, hl)) { /* nothing, or only comments */
            v.kind = AOR_KIND_TRANSIENT;
            v.hint_s = -1;
            snprintf(v.reason, sizeof v.reason, "stream ended before its first event");
            /* Should it be the last answer (§5.6 "as it came"): it came unfinished, and
             * the client must see that, not an empty 200 framed as whole (QA). */
            p->held_cut = HELD_CUT_STREAM;
        } else if (event_is_error(p, h, hl, &v)) {
            /* Its only event, an error without the blank line that ends an event: a
             * failed attempt like any other (§5.3), walk on. */
        } else {
            /* A short stream that ended cleanly without a blank line: pass it on. */
            record(p, cand, AOR_KIND_OK, -1);
            redact_stream_headers(p, &p->hdrs);
            write_head(p, p->status, &p->hdrs, cand, -1);
            if (write_stream_buffer(p, p->held) < 0) {
                abort_client(p);
                return;
            }
            write_stream_end(p);
            if (p->chunked_out)
                evbuffer_add(aor_conn_output(p->c), "0\r\n\r\n", 5);
            finish(p, 1);
            return;
        }
    } else {
        classify_held(p, &v);
    }
    redact(p, v.reason, sizeof v.reason);
    (void)status;
    char st[24] = "no answer";
    if (p->status > 0)
        snprintf(st, sizeof st, "%ld", p->status);
    /* A client error or a success changes no routing state: a debug line (AOR_DEBUG=1), so
     * that the request path writes nothing to disk for it, not even to aord.log (§4.5;
     * QA: every 400 appended a line). */
    aor_log(v.kind == AOR_KIND_OK || v.kind == AOR_KIND_CLIENT ? AOR_LOG_DEBUG : AOR_LOG_INFO,
            "%s/%s: %s -> %s (%s)%s", prov, cand->key_name, st, aor_kind_name(v.kind), v.reason,
            v.hint_s > 0 ? " with retry hint" : "");
    if (v.kind == AOR_KIND_OK) {
        record(p, cand, AOR_KIND_OK, -1);
        send_buffered(p, p->status, &p->hdrs, p->held, cand, p->held_cut);
        return;
    }
    if (v.kind == AOR_KIND_CONFIG) {
        char msg[512];
        snprintf(msg, sizeof msg,
                 "aor: provider '%s' answered with something that is not an answer of the "
                 "%s API (status %ld); check its base_url",
                 prov, aor_dialect_name(p->cfg->providers[cand->provider].dialect), p->status);
        aor_error("%s", msg);
        p->last_cand = cand;
        answer_local_error(p, 502, "aor_bad_upstream", msg, NULL);
        return;
    }
    if (v.kind == AOR_KIND_CLIENT) {
        send_buffered(p, p->status, &p->hdrs, p->held, cand, p->held_cut);
        return;
    }
    /* Retryable: record and walk on. */
    p->d->m.attempt_fail++;
    note_failure(p, cand, &v);
    record_status(p, cand, v.kind, v.hint_s, v.status);
    keep_last(p, &v);
    if (!p->cfg->auto_fallback) {
        p->next = p->seq.n; /* no more candidates */
    }
    start_next(p);
}

/* ---- starting attempts -------------------------------------------------------- */

/* Path part of a base_url ("https://openrouter.ai/api" -> "/api", "" when none). */
static const char *base_path(const char *base_url) {
    const char *s = strstr(base_url, "://");
    s = s ? s + 3 : base_url;
    const char *slash = strchr(s, '/');
    return slash ? slash : "";
}

/* The request path relative to the API root the client used. */
static const char *relative_path(aor_proxy *p) {
    if (!p->host)
        return p->path;
    const aor_config *cfg = p->cfg;
    for (size_t i = 0; i < cfg->nproviders; i++) {
        if (!aor_config_provider_owns_host(&cfg->providers[i], p->host))
            continue;
        const char *bp = base_path(cfg->providers[i].base_url);
        size_t n = strlen(bp);
        if (n && strncmp(p->path, bp, n) == 0 && (p->path[n] == '/' || p->path[n] == '\0'))
            return p->path + n;
        break;
    }
    return p->path;
}

/* The credential the client presented (for identity and pass-through): a header value
 * of req (borrowed: it lives as long as req), or a ?key= parameter copied into *own
 * (malloc'd; the caller wipes and frees it). NULL when there is none, or *own could not
 * be made (out of memory). */
static const char *client_credential(const aor_http_request *req, const char *query, char **own) {
    *own = NULL;
    const char *v = aor_http_request_known(req, AOR_HF_AUTHORIZATION);
    if (v && strncasecmp(v, "Bearer", 6) == 0 && (v[6] == ' ' || v[6] == '\t')) {
        /* The credential is the token, not the scheme (spec §5.1): the same key sent as
         * a bearer token or as x-api-key is one client, and an upstream that echoes the
         * token is redacted. */
        v += 6 + strspn(v + 6, " \t");
    }
    if (!v)
        v = aor_http_request_known(req, AOR_HF_X_API_KEY);
    if (!v)
        v = aor_http_request_known(req, AOR_HF_X_GOOG_API_KEY);
    if (!v)
        v = aor_http_request_known(req, AOR_HF_API_KEY);
    if (v)
        return v;
    *own = aor_dialect_query_key(query); /* the first non-empty key= */
    return *own;
}

/* Room for need bytes in hb (its bytes kept). 0, or -1 when out of memory. */
static int hb_reserve(hblock *hb, size_t need) {
    if (need <= hb->cap)
        return 0;
    size_t cap = hb->cap ? hb->cap : 1024;
    while (cap < need)
        cap *= 2;
    char *n = malloc(cap);
    if (!n)
        return -1;
    if (hb->b) {
        memcpy(n, hb->b, hb->len);
        explicit_bzero(hb->b, hb->len); /* may hold a credential */
        free(hb->b);
    }
    hb->b = n;
    hb->cap = cap;
    return 0;
}

/* Empties hb, its bytes wiped (a header block may hold a credential); memory kept. */
static void hb_wipe(hblock *hb) {
    if (hb->b && hb->len)
        explicit_bzero(hb->b, hb->len);
    hb->len = 0;
}

static int hb_line(hblock *hb, const char *name, size_t ln, const char *value, size_t lv) {
    if (memchr(name, '\r', ln) || memchr(name, '\n', ln) || memchr(value, '\r', lv) ||
        memchr(value, '\n', lv))
        return 0; /* never forward a line that would split in two */
    size_t need = hb->len + ln + 2 + lv + 2;
    if (hb_reserve(hb, need) < 0)
        return -1;
    memcpy(hb->b + hb->len, name, ln);
    memcpy(hb->b + hb->len + ln, ": ", 2);
    memcpy(hb->b + hb->len + ln + 2, value, lv);
    memcpy(hb->b + hb->len + ln + 2 + lv, "\r\n", 2);
    hb->len = need;
    return 0;
}

/* Adds a whole "Name: value" line (as aor_dialect_auth_header makes them). */
static int hb_raw(hblock *hb, const char *line) {
    const char *colon = strchr(line, ':');
    if (!colon)
        return 0;
    const char *v = colon + 1;
    while (*v == ' ')
        v++;
    return hb_line(hb, line, (size_t)(colon - line), v, strlen(v));
}

/* Adds the line that carries secret in dialect d (aor_dialect_auth_parts), written here
 * without an allocation. 0, or -1: out of memory, an unknown dialect, or a secret that is
 * empty or has a control character (which would inject a header). */
static int hb_auth(hblock *hb, aor_dialect d, const char *secret) {
    const char *name, *scheme;
    if (!aor_dialect_secret_ok(secret) || aor_dialect_auth_parts(d, &name, &scheme) < 0)
        return -1;
    size_t ls = strlen(secret), ln = strlen(name), lc = strlen(scheme);
    size_t need = hb->len + ln + 2 + lc + ls + 2;
    if (hb_reserve(hb, need) < 0)
        return -1;
    char *d0 = hb->b + hb->len;
    memcpy(d0, name, ln);
    memcpy(d0 + ln, ": ", 2);
    memcpy(d0 + ln + 2, scheme, lc);
    memcpy(d0 + ln + 2 + lc, secret, ls);
    memcpy(d0 + ln + 2 + lc + ls, "\r\n", 2);
    hb->len = need;
    return 0;
}

static void hb_free(hblock *hb) {
    hb_wipe(hb);
    free(hb->b);
    memset(hb, 0, sizeof *hb);
}

/* Client identities (spec §5.2: the SHA-256 of the client's credential) of the last few
 * credentials seen: a client sends the same one with every request, and hashing it each
 * time cost more than the rest of the routing. One thread: no lock. A replaced entry's
 * credential is wiped before it is freed. */
#define CLIENT_ID_CACHE 8
static struct {
    char *cred;
    size_t len;
    char hex[65];
} client_ids[CLIENT_ID_CACHE];
static size_t client_ids_next;

static void client_id(const char *cred, size_t len, char out[65]) {
    for (size_t i = 0; i < CLIENT_ID_CACHE; i++) {
        if (client_ids[i].cred && client_ids[i].len == len &&
            memcmp(client_ids[i].cred, cred, len) == 0) {
            memcpy(out, client_ids[i].hex, 65);
            return;
        }
    }
    aor_hash_sha256_hex(cred, len, out);
    size_t slot = client_ids_next++ % CLIENT_ID_CACHE;
    if (client_ids[slot].cred) {
        explicit_bzero(client_ids[slot].cred, client_ids[slot].len);
        free(client_ids[slot].cred);
    }
    client_ids[slot].cred = malloc(len + 1);
    if (!client_ids[slot].cred)
        return; /* only the cache is lost */
    memcpy(client_ids[slot].cred, cred, len);
    client_ids[slot].cred[len] = '\0';
    client_ids[slot].len = len;
    memcpy(client_ids[slot].hex, out, 65);
}

/* 1 for the headers that name the account of the client's own OpenAI key. */
static int is_account_header(const char *name) {
    return (name[0] | 0x20) == 'o' && (strcasecmp(name, "openai-organization") == 0 ||
                                       strcasecmp(name, "openai-project") == 0);
}

/* The items of the list v (separated by sep, blanks around them ignored) that drop()
 * does not take, joined by join, in order, into out (cap bytes, at least strlen(v) + 1).
 * Returns their length (0: none left); *dropped counts the items left out. */
static size_t filter_list(const char *v, char sep, const char *join,
                          int (*drop)(const char *item, size_t n), char *out, size_t cap,
                          size_t *dropped) {
    size_t o = 0, jl = strlen(join);
    const char *p = v;
    *dropped = 0;
    while (*p) {
        while (*p == ' ' || *p == '\t' || *p == sep)
            p++;
        const char *start = p;
        while (*p && *p != sep)
            p++;
        const char *end = p;
        while (end > start && (end[-1] == ' ' || end[-1] == '\t'))
            end--;
        size_t n = (size_t)(end - start);
        if (!n)
            continue;
        if (drop(start, n)) {
            (*dropped)++;
            continue;
        }
        if (o + (o ? jl : 0) + n + 1 > cap)
            break;
        if (o) {
            memcpy(out + o, join, jl);
            o += jl;
        }
        memcpy(out + o, start, n);
        o += n;
    }
    out[o] = '\0';
    return o;
}

/* An OAuth beta ("oauth-2025-04-20": the flow of a claude.ai subscription's OAuth token,
 * which Claude Code sends with that token). With a configured API key instead of the
 * client's token it names a flow the request no longer uses, and Anthropic answers a
 * beta it does not accept for the credential with 400 "Unexpected value(s) ... for the
 * anthropic-beta header": such betas stay behind, the others are forwarded in order
 * (filter_list; "oauth-" elsewhere in a name is not one). Source: Anthropic's "Beta
 * headers" documentation (comma-separated list). */
static int is_oauth_beta(const char *item, size_t n) {
    return n >= 6 && strncasecmp(item, "oauth-", 6) == 0;
}

/* aord's own admin session cookie (aor_admin=...: its value is the admin token; QA: a
 * client with a cookie jar sent it to the provider): taken out of a forwarded Cookie
 * field, the client's other cookies kept in order. Source: RFC 6265 §4.2.1 (pairs
 * separated by ";" and a space). */
static int is_admin_cookie(const char *item, size_t n) {
    return n >= 10 && strncmp(item, "aor_admin=", 10) == 0;
}

/* The request headers for the upstream of cand, as one block of lines (upstream.h):
 * the client's headers minus hop-by-hop ones, Accept-Encoding and (with a configured
 * key) the client's credentials, plus "Accept-Encoding: identity" and the key's auth
 * header. 0, or -1 on ENOMEM. */
static int build_headers(aor_proxy *p, const aor_provider_cfg *pc, const aor_candidate *cand,
                         hblock *hb) {
    const aor_http_request *req = p->req;
    /* Names listed by any Connection field (RFC 9110 §7.6.1; there may be several) are
     * not forwarded; looked at only when one lists more than keep-alive/close. */
    int conn_names = 0;
    if (aor_http_request_known(req, AOR_HF_CONNECTION))
        for (size_t i = 0; i < req->nheaders && !conn_names; i++)
            conn_names = strcasecmp(req->fields[i].name, "connection") == 0 &&
                         conn_lists_names(req->fields[i].value);
    /* The header section only: trailer fields are not merged into it (RFC 9110 §6.5.1),
     * and the checks (guard.c, the credential) look at the header section alone. */
    for (size_t i = 0; i < req->nheaders; i++) {
        const char *name = req->fields[i].name;
        if (aor_http_is_hop_header(name) || strcasecmp(name, "accept-encoding") == 0)
            continue;
        if (conn_names && req_conn_lists(req, name))
            continue;
        /* With a configured key the client's own credential and the OpenAI account it
         * names (OpenAI-Organization / OpenAI-Project: a mismatch with the key is a 401)
         * stay behind. */
        if (cand->key >= 0 && (aor_dialect_is_auth_header(name) || is_account_header(name)))
            continue;
        const char *value = req->fields[i].value;
        int (*drop)(const char *, size_t) = NULL;
        const char *join = ",";
        if (cand->key >= 0 && (name[0] | 0x20) == 'a' && strcasecmp(name, "anthropic-beta") == 0 &&
            strcasestr(value, "oauth-")) {
            drop = is_oauth_beta;
        } else if ((name[0] | 0x20) == 'c' && strcasecmp(name, "cookie") == 0 &&
                   strstr(value, "aor_admin=")) {
            drop = is_admin_cookie;
            join = "; ";
        }
        if (drop) {
            size_t vl = strlen(value), dropped = 0;
            char *kept = malloc(vl + 1);
            if (!kept)
                goto fail;
            size_t kl = filter_list(value, join[0], join, drop, kept, vl + 1, &dropped);
            /* as it came, or without the dropped items (left out when none remained) */
            int r = 0;
            if (!dropped)
                r = hb_line(hb, name, strlen(name), value, vl);
            else if (kl > 0)
                r = hb_line(hb, name, strlen(name), kept, kl);
            explicit_bzero(kept, vl);
            free(kept);
            if (r < 0)
                goto fail;
            continue;
        }
        if (hb_line(hb, name, strlen(name), value, strlen(value)) < 0)
            goto fail;
    }
    /* The answer is read (classified, its first SSE event looked at, the key redacted),
     * so it must come as it is: without Accept-Encoding an upstream may pick any coding
     * (RFC 9110 §12.5.3), and a gzip'd 429 insufficient_quota was read as a rate limit,
     * a gzip'd 401 quoting the key reached the client unredacted (QA). */
    if (hb_raw(hb, "Accept-Encoding: identity") < 0)
        goto fail;
    if (cand->key >= 0) {
        if (hb_auth(hb, pc->dialect, p->cfg->keys[cand->key].secret) < 0)
            goto fail;
    } else if (p->query && !aor_http_request_known(req, AOR_HF_X_GOOG_API_KEY)) {
        /* Pass-through of a Gemini ?key= credential: as a header, never in the URL. */
        char *own = NULL;
        const char *cred = client_credential(req, p->query, &own);
        if (cred && !aor_http_request_known(req, AOR_HF_AUTHORIZATION) &&
            !aor_http_request_known(req, AOR_HF_X_API_KEY)) {
            char *auth = aor_dialect_auth_header(AOR_DIALECT_GEMINI, cred);
            if (auth) {
                hb_raw(hb, auth);
                explicit_bzero(auth, strlen(auth));
                free(auth);
            }
        }
        if (own) {
            explicit_bzero(own, strlen(own));
            free(own);
        }
    }
    return 0;
fail:
    hb_wipe(hb);
    return -1;
}

/* The length of the API version segment path starts with ("/v1", "/v1beta", "/v1alpha",
 * followed by '/'), or 0: the roots of the provider APIs of spec §8. */
static size_t api_version_at(const char *path) {
    static const char *const versions[] = {"/v1", "/v1beta", "/v1alpha"};
    for (size_t i = 0; i < sizeof versions / sizeof versions[0]; i++) {
        size_t n = strlen(versions[i]);
        if (strncmp(path, versions[i], n) == 0 && path[n] == '/')
            return n;
    }
    return 0;
}

/* rel without its first segment when base_url's path already ends with it and it is an
 * API version (base_url = https://api.openai.com/v1, copied from OPENAI_BASE_URL, and
 * rel = /v1/chat/completions): the version once, not /v1/v1. */
static const char *skip_base_version(const char *base_url, const char *rel) {
    const char *bp = base_path(base_url);
    size_t bl = strlen(bp), n = api_version_at(rel);
    return n && bl >= n && memcmp(bp + bl - n, rel, n) == 0 ? rel + n : rel;
}

/* The upstream URL of the attempt, in p->url (NUL-terminated), or NULL (ENOMEM). */
static const char *build_url(aor_proxy *p, const aor_provider_cfg *pc, const char *rel) {
    rel = skip_base_version(pc->base_url, rel);
    char *q = p->query ? aor_dialect_query_drop_key(p->query) : NULL;
    if (p->query && !q)
        return NULL;
    size_t lb = strlen(pc->base_url), lr = strlen(rel), lq = q ? strlen(q) : 0;
    p->url.len = 0;
    char *url = hb_reserve(&p->url, lb + lr + lq + 2) == 0 ? p->url.b : NULL;
    if (url) {
        memcpy(url, pc->base_url, lb);
        memcpy(url + lb, rel, lr);
        size_t at = lb + lr;
        if (lq) {
            url[at++] = '?';
            memcpy(url + at, q, lq);
            at += lq;
        }
        url[at] = '\0';
    }
    free(q);
    return url;
}

static int try_candidate(aor_proxy *p, const aor_candidate *cand) {
    const aor_config *cfg = p->cfg;
    const aor_provider_cfg *pc = &cfg->providers[cand->provider];
    const char *rel = relative_path(p);
    char *rel_owned = NULL;
    const char *body = p->body;
    size_t body_len = p->body_len;
    free(p->upstream_body);
    p->upstream_body = NULL;
    if (p->model) {
        int listed = 0;
        const char *up = aor_config_upstream_model(pc, p->model, &listed);
        if (strcmp(up, p->model) != 0) {
            /* Gemini names the model in the path, except in its OpenAI-compatible API
             * (/v1beta/openai/...), whose body has it as OpenAI's does. */
            if (p->dialect == AOR_DIALECT_GEMINI &&
                (rel_owned = aor_dialect_path_set_model(rel, up)) != NULL) {
                rel = rel_owned;
            } else {
                size_t nl = 0;
                p->upstream_body = aor_dialect_body_set_model(p->body, p->body_len, up, &nl);
                if (p->upstream_body) {
                    body = p->upstream_body;
                    body_len = nl;
                }
            }
        }
    }
    const char *url = build_url(p, pc, rel);
    free(rel_owned);
    hblock *hb = &p->hb;
    hb_wipe(hb);
    if (!url || build_headers(p, pc, cand, hb) < 0)
        return -1;
    static const char *const methods[] = {
#define XX(num, name, string) [num] = #string,
        HTTP_METHOD_MAP(XX)
#undef XX
    };
    const char *method =
        p->req->method < sizeof methods / sizeof methods[0] && methods[p->req->method]
            ? methods[p->req->method]
            : "POST";
    aor_xfer_request xr = {url,    method, NULL, body, body_len, pc->ca_file, 0, hb->b ? hb->b : "",
                           hb->len};
    aor_xfer_callbacks cb = {on_up_header, on_up_data, on_up_done};
    reset_attempt(p);
    p->cand = cand;
    p->attempts++;
    p->d->m.attempts++; /* every request sent upstream, streamed or not */
    p->attempt_started = aor_clock_now();
    aor_debug("attempt %d: %s/%s %s %s", p->attempts, pc->name, cand->key_name, method, p->path);
    /* A half-open circuit lets only its probe through (routing or start_next took it for
     * this attempt): its lease, to hand back if the attempt is cancelled (proxy_free). */
    aor_breaker_row br;
    p->probe_until = aor_breaker_get(aor_rstate_breaker(p->d->rs), pc->name,
                                     p->model ? p->model : "", p->attempt_started, &br) &&
                             br.state == AOR_BREAKER_HALF_OPEN
                         ? br.probe_until
                         : 0;
    p->x = aor_xfer_start(p->d->up, &xr, &cb, p); /* copies url and headers */
    hb_wipe(hb);
    return p->x ? 0 : -1;
}

/* The "last failure" of an all-backed-off answer (§5.6): this request's own last failed
 * attempt, else the text kept for the key whose backoff row failed last (its kind and
 * reason: "transient (network: could not connect ...)"), else that row's kind alone. */
static const char *last_failure_text(const aor_proxy *p) {
    if (p->last_cand)
        return p->last_verdict.reason;
    const char *kind = aor_kind_name(p->seq.last_kind);
    const char *t = p->seq.last_provider
                        ? aor_rstate_failure_text(p->d->rs, p->seq.last_provider, p->seq.last_key)
                        : NULL;
    size_t kl = strlen(kind);
    /* Only when it is of the row's kind: a failure recorded without text came after it. */
    return t && strncmp(t, kind, kl) == 0 && t[kl] == ' ' ? t : kind;
}

static void answer_all_backed_off(aor_proxy *p, double earliest) {
    double now = aor_clock_now();
    double wait = earliest > now ? ceil(earliest - now) : 1;
    if (wait < 1)
        wait = 1;
    char ra[32];
    snprintf(ra, sizeof ra, "%.0f", wait);
    char msg[512];
    if (!p->last_cand && p->seq.usage_only)
        snprintf(msg, sizeof msg,
                 "aor: every key for %s has an exhausted usage window (the "
                 "provider's rate-limit headers said 0 remaining); the earliest resets in "
                 "%.0f s (no upstream failure)",
                 p->model ? p->model : "this request", wait);
    else
        snprintf(msg, sizeof msg,
                 "aor: every key for %s is backed off, its circuit is open or its usage "
                 "window is exhausted; the earliest is free again in %.0f s (last "
                 "failure: %s)",
                 p->model ? p->model : "this request", wait, last_failure_text(p));
    p->d->m.all_backed_off++;
    answer_local_error(p, 429, "aor_all_backed_off", msg, ra);
}

static int start_next(aor_proxy *p) {
    const aor_config *cfg = p->cfg;
    double now = aor_clock_now();
    while (p->next < p->seq.n) {
        if (p->allowed >= 0 && p->attempts >= p->allowed)
            break;
        /* The first candidate of a sequence aor_route_select just made was checked there,
         * in this same call: no second look (docs/performance.md); unless its circuit is
         * half-open, when this attempt must take the probe (§4.4). */
        int checked = p->next == 0 && p->attempts == 0 && !p->seq.items[0].half_open;
        const aor_candidate *cand = &p->seq.items[p->next++];
        const aor_provider_cfg *pc = &cfg->providers[cand->provider];
        if (checked) {
            if (try_candidate(p, cand) == 0)
                return 1;
            aor_error("could not start an upstream transfer to %s", pc->name);
            continue;
        }
        double until = 0;
        if (aor_backoff_blocked(aor_rstate_backoff(p->d->rs), pc->name, cand->key_name, now,
                                &until)) {
            /* Backed off meanwhile (another request failed on it): skip, no cost. */
            if (!p->skipped || until < p->skipped_until)
                p->skipped_until = until;
            p->skipped++;
            continue;
        }
        if (aor_usage_exhausted(aor_rstate_usage(p->d->rs), pc->name, cand->key_name, now,
                                &until)) {
            /* Its usage window ran out meanwhile (another request's answer, §6): skip. */
            if (!p->skipped || until < p->skipped_until)
                p->skipped_until = until;
            p->skipped++;
            continue;
        }
        double br_until = 0;
        if (!aor_breaker_allow_walk(aor_rstate_breaker(p->d->rs), pc->name,
                                    p->model ? p->model : "", now, -INFINITY, &br_until)) {
            /* Its circuit opened meanwhile (this walk's own failures, a failed probe), or
             * another request's probe of it is in flight (§4.4: skipped, no upstream call).
             * A half-open circuit with none: this attempt takes the probe (routing only
             * looked). */
            if (!p->skipped || br_until < p->skipped_until)
                p->skipped_until = br_until;
            p->skipped++;
            continue;
        }
        if (try_candidate(p, cand) == 0)
            return 1;
        aor_error("could not start an upstream transfer to %s", pc->name);
    }
    if (p->attempts == 0 || (p->last_cand == NULL)) {
        if (p->seq.dropped || p->skipped) {
            double e = p->seq.earliest_until;
            if (p->skipped && (e == 0 || p->skipped_until < e))
                e = p->skipped_until;
            answer_all_backed_off(p, e);
            return 0;
        }
        char msg[512];
        int speaks = 0, owned = 0; /* a section of the request's dialect; an owner of host */
        for (size_t i = 0; i < p->cfg->nproviders; i++) {
            const aor_provider_cfg *pc = &p->cfg->providers[i];
            speaks |= pc->dialect == p->dialect && !pc->implicit;
            owned |= p->host && aor_config_provider_owns_host(pc, p->host);
        }
        if (p->host && !owned) /* review: "serves model" misled when the host was the gap */
            snprintf(msg, sizeof msg,
                     "aor: no provider serves model '%s' on %s: no [provider] section owns that "
                     "host (add intercept = %s to the one that should serve it)",
                     p->model ? p->model : "", p->host, p->host);
        else if (speaks && p->model)
            snprintf(msg, sizeof msg, "aor: no configured provider serves model '%s'", p->model);
        else if (speaks) /* fresh-user pass: it said model '(none)' */
            snprintf(msg, sizeof msg,
                     "aor: the request names no model, and no configured provider of the %s "
                     "API takes it without one (the body's \"model\" field, or for Gemini the "
                     "model in the path, picks the provider)",
                     aor_dialect_name(p->dialect));
        else /* QA: the model was blamed when no provider speaks the request's API at all */
            snprintf(msg, sizeof msg,
                     "aor: no configured provider speaks the %s API this request uses (add a "
                     "[provider] with dialect = %s)",
                     aor_dialect_name(p->dialect), aor_dialect_name(p->dialect));
        answer_local_error(p, 404, "model_not_found", msg, NULL);
        return 0;
    }
    /* The walk ran out with upstream errors: the last answer as it came (§5.6). */
    if (p->last_status > 0 && p->last_body) {
        send_buffered(p, p->last_status, &p->last_hdrs, p->last_body, p->last_cand, p->last_cut);
        return 0;
    }
    char msg[512];
    snprintf(msg, sizeof msg, "aor: upstream %s failed: %s", cand_provider(p, p->last_cand),
             p->last_verdict.reason);
    answer_local_error(p, 502, "aor_upstream_unreachable", msg, NULL);
    return 0;
}

/* The path without a doubled API version ("/v1/v1/messages" -> "/v1/messages"): a base
 * URL that already ends in /v1 (ANTHROPIC_BASE_URL=http://127.0.0.1:8787/v1; the SDK adds
 * /v1 itself) would otherwise reach no route. A pointer into path. */
static const char *undouble_version(const char *path) {
    size_t n = api_version_at(path);
    return n && api_version_at(path + n) == n && memcmp(path, path + n, n) == 0 ? path + n : path;
}

/* 1 when a sidecar request's path is one aor forwards (spec §8: the provider APIs, all
 * under /v1/, /v1beta/ or /v1alpha/), with no "." or ".." segment a server might resolve to
 * another path. Anything else (/favicon.ico, /ADMIN/..., /v1/../x) is answered locally
 * and never reaches a provider with the user's key. */
static int sidecar_path_ok(const char *path) {
    if (!api_version_at(path))
        return 0;
    for (const char *s = path; (s = strchr(s, '/')) != NULL;) {
        s++;
        size_t n = strcspn(s, "/"), dots = 0, i = 0;
        while (i < n) { /* a segment of only '.' or "%2e" (RFC 3986 §6.2.2.2 decodes it) */
            if (s[i] == '.')
                i++;
            else if (n - i >= 3 && s[i] == '%' && s[i + 1] == '2' && (s[i + 2] | 0x20) == 'e')
                i += 3;
            else
                break;
            dots++;
        }
        if (i == n && (dots == 1 || dots == 2))
            return 0;
    }
    return 1;
}

int aor_proxy_sidecar_check(const char *path, const char **code, const char **why) {
    if (sidecar_path_ok(path))
        return 0;
    *code = "aor_unknown_route";
    *why = "the sidecar serves the provider APIs under /v1/ and /v1beta/ (and /v1alpha/), "
           "without '.' or '..' path segments";
    return 404;
}

/* On the sidecar, /v1/models and /v1/models/{id} are paths of both the OpenAI and the
 * Anthropic API: a request with Anthropic's version header (every Anthropic SDK sends
 * it), or with x-api-key and no Authorization, is Anthropic's (its SDK's models.list()
 * with ANTHROPIC_BASE_URL on the sidecar went to OpenAI with an OpenAI key). */
static int anthropic_models_request(const char *path, const aor_http_request *req) {
    size_t plen = strcspn(path, "?#");
    if (!((plen == 10 && memcmp(path, "/v1/models", 10) == 0) ||
          (plen >= 11 && memcmp(path, "/v1/models/", 11) == 0)))
        return 0;
    return aor_http_request_field(req, "anthropic-version") != NULL ||
           (aor_http_request_known(req, AOR_HF_X_API_KEY) != NULL &&
            aor_http_request_known(req, AOR_HF_AUTHORIZATION) == NULL);
}

aor_dialect aor_proxy_dialect(const aor_config *cfg, const char *host, const char *path) {
    for (size_t i = 0; host && i < cfg->nproviders; i++)
        if (aor_config_provider_owns_host(&cfg->providers[i], host))
            return cfg->providers[i].dialect; /* an intercepted host: its provider's */
    return aor_dialect_of_path(path);
}

aor_proxy *aor_proxy_start(aor_daemon *d, aor_conn *c, aor_http_request *req, const char *host) {
    aor_proxy *p = proxy_new();
    if (!p) {
        aor_http_request_free(req);
        aor_conn_abort(c);
        return NULL;
    }
    p->d = d;
    p->cfg = aor_cfgref_hold(d->cfgs); /* released in proxy_free */
    p->c = c;
    p->req = req;
    d->m.proxied++;
    /* The path is the target itself unless a query or fragment follows it. */
    if (req->url && !req->url[strcspn(req->url, "?#")])
        p->path = req->url;
    else
        p->path = p->path_own = aor_http_request_path(req);
    const char *qm = req->url ? strchr(req->url, '?') : NULL;
    if (qm)
        p->query = strdup(qm + 1);
    if (host)
        p->host = strdup(host);
    if (!p->held)
        p->held = evbuffer_new();
    if (!p->path || !p->held || (qm && !p->query) || (host && !p->host)) {
        proxy_free(p);
        aor_conn_abort(c);
        return NULL;
    }
    if (!host)
        p->path = undouble_version(p->path);
    p->dialect = aor_proxy_dialect(d->cfg, host, p->path);
    if (!host && p->dialect == AOR_DIALECT_OPENAI && anthropic_models_request(p->path, req))
        p->dialect = AOR_DIALECT_ANTHROPIC;
    const char *code, *why;
    if (!host && aor_proxy_sidecar_check(p->path, &code, &why)) {
        char msg[256];
        snprintf(msg, sizeof msg, "aor: %s", why);
        answer_local_error(p, 404, code, msg, NULL);
        return NULL;
    }
    if (req->upgrade) {
        answer_local_error(p, 426, "websocket_not_supported",
                           "aor: WebSocket is not supported here; use HTTP", NULL);
        return NULL;
    }
    p->body_len = evbuffer_get_length(req->body);
    p->body = p->body_len ? (const char *)evbuffer_pullup(req->body, -1) : "";
    if (p->dialect == AOR_DIALECT_GEMINI || strncmp(p->path, "/v1beta/models/", 15) == 0)
        p->model = p->model_own = aor_dialect_path_model(p->path);
    if (!p->model && p->body_len)
        p->model = aor_dialect_body_model_buf(p->body, p->body_len, p->model_buf,
                                              sizeof p->model_buf, &p->model_own);
    if (p->model && strlen(p->model) > AOR_MODEL_MAX) {
        answer_local_error(p, 400, "invalid_model", "aor: the model name is longer than 256 bytes",
                           NULL);
        return NULL;
    }
    p->cred = client_credential(req, p->query, &p->cred_own);
    client_id(p->cred ? p->cred : "", p->cred ? strlen(p->cred) : 0, p->client);
    long retries = aor_config_retries_for(d->cfg, p->model ? p->model : "");
    p->allowed = retries == AOR_RETRIES_UNLIMITED ? -1 : retries + 1;
    if (!d->cfg->auto_fallback)
        p->allowed = 1;
    aor_route_ctx ctx = aor_rstate_route_ctx(d->rs);
    if (aor_route_select(&ctx, p->model, p->client, p->host, p->dialect, aor_clock_now(), &p->seq) <
        0) {
        answer_local_error(p, 500, "aor_internal", "aor: out of memory", NULL);
        return NULL;
    }
    aor_conn_on_drain(c, on_drain, p);
    return start_next(p) ? p : NULL;
}
