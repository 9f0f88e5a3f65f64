#include "bcommon.h"

#include <dirent.h>
#include <errno.h>
#include <inttypes.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <openssl/err.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <time.h>
#include <fcntl.h>
#include <unistd.h>

uint64_t bc_now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

void bc_die(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    fputs("bench: ", stderr);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
    exit(1);
}

/* ---- samples ------------------------------------------------------------------------ */

void bc_samples_add(bc_samples *s, uint64_t ns) {
    if (s->n == s->cap) {
        size_t cap = s->cap ? s->cap * 2 : 4096;
        uint64_t *v = realloc(s->v, cap * sizeof *v);
        if (!v)
            bc_die("out of memory (samples)");
        s->v = v;
        s->cap = cap;
    }
    s->v[s->n++] = ns;
    s->sorted = 0;
}

static int cmp_u64(const void *a, const void *b) {
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

void bc_samples_print_json(const bc_samples *s, const char *key) {
    printf(",\"%s\":[", key);
    for (size_t i = 0; i < s->n; i++)
        printf("%s%.1f", i ? "," : "", (double)s->v[i] / 1e3);
    printf("]");
}

uint64_t bc_samples_pct(bc_samples *s, double p) {
    if (s->n == 0)
        return 0;
    if (!s->sorted) {
        qsort(s->v, s->n, sizeof *s->v, cmp_u64);
        s->sorted = 1;
    }
    if (p <= 0)
        return s->v[0];
    if (p >= 100)
        return s->v[s->n - 1];
    /* nearest rank: the smallest value with at least p % of the samples at or below it */
    double rank = p / 100.0 * (double)s->n;
    size_t i = (size_t)rank;
    if ((double)i < rank)
        i++;
    if (i == 0)
        i = 1;
    return s->v[i - 1];
}

void bc_samples_free(bc_samples *s) {
    free(s->v);
    memset(s, 0, sizeof *s);
}

/* ---- CPU ---------------------------------------------------------------------------- */

uint64_t bc_proc_cpu_ns(pid_t pid) {
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/task", (int)pid);
    DIR *d = opendir(path);
    if (!d)
        return 0;
    uint64_t total = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        if (e->d_name[0] == '.')
            continue;
        char p2[128];
        int n = snprintf(p2, sizeof p2, "/proc/%d/task/%s/schedstat", (int)pid, e->d_name);
        if (n < 0 || (size_t)n >= sizeof p2)
            continue;
        FILE *f = fopen(p2, "re");
        if (!f)
            continue;
        char buf[128];
        if (fgets(buf, sizeof buf, f)) {
            char *end;
            errno = 0;
            unsigned long long v = strtoull(buf, &end, 10);
            if (!errno && end != buf)
                total += v;
        }
        fclose(f);
    }
    closedir(d);
    return total;
}

/* ---- connections ---------------------------------------------------------------------- */

SSL_CTX *bc_tls_ctx(void) {
    SSL_CTX *ctx = SSL_CTX_new(TLS_client_method());
    if (!ctx)
        bc_die("SSL_CTX_new failed");
    SSL_CTX_set_verify(ctx, SSL_VERIFY_NONE, NULL);
    static const unsigned char alpn[] = "\x08http/1.1";
    SSL_CTX_set_alpn_protos(ctx, alpn, sizeof alpn - 1);
    SSL_CTX_set_mode(ctx, SSL_MODE_ENABLE_PARTIAL_WRITE | SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER);
    return ctx;
}

