/*
 * options.h — what copcontrol's and coprof's option parsing share besides
 * the rate (rate.h): --copsim-arg, --call-graph[=DEPTH] (which becomes
 * copsim's --call-graph=DEPTH), --help, and the one-line usage errors for
 * a missing value or an unknown option (exit status 2).
 */
#ifndef COPROF_CONTROL_OPTIONS_H
#define COPROF_CONTROL_OPTIONS_H

#include "control/daemons.h"

#define OPTIONS_EXIT_USAGE      2
#define OPTIONS_COPSIM_ARG      0x2000
#define OPTIONS_CALL_GRAPH      0x2001
#define OPTIONS_CALL_GRAPH_DEFAULT 16   /* frames, copsim's default too */
#define OPTIONS_CALL_GRAPH_MAX  64
#define OPTIONS_LONG_COMMON \
    {0, "copsim-arg", required_argument, OPTIONS_COPSIM_ARG}, \
    {0, "call-graph", optional_argument, OPTIONS_CALL_GRAPH}, \
    {'h', "help", no_argument, 0}

/*
 * Takes option c, one of OPTIONS_LONG_COMMON's or anything else the
 * program did not take: ':' (a missing value: the parser's mode starts
 * with ':', common/cli.h) or an unknown option.  word is
 * the argument that held it, help how to get help.  Returns 0 (taken),
 * 1 (--help) or OPTIONS_EXIT_USAGE after one line on stderr.
 */
int options_common(int c, const char *arg, const char *word,
                   const char *help, struct daemon_args *copsim_args);

/* The call-stack depth --call-graph asked for (the last one), 0 if none. */
unsigned options_call_graph(const struct daemon_args *copsim_args);

#endif
