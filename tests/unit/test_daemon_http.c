/* Unit tests for daemon/http.c: the client-side HTTP/1.1 request reader (RFC 9112 over
 * llhttp) and its response helpers. Every test asserts what a caller such as
 * daemon/conn.c sees: the result of each feed, the bytes consumed, the parsed request
 * (method, target, fields in order, body, keep-alive, version), and the status and reason
 * of a refusal. The reader must give the same request whatever the read boundaries. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "http.h"
#include "pool.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#if defined(__SANITIZE_ADDRESS__)
/* From the sanitizer runtime (its allocator_interface.h is not shipped with GCC 12). */
size_t __sanitizer_get_current_allocated_bytes(void);
#endif

#define BODY_MAX (1024 * 1024)

/* ---- helpers --------------------------------------------------------------------- */

/* A growing byte string for building requests. */
typedef struct {
    char *p;
    size_t len, cap;
} buf;

static void buf_add(buf *b, const char *s, size_t n) {
    if (b->len + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 256;
        while (cap < b->len + n + 1)
            cap *= 2;
        char *p = realloc(b->p, cap);
        assert_non_null(p);
        b->p = p;
        b->cap = cap;
    }
    memcpy(b->p + b->len, s, n);
    b->len += n;
    b->p[b->len] = '\0';
}

static void buf_str(buf *b, const char *s) {
    buf_add(b, s, strlen(s));
}

/* Deterministic pseudo-random numbers (xorshift64): reproducible splits. */
static uint64_t rng_state = 0x9e3779b97f4a7c15ull;
static uint64_t rng(void) {
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return rng_state;
}

/* A string of n letters that differs at every position from its neighbours, so a byte
 * copied to the wrong place shows. */
static char *pattern(size_t n, unsigned seed) {
    char *s = malloc(n + 1);
    assert_non_null(s);
    for (size_t i = 0; i < n; i++)
        s[i] = (char)('a' + (i * 7 + seed + i / 26) % 26);
    s[n] = '\0';
    return s;
}

/* Feeds data[0..len) to a new reader in pieces cut at the ascending offsets cuts[0..ncuts)
 * the way conn.c does (feed again from the first byte not consumed) and expects exactly one
 * request ending at the last byte, with a 100 Continue only when `want_continue`. The
 * reader is freed before returning: the request must outlive it. */
static aor_http_request *parse_cuts(const char *data, size_t len, const size_t *cuts, size_t ncuts,
                                    size_t body_max, int want_continue) {
    aor_http_reader *r = aor_http_reader_new(body_max);
    assert_non_null(r);
    aor_http_request *req = NULL;
    int continues = 0;
    size_t pos = 0;
    for (size_t i = 0; i <= ncuts; i++) {
        size_t end = i < ncuts ? cuts[i] : len;
        assert_true(end >= pos && end <= len);
        while (pos < end) {
            size_t used = 12345;
            int status = 0;
            const char *why = NULL;
            aor_http_result res =
                aor_http_reader_feed(r, data + pos, end - pos, &used, &status, &why);
            assert_true(used <= end - pos);
            pos += used;
            if (res == AOR_HTTP_ERROR)
                fail_msg("error %d (%s) at byte %zu", status, why ? why : "?", pos);
            if (res == AOR_HTTP_REQUEST) {
                assert_null(req);
                req = aor_http_reader_take(r);
                assert_non_null(req);
                assert_null(aor_http_reader_take(r));
            } else if (res == AOR_HTTP_CONTINUE) {
                continues++;
            } else {
                assert_int_equal(pos, end); /* NEED_MORE: all bytes used */
            }
        }
    }
    assert_int_equal(pos, len);
    assert_non_null(req);
    assert_int_equal(continues, want_continue ? 1 : 0);
    aor_http_reader_free(r);
    return req;
}

static aor_http_request *parse_whole(const char *data, size_t len) {
    return parse_cuts(data, len, NULL, 0, BODY_MAX, 0);
}

static aor_http_request *parse_str(const char *s) {
    return parse_whole(s, strlen(s));
}

static aor_http_request *parse_bytewise(const char *data, size_t len, int want_continue) {
    size_t *cuts = malloc(len * sizeof *cuts);
    assert_non_null(cuts);
    for (size_t i = 0; i < len; i++)
        cuts[i] = i + 1;
    aor_http_request *req = parse_cuts(data, len, cuts, len - 1, BODY_MAX, want_continue);
    free(cuts);
    return req;
}

/* Body bytes of a request as a NUL-terminated string (malloc'd), length in *n. */
static char *body_of(aor_http_request *req, size_t *n) {
    *n = evbuffer_get_length(req->body);
    char *s = malloc(*n + 1);
    assert_non_null(s);
    assert_int_equal(evbuffer_copyout(req->body, s, *n), (ssize_t)*n);
    s[*n] = '\0';
    return s;
}

static void assert_body(aor_http_request *req, const char *want, size_t want_len) {
    size_t n;
    char *b = body_of(req, &n);
    assert_int_equal(n, want_len);
    assert_memory_equal(b, want, want_len);
    free(b);
}

/* Everything a caller sees of two requests is the same. */
static void assert_same_request(aor_http_request *a, aor_http_request *b) {
    assert_int_equal(a->method, b->method);
    assert_non_null(a->url);
    assert_non_null(b->url);
    assert_string_equal(a->url, b->url);
    assert_int_equal(a->nfields, b->nfields);
    for (size_t i = 0; i < a->nfields; i++) {
        assert_non_null(b->fields[i].name);
        assert_non_null(b->fields[i].value);
        assert_string_equal(a->fields[i].name, b->fields[i].name);
        assert_string_equal(a->fields[i].value, b->fields[i].value);
    }
    size_t na, nb;
    char *ba = body_of(a, &na), *bb = body_of(b, &nb);
    assert_int_equal(na, nb);
    assert_memory_equal(ba, bb, na);
    free(ba);
    free(bb);
    assert_int_equal(a->keep_alive, b->keep_alive);
    assert_int_equal(a->upgrade, b->upgrade);
    assert_int_equal(a->http_major, b->http_major);
    assert_int_equal(a->http_minor, b->http_minor);
}

/* Feeds s in pieces of at most `step` bytes (0: all at once) to a reader with body_max and
 * expects AOR_HTTP_ERROR; returns the status, the reason in *why. */
static int expect_error(const char *s, size_t len, size_t step, size_t body_max, const char **why) {
    aor_http_reader *r = aor_http_reader_new(body_max);
    assert_non_null(r);
    size_t pos = 0;
    int status = 0;
    *why = NULL;
    for (;;) {
        assert_true(pos < len); /* the error comes before the input ends */
        size_t n = step && len - pos > step ? step : len - pos;
        size_t used = 0;
        aor_http_result res = aor_http_reader_feed(r, s + pos, n, &used, &status, why);
        if (res == AOR_HTTP_ERROR)
            break;
        assert_int_not_equal(res, AOR_HTTP_REQUEST);
        pos += used;
    }
    aor_http_reader_free(r);
    assert_non_null(*why);
    assert_true(**why != '\0');
    return status;
}

/* ---- a simple request ----------------------------------------------------------- */

