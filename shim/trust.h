/* libaor.so: CA trust variables set in the constructor (spec §2 "Trust", §9). */
#ifndef AOR_SHIM_TRUST_H
#define AOR_SHIM_TRUST_H

#include <stddef.h>

/* The aor data directory: $XDG_DATA_HOME/aor when XDG_DATA_HOME is absolute, else
 * $HOME/.local/share/aor. Writes it to out (outlen bytes). Returns 0, or -1 when HOME
 * is needed and unset, or the path does not fit. */
int aor_trust_data_dir(const char *xdg_data_home, const char *home, char *out, size_t outlen);

/* Applies the trust rules for data_dir: when data_dir/bundle.pem is a readable file,
 * SSL_CERT_FILE, REQUESTS_CA_BUNDLE and CURL_CA_BUNDLE that are unset or empty are set
 * to it; when data_dir/ca.pem is readable and NODE_EXTRA_CA_CERTS is unset or empty, it
 * is set to ca.pem. A variable the user already set is left alone (aor doctor reports
 * it). Uses setenv: call only while the process is single-threaded (the constructor).
 * Returns the number of variables set. Keeps errno. */
int aor_trust_apply(const char *data_dir);

/* The constructor's entry: does nothing with AOR_NO_TRUST=1 or when the shim is
 * disabled (the daemon must not trust its own CA upstream); else aor_trust_apply on the
 * data directory from the environment. */
void aor_trust_setup(void);

#endif
