/* Per-user file places (spec §7, §9). See paths.h. */
#include "paths.h"

#include <errno.h>
#include <fcntl.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <sys/un.h>
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

/* ---- read-only checks (spec §7) ------------------------------------------------------- */

#define INI_READ_MAX (1024 * 1024) /* bytes of a config file aor_path_ini_line reads */
#define HOSTS_MAGIC "aor-hosts "   /* first bytes of aord's published address set */

/* "<label> <dir>: " as a malloc'd prefix; NULL on ENOMEM. */
static char *dir_prefix(const char *label, const char *dir) {
    char *out = NULL;
    if (asprintf(&out, "%s%s%s: ", label ? label : "", label ? " " : "", dir) < 0) {
        errno = ENOMEM;
        return NULL;
    }
    return out;
}

/* aor_path_dir_problem, with the mode checked only when check_mode. */
static int dir_check(const char *dir, const char *label, const char *owner_fix,
                     const char *mode_fix, int check_mode, char **why) {
    *why = NULL;
    struct stat st;
    int bad_stat = stat(dir, &st) < 0;
    int saved = errno;
    if (bad_stat && saved == ENOENT)
        return 1;
    if (!bad_stat && S_ISDIR(st.st_mode) && st.st_uid == geteuid() &&
        (!check_mode || !(st.st_mode & 022)))
        return 0;
    char *pre = dir_prefix(label, dir);
    if (!pre)
        return -1;
    int n;
    if (bad_stat)
        n = asprintf(why, "%scannot stat it: %s", pre, strerror(saved));
    else if (!S_ISDIR(st.st_mode))
        n = asprintf(why, "%snot a directory", pre);
    else if (st.st_uid != geteuid())
        n = asprintf(why, "%sowned by uid %u, not by you (uid %u)%s%s", pre, (unsigned)st.st_uid,
                     (unsigned)geteuid(), owner_fix ? "; " : "", owner_fix ? owner_fix : "");
    else
        n = asprintf(why, "%swritable by group or others (mode %04o)%s%s", pre,
                     (unsigned)(st.st_mode & 07777), mode_fix ? "; " : "",
                     mode_fix ? mode_fix : "");
    free(pre);
    if (n < 0) {
        *why = NULL;
        errno = ENOMEM;
    }
    return -1;
}

int aor_path_dir_problem(const char *dir, const char *label, const char *owner_fix,
                         const char *mode_fix, char **why) {
    return dir_check(dir, label, owner_fix, mode_fix, 1, why);
}

/* The directory part of path ("." without a slash, "/" for "/x"); NULL on ENOMEM. */
static char *dir_part(const char *path) {
    const char *slash = strrchr(path, '/');
    char *out = !slash          ? strdup(".")
                : slash == path ? strdup("/")
                                : strndup(path, (size_t)(slash - path));
    if (!out)
        errno = ENOMEM;
    return out;
}

int aor_path_is_default_socket_dir(const char *dir) {
    /* NULL: the /tmp/aor-<uid> fallback (also what a relative XDG_RUNTIME_DIR gives). */
    const char *bases[2] = {getenv("XDG_RUNTIME_DIR"), NULL};
    int yes = 0;
    for (size_t i = 0; i < 2 && !yes; i++) {
        char *sock = aor_path_socket_for(NULL, bases[i], (unsigned long)getuid());
        char *d = sock ? dir_part(sock) : NULL;
        yes = d && strcmp(d, dir) == 0;
        free(d);
        free(sock);
    }
    return yes;
}

int aor_path_hosts_is_ours(const char *path) {
    struct stat st;
    if (lstat(path, &st) < 0)
        return -1;
    if (!S_ISREG(st.st_mode))
        return 0;
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
    if (fd < 0)
        return 0;
    char head[sizeof HOSTS_MAGIC - 1];
    size_t got = 0;
    while (got < sizeof head) {
        ssize_t n = read(fd, head + got, sizeof head - got);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            break;
        got += (size_t)n;
    }
    close(fd);
    return got == sizeof head && memcmp(head, HOSTS_MAGIC, sizeof head) == 0;
}

/* The socket directory's part of aor_path_socket_problem. 0, or -1 with *why. */
static int socket_dir_problem(const char *dir, char **why) {
    static const char own_dir[] = "choose a socket in a directory of your own";
    *why = NULL;
    if (aor_path_is_default_socket_dir(dir)) {
        /* aord tightens its default directory to 0700 (no mode problem), but opens it
         * with O_NOFOLLOW and checks its owner. */
        struct stat st;
        if (lstat(dir, &st) == 0 && S_ISLNK(st.st_mode)) {
            if (asprintf(why, "socket directory %s: cannot open it: it is a symbolic link", dir) <
                0) {
                *why = NULL;
                errno = ENOMEM;
            }
            return -1;
        }
        return dir_check(dir, "socket directory", own_dir, NULL, 0, why) < 0 ? -1 : 0;
    }
    char *fix = NULL;
    if (asprintf(&fix, "chmod 700 it or %s", own_dir) < 0) {
        errno = ENOMEM;
        return -1;
    }
    int r = dir_check(dir, "socket directory", own_dir, fix, 1, why);
    free(fix);
    return r < 0 ? -1 : 0;
}