static const char simple[] = "POST /v1/chat/completions?alt=sse&x=1 HTTP/1.1\r\n"
                             "Host: 127.0.0.1:8787\r\n"
                             "Content-Type: application/json\r\n"
                             "Authorization: Bearer sk-test\r\n"
                             "Content-Length: 27\r\n"
                             "\r\n"
                             "{\"model\":\"gpt-4o\",\"x\":true}";

static void check_simple(aor_http_request *req) {
    assert_int_equal(req->method, HTTP_POST);
    assert_string_equal(req->url, "/v1/chat/completions?alt=sse&x=1");
    assert_int_equal(req->nfields, 4);
    assert_string_equal(req->fields[0].name, "Host");
    assert_string_equal(req->fields[0].value, "127.0.0.1:8787");
    assert_string_equal(req->fields[1].name, "Content-Type");
    assert_string_equal(req->fields[1].value, "application/json");
    assert_string_equal(req->fields[2].name, "Authorization");
    assert_string_equal(req->fields[2].value, "Bearer sk-test");
    assert_string_equal(req->fields[3].name, "Content-Length");
    assert_string_equal(req->fields[3].value, "27");
    assert_body(req, "{\"model\":\"gpt-4o\",\"x\":true}", 27);
    assert_int_equal(req->keep_alive, 1);
    assert_int_equal(req->upgrade, 0);
    assert_int_equal(req->http_major, 1);
    assert_int_equal(req->http_minor, 1);
}

static void test_simple_post(void **state) {
    aor_http_request *req = parse_whole(simple, sizeof simple - 1);
    check_simple(req);
    char *path = aor_http_request_path(req);
    assert_string_equal(path, "/v1/chat/completions");
    free(path);
    aor_http_request_free(req);
}

/* RFC 9112: a request of another major version gets 505; two Host fields get 400. */
static void test_version_and_host_count(void **state) {
    const char *why = NULL;
    const char v2[] =
        "POST /v1/chat/completions HTTP/9.9\r\nHost: x\r\nContent-Length: 2\r\n\r\n{}";
    assert_int_equal(expect_error(v2, sizeof v2 - 1, 0, BODY_MAX, &why), 505);
    assert_non_null(strstr(why, "HTTP version"));
    const char h2[] = "GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nHost: evil.example\r\n\r\n";
    assert_int_equal(expect_error(h2, sizeof h2 - 1, 0, BODY_MAX, &why), 400);
    assert_non_null(strstr(why, "Host"));
    assert_int_equal(expect_error(h2, sizeof h2 - 1, 1, BODY_MAX, &why), 400);
    /* RFC 9112 §6.1: Transfer-Encoding in an HTTP/1.0 message is faulty framing. */
    const char te10[] = "POST /v1/chat/completions HTTP/1.0\r\nHost: x\r\n"
                        "Transfer-Encoding: chunked\r\n\r\n2\r\n{}\r\n0\r\n\r\n";
    assert_int_equal(expect_error(te10, sizeof te10 - 1, 0, BODY_MAX, &why), 400);
    assert_non_null(strstr(why, "HTTP/1.0"));
    /* HTTP/1.0 and one Host are fine. */
    aor_http_request *req = parse_str("GET /healthz HTTP/1.0\r\nHost: a\r\n\r\n");
    assert_int_equal(req->http_minor, 0);
    aor_http_request_free(req);
}

static void test_path(void **state) {
    aor_http_request *req = parse_str("GET /healthz HTTP/1.1\r\n\r\n");
    assert_int_equal(req->method, HTTP_GET);
    assert_int_equal(req->nfields, 0);
    assert_int_equal(evbuffer_get_length(req->body), 0);
    char *path = aor_http_request_path(req);
    assert_string_equal(path, "/healthz");
    free(path);
    aor_http_request_free(req);

    req =
        parse_str("GET /v1beta/models/gemini-pro:generateContent?key=abc&alt=sse HTTP/1.1\r\n\r\n");
    path = aor_http_request_path(req);
    assert_string_equal(path, "/v1beta/models/gemini-pro:generateContent");
    free(path);
    assert_string_equal(req->url, "/v1beta/models/gemini-pro:generateContent?key=abc&alt=sse");
    aor_http_request_free(req);

    req = parse_str("GET /x? HTTP/1.1\r\n\r\n");
    path = aor_http_request_path(req);
    assert_string_equal(path, "/x");
    free(path);
    aor_http_request_free(req);
}

/* The known fields are found as aor_http_request_field finds them: first field of the
 * name, any case; names that only look alike are not; trailer fields are not headers. */
static void test_known_fields(void **state) {
    static const char text[] = "POST /v1/chat/completions HTTP/1.1\r\n"
                               "HOST: 127.0.0.1:8787\r\n"
                               "Authorization: Bearer first\r\n"
                               "authorization: Bearer second\r\n"
                               "X-Api-Key: k1\r\n"
                               "x-goog-api-keys: not-it\r\n"
                               "Api-Key: k3\r\n"
                               "Origin: http://localhost\r\n"
                               "Sec-Fetch-Site: same-origin\r\n"
                               "Connection: keep-alive, x-drop\r\n"
                               "Hostname: not-it\r\n"
                               "Transfer-Encoding: chunked\r\n"
                               "\r\n"
                               "2\r\nhi\r\n0\r\n"
                               "X-Goog-Api-Key: in-a-trailer\r\n"
                               "\r\n";
    aor_http_request *req = parse_str(text);
    static const struct {
        aor_http_known_field k;
        const char *name;
    } names[] = {
        {AOR_HF_HOST, "host"},
        {AOR_HF_CONNECTION, "connection"},
        {AOR_HF_UPGRADE, "upgrade"},
        {AOR_HF_EXPECT, "expect"},
        {AOR_HF_AUTHORIZATION, "authorization"},
        {AOR_HF_X_API_KEY, "x-api-key"},
        {AOR_HF_API_KEY, "api-key"},
        {AOR_HF_ORIGIN, "origin"},
        {AOR_HF_SEC_FETCH_SITE, "sec-fetch-site"},
    };
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        const char *want = aor_http_request_field(req, names[i].name);
        const char *got = aor_http_request_known(req, names[i].k);
        if (!want)
            assert_null(got);
        else
            assert_string_equal(got, want);
    }
    assert_string_equal(aor_http_request_known(req, AOR_HF_HOST), "127.0.0.1:8787");
    assert_string_equal(aor_http_request_known(req, AOR_HF_AUTHORIZATION), "Bearer first");
    assert_string_equal(aor_http_request_known(req, AOR_HF_CONNECTION), "keep-alive, x-drop");
    assert_null(aor_http_request_known(req, AOR_HF_UPGRADE));
    /* Only in the trailer section: no header of that name, known or looked up by name
     * (the admin token in a trailer must not count: RFC 9110 §6.5.1). */
    assert_null(aor_http_request_known(req, AOR_HF_X_GOOG_API_KEY));
    assert_null(aor_http_request_field(req, "x-goog-api-key"));
    aor_http_request_free(req);
    /* The next request (a kept one, pool.h) has its own index. */
    req = parse_str("GET /v1/models HTTP/1.1\r\nx-goog-api-key: g\r\n\r\n");
    assert_null(aor_http_request_known(req, AOR_HF_HOST));
    assert_null(aor_http_request_known(req, AOR_HF_AUTHORIZATION));
    assert_string_equal(aor_http_request_known(req, AOR_HF_X_GOOG_API_KEY), "g");
    aor_http_request_free(req);
}

