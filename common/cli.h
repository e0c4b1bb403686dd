/*
 * cli.h — what coprof's command-line tools share (cop-run, cop-embed,
 * cop-overlays, coplfsr, copstream, coplog, ...): the one-line error and
 * the private temporary directory, and the test points that let a test
 * stop a tool at a known place.
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

/*
 * A test point: when $COPROF_TEST_PAUSE is point (or a comma-separated list
 * holding it), the process stops itself with SIGSTOP here, so that a test
 * can make a fault happen at exactly this place (kill another process,
 * fill a disk) and let it go on with SIGCONT, instead of racing for the
 * moment with sleeps.  Without the variable it does nothing.  (The test
 * keeps the stopped process in a process group that is not orphaned: the
 * kernel sends SIGCONT to an orphaned group's stopped members when one of
 * its processes exits.)
 */
void cli_test_point(const char *point);

#endif
