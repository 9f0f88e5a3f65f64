/* libaor.so: CA trust variables set in the constructor (spec §2 "Trust", §9). */
#ifndef AOR_SHIM_TRUST_H
#define AOR_SHIM_TRUST_H

#include <stddef.h>

/* Bytes read at most from ca.pem or from the user's NODE_EXTRA_CA_CERTS file; a bigger
 * file is not merged (the variable is left alone). */
#define AOR_TRUST_FILE_MAX (1024 * 1024)

/* The aor data directory: $XDG_DATA_HOME/aor when XDG_DATA_HOME is absolute, else
 * $HOME/.local/share/aor. Writes it to out (outlen bytes). Returns 0, or -1 when HOME
 * is needed and unset, or the path does not fit. */
int aor_trust_data_dir(const char *xdg_data_home, const char *home, char *out, size_t outlen);

/* Text test, no certificate parsing (the shim links libc only): 1 when the PEM text
 * (len bytes) holds a block ("-----BEGIN ...-----" to "-----END ...-----") whose base64
 * body equals the body of the first block of cert (cert_len bytes); white space and line
 * ends (LF, CRLF) are ignored, so a re-wrapped copy of the same certificate matches.
 * 0 when no block matches; -1 when cert holds no complete PEM block. Can't fail
 * otherwise; touches no errno. */
int aor_trust_pem_contains(const char *text, size_t len, const char *cert, size_t cert_len);

/* Name of the merged NODE_EXTRA_CA_CERTS file for this merged content:
 * "node-extra-ca-<16 hex digits>.pem", the digits being FNV-1a 64 of the len bytes at
 * data. One file per distinct content, so programs started with different user files
 * never overwrite each other's merged file. Writes it into out (outlen bytes; 40 are
 * enough). Returns 0, or -1 when it does not fit. */
int aor_trust_merged_name(const char *data, size_t len, char *out, size_t outlen);

/* NODE_EXTRA_CA_CERTS holds one file, and Node adds it to its built-in roots; spec §2
 * wants the user's file merged with aor's CA. Given the user's value `user` (non-empty)
 * and ca (data_dir/ca.pem), decides what the variable should be:
 *   - user is ca, or the user's file already holds ca.pem's certificate
 *     (aor_trust_pem_contains) -> 0 (leave it);
 *   - the user's file cannot be read (missing, no permission, not a regular file: Node
 *     would ignore it too) -> 1, out = ca (as `aor run` does);
 *   - the user's file is bigger than AOR_TRUST_FILE_MAX, ca.pem cannot be read or holds
 *     no PEM block, or the merged file cannot be written -> 0 (leave it);
 *   - else the merged content = the user's file, a newline if it did not end with one,
 *     then ca.pem (the rule of `aor run`) is in data_dir/<aor_trust_merged_name> ->
 *     1, out = that path. The file is written only when it is missing or holds other
 *     bytes: "<name>.tmp.<pid>" created 0644 (O_EXCL, O_NOFOLLOW), written, renamed
 *     over the name; on failure the tmp file is removed.
 * out: outlen bytes (PATH_MAX is enough); written only when 1 is returned.
 * Reads at most AOR_TRUST_FILE_MAX bytes of each file. Keeps errno. Prints nothing but
 * aor_debug lines (AOR_DEBUG=1). */
int aor_trust_node_value(const char *data_dir, const char *user, const char *ca, char *out,
                         size_t outlen);

/* Applies the trust rules for data_dir: when data_dir/bundle.pem is a readable file,
 * SSL_CERT_FILE, REQUESTS_CA_BUNDLE and CURL_CA_BUNDLE that are unset or empty are set
 * to it (a value the user set is left alone: aor doctor reports it). When
 * data_dir/ca.pem is readable: NODE_EXTRA_CA_CERTS unset or empty is set to ca.pem; a
 * value the user set follows aor_trust_node_value (merged with ca.pem).
 * Uses setenv: call only while the process is single-threaded (the constructor).
 * Returns the number of variables set. Keeps errno. */
int aor_trust_apply(const char *data_dir);

/* The constructor's entry: does nothing with AOR_NO_TRUST=1 or when the shim is
 * disabled (the daemon must not trust its own CA upstream); else aor_trust_apply on the
 * data directory from the environment. */
void aor_trust_setup(void);

#endif