/* A request freed before its announced body came (the client went away) is not kept
 * with the room reserved for that body: 32 such uploads of 8 MiB must not leave 512 MiB
 * held by the pool. Measured with AddressSanitizer's allocator counter. */
static void test_abandoned_upload_not_kept(void **state) {
#if defined(__SANITIZE_ADDRESS__)
    static const char head[] = "POST /v1/chat/completions HTTP/1.1\r\n"
                               "Content-Length: 8000000\r\n"
                               "\r\n";
    aor_http_spares_free();
    size_t before = __sanitizer_get_current_allocated_bytes();
    for (int i = 0; i < AOR_POOL_MAX; i++) {
        aor_http_reader *r = aor_http_reader_new(16 * 1024 * 1024);
        assert_non_null(r);
        size_t used = 0;
        int status = 0;
        const char *why = NULL;
        assert_int_equal(aor_http_reader_feed(r, head, sizeof head - 1, &used, &status, &why),
                         AOR_HTTP_NEED_MORE);
        aor_http_reader_free(r); /* the request being built goes with it */
    }
    size_t after = __sanitizer_get_current_allocated_bytes();
    assert_true(after < before + 1024 * 1024);
#else
    skip();
#endif
}

/* A freed request is kept for the next one (daemon/pool.h) with its memory: the next
 * request parsed must show nothing of the one before, whatever its size was. */
static void test_reuse_after_free(void **state) {
    /* A big one first: 70 fields (more than a kept field array holds) and values longer
     * than a string block, with a body. */
    buf b = {0};
    buf_str(&b, "POST /big?q=1 HTTP/1.1\r\n");
    char *longv = pattern(5000, 7);
    for (int i = 0; i < 70; i++) {
        char line[64];
        snprintf(line, sizeof line, "X-F%d: ", i);
        buf_str(&b, line);
        buf_add(&b, longv, i % 10 == 0 ? 5000 : 3);
        buf_str(&b, "\r\n");
    }
    buf_str(&b, "Content-Length: 5\r\n\r\nhello");
    aor_http_request *big = parse_whole(b.p, b.len);
    assert_int_equal(big->nfields, 71);
    assert_memory_equal(big->fields[10].value, longv, 5000);
    aor_http_request_free(big);
    for (int round = 0; round < 3; round++) {
        aor_http_request *req = parse_whole(simple, sizeof simple - 1);
        check_simple(req);
        aor_http_request_free(req);
        req = parse_str("GET /healthz HTTP/1.1\r\n\r\n");
        assert_string_equal(req->url, "/healthz");
        assert_int_equal(req->nfields, 0);
        assert_null(aor_http_request_field(req, "host"));
        assert_int_equal(evbuffer_get_length(req->body), 0);
        aor_http_request_free(req);
    }
    /* More alive at once than the pool keeps: the rest are freed, none is lost. */
    aor_http_request *many[AOR_POOL_MAX + 8];
    for (size_t i = 0; i < sizeof many / sizeof *many; i++)
        many[i] = parse_whole(simple, sizeof simple - 1);
    for (size_t i = 0; i < sizeof many / sizeof *many; i++) {
        check_simple(many[i]);
        aor_http_request_free(many[i]);
    }
    aor_http_spares_free();
    aor_http_request *req = parse_whole(simple, sizeof simple - 1);
    check_simple(req);
    aor_http_request_free(req);
    free(longv);
    free(b.p);
}

static void test_simple_every_split(void **state) {
    size_t len = sizeof simple - 1;
    aor_http_request *whole = parse_whole(simple, len);
    /* Two pieces, cut anywhere. */
    for (size_t cut = 0; cut <= len; cut++) {
        aor_http_request *req = parse_cuts(simple, len, &cut, 1, BODY_MAX, 0);
        check_simple(req);
        assert_same_request(whole, req);
        aor_http_request_free(req);
    }
    /* Three pieces, every pair of cuts. */
    for (size_t a = 1; a < len; a++) {
        for (size_t b = a; b < len; b++) {
            size_t cuts[2] = {a, b};
            aor_http_request *req = parse_cuts(simple, len, cuts, 2, BODY_MAX, 0);
            assert_same_request(whole, req);
            aor_http_request_free(req);
        }
    }
    aor_http_request *req = parse_bytewise(simple, len, 0);
    check_simple(req);
    aor_http_request_free(req);
    aor_http_request_free(whole);
}

/* ---- a ~400-byte request and a large one, split every way ------------------------------ */

typedef struct {
    char *name, *value;
} field;

typedef struct {
    buf text;
    field *fields;
    size_t nfields;
    char *body;
    size_t body_len;
} built;

static void built_field(built *b, const char *name, const char *value) {
    b->fields = realloc(b->fields, (b->nfields + 1) * sizeof *b->fields);
    assert_non_null(b->fields);
    b->fields[b->nfields].name = strdup(name);
    b->fields[b->nfields].value = strdup(value);
    assert_non_null(b->fields[b->nfields].name);
    assert_non_null(b->fields[b->nfields].value);
    b->nfields++;
    buf_str(&b->text, name);
    buf_str(&b->text, ": ");
    buf_str(&b->text, value);
    buf_str(&b->text, "\r\n");
}

static void built_end(built *b, const char *body) {
    char cl[32];
    b->body_len = strlen(body);
    int n = snprintf(cl, sizeof cl, "%zu", b->body_len);
    assert_true(n > 0 && (size_t)n < sizeof cl);
    built_field(b, "Content-Length", cl);
    buf_str(&b->text, "\r\n");
    buf_str(&b->text, body);
    b->body = strdup(body);
    assert_non_null(b->body);
}

static void built_free(built *b) {
    for (size_t i = 0; i < b->nfields; i++) {
        free(b->fields[i].name);
        free(b->fields[i].value);
    }
    free(b->fields);
    free(b->body);
    free(b->text.p);
}

/* The request as built, field by field. */
static void assert_built(aor_http_request *req, const built *b, const char *url) {
    assert_int_equal(req->method, HTTP_POST);
    assert_string_equal(req->url, url);
    assert_int_equal(req->nfields, b->nfields);
    for (size_t i = 0; i < b->nfields; i++) {
        assert_string_equal(req->fields[i].name, b->fields[i].name);
        assert_string_equal(req->fields[i].value, b->fields[i].value);
    }
    assert_body(req, b->body, b->body_len);
    assert_int_equal(req->keep_alive, 1);
    assert_int_equal(req->http_major, 1);
    assert_int_equal(req->http_minor, 1);
}

static const char medium_url[] = "/v1/messages?beta=true";

static void build_medium(built *b) {
    memset(b, 0, sizeof *b);
    buf_str(&b->text, "POST ");
    buf_str(&b->text, medium_url);
    buf_str(&b->text, " HTTP/1.1\r\n");
    built_field(b, "Host", "api.anthropic.com");
    built_field(b, "User-Agent", "claude-cli/1.0.0 (external, cli)");
    built_field(b, "Content-Type", "application/json");
    built_field(b, "anthropic-version", "2023-06-01");
    built_field(b, "anthropic-beta", "prompt-caching-2024-07-31,tools-2024-05-16");
    built_field(b, "x-api-key",
                "sk-ant-"
                "api03-0123456789abcdef");
    built_field(b, "Accept", "text/event-stream");
    built_field(b, "X-Empty", "");
    built_field(b, "x-stainless-lang", "js");
    built_end(b, "{\"model\":\"claude-3-5-sonnet\",\"max_tokens\":64,"
                 "\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}]}");
}