int bc_dial(bc_conn *c, const char *host, const char *port, SSL_CTX *ctx, char *err,
            size_t errlen) {
    c->fd = -1;
    c->ssl = NULL;
    /* Resolved once per process: a dial per connection would ask DNS every time (a
     * provider name goes to the network resolver before the shim's offline fallback
     * answers), and a slow resolver would then time the benchmark. The shim keeps the
     * addresses it saw, so later connects to them are still recognised. */
    static struct addrinfo *res;
    static char res_host[256], res_port[16];
    if (!res || strcmp(res_host, host) != 0 || strcmp(res_port, port) != 0) {
        if (res)
            freeaddrinfo(res);
        res = NULL;
        struct addrinfo hints = {0};
        hints.ai_family = AF_UNSPEC;
        hints.ai_socktype = SOCK_STREAM;
        int rc = getaddrinfo(host, port, &hints, &res);
        if (rc != 0) {
            res = NULL;
            snprintf(err, errlen, "getaddrinfo %s: %s", host, gai_strerror(rc));
            return -1;
        }
        snprintf(res_host, sizeof res_host, "%s", host);
        snprintf(res_port, sizeof res_port, "%s", port);
    }
    for (struct addrinfo *a = res; a; a = a->ai_next) {
        int fd = socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, a->ai_protocol);
        if (fd < 0)
            continue;
        if (connect(fd, a->ai_addr, a->ai_addrlen) == 0) {
            c->fd = fd;
            break;
        }
        snprintf(err, errlen, "connect %s:%s: %s", host, port, strerror(errno));
        close(fd);
    }
    if (c->fd < 0)
        return -1;
    int one = 1;
    setsockopt(c->fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    if (ctx) {
        c->ssl = SSL_new(ctx);
        if (!c->ssl) {
            snprintf(err, errlen, "SSL_new failed");
            goto fail_fd;
        }
        SSL_set_fd(c->ssl, c->fd);
        SSL_set_tlsext_host_name(c->ssl, host);
        ERR_clear_error();
        if (SSL_connect(c->ssl) != 1) {
            unsigned long e = ERR_get_error();
            char buf[256];
            ERR_error_string_n(e, buf, sizeof buf);
            snprintf(err, errlen, "TLS handshake with %s:%s: %s", host, port, buf);
            goto fail_ssl;
        }
    }
    int fl = fcntl(c->fd, F_GETFL);
    fcntl(c->fd, F_SETFL, fl | O_NONBLOCK);
    return 0;
fail_ssl:
    SSL_free(c->ssl);
    c->ssl = NULL;
fail_fd:
    close(c->fd);
    c->fd = -1;
    return -1;
}

static void wait_fd(int fd, short events) {
    struct pollfd p = {fd, events, 0};
    poll(&p, 1, 1000);
}

int bc_send_all(bc_conn *c, const char *buf, size_t len) {
    size_t off = 0;
    while (off < len) {
        if (c->ssl) {
            ERR_clear_error();
            int n = SSL_write(c->ssl, buf + off, (int)(len - off));
            if (n > 0) {
                off += (size_t)n;
                continue;
            }
            int e = SSL_get_error(c->ssl, n);
            if (e == SSL_ERROR_WANT_WRITE)
                wait_fd(c->fd, POLLOUT);
            else if (e == SSL_ERROR_WANT_READ)
                wait_fd(c->fd, POLLIN);
            else
                return -1;
        } else {
            ssize_t n = send(c->fd, buf + off, len - off, MSG_NOSIGNAL);
            if (n > 0) {
                off += (size_t)n;
                continue;
            }
            if (n < 0 && (errno == EAGAIN || errno == EINTR))
                wait_fd(c->fd, POLLOUT);
            else
                return -1;
        }
    }
    return 0;
}

ssize_t bc_recv(bc_conn *c, char *buf, size_t cap) {
    if (c->ssl) {
        ERR_clear_error();
        int n = SSL_read(c->ssl, buf, (int)cap);
        if (n > 0)
            return n;
        int e = SSL_get_error(c->ssl, n);
        if (e == SSL_ERROR_WANT_READ || e == SSL_ERROR_WANT_WRITE)
            return -2;
        if (e == SSL_ERROR_ZERO_RETURN)
            return 0;
        return -1;
    }
    ssize_t n = recv(c->fd, buf, cap, 0);
    if (n >= 0)
        return n;
    if (errno == EAGAIN || errno == EINTR)
        return -2;
    return -1;
}

void bc_close(bc_conn *c) {
    if (c->ssl) {
        SSL_free(c->ssl);
        c->ssl = NULL;
    }
    if (c->fd >= 0)
        close(c->fd);
    c->fd = -1;
}

/* ---- response reader ---------------------------------------------------------------- */

void bc_resp_reset(bc_resp *r) {
    r->st = BC_R_HEAD;
    r->status = 0;
    r->close = 0;
    r->remaining = 0;
    r->headlen = 0;
}

