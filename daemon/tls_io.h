/* TLS on a non-blocking socket without bufferevents (docs/architecture.md, the deviation
 * from design.md's library table): what the client connections (daemon/conn.c) and the
 * TLS upstreams (daemon/upstream_h1.c) share. The caller owns the readiness events and
 * retries after the socket is readable or writable, as OpenSSL's SSL_get_error says
 * (OpenSSL 3, SSL_read(3), SSL_write(3)). */
#ifndef AOR_TLS_IO_H
#define AOR_TLS_IO_H

#include <event2/buffer.h>
#include <openssl/err.h>
#include <openssl/ssl.h>

/* Bytes per SSL_write: one full TLS record (RFC 8446 §5.1: 2^14). */
#define AOR_TLS_IO_RECORD 16384

/* Ties ssl to fd (not taken: the caller closes it after SSL_free) for use with
 * aor_tls_io_write: accept state when server is 1, else connect state (the handshake
 * then runs inside the first SSL_read, SSL_write or SSL_do_handshake); partial writes and
 * a moving write buffer (each SSL_write is retried with the bytes where they then are);
 * read-ahead (one read() per record instead of two: callers must look at
 * SSL_has_pending, not only at the socket). 0, or -1 (OpenSSL's error queue says why). */
int aor_tls_io_attach(SSL *ssl, int fd, int server);

/* Empties this thread's OpenSSL error queue, as must be done before an SSL_read,
 * SSL_write, SSL_peek or SSL_do_handshake whose failure SSL_get_error will classify
 * (SSL_get_error(3): it reads the queue first, so an error left by another connection
 * would be taken for this one's). Looks before it clears: ERR_peek_error costs about a
 * fifth of ERR_clear_error in OpenSSL 3.0 (~200 against ~840 instructions, measured with
 * callgrind), and the queue is almost always empty. No arguments, no errors. */
static inline void aor_tls_io_clear_errors(void) {
    if (ERR_peek_error() != 0)
        ERR_clear_error();
}

typedef enum {
    AOR_TLS_IO_DONE = 0,   /* out is empty */
    AOR_TLS_IO_WANT_WRITE, /* the socket takes no more now: retry when writable */
    AOR_TLS_IO_WANT_READ,  /* OpenSSL must read first: retry when readable */
    AOR_TLS_IO_ERROR,      /* the connection failed; OpenSSL's error queue says why */
    AOR_TLS_IO_NOMEM       /* out could not be made contiguous (out of memory) */
} aor_tls_io_status;

/* Writes the bytes of out through ssl until out is empty or the socket takes no more,
 * up to AOR_TLS_IO_RECORD bytes per SSL_write (so a small answer is one record). The
 * bytes written are drained from out; on a retry the rest is written from where it then
 * is (out may have grown meanwhile). Clears OpenSSL's error queue before each call. */
aor_tls_io_status aor_tls_io_write(SSL *ssl, struct evbuffer *out);

#endif
