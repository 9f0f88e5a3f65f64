/* libcurl, loaded when first needed (docs/architecture.md "Upstream",
 * docs/performance.md "Idle memory"). aord forwards through its direct HTTP/1.1 path
 * unless a proxy variable is set (upstream.h), so it does not link libcurl: loading
 * libcurl and everything it depends on (GnuTLS, nettle, p11-kit, Kerberos, LDAP, SSH,
 * ...) made up a quarter of an idle aord's resident memory. The first call dlopen()s
 * libcurl.so.4 and runs curl_global_init; the functions aord uses are then reached
 * through the table. */
#ifndef AOR_CURL_API_H
#define AOR_CURL_API_H

#include <curl/curl.h>

typedef struct {
    CURLM *(*multi_init)(void);
    CURLMcode (*multi_cleanup)(CURLM *);
    CURLMcode (*multi_setopt)(CURLM *, CURLMoption, ...);
    CURLMcode (*multi_add_handle)(CURLM *, CURL *);
    CURLMcode (*multi_remove_handle)(CURLM *, CURL *);
    CURLMcode (*multi_socket_action)(CURLM *, curl_socket_t, int, int *);
    CURLMcode (*multi_assign)(CURLM *, curl_socket_t, void *);
    CURLMsg *(*multi_info_read)(CURLM *, int *);
    CURL *(*easy_init)(void);
    void (*easy_cleanup)(CURL *);
    void (*easy_reset)(CURL *);
    CURLcode (*easy_setopt)(CURL *, CURLoption, ...);
    CURLcode (*easy_getinfo)(CURL *, CURLINFO, ...);
    CURLcode (*easy_pause)(CURL *, int);
    const char *(*easy_strerror)(CURLcode);
    struct curl_slist *(*slist_append)(struct curl_slist *, const char *);
    void (*slist_free_all)(struct curl_slist *);
} aor_curl_api;

/* The libcurl functions, loading libcurl.so.4 on the first call (disk I/O once; call it
 * at startup when a proxy variable is set). Returns NULL when libcurl cannot be loaded
 * or initialised; the reason is logged once, and later calls return NULL again without
 * retrying. The table lives until the process ends. Not thread-safe (aord has one
 * thread). */
const aor_curl_api *aor_curl_api_get(void);

#endif
