/* TLS on a non-blocking socket without bufferevents. Contract: tls_io.h. */
#include "tls_io.h"

#include <openssl/err.h>

int aor_tls_io_attach(SSL *ssl, int fd, int server) {
    if (SSL_set_fd(ssl, fd) != 1)
        return -1;
    if (server)
        SSL_set_accept_state(ssl);
    else
        SSL_set_connect_state(ssl);
    SSL_set_mode(ssl, SSL_MODE_ENABLE_PARTIAL_WRITE | SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER);
    SSL_set_read_ahead(ssl, 1);
    return 0;
}

aor_tls_io_status aor_tls_io_write(SSL *ssl, struct evbuffer *out) {
    while (evbuffer_get_length(out) > 0) {
        size_t len = evbuffer_get_length(out);
        if (len > AOR_TLS_IO_RECORD)
            len = AOR_TLS_IO_RECORD;
        const unsigned char *data = evbuffer_pullup(out, (ev_ssize_t)len);
        if (!data)
            return AOR_TLS_IO_NOMEM;
        aor_tls_io_clear_errors();
        int n = SSL_write(ssl, data, (int)len);
        if (n > 0) {
            evbuffer_drain(out, (size_t)n);
            continue;
        }
        switch (SSL_get_error(ssl, n)) {
        case SSL_ERROR_WANT_WRITE:
            return AOR_TLS_IO_WANT_WRITE;
        case SSL_ERROR_WANT_READ:
            return AOR_TLS_IO_WANT_READ;
        default:
            return AOR_TLS_IO_ERROR;
        }
    }
    return AOR_TLS_IO_DONE;
}