static void test_medium_every_split(void **state) {
    built b;
    build_medium(&b);
    size_t len = b.text.len;
    assert_in_range(len, 350, 500);
    aor_http_request *whole = parse_whole(b.text.p, len);
    assert_built(whole, &b, medium_url);
    for (size_t cut = 0; cut <= len; cut++) {
        aor_http_request *req = parse_cuts(b.text.p, len, &cut, 1, BODY_MAX, 0);
        assert_same_request(whole, req);
        aor_http_request_free(req);
    }
    for (int round = 0; round < 2000; round++) {
        size_t cuts[12];
        size_t n = 1 + rng() % 12;
        for (size_t i = 0; i < n; i++)
            cuts[i] = rng() % (len + 1);
        for (size_t i = 1; i < n; i++) /* insertion sort */
            for (size_t j = i; j > 0 && cuts[j - 1] > cuts[j]; j--) {
                size_t t = cuts[j];
                cuts[j] = cuts[j - 1];
                cuts[j - 1] = t;
            }
        aor_http_request *req = parse_cuts(b.text.p, len, cuts, n, BODY_MAX, 0);
        assert_same_request(whole, req);
        aor_http_request_free(req);
    }
    aor_http_request *req = parse_bytewise(b.text.p, len, 0);
    assert_same_request(whole, req);
    aor_http_request_free(req);
    aor_http_request_free(whole);
    built_free(&b);
}

/* A request whose strings do not fit the reader's first block of string memory: a long
 * target, a name over 2 KiB, values over 2 and 4 KiB arriving in pieces (a string being
 * built must move), and 150 more fields (the field array grows). */
static char *large_url;

static void build_large(built *b) {
    memset(b, 0, sizeof *b);
    char *q = pattern(1500, 1);
    buf u = {0};
    buf_str(&u, "/v1/chat/completions?q=");
    buf_str(&u, q);
    free(q);
    large_url = u.p;
    buf_str(&b->text, "POST ");
    buf_str(&b->text, large_url);
    buf_str(&b->text, " HTTP/1.1\r\n");
    built_field(b, "Host", "localhost");
    char *v1 = pattern(2100, 2);
    built_field(b, "X-Two-K", v1);
    free(v1);
    buf name = {0};
    buf_str(&name, "X-Long-");
    char *np = pattern(2300, 3);
    buf_str(&name, np);
    free(np);
    built_field(b, name.p, "short");
    free(name.p);
    char *v2 = pattern(4500, 4);
    built_field(b, "X-Four-K", v2);
    free(v2);
    built_field(b, "X-Empty", "");
    char *v3 = pattern(9000, 5);
    built_field(b, "X-Nine-K", v3);
    free(v3);
    for (int i = 0; i < 150; i++) {
        char n[32], v[48];
        assert_true(snprintf(n, sizeof n, "X-Field-%03d", i) < (int)sizeof n);
        assert_true(snprintf(v, sizeof v, "value %d of the many", i) < (int)sizeof v);
        built_field(b, n, v);
    }
    built_end(b, "{\"model\":\"gpt-4o-mini\",\"stream\":true}");
}

static void test_large_splits(void **state) {
    built b;
    build_large(&b);
    size_t len = b.text.len;
    aor_http_request *whole = parse_whole(b.text.p, len);
    assert_built(whole, &b, large_url);
    assert_string_equal(aor_http_request_field(whole, "x-field-149"), "value 149 of the many");

    aor_http_request *req = parse_bytewise(b.text.p, len, 0);
    assert_built(req, &b, large_url);
    aor_http_request_free(req);

    /* Every two-piece cut. */
    for (size_t cut = 0; cut <= len; cut += 1) {
        req = parse_cuts(b.text.p, len, &cut, 1, BODY_MAX, 0);
        assert_same_request(whole, req);
        aor_http_request_free(req);
    }
    /* Random cuts, from many small pieces to a few large ones. */
    for (int round = 0; round < 300; round++) {
        size_t cuts[64];
        size_t n = 1 + rng() % 64, at = 0;
        for (size_t i = 0; i < n; i++) {
            at += rng() % (2 * len / n + 1);
            cuts[i] = at < len ? at : len;
        }
        req = parse_cuts(b.text.p, len, cuts, n, BODY_MAX, 0);
        assert_same_request(whole, req);
        aor_http_request_free(req);
    }
    aor_http_request_free(whole);
    built_free(&b);
    free(large_url);
}

/* ---- fields ---------------------------------------------------------------------- */

static void test_fields(void **state) {
    aor_http_request *req = parse_str("GET /v1/models HTTP/1.1\r\n"
                                      "X-Empty:\r\n"
                                      "X-Spaces:    padded value\r\n"
                                      "Accept: text/plain\r\n"
                                      "X-Empty-Sp:   \r\n"
                                      "accept: application/json\r\n"
                                      "Cookie: a=1\r\n"
                                      "Content-Type: text/x\r\n"
                                      "X-Trail: a b \t \r\n"
                                      "\r\n");
    assert_int_equal(req->nfields, 8);
    assert_string_equal(req->fields[0].name, "X-Empty");
    assert_non_null(req->fields[0].value);
    assert_string_equal(req->fields[0].value, "");
    assert_string_equal(req->fields[1].name, "X-Spaces");
    assert_string_equal(req->fields[1].value, "padded value");
    assert_string_equal(req->fields[2].name, "Accept");
    assert_string_equal(req->fields[2].value, "text/plain");
    assert_string_equal(req->fields[3].name, "X-Empty-Sp");
    assert_string_equal(req->fields[3].value, "");
    /* Both duplicates kept, in order. */
    assert_string_equal(req->fields[4].name, "accept");
    assert_string_equal(req->fields[4].value, "application/json");

    /* Whitespace around a value is not part of it (RFC 9112 §5.1); inside it is. */
    assert_string_equal(req->fields[7].value, "a b");

    /* Lookup: case-insensitive, the first of duplicates. */
    assert_string_equal(aor_http_request_field(req, "accept"), "text/plain");
    assert_string_equal(aor_http_request_field(req, "ACCEPT"), "text/plain");
    assert_string_equal(aor_http_request_field(req, "x-empty"), "");
    assert_string_equal(aor_http_request_field(req, "X-SPACES"), "padded value");
    assert_string_equal(aor_http_request_field(req, "cOOKIE"), "a=1");
    assert_string_equal(aor_http_request_field(req, "content-type"), "text/x");
    /* Missing names, names sharing a first letter or a prefix. */
    assert_null(aor_http_request_field(req, "Authorization"));
    assert_null(aor_http_request_field(req, "A"));
    assert_null(aor_http_request_field(req, "Accept-Encoding"));
    assert_null(aor_http_request_field(req, "Acc"));
    assert_null(aor_http_request_field(req, "Content-Length"));
    assert_null(aor_http_request_field(req, "C"));
    assert_null(aor_http_request_field(req, "X"));
    assert_null(aor_http_request_field(req, "x-empty-"));
    assert_null(aor_http_request_field(req, ""));
    aor_http_request_free(req);
}

