#include "curl_api.h"

#include "log.h"

#include <dlfcn.h>
#include <stddef.h>

static aor_curl_api api;
static int state; /* 0 not tried, 1 loaded, -1 failed */

/* dlsym of name into *slot (a function pointer of the table). 0, or -1 when missing. */
static int sym(void *lib, const char *name, void *slot) {
    void *f = dlsym(lib, name);
    if (!f) {
        aor_error("libcurl: %s is missing in libcurl.so.4", name);
        return -1;
    }
    /* POSIX: a function's address from dlsym may be stored through a void *. */
    *(void **)slot = f;
    return 0;
}

const aor_curl_api *aor_curl_api_get(void) {
    if (state)
        return state > 0 ? &api : NULL;
    state = -1;
    void *lib = dlopen("libcurl.so.4", RTLD_NOW | RTLD_LOCAL);
    if (!lib) {
        aor_error("libcurl could not be loaded (needed for upstreams reached through a "
                  "proxy): %s; install libcurl4 (scripts/install-deps)",
                  dlerror());
        return NULL;
    }
    CURLcode (*global_init)(long) = NULL;
    if (sym(lib, "curl_global_init", &global_init) ||
        sym(lib, "curl_multi_init", &api.multi_init) ||
        sym(lib, "curl_multi_cleanup", &api.multi_cleanup) ||
        sym(lib, "curl_multi_setopt", &api.multi_setopt) ||
        sym(lib, "curl_multi_add_handle", &api.multi_add_handle) ||
        sym(lib, "curl_multi_remove_handle", &api.multi_remove_handle) ||
        sym(lib, "curl_multi_socket_action", &api.multi_socket_action) ||
        sym(lib, "curl_multi_assign", &api.multi_assign) ||
        sym(lib, "curl_multi_info_read", &api.multi_info_read) ||
        sym(lib, "curl_easy_init", &api.easy_init) ||
        sym(lib, "curl_easy_cleanup", &api.easy_cleanup) ||
        sym(lib, "curl_easy_reset", &api.easy_reset) ||
        sym(lib, "curl_easy_setopt", &api.easy_setopt) ||
        sym(lib, "curl_easy_getinfo", &api.easy_getinfo) ||
        sym(lib, "curl_easy_pause", &api.easy_pause) ||
        sym(lib, "curl_easy_strerror", &api.easy_strerror) ||
        sym(lib, "curl_slist_append", &api.slist_append) ||
        sym(lib, "curl_slist_free_all", &api.slist_free_all))
        return NULL; /* the library stays loaded: harmless */
    if (global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK) {
        aor_error("libcurl initialisation failed");
        return NULL;
    }
    state = 1;
    return &api;
}
