/* aor install-service: run aord as a per-user service (spec §1: "run by hand, by `aor run`,
 * or under systemd --user / launchd"). Writes the unit from the templates below (the
 * same text as scripts/aord.service and scripts/aord.plist, with the absolute path of
 * aord filled in, followed by `--config FILE` when the user chose a configuration file,
 * and the XDG base directories of this environment), then enables it when the service
 * manager is reachable. The configuration is validated first (as check-config, keys'
 * variables optional): a unit for one aord refuses would fail for good. */
#include "cli.h"
#include "paths.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#define PLACEHOLDER "@AORD@"
#define ENV_FILE_LINE "EnvironmentFile=-%h/.config/aor/env\n" /* the default's line */
#define LAUNCHD_LABEL "dev.aor.aord"
#define PLIST_ENV_BEFORE "    <key>RunAtLoad</key>\n" /* EnvironmentVariables go here */
#define BACKUP_SUFFIX ".bak"

/* Keep these two equal to scripts/aord.service and scripts/aord.plist (tests/e2e/test_cli.py
 * compares them). */
static const char systemd_template[] =
    "# aord, the aor routing daemon, as a systemd user service.\n"
    "# `aor install-service` writes this file to $XDG_CONFIG_HOME/systemd/user/aord.service\n"
    "# (~/.config/systemd/user/ when XDG_CONFIG_HOME is unset) with ExecStart set to the\n"
    "# absolute path of aord (see docs/cli.md), then runs\n"
    "#   systemctl --user daemon-reload && systemctl --user enable --now aord\n"
    "[Unit]\n"
    "Description=aor routing daemon (LLM API traffic: backoff, fallback, key rotation)\n"
    "\n"
    "[Service]\n"
    "# aord says \"READY=1\" on $NOTIFY_SOCKET once it serves: `systemctl --user start`\n"
    "# returns then, and no reload (SIGHUP) reaches it before it can take one.\n"
    "Type=notify\n"
    "# aord reads API keys from its environment, and a user service does not see your\n"
    "# shell's variables: put them in this optional file (NAME=value lines, mode 0600),\n"
    "# or name a file with `env_file` in [daemon] of aor.ini. With XDG_CONFIG_HOME set\n"
    "# elsewhere, install-service writes $XDG_CONFIG_HOME/aor/env here instead.\n" ENV_FILE_LINE
    "ExecStart=@AORD@\n"
    "ExecReload=/bin/kill -HUP $MAINPID\n"
    "Restart=on-failure\n"
    "RestartSec=2\n"
    "# Exit status 2 is a configuration error, 3 another aord holding the state file:\n"
    "# restarting will not fix either.\n"
    "RestartPreventExitStatus=2 3\n"
    "\n"
    "[Install]\n"
    "WantedBy=default.target\n";

static const char launchd_template[] =
    "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
    "<!DOCTYPE plist PUBLIC \"-//Apple//DTD PLIST 1.0//EN\" "
    "\"http://www.apple.com/DTDs/PropertyList-1.0.dtd\">\n"
    "<!-- aord, the aor routing daemon, as a launchd user agent.\n"
    "     `aor install-service` writes this file to ~/Library/LaunchAgents/dev.aor.aord.plist\n"
    "     with the program path set to the absolute path of aord (see docs/cli.md), then runs\n"
    "       launchctl bootstrap gui/$(id -u) ~/Library/LaunchAgents/dev.aor.aord.plist\n"
    "     aord reads API keys from its environment: name a file with `env_file` in [daemon]\n"
    "     of aor.ini (launchd agents do not see your shell's variables). -->\n"
    "<plist version=\"1.0\">\n"
    "<dict>\n"
    "    <key>Label</key>\n"
    "    <string>dev.aor.aord</string>\n"
    "    <key>ProgramArguments</key>\n"
    "    <array>\n"
    "        <string>@AORD@</string>\n"
    "    </array>\n"
    "    <key>RunAtLoad</key>\n"
    "    <true/>\n"
    "    <key>KeepAlive</key>\n"
    "    <dict>\n"
    "        <key>SuccessfulExit</key>\n"
    "        <false/>\n"
    "    </dict>\n"
    "    <key>ProcessType</key>\n"
    "    <string>Background</string>\n"
    "</dict>\n"
    "</plist>\n";