/* Empty values stay "" and do not merge names however the bytes arrive. */
static void test_empty_values_split(void **state) {
    static const char s[] = "GET / HTTP/1.1\r\nA:\r\nB:\r\nC: c\r\nD:\r\n\r\n";
    size_t len = sizeof s - 1;
    for (size_t cut = 0; cut <= len; cut++) {
        aor_http_request *req = parse_cuts(s, len, &cut, 1, BODY_MAX, 0);
        assert_int_equal(req->nfields, 4);
        const char *names[] = {"A", "B", "C", "D"}, *values[] = {"", "", "c", ""};
        for (size_t i = 0; i < 4; i++) {
            assert_string_equal(req->fields[i].name, names[i]);
            assert_string_equal(req->fields[i].value, values[i]);
        }
        aor_http_request_free(req);
    }
}

/* ---- pipelining ------------------------------------------------------------------ */

static void test_pipelined(void **state) {
    static const char first[] = "POST /v1/embeddings HTTP/1.1\r\n"
                                "Content-Length: 5\r\n"
                                "\r\n"
                                "hello";
    static const char second[] = "GET /v1/models?limit=2 HTTP/1.1\r\n"
                                 "Host: b\r\n"
                                 "\r\n";
    buf two = {0};
    buf_str(&two, first);
    buf_str(&two, second);

    aor_http_reader *r = aor_http_reader_new(BODY_MAX);
    assert_non_null(r);
    size_t used = 0;
    int status = 0;
    const char *why = NULL;
    assert_int_equal(aor_http_reader_feed(r, two.p, two.len, &used, &status, &why),
                     AOR_HTTP_REQUEST);
    assert_int_equal(used, sizeof first - 1);
    /* Not taken yet: the reader holds on and consumes nothing. */
    assert_int_equal(aor_http_reader_feed(r, two.p + used, two.len - used, &used, &status, &why),
                     AOR_HTTP_REQUEST);
    assert_int_equal(used, 0);
    aor_http_request *a = aor_http_reader_take(r);
    assert_non_null(a);
    assert_null(aor_http_reader_take(r));

    size_t off = sizeof first - 1;
    assert_int_equal(aor_http_reader_feed(r, two.p + off, two.len - off, &used, &status, &why),
                     AOR_HTTP_REQUEST);
    assert_int_equal(used, sizeof second - 1);
    aor_http_request *b = aor_http_reader_take(r);
    assert_non_null(b);

    /* The first request is intact after the second was read. */
    assert_int_equal(a->method, HTTP_POST);
    assert_string_equal(a->url, "/v1/embeddings");
    assert_int_equal(a->nfields, 1);
    assert_string_equal(a->fields[0].name, "Content-Length");
    assert_string_equal(a->fields[0].value, "5");
    assert_body(a, "hello", 5);
    assert_int_equal(b->method, HTTP_GET);
    assert_string_equal(b->url, "/v1/models?limit=2");
    assert_int_equal(b->nfields, 1);
    assert_string_equal(aor_http_request_field(b, "host"), "b");
    assert_int_equal(evbuffer_get_length(b->body), 0);
    assert_int_equal(b->keep_alive, 1);

    /* Nothing more: a third feed of nothing is not a request. */
    assert_int_equal(aor_http_reader_feed(r, "", 0, &used, &status, &why), AOR_HTTP_NEED_MORE);
    assert_null(aor_http_reader_take(r));
    aor_http_request_free(a);
    aor_http_request_free(b);
    aor_http_reader_free(r);
    free(two.p);
}

/* ---- body framing and connection handling ------------------------------------------ */

static const char chunked[] = "POST /v1/responses HTTP/1.1\r\n"
                              "Transfer-Encoding: chunked\r\n"
                              "Content-Type: application/json\r\n"
                              "\r\n"
                              "5\r\nhello\r\n"
                              "1;ext=1\r\n \r\n"
                              "a\r\nchunked wo\r\n"
                              "3\r\nrld\r\n"
                              "0\r\n"
                              "\r\n";

static void test_chunked(void **state) {
    size_t len = sizeof chunked - 1;
    aor_http_request *whole = parse_whole(chunked, len);
    assert_body(whole, "hello chunked world", 19);
    assert_int_equal(whole->nfields, 2);
    assert_string_equal(aor_http_request_field(whole, "transfer-encoding"), "chunked");
    assert_int_equal(whole->keep_alive, 1);
    for (size_t cut = 0; cut <= len; cut++) {
        aor_http_request *req = parse_cuts(chunked, len, &cut, 1, BODY_MAX, 0);
        assert_same_request(whole, req);
        aor_http_request_free(req);
    }
    aor_http_request *req = parse_bytewise(chunked, len, 0);
    assert_same_request(whole, req);
    aor_http_request_free(req);
    aor_http_request_free(whole);

    /* A trailer section ends the body; whatever of it is kept has its OWS trimmed too. */
    static const char trailer[] = "POST /v1/responses HTTP/1.1\r\n"
                                  "Transfer-Encoding: chunked\r\n"
                                  "\r\n"
                                  "2\r\nhi\r\n"
                                  "0\r\n"
                                  "X-Checksum: abc  \r\n"
                                  "\r\n";
    req = parse_str(trailer);
    assert_body(req, "hi", 2);
    const char *t = aor_http_request_field(req, "x-checksum");
    if (t)
        assert_string_equal(t, "abc");
    aor_http_request_free(req);
}

static void test_expect_continue(void **state) {
    static const char head[] = "POST /v1/messages HTTP/1.1\r\n"
                               "Content-Length: 4\r\n"
                               "Expect: 100-Continue  \r\n" /* OWS is not part of it */
                               "\r\n";
    aor_http_reader *r = aor_http_reader_new(BODY_MAX);
    assert_non_null(r);
    size_t used = 0;
    int status = 0;
    const char *why = NULL;
    assert_int_equal(aor_http_reader_feed(r, head, sizeof head - 1, &used, &status, &why),
                     AOR_HTTP_CONTINUE);
    assert_int_equal(used, sizeof head - 1);
    assert_null(aor_http_reader_take(r));
    assert_int_equal(aor_http_reader_feed(r, "da", 2, &used, &status, &why), AOR_HTTP_NEED_MORE);
    assert_int_equal(used, 2);
    assert_int_equal(aor_http_reader_feed(r, "ta", 2, &used, &status, &why), AOR_HTTP_REQUEST);
    assert_int_equal(used, 2);
    aor_http_request *req = aor_http_reader_take(r);
    assert_non_null(req);
    assert_body(req, "data", 4);
    assert_string_equal(aor_http_request_field(req, "expect"), "100-Continue");
    aor_http_request_free(req);
    aor_http_reader_free(r);

    /* One byte at a time: exactly one 100 Continue, then the request. */
    buf all = {0};
    buf_str(&all, head);
    buf_str(&all, "data");
    req = parse_bytewise(all.p, all.len, 1);
    assert_body(req, "data", 4);
    aor_http_request_free(req);
    /* The body in the same read as the headers: no 100 needed, just the request. */
    req = parse_cuts(all.p, all.len, NULL, 0, BODY_MAX, 0);
    assert_body(req, "data", 4);
    aor_http_request_free(req);
    free(all.p);

    /* HTTP/1.0: the expectation is ignored, no 100 (RFC 9110 §10.1.1; QA) */
    static const char head10[] = "POST /v1/messages HTTP/1.0\r\n"
                                 "Content-Length: 4\r\n"
                                 "Expect: 100-continue\r\n"
                                 "\r\n";
    r = aor_http_reader_new(BODY_MAX);
    assert_non_null(r);
    assert_int_equal(aor_http_reader_feed(r, head10, sizeof head10 - 1, &used, &status, &why),
                     AOR_HTTP_NEED_MORE);
    assert_int_equal(aor_http_reader_feed(r, "data", 4, &used, &status, &why), AOR_HTTP_REQUEST);
    req = aor_http_reader_take(r);
    assert_non_null(req);
    assert_body(req, "data", 4);
    aor_http_request_free(req);
    aor_http_reader_free(r);
}

