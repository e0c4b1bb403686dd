/*
 * options.c — option handling shared by copcontrol and coprof
 * (options.h).  Errors are printed by common/cli.c's cli_fail(), so they read
 * "PROGRAM: WORD: reason".
 */
#include "control/options.h"

#include "common/cli.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* --call-graph[=DEPTH]: copsim's register file gets a call-stack area of
 * DEPTH frames (1..OPTIONS_CALL_GRAPH_MAX). */
static int call_graph(const char *arg, const char *word,
                      struct daemon_args *copsim_args)
{
    static char copsim_arg[32];
    char err[256], *end;
    unsigned long depth = OPTIONS_CALL_GRAPH_DEFAULT;

    if (arg) {
        depth = strtoul(arg, &end, 10);
        if (!*arg || *end || depth < 1 || depth > OPTIONS_CALL_GRAPH_MAX)
            return cli_fail(OPTIONS_EXIT_USAGE, "%s: not a depth from 1 "
                            "to %d", word, OPTIONS_CALL_GRAPH_MAX);
    }
    snprintf(copsim_arg, sizeof(copsim_arg), "--call-graph=%lu", depth);
    if (daemons_add_arg(copsim_args, copsim_arg, err, sizeof(err)) < 0)
        return cli_fail(OPTIONS_EXIT_USAGE, "%s", err);
    return 0;
}

unsigned options_call_graph(const struct daemon_args *copsim_args)
{
    static const char prefix[] = "--call-graph=";
    unsigned depth = 0;

    for (int i = 0; i < copsim_args->n; i++)
        if (!strncmp(copsim_args->args[i], prefix, sizeof(prefix) - 1))
            depth = (unsigned)strtoul(copsim_args->args[i]
                                      + sizeof(prefix) - 1, NULL, 10);
    return depth;
}

int options_common(int c, const char *arg, const char *word,
                   const char *help, struct daemon_args *copsim_args)
{
    char err[256];

    switch (c) {
    case OPTIONS_COPSIM_ARG:
        if (daemons_add_arg(copsim_args, arg, err, sizeof(err)) < 0)
            return cli_fail(OPTIONS_EXIT_USAGE, "%s", err);
        return 0;
    case OPTIONS_CALL_GRAPH:
        return call_graph(arg, word, copsim_args);
    case 'h':
        return 1;
    case ':':
        return cli_fail(OPTIONS_EXIT_USAGE, "%s: needs a value", word);
    default:
        return cli_fail(OPTIONS_EXIT_USAGE, "%s: unknown option (see %s)",
                        word, help);
    }
}