/* Appends s to the growing buffer; -1 on ENOMEM. */
static int put(char **buf, size_t *len, const char *s, size_t n) {
    char *nb = realloc(*buf, *len + n + 1);
    if (!nb)
        return -1;
    memcpy(nb + *len, s, n);
    *len += n;
    nb[*len] = '\0';
    *buf = nb;
    return 0;
}

static int put_str(char **buf, size_t *len, const char *s) {
    return put(buf, len, s, strlen(s));
}

/* One systemd word: '%' doubled, '$' doubled when dollar (ExecStart expands $VAR; an
 * Environment= assignment does not), and in double quotes (with \ and " escaped) when it
 * holds whitespace or quotes (systemd.service(5) "Command lines", systemd.exec(5)
 * "Environment=", systemd.unit(5) "Specifiers"). */
static int put_systemd_word(char **buf, size_t *len, const char *p, int dollar) {
    int quote = strpbrk(p, " \t\"'\\") != NULL;
    if (quote && put(buf, len, "\"", 1) < 0)
        return -1;
    for (; *p; p++) {
        const char *s = p;
        size_t n = 1;
        if (*p == '%')
            s = "%%", n = 2;
        else if (*p == '$' && dollar)
            s = "$$", n = 2;
        else if (quote && (*p == '"' || *p == '\\'))
            s = *p == '"' ? "\\\"" : "\\\\", n = 2;
        if (put(buf, len, s, n) < 0)
            return -1;
    }
    return quote ? put(buf, len, "\"", 1) : 0;
}

/* The path as systemd wants it in ExecStart (put_systemd_word with '$' doubled). */
static int put_systemd_path(char **buf, size_t *len, const char *p) {
    return put_systemd_word(buf, len, p, 1);
}

/* XML character data escaping for the plist. */
static int put_xml(char **buf, size_t *len, const char *p) {
    for (; *p; p++) {
        const char *s = p;
        size_t n = 1;
        switch (*p) {
        case '&':
            s = "&amp;", n = 5;
            break;
        case '<':
            s = "&lt;", n = 4;
            break;
        case '>':
            s = "&gt;", n = 4;
            break;
        case '"':
            s = "&quot;", n = 6;
            break;
        case '\'':
            s = "&apos;", n = 6;
            break;
        }
        if (put(buf, len, s, n) < 0)
            return -1;
    }
    return 0;
}

/* The XDG base directories aord takes its files from (spec §9): config, state (aor.db,
 * admin token, log), data (the CA). A service manager does not have the shell's. */
static const struct {
    const char *name;
    const char *home_rel; /* the default, under the home directory */
} xdg_vars[] = {
    {"XDG_CONFIG_HOME", ".config"},
    {"XDG_STATE_HOME", ".local/state"},
    {"XDG_DATA_HOME", ".local/share"},
    /* The socket's directory: systemd --user sets /run/user/UID itself, launchd nothing
     * (aord then uses /tmp/aor-UID); a shell's other one is carried (fresh-user pass: the
     * service's socket was not where aor and the shim of that shell look). */
    {"XDG_RUNTIME_DIR", NULL},
    /* The socket itself, when the shell names it (spec §9): it has no default to compare
     * with, so it is carried whenever set (QA: the service's aord listened on the default
     * socket while every `aor run` of that shell looked at AOR_SOCKET). */
    {"AOR_SOCKET", NULL},
};

/* Whether the service needs $name from this environment to find the directory aor uses:
 * 1 (*value points into the environment) when it is set to an absolute path (the XDG
 * rule: anything else is ignored, by aord too) that is not the default home/home_rel
 * (home_rel NULL: XDG_RUNTIME_DIR, whose default is /run/user/UID under systemd and none
 * under launchd; AOR_SOCKET, which has none)
 * (compared as text without trailing slashes, then as the same directory); 0 when the
 * service finds the same directory without it; -1 after printing (control characters:
 * no unit can carry them, ENOMEM). */