static void test_keep_alive(void **state) {
    aor_http_request *req = parse_str("GET /healthz HTTP/1.0\r\nHost: x\r\n\r\n");
    assert_int_equal(req->http_major, 1);
    assert_int_equal(req->http_minor, 0);
    assert_int_equal(req->keep_alive, 0);
    aor_http_request_free(req);

    req = parse_str("GET /healthz HTTP/1.0\r\nConnection: keep-alive\r\n\r\n");
    assert_int_equal(req->keep_alive, 1);
    aor_http_request_free(req);

    req = parse_str("GET /healthz HTTP/1.1\r\nConnection: close\r\n\r\n");
    assert_int_equal(req->http_minor, 1);
    assert_int_equal(req->keep_alive, 0);
    aor_http_request_free(req);

    req = parse_str("GET /healthz HTTP/1.1\r\nConnection: Close\r\n\r\n");
    assert_int_equal(req->keep_alive, 0);
    aor_http_request_free(req);

    req = parse_str("GET /healthz HTTP/1.1\r\n\r\n");
    assert_int_equal(req->keep_alive, 1);
    aor_http_request_free(req);
}

static void test_upgrade(void **state) {
    aor_http_request *req = parse_str("GET /v1/responses HTTP/1.1\r\n"
                                      "Connection: Upgrade\r\n"
                                      "Upgrade: websocket\r\n"
                                      "\r\n");
    assert_int_equal(req->upgrade, 1);
    assert_string_equal(req->url, "/v1/responses");
    aor_http_request_free(req);

    /* With a body: ends at the empty line, the same at every read boundary (the body is
     * not read; the answer is 426 and the connection ends). Found by fuzz_http. */
    static const char with_body[] = "POST /v1/x HTTP/1.1\r\n"
                                    "Connection: Upgrade\r\n"
                                    "Upgrade: websocket\r\n"
                                    "Content-Length: 10\r\n"
                                    "\r\n"
                                    "0123456789";
    size_t len = sizeof with_body - 1, head = len - 10;
    for (size_t cut = 1; cut <= len; cut++) {
        aor_http_reader *r = aor_http_reader_new(BODY_MAX);
        assert_non_null(r);
        size_t pos = 0;
        aor_http_result res = AOR_HTTP_NEED_MORE;
        while (res != AOR_HTTP_REQUEST && pos < len) {
            size_t end = pos < cut ? cut : len, used = 0;
            int status = 0;
            const char *why = NULL;
            res = aor_http_reader_feed(r, with_body + pos, end - pos, &used, &status, &why);
            assert_int_not_equal(res, AOR_HTTP_ERROR);
            pos += used;
        }
        assert_int_equal(res, AOR_HTTP_REQUEST);
        assert_int_equal(pos, head); /* the body is not taken as part of the request */
        req = aor_http_reader_take(r);
        assert_int_equal(req->upgrade, 1);
        assert_int_equal(req->keep_alive, 0);
        assert_int_equal(evbuffer_get_length(req->body), 0);
        aor_http_request_free(req);
        aor_http_reader_free(r);
    }
}

/* ---- refusals -------------------------------------------------------------------- */

static void test_body_too_large(void **state) {
    const char *why;
    /* By Content-Length: refused at the headers, before any body byte. */
    static const char cl[] = "POST /v1/x HTTP/1.1\r\nContent-Length: 17\r\n\r\n";
    assert_int_equal(expect_error(cl, sizeof cl - 1, 0, 16, &why), 413);
    assert_non_null(strstr(why, "body_max (set in the [daemon] section of aor.ini"));
    assert_int_equal(expect_error(cl, sizeof cl - 1, 1, 16, &why), 413);
    /* Exactly body_max is fine. */
    static const char fits[] = "POST /v1/x HTTP/1.1\r\nContent-Length: 4\r\n\r\nabcd";
    aor_http_request *req = parse_cuts(fits, strlen(fits), NULL, 0, 4, 0);
    assert_body(req, "abcd", 4);
    aor_http_request_free(req);

    /* Chunked: refused once the chunks add up to more than body_max. */
    static const char ch[] = "POST /v1/x HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n"
                             "8\r\n01234567\r\n8\r\n89abcdef\r\n1\r\nX\r\n0\r\n\r\n";
    assert_int_equal(expect_error(ch, sizeof ch - 1, 0, 16, &why), 413);
    assert_non_null(strstr(why, "body"));
    assert_int_equal(expect_error(ch, sizeof ch - 1, 1, 16, &why), 413);
    assert_int_equal(expect_error(ch, sizeof ch - 1, 7, 16, &why), 413);
    req = parse_cuts(ch, sizeof ch - 1, NULL, 0, 17, 0);
    assert_body(req, "0123456789abcdefX", 17);
    aor_http_request_free(req);
}

static void test_too_many_fields(void **state) {
    for (int extra = 0; extra <= 1; extra++) {
        buf s = {0};
        buf_str(&s, "GET / HTTP/1.1\r\n");
        for (int i = 0; i < AOR_HTTP_MAX_HEADERS + extra; i++) {
            char line[32];
            assert_true(snprintf(line, sizeof line, "X-%d: %d\r\n", i, i) < (int)sizeof line);
            buf_str(&s, line);
        }
        buf_str(&s, "\r\n");
        if (!extra) {
            aor_http_request *req = parse_whole(s.p, s.len);
            assert_int_equal(req->nfields, AOR_HTTP_MAX_HEADERS);
            assert_string_equal(req->fields[AOR_HTTP_MAX_HEADERS - 1].name, "X-199");
            assert_string_equal(req->fields[AOR_HTTP_MAX_HEADERS - 1].value, "199");
            aor_http_request_free(req);
        } else {
            const char *why;
            assert_int_equal(expect_error(s.p, s.len, 0, BODY_MAX, &why), 431);
            assert_non_null(strstr(why, "header"));
            assert_int_equal(expect_error(s.p, s.len, 3, BODY_MAX, &why), 431);
        }
        free(s.p);
    }
}

