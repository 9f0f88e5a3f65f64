/* libFuzzer target: the direct HTTP/1.1 upstream client (daemon/upstream_h1.h) reading an
 * upstream's answer, with the caller's flow control (the aor_xfer contract of
 * daemon/upstream.h). The "upstream" is a TCP listener on 127.0.0.1 made once per process;
 * each run accepts aor_h1's connection, waits for the request and writes the answer bytes
 * in chunks, running the libevent loop one pass after each chunk so that the parser's
 * state crosses reads.
 * Input: byte 0 flags (bits 0-1 method POST/GET/HEAD/POST without body, bit 2 the server
 * closes after the answer, bit 3 resume also when not paused, bit 4 a cut returns 0
 * instead of len/2, bit 5 cancel from the loop instead of from a callback, bit 6 resume
 * one pass later), byte 1 which on_data calls pause (bit i: call i mod 8; at most 8
 * pauses), byte 2 the on_data call that takes a short count (0: none), byte 3 the
 * callback (or with bit 5 the loop pass) that cancels (0: none), byte 4 the number of
 * chunk sizes (low 3 bits) followed by that many size bytes (0: all the rest); the rest
 * is the answer.
 * Each input runs twice: once plainly (one write, no pause/cut/cancel), once with the
 * options. Checks, beside memory safety: at most one on_done and none after a cancel or
 * after on_done; header lines come in blocks (status line, fields, empty line; only 1xx
 * blocks before the final one; nothing after it) without CR or LF; no body before the
 * final header block, in a 204 or 304 answer, to HEAD or while paused; bytes refused with
 * PAUSE come again first; never more body bytes than were written; a cut ends with
 * CURLE_WRITE_ERROR; CURLE_OK only with a final status and nothing held back; and
 * pausing, resuming and the read boundaries change nothing the caller sees (the same
 * header lines, body, code and status as the plain run; after a cut or cancel a prefix of
 * them; before a parse error either run may have seen a few more). */
#include "fuzz_util.h"
#include "upstream_h1.h"

#include <arpa/inet.h>
#include <errno.h>
#include <event2/event.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#define MAX_PAUSES 8
#define MAX_PASSES 4096 /* loop passes per run: a run never spins forever */

static struct event_base *base;
static int lfd = -1;
static char url[64];

typedef struct {
    char *p;
    size_t len, cap;
} buf;

static void buf_add(buf *b, const void *s, size_t n) {
    if (b->len + n > b->cap) {
        size_t cap = b->cap ? b->cap : 256;
        while (cap < b->len + n)
            cap *= 2;
        b->p = realloc(b->p, cap);
        FUZZ_CHECK(b->p != NULL, "out of memory in the harness");
        b->cap = cap;
    }
    if (n)
        memcpy(b->p + b->len, s, n);
    b->len += n;
}

typedef struct {
    unsigned flags, pause_mask, cut_at, cancel_at;
    const uint8_t *chunks; /* chunk sizes */
    size_t nchunks;
} options;

typedef struct {
    const options *o;
    aor_xfer *x;
    int done, cancelled, capped, cut, paused, in_block, final_block;
    CURLcode rc;
    long status, last_status;
    unsigned ncb, ndata, npauses, passes, pause_age;
    size_t written; /* answer bytes the server has written so far */
    buf heads;      /* header lines, each followed by '\n' */
    buf body;       /* body bytes on_data took */
    buf pend;       /* bytes on_data refused with PAUSE */
} run;

/* Every callback: none after on_done or a cancel; cancels when its number comes. */
static int cb_enter(run *r) {
    FUZZ_CHECK(!r->done, "no callback after on_done");
    FUZZ_CHECK(!r->cancelled, "no callback after aor_h1_cancel");
    r->ncb++;
    if (!(r->o->flags & 0x20) && r->o->cancel_at && r->ncb == r->o->cancel_at) {
        aor_h1_cancel(r->x); /* from inside the callback */
        r->cancelled = 1;
        return 1;
    }
    return 0;
}