static int xdg_elsewhere(int launchd, const char *name, const char *home_rel, const char **value) {
    const char *v = getenv(name);
    *value = NULL;
    if (!v || v[0] != '/')
        return 0;
    char *home = home_rel ? aor_path_home() : NULL;
    char *dflt = home ? aor_path_join(home, home_rel) : NULL;
    int rc = 1;
    int no_default = strcmp(name, "AOR_SOCKET") == 0;
    if (!home_rel && !launchd && !no_default) { /* XDG_RUNTIME_DIR: what systemd --user sets */
        char run[64];
        snprintf(run, sizeof run, "/run/user/%lu", (unsigned long)getuid());
        dflt = strdup(run);
        if (!dflt) {
            fprintf(stderr, "aor: out of memory\n");
            rc = -1;
            goto out;
        }
    }
    if (home && !dflt) {
        fprintf(stderr, "aor: out of memory\n");
        rc = -1;
        goto out;
    }
    size_t vl = strlen(v), dl = dflt ? strlen(dflt) : 0;
    while (vl > 1 && v[vl - 1] == '/')
        vl--;
    struct stat a, b;
    if (!no_default && dflt &&
        ((vl == dl && memcmp(v, dflt, vl) == 0) ||
         (stat(v, &a) == 0 && stat(dflt, &b) == 0 && a.st_dev == b.st_dev &&
          a.st_ino == b.st_ino))) {
        rc = 0;
        goto out;
    }
    for (const char *p = v; *p; p++) {
        if ((unsigned char)*p < 0x20 || *p == 0x7f) {
            fprintf(stderr, "aor: %s contains control characters; a service unit cannot carry it\n",
                    name);
            rc = -1;
            goto out;
        }
    }
    *value = v;
out:
    free(dflt);
    free(home);
    return rc;
}

/* The systemd EnvironmentFile line for the env file the user's aor uses: NULL for the
 * template's own (%h/.config/aor/env: XDG_CONFIG_HOME unset, or the same directory),
 * else "EnvironmentFile=-$XDG_CONFIG_HOME/aor/env\n" with '%' doubled (systemd.unit(5)
 * "Specifiers"; the rest of the value is the path as is). *out: malloc'd or NULL.
 * Returns 0, or -1 after printing (a path with control characters, ENOMEM). */
static int env_file_line(char **out) {
    *out = NULL;
    const char *conf = NULL;
    char *dir = NULL, *line = NULL;
    size_t len = 0;
    int r = xdg_elsewhere(0, "XDG_CONFIG_HOME", ".config", &conf);
    if (r <= 0)
        return r;
    dir = aor_path_config_dir();
    if (!dir)
        goto oom;
    static const char head[] = "EnvironmentFile=-";
    if (put(&line, &len, head, sizeof head - 1) < 0)
        goto oom;
    for (const char *p = dir; *p; p++)
        if (put(&line, &len, *p == '%' ? "%%" : p, *p == '%' ? 2 : 1) < 0)
            goto oom;
    if (put(&line, &len, "/env\n", 5) < 0)
        goto oom;
    free(dir);
    *out = line;
    return 0;
oom:
    fprintf(stderr, "aor: out of memory\n");
    free(line);
    free(dir);
    return -1;
}

/* 1 when the text of an env file (VAR=value lines) assigns name. */
static int env_text_sets(const char *text, const char *name) {
    size_t nl = strlen(name);
    for (const char *l = text; l && *l; l = strchr(l, '\n') ? strchr(l, '\n') + 1 : NULL) {
        l += strspn(l, " \t");
        if (strncmp(l, "export ", 7) == 0)
            l += 7 + strspn(l + 7, " \t");
        if (strncmp(l, name, nl) == 0 && (l[nl] == '=' || l[nl] == ' ' || l[nl] == '\t'))
            return 1;
    }
    return 0;
}

