/*
 * options.c — option handling shared by copcontrol and coprof
 * (options.h).  Errors are printed by common/cli.c's cli_fail(), so they read
 * "PROGRAM: WORD: reason".
 */
#include "control/options.h"

#include "common/cli.h"

int options_common(int c, const char *arg, const char *word,
                   const char *help, struct daemon_args *copsim_args)
{
    char err[256];

    switch (c) {
    case OPTIONS_COPSIM_ARG:
        if (daemons_add_arg(copsim_args, arg, err, sizeof(err)) < 0)
            return cli_fail(OPTIONS_EXIT_USAGE, "%s", err);
        return 0;
    case 'h':
        return 1;
    case ':':
        return cli_fail(OPTIONS_EXIT_USAGE, "%s: needs a value", word);
    default:
        return cli_fail(OPTIONS_EXIT_USAGE, "%s: unknown option (see %s)",
                        word, help);
    }
}
