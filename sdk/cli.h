/*
 * cli.h — what coprof's command-line tools share (cop-run, cop-embed,
 * cop-overlays, coplfsr, copstream, coplog, ...).
 */
#ifndef COPROF_SDK_CLI_H
#define COPROF_SDK_CLI_H

/*
 * Prints "TOOL: MESSAGE" as one line on stderr, TOOL being the program's
 * name without its directory, and returns status, so that an error path
 * reads `return cli_fail(EXIT_..., "%s: ...", file);`.
 */
int cli_fail(int status, const char *format, ...)
    __attribute__((format(printf, 2, 3)));

#endif
