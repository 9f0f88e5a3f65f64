/* Shared helpers of the benchmark clients (bench/loadgen.c, bench/streamlat.c): a
 * monotonic clock, latency samples with percentiles, CPU time of other processes from
 * /proc, client connections (plain TCP or TLS, resolved with getaddrinfo so that
 * libaor.so can redirect them), and an incremental HTTP/1.1 response reader.
 * Benchmarks only (docs/performance.md); not part of aord or libaor.so. */
#ifndef AOR_BENCH_COMMON_H
#define AOR_BENCH_COMMON_H

#include <openssl/ssl.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/* CLOCK_MONOTONIC in nanoseconds (the same clock the mock stamps stream chunks with). */
uint64_t bc_now_ns(void);

/* Prints "bench: <message>" to stderr and exits 1. */
void bc_die(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));

/* ---- latency samples ------------------------------------------------------------ */

typedef struct {
    uint64_t *v; /* nanoseconds */
    size_t n, cap;
    int sorted;
} bc_samples;

/* Appends one sample (ns); exits on ENOMEM. */
void bc_samples_add(bc_samples *s, uint64_t ns);

/* The p-th percentile (0 <= p <= 100, nearest rank) in ns, 0 when empty. Sorts. */
uint64_t bc_samples_pct(bc_samples *s, double p);

void bc_samples_free(bc_samples *s);

/* Prints ,"<key>":[v1,v2,...] with every sample in µs (one decimal) to stdout: the end
 * of a JSON object, for a caller that pools the samples of several runs. */
void bc_samples_print_json(const bc_samples *s, const char *key);

/* ---- CPU time of other processes -------------------------------------------------- */

/* On-CPU time of every thread of pid (sum of the first field of
 * /proc/PID/task/ * /schedstat), in ns; 0 when the process is gone. */
uint64_t bc_proc_cpu_ns(pid_t pid);

/* ---- connections -------------------------------------------------------------------- */

typedef struct {
    int fd;
    SSL *ssl; /* NULL for plain TCP */
} bc_conn;

/* A TLS client context that does not verify the peer (benchmark only), http/1.1 ALPN. */
SSL_CTX *bc_tls_ctx(void);

/* Resolves host:port with getaddrinfo, connects (blocking), does the TLS handshake when
 * ctx is not NULL (SNI = host), sets TCP_NODELAY, then makes the socket non-blocking.
 * The address is resolved on the first call and reused while host and port stay the same
 * (not thread-safe). Returns 0, or -1 with a message in err. */
int bc_dial(bc_conn *c, const char *host, const char *port, SSL_CTX *ctx, char *err, size_t errlen);

/* Sends all len bytes (waits with poll when the socket is full). 0, or -1 on error. */
int bc_send_all(bc_conn *c, const char *buf, size_t len);

/* Reads what is there: > 0 bytes, 0 on EOF, -1 on error, -2 when nothing is waiting. */
ssize_t bc_recv(bc_conn *c, char *buf, size_t cap);

void bc_close(bc_conn *c);

/* ---- HTTP/1.1 response reader ------------------------------------------------------- */

typedef enum {
    BC_R_HEAD = 0,
    BC_R_BODY_LEN,
    BC_R_CHUNK_SIZE,
    BC_R_CHUNK_DATA,
    BC_R_CHUNK_CRLF,
    BC_R_TRAILER,
    BC_R_DONE
} bc_resp_state;

typedef struct {
    bc_resp_state st;
    int status;
    int close;          /* "Connection: close" seen */
    uint64_t remaining; /* body bytes left (content-length or current chunk) */
    char head[16384];   /* header bytes gathered so far (also chunk-size lines) */
    size_t headlen;
    /* Decoded body bytes as they arrive; may be NULL. */
    void (*on_body)(void *arg, const char *data, size_t len);
    void *arg;
} bc_resp;

/* Readies r for the next response (keeps on_body/arg). */
void bc_resp_reset(bc_resp *r);

/* Feeds bytes. Returns how many were used (the rest belongs to the next response), or -1
 * on a malformed answer. r->st == BC_R_DONE when the response is complete. */
ssize_t bc_resp_feed(bc_resp *r, const char *data, size_t len);

#endif