/* The service does not get this shell's environment: says so on stderr, naming the keys'
 * variables that neither env_file nor the service's env file ($XDG_CONFIG_HOME/aor/env)
 * sets (fresh-user pass: the unit was written, and its aord exited 2 for an unset
 * OPENAI_API_KEY, which RestartPreventExitStatus makes final). Nothing when the config
 * names an env_file (aord reads that one itself) or has no keys. */
static void note_keys_environment(const aor_config *cfg, int launchd) {
    if (!cfg || cfg->nkeys == 0 || cfg->env_file)
        return;
    char *dir = aor_path_config_dir(), *path = NULL, *text = NULL;
    if (!dir || asprintf(&path, "%s/env", dir) < 0) {
        path = NULL;
        goto out;
    }
    /* The launchd agent has no env file of its own (scripts/aord.plist): env_file only. */
    int fd = launchd ? -1 : open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
    if (fd >= 0) {
        struct stat st;
        if (fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && st.st_size < (1 << 20) &&
            (text = calloc(1, (size_t)st.st_size + 1)) != NULL &&
            read(fd, text, (size_t)st.st_size) < 0) {
            free(text);
            text = NULL;
        }
        close(fd);
    }
    int missing = 0;
    for (size_t i = 0; i < cfg->nkeys; i++) {
        const char *var = cfg->keys[i].env;
        if (!var || (text && env_text_sets(text, var)))
            continue;
        fprintf(stderr, "%s%s",
                missing++ ? ", "
                          : "aor: note: the service does not get this "
                            "shell's environment, and ",
                var);
    }
    if (missing && launchd)
        fprintf(stderr,
                " %s set nowhere it reads: name a file of NAME=value lines (mode 0600) with "
                "env_file in [daemon] of aor.ini; else the agent's aord stops at once "
                "(exit 2)\n",
                missing == 1 ? "is" : "are");
    else if (missing)
        fprintf(stderr,
                " %s set nowhere it reads: put %s in %s as NAME=value lines (mode 0600), or "
                "name a file with env_file in aor.ini; else the service's aord stops at once "
                "(exit 2)\n",
                missing == 1 ? "is" : "are", missing == 1 ? "it" : "them", path);
out:
    free(text);
    free(path);
    free(dir);
}

/* The XDG variables the service needs (xdg_elsewhere), as systemd lines
 * `Environment=NAME=value` (the assignment quoted like ExecStart's words, '$' kept: no
 * expansion there), or as the plist's EnvironmentVariables dictionary (XML-escaped).
 * *out: malloc'd, or NULL when none is needed. Returns 0, or -1 after printing. */
static int xdg_env(int launchd, char **out) {
    char *buf = NULL, *assign = NULL;
    size_t len = 0;
    int any = 0;
    *out = NULL;
    for (size_t i = 0; i < sizeof xdg_vars / sizeof xdg_vars[0]; i++) {
        const char *v = NULL;
        int r = xdg_elsewhere(launchd, xdg_vars[i].name, xdg_vars[i].home_rel, &v);
        if (r < 0)
            goto fail;
        if (r == 0)
            continue;
        if (launchd) {
            static const char head[] = "    <key>EnvironmentVariables</key>\n    <dict>\n";
            if ((!any && put_str(&buf, &len, head) < 0) ||
                put_str(&buf, &len, "        <key>") < 0 ||
                put_str(&buf, &len, xdg_vars[i].name) < 0 ||
                put_str(&buf, &len, "</key>\n        <string>") < 0 || put_xml(&buf, &len, v) < 0 ||
                put_str(&buf, &len, "</string>\n") < 0)
                goto oom;
        } else {
            if (asprintf(&assign, "%s=%s", xdg_vars[i].name, v) < 0) {
                assign = NULL;
                goto oom;
            }
            if (put_str(&buf, &len, "Environment=") < 0 ||
                put_systemd_word(&buf, &len, assign, 0) < 0 || put_str(&buf, &len, "\n") < 0)
                goto oom;
            free(assign);
            assign = NULL;
        }
        any = 1;
    }
    if (any && launchd && put_str(&buf, &len, "    </dict>\n") < 0)
        goto oom;
    *out = buf;
    return 0;
oom:
    fprintf(stderr, "aor: out of memory\n");
fail:
    free(assign);
    free(buf);
    return -1;
}