static void on_header(void *arg, const char *line, size_t len) {
    run *r = arg;
    FUZZ_CHECK(line != NULL, "a header line");
    if (cb_enter(r))
        return;
    FUZZ_CHECK(!r->final_block, "no header line after the final header block");
    FUZZ_CHECK(!memchr(line, '\r', len) && !memchr(line, '\n', len), "no CR or LF in a line");
    if (len >= 5 && memcmp(line, "HTTP/", 5) == 0) {
        FUZZ_CHECK(!r->in_block, "a status line starts a header block");
        FUZZ_CHECK(len >= 12 && line[8] == ' ', "status line is HTTP/x.y NNN");
        r->in_block = 1;
        r->last_status = (line[9] - '0') * 100 + (line[10] - '0') * 10 + (line[11] - '0');
    } else if (len == 0) {
        FUZZ_CHECK(r->in_block, "an empty line ends a header block");
        r->in_block = 0;
        if (r->last_status / 100 != 1) /* a 1xx block is interim; any other ends the head */
            r->final_block = 1;
    } else {
        FUZZ_CHECK(r->in_block, "a field line inside a header block");
    }
    buf_add(&r->heads, line, len);
    buf_add(&r->heads, "\n", 1);
}

static size_t on_data(void *arg, const char *data, size_t len) {
    run *r = arg;
    if (cb_enter(r))
        return len;
    FUZZ_CHECK(!r->paused, "no on_data while paused");
    FUZZ_CHECK(len > 0, "on_data has bytes");
    FUZZ_CHECK(r->final_block, "body only after the final header block");
    FUZZ_CHECK(r->o->flags % 4 != 2, "no body in the answer to HEAD");
    FUZZ_CHECK(r->last_status != 204 && r->last_status != 304, "no body in a 204 or 304 answer");
    if (r->pend.len) {
        FUZZ_CHECK(len >= r->pend.len && memcmp(data, r->pend.p, r->pend.len) == 0,
                   "bytes refused with PAUSE come again first");
        r->pend.len = 0;
    }
    FUZZ_CHECK(r->body.len + len <= r->written, "never more body bytes than were written");
    r->ndata++;
    if (r->o->cut_at && r->ndata == r->o->cut_at) {
        r->cut = 1;
        return (r->o->flags & 0x10) ? 0 : len / 2;
    }
    if (r->npauses < MAX_PAUSES && (r->o->pause_mask >> ((r->ndata - 1) % 8) & 1)) {
        r->npauses++;
        r->paused = 1;
        r->pause_age = 0;
        buf_add(&r->pend, data, len);
        return CURL_WRITEFUNC_PAUSE;
    }
    buf_add(&r->body, data, len);
    return len;
}

static void on_done(void *arg, CURLcode rc, long status, const char *errtext) {
    run *r = arg;
    FUZZ_CHECK(!r->done, "exactly one on_done");
    FUZZ_CHECK(!r->cancelled, "no on_done after aor_h1_cancel");
    FUZZ_CHECK(errtext != NULL && fuzz_printable(errtext, 256), "errtext printable");
    r->done = 1;
    r->rc = rc;
    r->status = status;
    if (rc == CURLE_OK) {
        FUZZ_CHECK(errtext[0] == '\0', "no errtext on success");
        FUZZ_CHECK(r->final_block && status / 100 != 1 && status == r->last_status,
                   "success only with a final header block and its status");
        FUZZ_CHECK(!r->paused && r->pend.len == 0, "success only when no byte is held back");
    } else {
        FUZZ_CHECK(errtext[0] != '\0', "an error names what went wrong");
    }
    if (r->cut)
        FUZZ_CHECK(rc == CURLE_WRITE_ERROR, "a cut ends with CURLE_WRITE_ERROR");
}

/* Resumes a paused transfer (flag bit 6: one pass later); bit 3 resumes also when not
 * paused (must be harmless). */
static void maybe_resume(run *r) {
    if (r->done || r->cancelled)
        return;
    if (r->paused) {
        if ((r->o->flags & 0x40) && r->pause_age++ < 1)
            return;
        r->paused = 0;
        aor_h1_resume(r->x);
    } else if (r->o->flags & 0x08) {
        aor_h1_resume(r->x);
    }
}

static void pass(run *r) {
    event_base_loop(base, EVLOOP_NONBLOCK);
    r->passes++;
    maybe_resume(r);
    if ((r->o->flags & 0x20) && r->o->cancel_at && r->passes == r->o->cancel_at && !r->done &&
        !r->cancelled) {
        aor_h1_cancel(r->x); /* from the loop, between callbacks */
        r->cancelled = 1;
    }
}

