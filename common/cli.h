/*
 * cli.h — what coprof's command-line tools share (cop-run, cop-embed,
 * cop-overlays, coplfsr, copstream, coplog, ...): the one-line error and
 * the private temporary directory.
 */
#ifndef COPROF_SDK_CLI_H
#define COPROF_SDK_CLI_H

#include <stddef.h>

/*
 * Prints "TOOL: MESSAGE" as one line on stderr, TOOL being the program's
 * name without its directory, and returns status, so that an error path
 * reads `return cli_fail(EXIT_..., "%s: ...", file);`.
 */
int cli_fail(int status, const char *format, ...)
    __attribute__((format(printf, 2, 3)));

/*
 * Makes a fresh directory $TMPDIR/NAME-XXXXXX (mkdtemp: mode 0700, a name
 * nobody else has), in /tmp when TMPDIR is unset, empty or longer than
 * tmpdir_max (a UNIX socket path inside one holds about 100 bytes), and
 * puts its path in buf.  0, or -1 with errno set and buf naming the
 * directory that could not be made.
 */
int cli_make_temp_dir(char *buf, size_t size, const char *name,
                      size_t tmpdir_max);

#endif
