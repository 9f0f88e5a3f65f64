/* The hosts every shim intercepts without configuration, and how many intercepted
 * (host, port) entries a shim keeps. Shared by libaor.so (shim/hostlist.c), aord (the
 * published hosts file, TLS leaves) and the config check. Source: spec §2. */
#ifndef AOR_BUILTIN_HOSTS_H
#define AOR_BUILTIN_HOSTS_H

/* Intercepted (host, port) entries a shim keeps, from AOR_HOSTS or from the hosts file
 * aord publishes (the built-in hosts included): the list is searched linearly once the
 * shim's name filter lets a name through, and built in every preloaded process. A
 * config whose hosts need more is refused (aor_config_load). */
#define AOR_HOSTS_MAX 256

/* The built-in list of well-known provider API hosts, lower case, all on port 443
 * (NULL-terminated; static storage). */
extern const char *const aor_builtin_hosts[];

#endif