/* Parses the complete header block in r->head. 0 or -1. */
static int parse_head(bc_resp *r) {
    r->head[r->headlen] = '\0';
    char *p = r->head;
    if (strncmp(p, "HTTP/1.", 7) != 0)
        return -1;
    char *sp = strchr(p, ' ');
    if (!sp)
        return -1;
    char *end;
    long st = strtol(sp + 1, &end, 10);
    if (end == sp + 1 || st < 100 || st > 999)
        return -1;
    r->status = (int)st;
    int chunked = 0;
    long long clen = -1;
    char *line = strstr(p, "\r\n");
    while (line) {
        line += 2;
        char *next = strstr(line, "\r\n");
        if (!next || next == line)
            break;
        *next = '\0';
        char *colon = strchr(line, ':');
        if (colon) {
            *colon = '\0';
            char *v = colon + 1;
            while (*v == ' ' || *v == '\t')
                v++;
            if (strcasecmp(line, "content-length") == 0) {
                errno = 0;
                clen = strtoll(v, &end, 10);
                if (errno || end == v || clen < 0)
                    return -1;
            } else if (strcasecmp(line, "transfer-encoding") == 0) {
                chunked = strcasestr(v, "chunked") != NULL;
            } else if (strcasecmp(line, "connection") == 0) {
                r->close = strcasecmp(v, "close") == 0;
            }
        }
        line = next;
    }
    if (r->status < 200) {
        /* 1xx: another header block follows */
        r->headlen = 0;
        return 0;
    }
    if (chunked) {
        r->st = BC_R_CHUNK_SIZE;
    } else if (clen >= 0) {
        r->remaining = (uint64_t)clen;
        r->st = clen > 0 ? BC_R_BODY_LEN : BC_R_DONE;
    } else {
        return -1; /* read-until-close bodies are not used by the benchmarks */
    }
    r->headlen = 0;
    return 0;
}

ssize_t bc_resp_feed(bc_resp *r, const char *data, size_t len) {
    size_t i = 0;
    while (i < len && r->st != BC_R_DONE) {
        switch (r->st) {
        case BC_R_HEAD: {
            size_t room = sizeof r->head - 1 - r->headlen;
            size_t n = len - i < room ? len - i : room;
            if (n == 0)
                return -1; /* header block too large */
            size_t old = r->headlen;
            memcpy(r->head + old, data + i, n);
            size_t from = old >= 3 ? old - 3 : 0;
            char *t = memmem(r->head + from, old + n - from, "\r\n\r\n", 4);
            if (!t) {
                r->headlen += n;
                i += n;
                break;
            }
            size_t hend = (size_t)(t - r->head) + 4;
            i += hend - old;
            r->headlen = hend;
            if (parse_head(r) < 0)
                return -1;
            break;
        }
        case BC_R_BODY_LEN:
        case BC_R_CHUNK_DATA: {
            size_t n = len - i;
            if (n > r->remaining)
                n = (size_t)r->remaining;
            if (r->on_body)
                r->on_body(r->arg, data + i, n);
            i += n;
            r->remaining -= n;
            if (r->remaining == 0)
                r->st = r->st == BC_R_BODY_LEN ? BC_R_DONE : BC_R_CHUNK_CRLF;
            break;
        }
        case BC_R_CHUNK_SIZE:
        case BC_R_CHUNK_CRLF:
        case BC_R_TRAILER:
            if (r->headlen + 1 >= 256)
                return -1;
            r->head[r->headlen++] = data[i++];
            if (r->headlen >= 2 && r->head[r->headlen - 2] == '\r' &&
                r->head[r->headlen - 1] == '\n') {
                if (r->st == BC_R_CHUNK_CRLF) {
                    if (r->headlen != 2)
                        return -1;
                    r->st = BC_R_CHUNK_SIZE;
                } else if (r->st == BC_R_TRAILER) {
                    if (r->headlen == 2)
                        r->st = BC_R_DONE;
                } else {
                    r->head[r->headlen - 2] = '\0';
                    char *end;
                    errno = 0;
                    unsigned long long sz = strtoull(r->head, &end, 16);
                    if (errno || end == r->head)
                        return -1;
                    r->remaining = sz;
                    r->st = sz ? BC_R_CHUNK_DATA : BC_R_TRAILER;
                }
                r->headlen = 0;
            }
            break;
        case BC_R_DONE:
            break;
        }
    }
    return (ssize_t)i;
}
