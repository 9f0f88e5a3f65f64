/* aor: the command line (spec §1, §9). Dispatch, usage and `check-config`; the other
 * commands live in daemon/cli_*.c. See docs/cli.md. */
#include "cli.h"
#include "version.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    const char *name;
    const char *args;
    const char *what;
    int (*fn)(aor_cli *c, int argc, char **argv);
} command;

static int cmd_check_config(aor_cli *c, int argc, char **argv);

static const command commands[] = {
    {"run", "[--config FILE] [--sidecar] [--] CMD [ARGS...]",
     "run CMD with its LLM traffic routed by aor (--sidecar: base-URL variables, no preload)",
     aor_cli_cmd_run},
    {"env", "[--sidecar] [--config FILE]", "print the variables `aor run` sets, as `export` lines",
     aor_cli_cmd_env},
    {"status", "[--json] [--config FILE]", "daemon, keys, backoff, open circuits",
     aor_cli_cmd_status},
    {"backoff", "[list [--json] | reset PROVIDER [KEY] | clear]", "show or reset backoff rows",
     aor_cli_cmd_backoff},
    {"check-config", "[--config FILE]", "validate the configuration", cmd_check_config},
    {"install-service", "[--print] [--no-start] [--systemd|--launchd] [--config FILE]",
     "run aord as a user service", aor_cli_cmd_install_service},
    {"doctor", "[--config FILE]", "check the setup, one line per check", aor_cli_cmd_doctor},
};

static void usage(FILE *f) {
    fprintf(f, "usage: aor [--config FILE] COMMAND [ARGS...]\n"
               "       aor --help | --version | COMMAND --help\n\ncommands:\n");
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
        fprintf(f, "  %-16s %s\n  %-16s   %s\n", commands[i].name, commands[i].args, "",
                commands[i].what);
    fprintf(f, "\nExit status: 0 ok, 1 failure, 2 usage or configuration error; `aor run` "
               "exits with\nthe program's status. See docs/cli.md.\n");
}

/* Prints the usage of commands[k] on stdout (`aor CMD --help`, `aor help CMD`). */
static int command_usage(size_t k) {
    printf("usage: aor %s %s\n  %s\n", commands[k].name, commands[k].args, commands[k].what);
    return AOR_CLI_OK;
}

/* `aor check-config`: the validation of `aord --check-config` (spec §3.1), including
 * what aord's start would refuse about the socket (common/paths.h). */
static int cmd_check_config(aor_cli *c, int argc, char **argv) {
    for (int i = 0; i < argc; i++) {
        int t = aor_cli_take_config(c, argc, argv, &i);
        if (t < 0)
            return AOR_CLI_USAGE;
        if (t > 0)
            continue;
        fprintf(stderr, "aor check-config: unknown argument '%s'\n", argv[i]);
        return AOR_CLI_USAGE;
    }
    /* What aord would refuse about the socket at start is a configuration error too. */
    aor_config *cfg = aor_cli_load_config_full(c);
    if (!cfg)
        return AOR_CLI_USAGE;
    size_t nk = cfg->nkeys; /* distinct keys (one may serve several providers) */
    printf("aor: configuration OK (%s): %zu provider%s, %zu key%s\n",
           cfg->source ? cfg->source : "embedded default from the environment",
           aor_config_count_providers(cfg), aor_config_count_providers(cfg) == 1 ? "" : "s", nk,
           nk == 1 ? "" : "s");
    for (size_t i = 0; i < cfg->nwarnings; i++) /* valid, but almost surely a mistake */
        fprintf(stderr, "aor: warning: %s\n", cfg->warnings[i]);
    aor_config_free(cfg);
    return AOR_CLI_OK;
}

int main(int argc, char **argv) {
    aor_cli c = {argv[0], NULL};
    int i = 1;
    for (; i < argc; i++) {
        const char *a = argv[i];
        int t = aor_cli_take_config(&c, argc, argv, &i);
        if (t < 0)
            return AOR_CLI_USAGE;
        if (t > 0)
            continue;
        if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0 || strcmp(a, "help") == 0) {
            /* `aor help CMD`: that command's usage, as `aor CMD --help` (QA) */
            if (strcmp(a, "help") == 0 && i + 1 < argc && strcmp(argv[i + 1], "help") != 0) {
                for (size_t k = 0; k < sizeof commands / sizeof commands[0]; k++) {
                    if (strcmp(argv[i + 1], commands[k].name) == 0)
                        return command_usage(k);
                }
                fprintf(stderr, "aor: unknown command '%s'\n", argv[i + 1]);
                usage(stderr);
                return AOR_CLI_USAGE;
            }
            usage(stdout);
            return AOR_CLI_OK;
        }
        if (strcmp(a, "--version") == 0 || strcmp(a, "-V") == 0) {
            printf("aor %s\n", AOR_VERSION);
            return AOR_CLI_OK;
        }
        if (a[0] == '-') {
            fprintf(stderr, "aor: unknown option '%s'\n", a);
            usage(stderr);
            return AOR_CLI_USAGE;
        }
        break;
    }
    if (i >= argc) {
        usage(stderr);
        return AOR_CLI_USAGE;
    }
    for (size_t k = 0; k < sizeof commands / sizeof commands[0]; k++) {
        if (strcmp(argv[i], commands[k].name) != 0)
            continue;
        /* `aor CMD --help` (run: only before the program). */
        for (int j = i + 1; j < argc && strcmp(argv[j], "--") != 0; j++) {
            if (strcmp(argv[j], "--help") == 0 || strcmp(argv[j], "-h") == 0)
                return command_usage(k);
            if (strcmp(argv[j], "--config") == 0)
                j++;
            else if (commands[k].fn == aor_cli_cmd_run && argv[j][0] != '-')
                break;
        }
        return commands[k].fn(&c, argc - i - 1, argv + i + 1);
    }
    fprintf(stderr, "aor: unknown command '%s'\n", argv[i]);
    usage(stderr);
    return AOR_CLI_USAGE;
}
