/* libaor.so: lists of intercepted host names (the built-in list, AOR_HOSTS).
 * Pure code, no locks: a list is built once and then only read. Source: spec §2, §9. */
#ifndef AOR_SHIM_HOSTLIST_H
#define AOR_SHIM_HOSTLIST_H

#include "builtin_hosts.h"

#include <stddef.h>

typedef struct aor_hostlist aor_hostlist; /* opaque */

/* Normalises a host name for comparison: lower case, one trailing dot dropped.
 * Accepts 1..253 bytes of letters, digits, '-', '_' and '.', at least one byte that is
 * not a dot. Writes the result (NUL-terminated) into out (outlen >= 254 is always
 * enough). Returns its length, or -1 when the name is not acceptable. */
int aor_host_normalize(const char *in, size_t inlen, char *out, size_t outlen);

/* The built-in list of well-known provider API hosts (spec §2), all on port 443.
 * Returns a new list (free with aor_hostlist_free) or NULL on allocation failure. */
aor_hostlist *aor_hostlist_builtin(void);

/* Parses an AOR_HOSTS value: comma-separated entries "host" or "host:port", spaces
 * around entries ignored. Bad entries (bad name, port not 1..65535, empty) are skipped
 * and counted in *nbad (may be NULL); entries past AOR_HOSTS_MAX are counted there
 * too. An empty or all-bad spec gives an empty list. A name may appear with several
 * ports (one entry each); an exact duplicate (same name and port) is kept once.
 * Returns a new list (free with aor_hostlist_free) or NULL on allocation failure. */
aor_hostlist *aor_hostlist_parse(const char *spec, int *nbad);

/* A new empty list (free with aor_hostlist_free), or NULL on allocation failure. */
aor_hostlist *aor_hostlist_new(void);

/* Adds name (namelen bytes, normalised here) with extra port (0 or 1..65535).
 * The same name and port already on the list is not added again. Returns 0, or -1
 * with errno EINVAL (bad name or port), ENOMEM, or ENOSPC (AOR_HOSTS_MAX reached). */
int aor_hostlist_add(aor_hostlist *l, const char *name, size_t namelen, int port);

/* Frees a list; NULL is fine. */
void aor_hostlist_free(aor_hostlist *l);

/* Number of entries. */
size_t aor_hostlist_count(const aor_hostlist *l);

/* Name (normalised) of entry i < count; the string lives as long as the list. */
const char *aor_hostlist_name(const aor_hostlist *l, size_t i);

/* Extra redirect port of entry i (from "host:port"), or 0 when only 443 applies. */
int aor_hostlist_port(const aor_hostlist *l, size_t i);

/* Index of the first entry named name (any case, optional trailing dot; namelen bytes,
 * no NUL needed), or -1 when the name is not on the list. l may be NULL (-1). */
int aor_hostlist_find(const aor_hostlist *l, const char *name, size_t namelen);

/* 1 when some entry named name (as for aor_hostlist_find) has this port (1..65535);
 * 0 otherwise or when l is NULL. */
int aor_hostlist_has_port(const aor_hostlist *l, const char *name, size_t namelen, int port);

#endif
