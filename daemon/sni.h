/* Reads the server name (SNI) of a TLS ClientHello from the raw bytes a client sent,
 * before any TLS library takes the socket (spec §2: the daemon confirms the host from
 * SNI and passes connections to other hosts through untouched).
 * Source: RFC 8446 §4.1.2 (ClientHello), RFC 5246 §6.2 (records), RFC 6066 §3
 * (server_name extension). */
#ifndef AOR_SNI_H
#define AOR_SNI_H

#include <stddef.h>

#define AOR_SNI_MAX_HELLO (16 * 1024) /* bytes of records read at most */

/* Parses the ClientHello at buf/len (TLS records, possibly split across records).
 * Returns 1 and writes the lower-cased host name into host (hostlen bytes, NUL-ended)
 * when the hello carries a server_name; 0 when it is complete and has none; -2 when more
 * bytes are needed (and len < AOR_SNI_MAX_HELLO); -1 when it is not a ClientHello or is
 * malformed (a name longer than hostlen-1 is malformed too). Can't allocate. */
int aor_sni_parse(const unsigned char *buf, size_t len, char *host, size_t hostlen);

#endif