int aor_path_socket_problem(const char *sock, char **why) {
    *why = NULL;
    char *dir = NULL, *hosts = NULL;
    int rc = -1, n = 0;
    struct stat st;
    if (sock[0] != '/') {
        n = asprintf(why,
                     "socket path %s is not absolute: aord would make the socket, and the "
                     "published hosts file, in its own working directory, where programs "
                     "started in another directory do not look; use an absolute path",
                     sock);
        goto out;
    }
    if (strlen(sock) >= sizeof(((struct sockaddr_un *)0)->sun_path)) {
        /* as the config loader says it; doctor said "ok" after it (QA) */
        n = asprintf(why,
                     "socket path %s is longer than %zu bytes, the limit of a Unix socket "
                     "address; set AOR_SOCKET or `socket` to a shorter path",
                     sock, sizeof(((struct sockaddr_un *)0)->sun_path) - 1);
        goto out;
    }
    dir = dir_part(sock);
    if (!dir)
        goto out;
    if (socket_dir_problem(dir, why) < 0)
        goto out;
    if (lstat(sock, &st) == 0 && !S_ISSOCK(st.st_mode)) {
        n = asprintf(why,
                     "socket %s: the path exists and is not a socket; refusing to replace it "
                     "(remove it or choose another socket path)",
                     sock);
        goto out;
    }
    hosts = aor_path_join(dir, "hosts");
    if (!hosts)
        goto out;
    if (aor_path_hosts_is_ours(hosts) == 0) {
        n = asprintf(why,
                     "%s exists and is not aord's published address set (no \"aor-hosts\" "
                     "header); refusing to overwrite it: choose a socket in a directory of its "
                     "own",
                     hosts);
        goto out;
    }
    rc = 0;
out:
    if (n < 0) {
        *why = NULL;
        errno = ENOMEM;
    }
    free(dir);
    free(hosts);
    return rc;
}

int aor_path_config_socket_problem(const char *socket_path, const char *config_file, int full,
                                   char **why) {
    *why = NULL;
    char *what = NULL;
    /* A relative path is the first problem aor_path_socket_problem reports. */
    if ((!full && socket_path[0] == '/') || aor_path_socket_problem(socket_path, &what) == 0)
        return 0;
    if (!what)
        return -1;
    const char *env = getenv("AOR_SOCKET");
    size_t line = config_file ? aor_path_ini_line(config_file, "daemon", "socket") : 0;
    int n;
    if (env && *env)
        n = asprintf(why, "AOR_SOCKET=%s: %s", env, what);
    else if (line)
        n = asprintf(why, "%s:%zu: socket = %s: %s", config_file, line, socket_path, what);
    else
        n = asprintf(why, "%s", what);
    free(what);
    if (n < 0) {
        *why = NULL;
        errno = ENOMEM;
    }
    return -1;
}

/* s without leading and trailing blanks: *len bytes from the returned pointer. */
static const char *trim(const char *s, size_t *len) {
    size_t n = *len;
    while (n && (*s == ' ' || *s == '\t')) {
        s++;
        n--;
    }
    while (n && (s[n - 1] == ' ' || s[n - 1] == '\t' || s[n - 1] == '\r'))
        n--;
    *len = n;
    return s;
}

size_t aor_path_ini_line(const char *path, const char *section, const char *key) {
    FILE *f = fopen(path, "re");
    if (!f)
        return 0;
    char *text = malloc(INI_READ_MAX + 1);
    size_t len = text ? fread(text, 1, INI_READ_MAX, f) : 0;
    fclose(f);
    if (!text)
        return 0;
    text[len] = '\0';
    size_t found = 0, lineno = 0, sl = strlen(section), kl = strlen(key);
    int in_section = 0;
    const char *p = text;
    if (len >= 3 && memcmp(p, "\xEF\xBB\xBF", 3) == 0)
        p += 3; /* a UTF-8 BOM, as the loader skips it (QA) */
    while (*p && !found) {
        const char *nl = strchr(p, '\n');
        size_t n = nl ? (size_t)(nl - p) : strlen(p);
        const char *line = trim(p, &n);
        lineno++;
        p = nl ? nl + 1 : p + strlen(p);
        if (n == 0 || line[0] == ';' || line[0] == '#')
            continue;
        if (line[0] == '[') {
            const char *end = memchr(line, ']', n);
            size_t inner = end ? (size_t)(end - line - 1) : 0;
            const char *name = trim(line + 1, &inner);
            /* section types and option names are case-insensitive, as for the loader */
            in_section = end && inner == sl && strncasecmp(name, section, sl) == 0;
            continue;
        }
        size_t sep = strcspn(line, "=:");
        if (!in_section || sep >= n)
            continue;
        const char *name = trim(line, &sep);
        if (sep == kl && strncasecmp(name, key, kl) == 0)
            found = lineno;
    }
    free(text);
    return found;
}
