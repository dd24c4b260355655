/*
 * The xattn command-line tool: devices, run, bench, check, compare, advise,
 * tune.
 *
 * Exit status: 0 success, 1 a run failed or disagreed with the reference,
 * 2 a bad command line.
 */
#include <stdio.h>
#include <string.h>

#include "xtool.h"
#include "xtool_cli.h"

int main(int argc, char **argv)
{
    if (argc < 2) {
        xtool_cli_commands_print(stderr);
        return XTOOL_EXIT_USAGE;
    }
    const char *cmd = argv[1];
    if (!strcmp(cmd, "-h") || !strcmp(cmd, "--help") || !strcmp(cmd, "help")) {
        xtool_cli_commands_print(stdout);
        return XTOOL_EXIT_OK;
    }
    if (!strcmp(cmd, "--version") || !strcmp(cmd, "version")) {
        printf("xattn %s\n", xattn_version_string());
        return XTOOL_EXIT_OK;
    }
    xtool_cli_opts o;
    char err[512];
    int rc = xtool_cli_parse(argc - 1, argv + 1, &o, err, sizeof err);
    if (rc) {
        if (o.cmd != XTOOL_CLI_NONE)
            fprintf(stderr, "%s: %s\n(see '%s %s --help')\n", xtool_prog, err, xtool_prog, cmd);
        else
            fprintf(stderr, "%s: %s\n(see '%s --help')\n", xtool_prog, err, xtool_prog);
        return rc;
    }
    if (o.help) {
        fputs(xtool_cli_help_text(o.cmd), stdout);
        return XTOOL_EXIT_OK;
    }
    switch (o.cmd) {
    case XTOOL_CLI_DEVICES: return xtool_cmd_devices(&o);
    case XTOOL_CLI_RUN: return xtool_cmd_run(&o, argc - 1, argv + 1);
    case XTOOL_CLI_BENCH: return xtool_cmd_bench(&o, argc - 1, argv + 1);
    case XTOOL_CLI_CHECK: return xtool_cmd_check(&o);
    case XTOOL_CLI_COMPARE: return xtool_cmd_compare(&o);
    case XTOOL_CLI_ADVISE: return xtool_cmd_advise(&o);
    case XTOOL_CLI_TUNE: return xtool_cmd_tune(&o);
    default: break;
    }
    return XTOOL_EXIT_USAGE;
}
