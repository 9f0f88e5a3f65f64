/* Reads the host a shim connection is for from the client's first bytes, before any
 * TLS library or HTTP parser takes the socket (spec §2: the daemon confirms the host
 * from SNI and passes connections to other hosts through untouched): the server name
 * (SNI) of a TLS ClientHello, or the Host header of a plain HTTP/1.x request, which
 * plays the role of SNI for plain HTTP (docs/shim.md "Pass-through").
 * Source: RFC 8446 §4.1.2 (ClientHello), RFC 5246 §6.2 (records), RFC 6066 §3
 * (server_name extension), RFC 9112 §3 (request line), RFC 9110 §7.2 (Host). */
#ifndef AOR_SNI_H
#define AOR_SNI_H

#include <stddef.h>

/* Bytes of TLS records read at most for one ClientHello. A hello may span several
 * records (up to 16 KiB each); post-quantum key shares and many PSK identities grow it
 * past one record, so up to four records are read (the peek buffer is static and the
 * Unix socket's queue holds that much; docs/tls.md). */
#define AOR_SNI_MAX_HELLO (64 * 1024)

/* Bytes of a plain HTTP request read at most to find its Host header. */
#define AOR_SNI_MAX_HTTP_HEAD (16 * 1024)

/* Parses the ClientHello at buf/len (TLS records, possibly split across records).
 * Returns 1 and writes the lower-cased host name into host (hostlen bytes, NUL-ended)
 * when the hello carries a server_name; 0 when it is complete and has none; -2 when more
 * bytes are needed (and len < AOR_SNI_MAX_HELLO); -1 when it is not a ClientHello, is
 * malformed (a name longer than hostlen-1 is malformed too) or is longer than
 * AOR_SNI_MAX_HELLO. Can't allocate. */
int aor_sni_parse(const unsigned char *buf, size_t len, char *host, size_t hostlen);

/* Reads the Host header of the plain HTTP/1.x request whose first len bytes are at buf
 * (not NUL-ended). Returns 1 once the first Host field line is complete and writes its
 * host into host (hostlen bytes, NUL-ended): lower-cased, without the port, an IPv6
 * literal without its brackets. Returns 0 when the head ended (empty line) with no Host
 * field; -2 when more bytes are needed (and len < AOR_SNI_MAX_HTTP_HEAD); -1 when the
 * first line is not an HTTP/1.x request line, a field line is malformed (no colon, space
 * before the colon, an obsolete line folding), the Host value is empty, has characters
 * a host may not have, a bad port or is longer than hostlen-1, or when no decision was
 * reached within AOR_SNI_MAX_HTTP_HEAD bytes. Lines end in CRLF or LF. Can't allocate. */
int aor_sni_http_host(const char *buf, size_t len, char *host, size_t hostlen);

#endif
