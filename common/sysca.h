/* The system's CA bundle: where distributions keep it, and whether a trust variable
 * names it. Shared by libaor.so (shim/trust.c), `aor run` / `aor env` / `aor doctor`
 * (daemon/cli_trust.c, daemon/cli_doctor.c) and aord, which builds bundle.pem from it
 * (daemon/tls_ca.c). Source: spec §2 "Trust"; the decision is in docs/shim.md "Trust". */
#ifndef AOR_SYSCA_H
#define AOR_SYSCA_H

/* Debian's and Ubuntu's bundle, the first place aord reads the system CAs from. */
#define AOR_SYSCA_BUNDLE "/etc/ssl/certs/ca-certificates.crt"

/* Debian's directory of the system CAs with OpenSSL's hash links (c_rehash), which
 * aord's libcurl path adds beside a provider's ca_file (daemon/upstream_curl.c). */
#define AOR_SYSCA_DIR "/etc/ssl/certs"

/* 1 when path names the system's CA bundle: the same file (device and inode, after
 * symbolic links) as AOR_SYSCA_BUNDLE, the file aord builds bundle.pem from when it
 * exists (daemon/tls_ca.c; other distributions' places are not taken: there such a path
 * may hold a bundle of the user's own). bundle.pem is that bundle plus aor's CA, so a
 * variable pointing
 * there loses nothing when it points at bundle.pem instead, and is not "set to
 * something else" in the sense of spec §2. 0 otherwise: NULL, empty, a file that cannot
 * be stat'ed, any other file. Keeps errno. Async-signal-unsafe only in that it calls
 * stat(2). */
int aor_sysca_is_bundle(const char *path);

#endif