/* Appends the template from *tpl up to `at` and moves *tpl there. -1 on ENOMEM. */
static int put_upto(char **buf, size_t *len, const char **tpl, const char *at) {
    if (put(buf, len, *tpl, (size_t)(at - *tpl)) < 0)
        return -1;
    *tpl = at;
    return 0;
}

/* The template with its placeholder replaced by aord, followed by `--config <config>`
 * when config is not NULL (ExecStart words / ProgramArguments strings); for systemd the
 * EnvironmentFile line replaced by envline when not NULL; xdgenv (xdg_env's text, or
 * NULL) after the EnvironmentFile line (systemd) or before RunAtLoad (launchd).
 * malloc'd, NULL on ENOMEM. */
static char *render(int launchd, const char *aord, const char *config, const char *envline,
                    const char *xdgenv) {
    const char *tpl = launchd ? launchd_template : systemd_template;
    const char *at = strstr(tpl, PLACEHOLDER);
    const char *ef = launchd ? NULL : strstr(tpl, ENV_FILE_LINE);
    const char *rl = launchd ? strstr(tpl, PLIST_ENV_BEFORE) : NULL;
    char *buf = NULL;
    size_t len = 0;
    static const char xml_sep[] = "</string>\n        <string>";
    /* The templates are ours: the env line comes before ExecStart, RunAtLoad after the
     * program. */
    if (!at || (launchd ? !rl || rl < at : !ef || ef > at))
        goto fail;
    if (ef) {
        if (put_upto(&buf, &len, &tpl, ef) < 0 ||
            put(&buf, &len, envline ? envline : ENV_FILE_LINE,
                strlen(envline ? envline : ENV_FILE_LINE)) < 0 ||
            (xdgenv && put(&buf, &len, xdgenv, strlen(xdgenv)) < 0))
            goto fail;
        tpl += strlen(ENV_FILE_LINE);
    }
    if (put_upto(&buf, &len, &tpl, at) < 0)
        goto fail;
    if ((launchd ? put_xml(&buf, &len, aord) : put_systemd_path(&buf, &len, aord)) < 0)
        goto fail;
    if (config && launchd &&
        (put(&buf, &len, xml_sep, strlen(xml_sep)) < 0 || put(&buf, &len, "--config", 8) < 0 ||
         put(&buf, &len, xml_sep, strlen(xml_sep)) < 0 || put_xml(&buf, &len, config) < 0))
        goto fail;
    if (config && !launchd &&
        (put(&buf, &len, " --config ", 10) < 0 || put_systemd_path(&buf, &len, config) < 0))
        goto fail;
    tpl += strlen(PLACEHOLDER);
    if (rl && (put_upto(&buf, &len, &tpl, rl) < 0 ||
               (xdgenv && put(&buf, &len, xdgenv, strlen(xdgenv)) < 0)))
        goto fail;
    if (put(&buf, &len, tpl, strlen(tpl)) < 0)
        goto fail;
    return buf;
fail:
    free(buf);
    return NULL;
}

/* When dest exists and differs from unit (the user may have edited it), copies it to
 * dest.bak (same mode; an older backup is replaced) and says so. Returns 0 (nothing to
 * keep, or kept), or -1 after printing (it cannot be read or copied: not replaced). */
