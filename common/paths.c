/* Per-user file places (spec §7, §9). See paths.h. */
#include "paths.h"

#include <errno.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define HOME_BUF_MAX (1024 * 1024) /* cap for the getpwuid_r buffer, bytes */

static int absolute(const char *p) {
    return p != NULL && p[0] == '/';
}

char *aor_path_join(const char *dir, const char *name) {
    size_t dl = strlen(dir);
    int slash = dl > 0 && dir[dl - 1] == '/';
    char *out = NULL;
    if (asprintf(&out, "%s%s%s", dir, slash ? "" : "/", name) < 0) {
        errno = ENOMEM;
        return NULL;
    }
    return out;
}

char *aor_path_xdg_dir(const char *xdg, const char *home, const char *home_rel) {
    char *out = NULL;
    int n;
    if (absolute(xdg))
        n = asprintf(&out, "%s/aor", xdg);
    else if (absolute(home))
        n = asprintf(&out, "%s/%s/aor", home, home_rel);
    else {
        errno = ENOENT;
        return NULL;
    }
    if (n < 0) {
        errno = ENOMEM;
        return NULL;
    }
    return out;
}

char *aor_path_socket_for(const char *aor_socket, const char *runtime_dir, unsigned long uid) {
    char *out = NULL;
    int n;
    if (aor_socket != NULL && aor_socket[0] != '\0')
        n = asprintf(&out, "%s", aor_socket);
    else if (absolute(runtime_dir))
        n = asprintf(&out, "%s/aor/aor.sock", runtime_dir);
    else
        n = asprintf(&out, "/tmp/aor-%lu/aor.sock", uid);
    if (n < 0) {
        errno = ENOMEM;
        return NULL;
    }
    return out;
}

char *aor_path_home(void) {
    const char *h = getenv("HOME");
    if (absolute(h)) {
        char *out = strdup(h);
        if (!out)
            errno = ENOMEM;
        return out;
    }
    long sz = sysconf(_SC_GETPW_R_SIZE_MAX);
    size_t bufsz = sz > 0 && sz < HOME_BUF_MAX ? (size_t)sz : 16384;
    char *buf = malloc(bufsz);
    if (!buf) {
        errno = ENOMEM;
        return NULL;
    }
    struct passwd pw, *res = NULL;
    char *home = NULL;
    if (getpwuid_r(getuid(), &pw, buf, bufsz, &res) == 0 && res && absolute(res->pw_dir)) {
        home = strdup(res->pw_dir);
        if (!home)
            errno = ENOMEM;
    } else {
        errno = ENOENT;
    }
    free(buf);
    return home;
}

/* XDG variable `var` when absolute, else home + home_rel, then "/aor" when with_aor. */
static char *xdg_from_env(const char *var, const char *home_rel, int with_aor) {
    const char *x = getenv(var);
    char *home = NULL;
    if (!absolute(x)) {
        home = aor_path_home();
        if (!home)
            return NULL;
    }
    char *dir = aor_path_xdg_dir(x, home, home_rel);
    free(home);
    if (!dir || with_aor)
        return dir;
    /* Strip the "/aor" that aor_path_xdg_dir appended. */
    dir[strlen(dir) - 4] = '\0';
    return dir;
}

char *aor_path_state_dir(void) {
    return xdg_from_env("XDG_STATE_HOME", ".local/state", 1);
}

char *aor_path_data_dir(void) {
    return xdg_from_env("XDG_DATA_HOME", ".local/share", 1);
}

char *aor_path_config_dir(void) {
    return xdg_from_env("XDG_CONFIG_HOME", ".config", 1);
}

char *aor_path_config_home(void) {
    return xdg_from_env("XDG_CONFIG_HOME", ".config", 0);
}

char *aor_path_socket(void) {
    return aor_path_socket_for(getenv("AOR_SOCKET"), getenv("XDG_RUNTIME_DIR"),
                               (unsigned long)getuid());
}