static int live(const run *r) {
    return !r->done && !r->cancelled && r->passes < MAX_PASSES;
}

/* Reads what the client sent so far; returns the bytes read. */
static size_t drain(int fd, buf *req) {
    char tmp[4096];
    size_t got = 0;
    ssize_t n;
    while ((n = recv(fd, tmp, sizeof tmp, MSG_DONTWAIT)) > 0) {
        if (req)
            buf_add(req, tmp, (size_t)n);
        got += (size_t)n;
    }
    return got;
}

static void run_once(run *r, const options *o, const uint8_t *ans, size_t len) {
    memset(r, 0, sizeof *r);
    r->o = o;
    aor_h1 *h = aor_h1_new(base);
    FUZZ_CHECK(h != NULL, "aor_h1_new");
    static const char *const methods[4] = {"POST", "GET", "HEAD", "POST"};
    unsigned m = o->flags % 4;
    aor_xfer_request req = {.url = url,
                            .method = methods[m],
                            .body = m == 0 ? "{\"model\":\"m\"}" : NULL,
                            .body_len = m == 0 ? 13 : 0,
                            .header_block = "Accept: */*\r\n",
                            .header_block_len = 13};
    aor_xfer_callbacks cb = {on_header, on_data, on_done};
    int why = 0;
    r->x = aor_h1_start(h, &req, &cb, r, &why);
    FUZZ_CHECK(r->x != NULL, "aor_h1_start takes an http://127.0.0.1 URL");

    /* aor_h1 connects before aor_h1_start returns (a numeric host). */
    struct pollfd pfd = {.fd = lfd, .events = POLLIN};
    FUZZ_CHECK(poll(&pfd, 1, 5000) == 1, "the client connects");
    int sfd = accept4(lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
    FUZZ_CHECK(sfd >= 0, "accept");

    /* The request head, then the answer. */
    buf rq = {0};
    while (live(r) && !(rq.len >= 4 && memmem(rq.p, rq.len, "\r\n\r\n", 4))) {
        pass(r);
        drain(sfd, &rq);
    }
    FUZZ_CHECK(r->passes < MAX_PASSES && !r->done, "the request arrives");
    free(rq.p);

    size_t pos = 0, ci = 0;
    while (pos < len && live(r)) {
        size_t want = len - pos;
        if (o->nchunks) {
            size_t c = o->chunks[ci++ % o->nchunks];
            if (c && c < want)
                want = c;
        }
        ssize_t n = send(sfd, ans + pos, want, MSG_NOSIGNAL | MSG_DONTWAIT);
        if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)
            break; /* the client closed */
        if (n > 0) {
            pos += (size_t)n;
            r->written = pos;
        }
        for (size_t i = 0; i <= (n > 0 ? (size_t)n : 0) / 65536 && live(r); i++)
            pass(r);
        drain(sfd, NULL);
    }
    if (o->flags & 0x04)
        shutdown(sfd, SHUT_WR);
    /* Passes while paused do not count: the caller resumes (at most MAX_PAUSES times). */
    for (size_t i = 0; i < 8 + len / 16384 && live(r);) {
        int waiting = r->paused;
        pass(r);
        i += !waiting;
    }
    if (!r->done && !r->cancelled) {
        /* An answer that never ends (the server keeps the connection open). */
        aor_h1_cancel(r->x);
        r->cancelled = r->capped = 1;
    }
    aor_h1_free(h);
    /* Close with a reset: no TIME_WAIT left behind by thousands of runs. */
    drain(sfd, NULL);
    struct linger lg = {1, 0};
    setsockopt(sfd, SOL_SOCKET, SO_LINGER, &lg, sizeof lg);
    close(sfd);
}

static void run_free(run *r) {
    free(r->heads.p);
    free(r->body.p);
    free(r->pend.p);
}

/* What a run saw, for the log of a broken invariant. */
static void dump(const char *name, const run *r) {
    fprintf(stderr,
            "%s: done=%d rc=%d status=%ld cancelled=%d capped=%d cut=%d passes=%u written=%zu "
            "ndata=%u pauses=%u\n  heads (%zu): %.*s\n  body (%zu): %.*s\n",
            name, r->done, (int)r->rc, r->status, r->cancelled, r->capped, r->cut, r->passes,
            r->written, r->ndata, r->npauses, r->heads.len, (int)r->heads.len,
            r->heads.p ? r->heads.p : "", r->body.len, (int)r->body.len,
            r->body.p ? r->body.p : "");
}