static void test_header_section_too_large(void **state) {
    const char *why;
    /* 100 fields of 700 bytes: 70 KB of names and values, under http_parser's own limit. */
    buf s = {0};
    buf_str(&s, "GET / HTTP/1.1\r\n");
    char *v = pattern(700, 9);
    for (int i = 0; i < 100; i++) {
        char name[16];
        assert_true(snprintf(name, sizeof name, "X-%d: ", i) < (int)sizeof name);
        buf_str(&s, name);
        buf_str(&s, v);
        buf_str(&s, "\r\n");
    }
    free(v);
    buf_str(&s, "\r\n");
    assert_int_equal(expect_error(s.p, s.len, 0, BODY_MAX, &why), 431);
    assert_non_null(strstr(why, "header"));
    assert_int_equal(expect_error(s.p, s.len, 4096, BODY_MAX, &why), 431);
    assert_int_equal(expect_error(s.p, s.len, 1, BODY_MAX, &why), 431);
    free(s.p);

    /* One value of 100 KB, in one read and in many. */
    buf t = {0};
    buf_str(&t, "GET / HTTP/1.1\r\nX-Big: ");
    v = pattern(100 * 1024, 10);
    buf_str(&t, v);
    free(v);
    buf_str(&t, "\r\n\r\n");
    assert_int_equal(expect_error(t.p, t.len, 0, BODY_MAX, &why), 431);
    assert_non_null(strstr(why, "header"));
    assert_int_equal(expect_error(t.p, t.len, 16384, BODY_MAX, &why), 431);
    free(t.p);

    /* A long target: 414 beyond AOR_HTTP_MAX_URL_BYTES, whatever the read boundaries; one
     * of exactly that length is fine. */
    buf u = {0};
    buf_str(&u, "GET /");
    v = pattern(AOR_HTTP_MAX_URL_BYTES, 11);
    buf_str(&u, v);
    free(v);
    buf_str(&u, " HTTP/1.1\r\n\r\n");
    assert_int_equal(expect_error(u.p, u.len, 0, BODY_MAX, &why), 414);
    assert_non_null(strstr(why, "target"));
    assert_int_equal(expect_error(u.p, u.len, 1000, BODY_MAX, &why), 414);
    free(u.p);
    buf w = {0};
    buf_str(&w, "GET /");
    v = pattern(AOR_HTTP_MAX_URL_BYTES - 1, 12);
    buf_str(&w, v);
    free(v);
    buf_str(&w, " HTTP/1.1\r\nHost: x\r\n\r\n");
    size_t used;
    int status;
    aor_http_reader *r = aor_http_reader_new(BODY_MAX);
    assert_non_null(r);
    assert_int_equal(aor_http_reader_feed(r, w.p, w.len, &used, &status, &why), AOR_HTTP_REQUEST);
    aor_http_request *req = aor_http_reader_take(r);
    assert_non_null(req);
    assert_int_equal(strlen(req->url), AOR_HTTP_MAX_URL_BYTES);
    aor_http_request_free(req);
    aor_http_reader_free(r);
    free(w.p);
}

static void test_nul_in_value(void **state) {
    const char *why;
    static const char mid[] = "GET / HTTP/1.1\r\nX-A: ab\0cd\r\n\r\n";
    static const char first[] = "GET / HTTP/1.1\r\nX-A: \0abc\r\n\r\n";
    static const char only[] = "GET / HTTP/1.1\r\nX-A:\0\r\n\r\n";
    const char *cases[] = {mid, first, only};
    size_t lens[] = {sizeof mid - 1, sizeof first - 1, sizeof only - 1};
    for (size_t i = 0; i < 3; i++) {
        for (size_t step = 0; step <= 3; step++) {
            assert_int_equal(expect_error(cases[i], lens[i], step, BODY_MAX, &why), 400);
            if (!strstr(why, "NUL") && !strstr(why, "Invalid header value char"))
                fail_msg("reason for a NUL byte: %s", why);
        }
    }
}

static void test_garbage(void **state) {
    const char *why;
    static const char bin[] = "\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03";
    assert_int_equal(expect_error(bin, sizeof bin - 1, 0, BODY_MAX, &why), 400);
    assert_non_null(strcasestr(why, "method"));
    assert_int_equal(expect_error("HELLO WORLD\r\n\r\n", 15, 0, BODY_MAX, &why), 400);
    assert_non_null(strcasestr(why, "method"));
    static const char nover[] = "GET / HTTP/9.x\r\n\r\n";
    assert_int_equal(expect_error(nover, sizeof nover - 1, 0, BODY_MAX, &why), 400);
    assert_non_null(strcasestr(why, "version"));
    static const char badcl[] = "POST / HTTP/1.1\r\nContent-Length: 12x\r\n\r\n";
    assert_int_equal(expect_error(badcl, sizeof badcl - 1, 0, BODY_MAX, &why), 400);
    assert_non_null(strcasestr(why, "content-length"));
    /* RFC 9112 §6.1: only chunked is decoded; another coding before it would be dropped
     * silently when the body is forwarded with a Content-Length. */
    static const char gz[] = "POST / HTTP/1.1\r\nTransfer-Encoding: gzip, chunked\r\n\r\n0\r\n\r\n";
    assert_int_equal(expect_error(gz, sizeof gz - 1, 0, BODY_MAX, &why), 501);
    assert_non_null(strstr(why, "transfer coding"));
    static const char badchunk[] = "POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n";
    assert_int_equal(expect_error(badchunk, sizeof badchunk - 1, 0, BODY_MAX, &why), 400);
    assert_non_null(strcasestr(why, "chunk"));
}

/* Whitespace in or around a field name is refused (RFC 9112 §5.1, §2.2), not taken as
 * part of the name: "Content-Length : 5" must not become a field the body is not framed by
 * and that would be forwarded upstream. */
static void test_name_whitespace(void **state) {
    static const char *const bad[] = {
        "POST / HTTP/1.1\r\nContent-Length : 5\r\n\r\nhello",
        "POST / HTTP/1.1\r\nTransfer-Encoding : chunked\r\n\r\n0\r\n\r\n",
        "GET / HTTP/1.1\r\nBad Name: x\r\n\r\n",
        "GET / HTTP/1.1\r\n X-A: b\r\n\r\n",
        "GET / HTTP/1.1\r\nX-A\t: b\r\n\r\n",
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        for (size_t step = 0; step <= 2; step++) {
            const char *why;
            int status = expect_error(bad[i], strlen(bad[i]), step, BODY_MAX, &why);
            if (status != 400)
                fail_msg("case %zu step %zu: status %d (%s)", i, step, status, why);
            /* ours, or llhttp's ("Invalid header field char", "Unexpected space after start
             * line", "Invalid header token") */
            if (!strcasestr(why, "space") && !strcasestr(why, "header"))
                fail_msg("case %zu: reason %s", i, why);
        }
    }
}

/* ---- response helpers ------------------------------------------------------------ */

static char *drain(struct evbuffer *b) {
    size_t n = evbuffer_get_length(b);
    char *s = malloc(n + 1);
    assert_non_null(s);
    assert_int_equal(evbuffer_remove(b, s, n), (int)n);
    s[n] = '\0';
    return s;
}