static int keep_old_unit(const char *dest, const char *unit) {
    char *old = NULL, *bak = NULL;
    size_t oldlen = 0, ulen = strlen(unit);
    struct stat st;
    int rc = -1;
    if (stat(dest, &st) < 0 && errno == ENOENT)
        return 0;
    if (aor_cli_read_file(dest, AOR_CLI_FILE_MAX, &old, &oldlen) < 0) {
        fprintf(stderr, "aor: cannot read the existing %s (%s); not replacing it\n", dest,
                strerror(errno));
        return -1;
    }
    if (oldlen == ulen && memcmp(old, unit, ulen) == 0) {
        rc = 0;
        goto out;
    }
    if (asprintf(&bak, "%s" BACKUP_SUFFIX, dest) < 0) {
        bak = NULL;
        fprintf(stderr, "aor: out of memory\n");
        goto out;
    }
    if (aor_cli_write_file(bak, old, oldlen, st.st_mode & 0777) < 0) {
        fprintf(stderr, "aor: cannot keep a copy of %s as %s (%s); not replacing it\n", dest, bak,
                strerror(errno));
        goto out;
    }
    printf("%s differs from the new unit (edited?): the old one is kept as %s\n", dest, bak);
    rc = 0;
out:
    free(bak);
    free(old);
    return rc;
}

/* Runs argv with aor's stdio (quiet: stdout/stderr to /dev/null). Returns its exit
 * status, or -1 when it could not run. */
