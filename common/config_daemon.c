/* Lenient read of the [daemon] addresses for the `aor` command: a config file with errors
 * elsewhere (an unset key variable in the shell that runs `aor status`, a typo in a
 * provider) must not send the command to the default port of someone else's daemon.
 * The file goes through the loader's own parser (config_parse.c), so `socket` and
 * `listen` are read exactly as aord reads them (quotes, `~/` and paths relative to the
 * file's directory, `localhost` in listen); its errors are ignored. */
#include "config_int.h"
#include "paths.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* The text of the file at path (malloc'd, *len bytes), or NULL when it cannot be read,
 * is not a regular file or is too large: then the defaults apply. */
static char *read_text(const char *path, size_t *len) {
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK); /* a FIFO: no hang */
    if (fd < 0)
        return NULL;
    struct stat st;
    char *text = NULL;
    if (fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && st.st_size <= AOR_CFG_FILE_MAX &&
        aor_cfg_read_fd(fd, (size_t)st.st_size, &text, len) != 0)
        text = NULL;
    close(fd);
    return text;
}

/* Parses text into cfg (errors ignored: lenient by design), paths relative to the
 * directory of path. Returns 0, or -1 (ENOMEM). */
static int parse_text(aor_config *cfg, const char *path, const char *text, size_t len) {
    const char *slash = strrchr(path, '/');
    char *dir = NULL;
    if (slash) {
        dir = slash == path ? strdup("/") : strndup(path, (size_t)(slash - path));
        if (!dir)
            return -1;
    }
    aor_cfg_errs errs = {0};
    aor_cfg_parse_ctx c = {
        .cfg = cfg, .errs = &errs, .dir = dir, .text = text, .len = len, .cur = -1};
    int r = aor_cfg_parse(&c) == 0 && !errs.oom ? 0 : -1;
    aor_cfg_parse_free(&c);
    aor_cfg_errs_free(&errs);
    free(dir);
    return r;
}

int aor_config_daemon_addrs(const char *path, char **socket_path, char **listen) {
    char *owned = NULL, *text = NULL;
    size_t len = 0;
    aor_cfg_errs errs = {0};
    int r = -1;
    *socket_path = NULL;
    *listen = NULL;
    aor_config *cfg = calloc(1, sizeof *cfg);
    if (!cfg)
        return -1;
    cfg->listen = strdup("127.0.0.1:8787");
    if (!cfg->listen)
        goto out;
    if (!path || !*path)
        path = getenv("AOR_CONFIG");
    if (!path || !*path) {
        char *dir = aor_path_config_dir();
        owned = dir ? aor_path_join(dir, "aor.ini") : NULL;
        free(dir);
        path = owned;
    }
    if (path)
        text = read_text(path, &len);
    if (text && parse_text(cfg, path, text, len) < 0)
        goto out;
    /* $AOR_SOCKET, else the file's socket, else the default; its errors are ignored too */
    if (aor_cfg_default_paths(cfg, &errs) < 0 || errs.oom || !cfg->socket_path)
        goto out;
    *socket_path = cfg->socket_path;
    *listen = cfg->listen; /* NULL: listen = off */
    cfg->socket_path = NULL;
    cfg->listen = NULL;
    r = 0;
out:
    if (text) /* an inline secret may have been written into the file */
        explicit_bzero(text, len);
    free(text);
    free(owned);
    aor_cfg_errs_free(&errs);
    aor_config_free(cfg);
    if (r < 0)
        errno = ENOMEM;
    return r;
}