static void test_write_response(void **state) {
    struct evbuffer *out = evbuffer_new();
    assert_non_null(out);
    static const char *const extra[] = {"x-aor-provider: openai", "X-Aor-Key: main", NULL};
    assert_int_equal(
        aor_http_write_response(out, 200, "application/json", extra, "{\"ok\":1}", 8, ""), 0);
    char *s = drain(out);
    assert_string_equal(s, "HTTP/1.1 200 OK\r\n"
                           "Content-Type: application/json\r\n"
                           "x-aor-provider: openai\r\n"
                           "X-Aor-Key: main\r\n"
                           "Content-Length: 8\r\n"
                           "\r\n"
                           "{\"ok\":1}");
    free(s);

    assert_int_equal(aor_http_write_response(out, 429, "text/plain", NULL, "slow down\n", 10, NULL),
                     0);
    s = drain(out);
    assert_string_equal(s, "HTTP/1.1 429 Too Many Requests\r\n"
                           "Content-Type: text/plain\r\n"
                           "Content-Length: 10\r\n"
                           "Connection: close\r\n"
                           "\r\n"
                           "slow down\n");
    free(s);

    assert_int_equal(aor_http_write_response(out, 404, NULL, NULL, NULL, 0, ""), 0);
    s = drain(out);
    assert_string_equal(s, "HTTP/1.1 404 Not Found\r\n"
                           "Content-Length: 0\r\n"
                           "\r\n");
    free(s);

    /* The answer to HEAD: the head with the body's length, no body. */
    assert_int_equal(aor_http_write_response(out, 404, "application/json", NULL, NULL, 211, ""), 0);
    s = drain(out);
    assert_string_equal(s, "HTTP/1.1 404 Not Found\r\n"
                           "Content-Type: application/json\r\n"
                           "Content-Length: 211\r\n"
                           "\r\n");
    free(s);

    /* Body bytes are copied as they are, NULs included. */
    assert_int_equal(
        aor_http_write_response(out, 502, "application/octet-stream", NULL, "a\0b", 3, NULL), 0);
    size_t n = evbuffer_get_length(out);
    char *raw = malloc(n);
    assert_non_null(raw);
    assert_int_equal(evbuffer_remove(out, raw, n), (int)n);
    static const char want[] = "HTTP/1.1 502 Bad Gateway\r\n"
                               "Content-Type: application/octet-stream\r\n"
                               "Content-Length: 3\r\n"
                               "Connection: close\r\n"
                               "\r\n"
                               "a\0b";
    assert_int_equal(n, sizeof want - 1);
    assert_memory_equal(raw, want, n);
    free(raw);
    evbuffer_free(out);
}

/* What the reader makes of what write_response wrote (as a request body carrier): the
 * framing round-trips through llhttp's response mode. */
static int on_body_cat(llhttp_t *p, const char *at, size_t len) {
    buf_add(p->data, at, len);
    return 0;
}

static int keep_alive_seen;

static int on_complete_ka(llhttp_t *p) {
    keep_alive_seen = llhttp_should_keep_alive(p); /* the flags are reset after this */
    return 0;
}

static void test_write_response_parses(void **state) {
    struct evbuffer *out = evbuffer_new();
    assert_non_null(out);
    static const char *const extra[] = {"X-A: 1", NULL};
    assert_int_equal(aor_http_write_response(out, 503, "text/plain", extra, "busy", 4, ""), 0);
    char *s = drain(out);
    llhttp_t p;
    llhttp_settings_t st;
    llhttp_settings_init(&st);
    st.on_body = on_body_cat;
    st.on_message_complete = on_complete_ka;
    keep_alive_seen = -1;
    llhttp_init(&p, HTTP_RESPONSE, &st);
    buf body = {0};
    p.data = &body;
    size_t n = strlen(s);
    assert_int_equal(llhttp_execute(&p, s, n), HPE_OK);
    assert_int_equal(p.status_code, 503);
    assert_int_equal(keep_alive_seen, 1);
    assert_int_equal(body.len, 4);
    assert_memory_equal(body.p, "busy", 4);
    free(body.p);
    free(s);
    evbuffer_free(out);
}

static void test_reason(void **state) {
    assert_string_equal(aor_http_reason(200), "OK");
    assert_string_equal(aor_http_reason(429), "Too Many Requests");
    assert_string_equal(aor_http_reason(502), "Bad Gateway");
    assert_string_equal(aor_http_reason(413), "Content Too Large");
    assert_string_equal(aor_http_reason(431), "Request Header Fields Too Large");
    assert_string_equal(aor_http_reason(304), "Not Modified");
    assert_string_equal(aor_http_reason(409), "Conflict");
    assert_string_equal(aor_http_reason(422), "Unprocessable Content");
    assert_string_equal(aor_http_reason(418), "Client Error"); /* by class when unlisted */
    assert_string_equal(aor_http_reason(599), "Server Error");
    int unknown[] = {299, 0, -1, 999, 1000000};
    for (size_t i = 0; i < sizeof unknown / sizeof unknown[0]; i++) {
        const char *r = aor_http_reason(unknown[i]);
        assert_non_null(r);
        assert_true(r[0] != '\0');
        assert_null(strpbrk(r, "\r\n"));
    }
}

static void test_hop_header(void **state) {
    static const char *const hop[] = {"connection",
                                      "Connection",
                                      "CONNECTION",
                                      "keep-alive",
                                      "Keep-Alive",
                                      "transfer-encoding",
                                      "Transfer-Encoding",
                                      "host",
                                      "Host",
                                      "content-length",
                                      "Content-Length",
                                      "te",
                                      "TE",
                                      "upgrade",
                                      "Upgrade",
                                      "trailer",
                                      "Trailers",
                                      "proxy-connection",
                                      "Proxy-Authenticate",
                                      "Proxy-Authorization",
                                      "expect",
                                      "Expect"};
    for (size_t i = 0; i < sizeof hop / sizeof hop[0]; i++)
        if (!aor_http_is_hop_header(hop[i]))
            fail_msg("%s should be hop-by-hop", hop[i]);
    static const char *const end[] = {"x-request-id",
                                      "authorization",
                                      "Authorization",
                                      "content-type",
                                      "Content-Encoding",
                                      "cookie",
                                      "t",
                                      "tea",
                                      "hostname",
                                      "h",
                                      "x-api-key",
                                      "keep",
                                      "connections",
                                      "upgrade-insecure-requests",
                                      "",
                                      "proxy",
                                      "expect-ct"};
    for (size_t i = 0; i < sizeof end / sizeof end[0]; i++)
        if (aor_http_is_hop_header(end[i]))
            fail_msg("%s should be end-to-end", end[i]);
}

/* The requests kept for reuse are freed at the end, as aord does at shutdown. */
static int spares_free(void **state) {
    aor_http_spares_free();
    return 0;
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_simple_post),
        cmocka_unit_test(test_version_and_host_count),
        cmocka_unit_test(test_path),
        cmocka_unit_test(test_simple_every_split),
        cmocka_unit_test(test_medium_every_split),
        cmocka_unit_test(test_large_splits),
        cmocka_unit_test(test_fields),
        cmocka_unit_test(test_empty_values_split),
        cmocka_unit_test(test_pipelined),
        cmocka_unit_test(test_chunked),
        cmocka_unit_test(test_expect_continue),
        cmocka_unit_test(test_keep_alive),
        cmocka_unit_test(test_upgrade),
        cmocka_unit_test(test_body_too_large),
        cmocka_unit_test(test_too_many_fields),
        cmocka_unit_test(test_header_section_too_large),
        cmocka_unit_test(test_nul_in_value),
        cmocka_unit_test(test_garbage),
        cmocka_unit_test(test_name_whitespace),
        cmocka_unit_test(test_write_response),
        cmocka_unit_test(test_write_response_parses),
        cmocka_unit_test(test_reason),
        cmocka_unit_test(test_hop_header),
        cmocka_unit_test(test_reuse_after_free),
        cmocka_unit_test(test_known_fields),
        cmocka_unit_test(test_abandoned_upload_not_kept),
    };
    return cmocka_run_group_tests(tests, NULL, spares_free);
}
