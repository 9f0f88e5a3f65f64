/* Shared helpers of the plain-HTTP test clients http_epoll_after.c and
 * http_nonblock_poll.c (tests/e2e/test_shim_clients.py). Header-only (each program
 * in tests/progs is one .c file): the request text, reading an answer to its end,
 * and printing what the e2e test checks.
 *
 * Output of a program using it, one item a line:
 *   connect immediate|inprogress     (how connect() returned)
 *   status <code>                    (the answer's status line)
 *   x-aor-key <name>|-               (the header aord adds; "-" when absent)
 *   body <bytes>
 *   ok
 * or "FAIL <why>" and exit 1. The whole run is bounded by alarm(HP_DEADLINE_S). */
#ifndef AOR_TESTS_HTTP_PROBE_H
#define AOR_TESTS_HTTP_PROBE_H

#include <errno.h>
#include <netdb.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <unistd.h>

#define HP_DEADLINE_S 30        /* SIGALRM ends a stuck run */
#define HP_WAIT_MS 20000        /* one poll/epoll wait */
#define HP_ANSWER_MAX (1 << 20) /* bytes of answer kept; more is an error */

static void hp_fail(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    fputs("FAIL ", stdout);
    vprintf(fmt, ap);
    fputs("\n", stdout);
    va_end(ap);
    fflush(stdout);
    exit(1);
}

/* getaddrinfo(host, port) for a TCP stream; the caller frees the list. */
static struct addrinfo *hp_resolve(const char *host, const char *port) {
    struct addrinfo hints = {0}, *res = NULL;
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    int rc = getaddrinfo(host, port, &hints, &res);
    if (rc != 0)
        hp_fail("getaddrinfo %s: %s", host, gai_strerror(rc));
    return res;
}

/* The request: an OpenAI chat completion with a client token, Connection: close.
 * Returns the length written into buf (size bytes). */
static size_t hp_request(char *buf, size_t size, const char *host) {
    static const char body[] =
        "{\"model\":\"gpt-4o-mini\",\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}]}";
    int n = snprintf(buf, size,
                     "POST /v1/chat/completions HTTP/1.1\r\n"
                     "Host: %s\r\n"
                     "Authorization: Bearer client-token\r\n"
                     "Content-Type: application/json\r\n"
                     "Content-Length: %zu\r\n"
                     "Connection: close\r\n"
                     "\r\n%s",
                     host, strlen(body), body);
    if (n < 0 || (size_t)n >= size)
        hp_fail("request does not fit in %zu bytes", size);
    return (size_t)n;
}

/* Collects an answer; hp_complete() says when it is whole. */
typedef struct {
    char *data;
    size_t len;
} hp_answer;

static void hp_append(hp_answer *a, const char *p, size_t n) {
    if (a->len + n > HP_ANSWER_MAX)
        hp_fail("answer larger than %d bytes", HP_ANSWER_MAX);
    char *nd = realloc(a->data, a->len + n + 1);
    if (!nd)
        hp_fail("out of memory");
    memcpy(nd + a->len, p, n);
    a->data = nd;
    a->len += n;
    a->data[a->len] = '\0';
}

/* Value of header `name` in the head (case-insensitive), copied into out; 0 when absent. */
static int hp_header(const char *head, size_t head_len, const char *name, char *out,
                     size_t out_size) {
    size_t nl = strlen(name);
    const char *p = memchr(head, '\n', head_len); /* skip the status line */
    while (p && p < head + head_len) {
        p++;
        const char *eol = memchr(p, '\n', (size_t)(head + head_len - p));
        if (!eol)
            break;
        if ((size_t)(eol - p) > nl && strncasecmp(p, name, nl) == 0 && p[nl] == ':') {
            const char *v = p + nl + 1;
            while (v < eol && (*v == ' ' || *v == '\t'))
                v++;
            size_t vl = (size_t)(eol - v);
            while (vl > 0 && (v[vl - 1] == '\r' || v[vl - 1] == ' '))
                vl--;
            if (vl >= out_size)
                vl = out_size - 1;
            memcpy(out, v, vl);
            out[vl] = '\0';
            return 1;
        }
        p = eol;
    }
    return 0;
}

/* 1 when the answer is complete: head + Content-Length bytes, or the last chunk of
 * a chunked body. Without either the answer ends at EOF (returns 0 until then). */
static int hp_complete(const hp_answer *a) {
    if (!a->data)
        return 0;
    const char *end = strstr(a->data, "\r\n\r\n");
    if (!end)
        return 0;
    size_t head_len = (size_t)(end - a->data) + 4;
    char v[64];
    if (hp_header(a->data, head_len, "content-length", v, sizeof v)) {
        char *ep;
        errno = 0;
        unsigned long long cl = strtoull(v, &ep, 10);
        if (errno || ep == v || *ep)
            hp_fail("bad Content-Length %s", v);
        return a->len >= head_len + cl;
    }
    if (hp_header(a->data, head_len, "transfer-encoding", v, sizeof v) &&
        strcasecmp(v, "chunked") == 0)
        return a->len >= head_len + 5 && strstr(a->data + head_len - 2, "\r\n0\r\n\r\n") != NULL;
    return 0;
}

/* Prints status, x-aor-key and the body size of a whole answer, then "ok". */
static void hp_report(const hp_answer *a) {
    if (!a->data || strncmp(a->data, "HTTP/1.", 7) != 0)
        hp_fail("no HTTP answer (%zu bytes)", a->len);
    const char *end = strstr(a->data, "\r\n\r\n");
    if (!end)
        hp_fail("answer head not terminated (%zu bytes)", a->len);
    size_t head_len = (size_t)(end - a->data) + 4;
    char code[4] = "";
    if (a->len > 12)
        memcpy(code, a->data + 9, 3);
    char key[128];
    if (!hp_header(a->data, head_len, "x-aor-key", key, sizeof key))
        memcpy(key, "-", 2);
    printf("status %s\nx-aor-key %s\nbody %zu\nok\n", code, key, a->len - head_len);
    fflush(stdout);
}

#endif