static int is_prefix(const buf *a, const buf *b) {
    return a->len <= b->len && (a->len == 0 || memcmp(a->p, b->p, a->len) == 0);
}

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    signal(SIGPIPE, SIG_IGN);
    base = event_base_new();
    FUZZ_CHECK(base != NULL, "event_base_new");
    lfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    FUZZ_CHECK(lfd >= 0, "socket");
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t sl = sizeof sa;
    FUZZ_CHECK(bind(lfd, (struct sockaddr *)&sa, sizeof sa) == 0, "bind 127.0.0.1");
    FUZZ_CHECK(listen(lfd, 64) == 0, "listen");
    FUZZ_CHECK(getsockname(lfd, (struct sockaddr *)&sa, &sl) == 0, "getsockname");
    int n = snprintf(url, sizeof url, "http://127.0.0.1:%u/v1/fuzz", ntohs(sa.sin_port));
    FUZZ_CHECK(n > 0 && (size_t)n < sizeof url, "url fits");
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    options o = {0};
    o.flags = fuzz_take_byte(&data, &size);
    o.pause_mask = fuzz_take_byte(&data, &size);
    o.cut_at = fuzz_take_byte(&data, &size);
    o.cancel_at = fuzz_take_byte(&data, &size);
    o.nchunks = fuzz_take_byte(&data, &size) & 7;
    if (o.nchunks > size)
        o.nchunks = size;
    o.chunks = data;
    data += o.nchunks;
    size -= o.nchunks;
    /* Exact-size heap copy: ASan sees any read past the end of what was sent. */
    uint8_t *ans = malloc(size ? size : 1);
    FUZZ_CHECK(ans != NULL, "out of memory in the harness");
    if (size)
        memcpy(ans, data, size);

    options plain = {.flags = o.flags & 0x07};
    run a, b;
    run_once(&a, &plain, ans, size);
    run_once(&b, &o, ans, size);

    if (getenv("FUZZ_UPSTREAM_DUMP")) {
        dump("plain", &a);
        dump("with options", &b);
    }
    FUZZ_CHECK(a.done || a.capped, "the plain run ends or waits for more");
    if (a.done && a.rc == CURLE_WEIRD_SERVER_REPLY && !b.cut && !(b.cancelled && !b.capped)) {
        /* A parse error: the lines and bytes handed on before it depend on where the reads
         * ended (llhttp hands on a field or body piece at the end of each read), so
         * either run may have seen more; the end is the same. */
        FUZZ_CHECK(b.done && b.rc == a.rc && b.status == a.status, "the same parse error");
        FUZZ_CHECK(is_prefix(&a.heads, &b.heads) || is_prefix(&b.heads, &a.heads),
                   "header lines before a parse error");
        FUZZ_CHECK(is_prefix(&a.body, &b.body) || is_prefix(&b.body, &a.body),
                   "body before a parse error");
    } else if (!b.cut && !(b.cancelled && !b.capped)) {
        /* Nothing the caller did stopped it: what it saw does not depend on the flow. */
        FUZZ_CHECK(a.done == b.done, "the same end with pauses and chunks");
        FUZZ_CHECK(a.heads.len == b.heads.len && is_prefix(&a.heads, &b.heads),
                   "the same header lines with pauses and chunks");
        FUZZ_CHECK(a.body.len == b.body.len && is_prefix(&a.body, &b.body),
                   "the same body with pauses and chunks");
        if (a.done)
            FUZZ_CHECK(a.rc == b.rc && a.status == b.status,
                       "the same code and status with pauses and chunks");
    } else {
        /* Stopped by the caller: what it saw is a prefix of the plain run's (either way
         * round when that one ended in a parse error, as above). */
        int loose = a.done && a.rc == CURLE_WEIRD_SERVER_REPLY;
        FUZZ_CHECK(is_prefix(&b.heads, &a.heads) || (loose && is_prefix(&a.heads, &b.heads)),
                   "header lines before a cut or cancel");
        FUZZ_CHECK(is_prefix(&b.body, &a.body) || (loose && is_prefix(&a.body, &b.body)),
                   "body before a cut or cancel");
    }
    run_free(&a);
    run_free(&b);
    free(ans);
    return 0;
}
