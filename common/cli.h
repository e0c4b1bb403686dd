/*
 * cli.h — what coprof's command-line tools share (cop-run, cop-embed,
 * cop-overlays, coplfsr, copstream, coplog, ...): the option parser, the
 * one-line error, the private temporary directory, and the test points
 * that let a test stop a tool at a known place.
 */
#ifndef COPROF_SDK_CLI_H
#define COPROF_SDK_CLI_H

#include <getopt.h>
#include <stddef.h>

/*
 * One option of a tool's table: -SHORT and/or --LONG, whether it takes a
 * value (no_argument, required_argument, optional_argument, as getopt's),
 * and the key cli_next() returns for it: 0 means short_name, the usual
 * case; a long option without a short one has a key of its own (a letter
 * the short options do not use, or a number >= 256).  A table ends with
 * an entry of zeros (CLI_END).
 */
struct cli_option {
    char short_name;            /* -X, or 0: none */
    const char *long_name;      /* --NAME, or NULL: none */
    int has_arg;
    int key;
};

#define CLI_END                 { 0, NULL, 0, 0 }
#define CLI_OPTIONS_MAX         64

/* getopt_long's two tables, made from one cli_option table. */
struct cli_parser {
    struct option longs[CLI_OPTIONS_MAX + 1];
    char shorts[3 * CLI_OPTIONS_MAX + 3];
};

/*
 * Builds the parser of a table.  mode is getopt's prefix: "" (options
 * anywhere), "+" (the first operand ends them), ":" or "+:" (getopt prints
 * nothing: a missing value is ':', an unknown option '?', for the tool to
 * say).  A table longer than CLI_OPTIONS_MAX is the program's bug: it
 * aborts naming it.
 */
void cli_parser_init(struct cli_parser *parser,
                     const struct cli_option *table, const char *mode);

/* The next option (getopt_long's return, with optarg and optind). */
int cli_next(const struct cli_parser *parser, int argc, char **argv);

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
 * Writes word and a newline on fd, the pipe a starter passed with
 * --ready-fd and reads with copsim_wait_word() ("ready" once serving,
 * coprof-host's "stored").  0, or -1 with errno when it could not be
 * written whole (the reader has gone).  fd stays open.
 */
int cli_say_word(int fd, const char *word);

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