static int run_cmd(char *const argv[], int quiet) {
    fflush(NULL);
    pid_t pid = fork();
    if (pid < 0)
        return -1;
    if (pid == 0) {
        if (quiet) {
            int nul = open("/dev/null", O_RDWR | O_CLOEXEC);
            if (nul >= 0) {
                dup2(nul, 1);
                dup2(nul, 2);
            }
        }
        execvp(argv[0], argv);
        _exit(127);
    }
    int status;
    while (waitpid(pid, &status, 0) < 0)
        if (errno != EINTR)
            return -1;
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

/* 1 when process pid runs in the systemd user unit aord.service (its /proc cgroup line
 * names it): the service's own aord, not one started by hand. 0 otherwise, or when it
 * cannot be told (no /proc). */
static int in_service(pid_t pid) {
    char path[64], *text = NULL;
    size_t len = 0;
    if (pid <= 0)
        return 0;
    snprintf(path, sizeof path, "/proc/%ld/cgroup", (long)pid);
    if (aor_cli_read_file(path, 64 * 1024, &text, &len) != 0)
        return 0;
    int in = strstr(text, "/aord.service") != NULL;
    free(text);
    return in;
}

/* Destination file of the unit; malloc'd, NULL (printed) on error. */
static char *dest_path(int launchd) {
    char *base = launchd ? aor_path_home() : aor_path_config_home();
    if (!base) {
        fprintf(stderr, "aor: cannot find your %s directory: %s\n",
                launchd ? "home" : "configuration", strerror(errno));
        return NULL;
    }
    char *p = aor_path_join(base, launchd ? "Library/LaunchAgents/" LAUNCHD_LABEL ".plist"
                                          : "systemd/user/aord.service");
    free(base);
    if (!p)
        fprintf(stderr, "aor: out of memory\n");
    return p;
}

static int enable_systemd(int no_start) {
    const char *cmdline = "systemctl --user daemon-reload && systemctl --user enable --now aord";
    char *probe[] = {"systemctl", "--user", "show-environment", NULL};
    if (no_start || run_cmd(probe, 1) != 0) {
        printf("%s the service with:\n  %s\n",
               no_start ? "Start" : "systemctl --user is not available here; start", cmdline);
        return AOR_CLI_OK;
    }
    char *reload[] = {"systemctl", "--user", "daemon-reload", NULL};
    char *enable[] = {"systemctl", "--user", "enable", "--now", "aord", NULL};
    printf("running: %s\n", cmdline);
    if (run_cmd(reload, 0) != 0 || run_cmd(enable, 0) != 0) {
        fprintf(stderr, "aor: systemctl failed; see `systemctl --user status aord`\n");
        return AOR_CLI_FAIL;
    }
    printf("aord is enabled and started (`systemctl --user status aord`, logs: `journalctl "
           "--user -u aord`)\n");
    return AOR_CLI_OK;
}

static int enable_launchd(const char *dest, int no_start) {
    char domain[64];
    snprintf(domain, sizeof domain, "gui/%lu", (unsigned long)getuid());
    char *lc = aor_cli_which("launchctl");
    int have = lc != NULL;
    free(lc);
    if (no_start || !have) {
        /* quoted: a home with a space (/Users/John Smith) must paste as one word (QA) */
        printf("Start the agent with:\n  launchctl bootstrap %s ", domain);
        aor_cli_shell_quote(stdout, dest);
        printf("\n");
        return AOR_CLI_OK;
    }
    char target[128];
    snprintf(target, sizeof target, "%s/%s", domain, LAUNCHD_LABEL);
    char *bootout[] = {"launchctl", "bootout", target, NULL};
    char *bootstrap[] = {"launchctl", "bootstrap", domain, (char *)dest, NULL};
    run_cmd(bootout, 1); /* an older copy may be loaded; not an error when it is not */
    printf("running: launchctl bootstrap %s %s\n", domain, dest);
    if (run_cmd(bootstrap, 0) != 0) {
        fprintf(stderr, "aor: launchctl bootstrap failed\n");
        return AOR_CLI_FAIL;
    }
    printf("aord is loaded (`launchctl print %s`)\n", target);
    return AOR_CLI_OK;
}

/* The configuration file chosen for aor (--config, $AOR_CONFIG) as an absolute path
 * for the service, symbolic links kept (the service follows them like aor does).
 * *out: malloc'd path, or NULL when none was chosen (aord then finds the default
 * itself). Returns 0, or -1 after printing (missing file, control characters, ENOMEM). */
static int service_config(const aor_cli *c, char **out) {
    *out = NULL;
    const char *chosen = aor_cli_chosen_config(c);
    if (!chosen)
        return 0;
    for (const char *p = chosen; *p; p++) {
        if ((unsigned char)*p < 0x20 || *p == 0x7f) {
            fprintf(stderr, "aor: the configuration file name contains control characters; a "
                            "service unit cannot name it\n");
            return -1;
        }
    }
    char *abs = NULL;
    if (chosen[0] == '/') {
        abs = strdup(chosen);
    } else {
        char *cwd = getcwd(NULL, 0);
        while (chosen[0] == '.' && chosen[1] == '/') { /* "./a.ini" -> "a.ini" */
            chosen += 2;
            while (*chosen == '/')
                chosen++;
        }
        if (cwd && asprintf(&abs, "%s%s%s", cwd, strcmp(cwd, "/") ? "/" : "", chosen) < 0)
            abs = NULL;
        free(cwd);
    }
    if (!abs) {
        fprintf(stderr, "aor: cannot make the configuration path absolute: %s\n", strerror(errno));
        return -1;
    }
    struct stat st;
    const char *why = NULL;
    if (stat(abs, &st) < 0)
        why = strerror(errno);
    else if (!S_ISREG(st.st_mode))
        why = "not a regular file";
    if (why) {
        fprintf(stderr, "aor: configuration file %s: %s\n", abs, why);
        free(abs);
        return -1;
    }
    *out = abs;
    return 0;
}

int aor_cli_cmd_install_service(aor_cli *c, int argc, char **argv) {
    int print_only = 0, no_start = 0, want_systemd = 0, want_launchd = 0;
#ifdef __APPLE__
    int launchd = 1;
#else
    int launchd = 0;
#endif
    for (int i = 0; i < argc; i++) {
        int tk = aor_cli_take_config(c, argc, argv, &i);
        if (tk < 0)
            return AOR_CLI_USAGE;
        if (tk > 0)
            continue;
        if (strcmp(argv[i], "--print") == 0)
            print_only = 1;
        else if (strcmp(argv[i], "--no-start") == 0)
            no_start = 1;
        else if (strcmp(argv[i], "--systemd") == 0)
            want_systemd = 1;
        else if (strcmp(argv[i], "--launchd") == 0)
            want_launchd = 1;
        else {
            fprintf(stderr, "aor install-service: unknown argument '%s'\n", argv[i]);
            return AOR_CLI_USAGE;
        }
    }
    if (want_systemd && want_launchd) {
        fprintf(stderr, "aor install-service: --systemd and --launchd exclude each other; give "
                        "one\n");
        return AOR_CLI_USAGE;
    }
    if (want_systemd || want_launchd)
        launchd = want_launchd;
    char *config = NULL;
    if (service_config(c, &config) < 0)
        return AOR_CLI_USAGE;
    /* A unit for a configuration aord refuses would fail with status 2, which the unit's
     * RestartPreventExitStatus makes final: validate it first, as check-config does, but
     * without the keys' variables (the service gets them from its EnvironmentFile or
     * env_file, not from this shell). */
    aor_config *cfg = aor_cli_load_config_no_secrets(c);
    if (!cfg || aor_cli_check_socket(cfg, 1) < 0) {
        fprintf(stderr, "aor: no service %s: fix the configuration first (`aor check-config`)\n",
                print_only ? "printed" : "written");
        aor_config_free(cfg);
        free(config);
        return AOR_CLI_USAGE;
    }
    pid_t running = 0;
    /* launchd: no cgroup to tell its agent's aord from one started by hand; either way
     * the agent is not bootstrapped while one runs (its KeepAlive would relaunch an aord
     * that exits 3 every 10 s: review). */
    if (!print_only && aor_cli_socket_answers(cfg->socket_path, &running) &&
        (launchd || !in_service(running)))
        running = running > 0 ? running : -1;
    else
        running = 0;
    note_keys_environment(cfg, launchd);
    aor_config_free(cfg);
    int rc = AOR_CLI_FAIL;
    char *unit = NULL, *dest = NULL, *dir = NULL, *envline = NULL, *xdgenv = NULL;
    char *self = aor_cli_self_dir(c->argv0);
    char *aord = aor_cli_find_aord(self);
    if (!aord) {
        fprintf(stderr,
                "aor: cannot find aord (not in %s, not on PATH); install it first "
                "(make install)\n",
                self ? self : "the directory of aor");
        goto out;
    }
    if ((!launchd && env_file_line(&envline) < 0) || xdg_env(launchd, &xdgenv) < 0)
        goto out;
    unit = render(launchd, aord, config, envline, xdgenv);
    if (!unit) {
        fprintf(stderr, "aor: out of memory\n");
        goto out;
    }
    if (print_only) {
        fputs(unit, stdout);
        rc = fflush(stdout) == 0 ? AOR_CLI_OK : AOR_CLI_FAIL;
        goto out;
    }
    dest = dest_path(launchd);
    if (!dest)
        goto out;
    dir = strndup(dest, (size_t)(strrchr(dest, '/') - dest));
    if (!dir || aor_cli_mkdirs(dir, 0755) < 0) {
        fprintf(stderr, "aor: cannot write %s: %s\n", dest, strerror(errno));
        goto out;
    }
    if (keep_old_unit(dest, unit) < 0)
        goto out;
    if (aor_cli_write_file(dest, unit, strlen(unit), 0644) < 0) {
        fprintf(stderr, "aor: cannot write %s: %s\n", dest, strerror(errno));
        goto out;
    }
    printf("wrote %s (aord: %s%s%s)\n", dest, aord, config ? ", config: " : "",
           config ? config : "");
    if (running) {
        /* The service's aord would find the state file locked and exit 3, which
         * RestartPreventExitStatus makes final (fresh-user pass). */
        const char *where = launchd ? "already" : "outside the service";
        if (running > 0)
            printf("An aord (pid %ld) is running %s: the service's aord would find the "
                   "state file locked and stop (exit 3). Stop that one first (kill %ld), "
                   "then:\n",
                   (long)running, where, (long)running);
        else
            printf("An aord is running %s: the service's aord would find the state file "
                   "locked and stop (exit 3). Stop that one first, then:\n",
                   where);
        no_start = 1;
    }
    rc = launchd ? enable_launchd(dest, no_start) : enable_systemd(no_start);
out:
    free(config);
    free(envline);
    free(xdgenv);
    free(unit);
    free(dest);
    free(dir);
    free(aord);
    free(self);
    return rc;
}
