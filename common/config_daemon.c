/* Lenient read of the [daemon] addresses for the `aor` command: a config file with errors
 * elsewhere (an unset key variable in the shell that runs `aor status`, a typo in a
 * provider) must not send the command to the default port of someone else's daemon. */
#include "config.h"
#include "paths.h"

#include <ini.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

typedef struct {
    char *socket;
    char *listen;
    int oom;
} daemon_addrs;

static int on_value(void *user, const char *section, const char *name, const char *value) {
    daemon_addrs *a = user;
    if (strcasecmp(section, "daemon") != 0)
        return 1;
    char **slot = strcasecmp(name, "socket") == 0   ? &a->socket
                  : strcasecmp(name, "listen") == 0 ? &a->listen
                                                    : NULL;
    if (!slot)
        return 1;
    free(*slot);
    *slot = strdup(value);
    if (!*slot)
        a->oom = 1;
    return 1;
}

int aor_config_daemon_addrs(const char *path, char **socket_path, char **listen) {
    daemon_addrs a = {NULL, NULL, 0};
    char *owned = NULL;
    *socket_path = NULL;
    *listen = NULL;
    if (!path || !*path)
        path = getenv("AOR_CONFIG");
    if (!path || !*path) {
        char *dir = aor_path_config_dir();
        owned = dir ? aor_path_join(dir, "aor.ini") : NULL;
        free(dir);
        path = owned;
    }
    if (path)
        ini_parse(path, on_value, &a); /* errors ignored: lenient by design */
    free(owned);
    const char *env_sock = getenv("AOR_SOCKET");
    if (env_sock && *env_sock) {
        free(a.socket);
        a.socket = strdup(env_sock);
    } else if (!a.socket) {
        a.socket = aor_path_socket();
    }
    if (!a.listen) {
        a.listen = strdup("127.0.0.1:8787");
    } else if (strcasecmp(a.listen, "off") == 0) {
        free(a.listen);
        a.listen = NULL;
    } else if (strncasecmp(a.listen, "localhost:", 10) == 0) {
        char *l = NULL;
        if (asprintf(&l, "127.0.0.1:%s", a.listen + 10) < 0)
            l = NULL;
        free(a.listen);
        a.listen = l;
        if (!l)
            a.oom = 1;
    }
    if (a.oom || !a.socket) {
        free(a.socket);
        free(a.listen);
        return -1;
    }
    *socket_path = a.socket;
    *listen = a.listen;
    return 0;
}
