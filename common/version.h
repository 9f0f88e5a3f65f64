/* The version both binaries print with --version (aord, aor). One place to bump. */
#ifndef AOR_VERSION_H
#define AOR_VERSION_H

#ifndef AOR_VERSION
#define AOR_VERSION "0.1.0"
#endif

#endif
