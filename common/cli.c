/*
 * cli.c — the option parser of coprof's command-line tools, their
 * one-line error messages and their private temporary directories.
 *
 * A tool describes its options once, in a table of struct cli_option;
 * cli_parser_init() makes getopt_long's long-option table and short-option
 * string from it, so the two never disagree, and getopt_long parses as it
 * always did (its own messages, the tool's switch on the keys).
 *
 * The tool's name comes from glibc's program_invocation_short_name (the
 * basename of argv[0]), so messages read "cop-run: FILE: reason" however
 * the tool was invoked.  Temporary directories follow TMPDIR, as every
 * Unix tool's should, and are made by mkdtemp, so no other user can have
 * made them first.  cli_test_point() stops the process at a place a test
 * named in $COPROF_TEST_PAUSE.
 */
#include "common/cli.h"

#include <errno.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static void add_short(struct cli_parser *parser, size_t *n,
                      const struct cli_option *option)
{
    parser->shorts[(*n)++] = option->short_name;
    if (option->has_arg != no_argument)
        parser->shorts[(*n)++] = ':';
    if (option->has_arg == optional_argument)
        parser->shorts[(*n)++] = ':';
}

void cli_parser_init(struct cli_parser *parser,
                     const struct cli_option *table, const char *mode)
{
    size_t n = 0, count = 0;

    memset(parser, 0, sizeof(*parser));
    n = strlen(mode);
    memcpy(parser->shorts, mode, n);
    for (const struct cli_option *o = table; o->short_name || o->long_name;
         o++) {
        if (o - table == CLI_OPTIONS_MAX) {
            fprintf(stderr, "%s: more than %d options in its table\n",
                    program_invocation_short_name, CLI_OPTIONS_MAX);
            abort();
        }
        if (o->short_name)
            add_short(parser, &n, o);
        if (o->long_name) {
            struct option *l = &parser->longs[count++];

            l->name = o->long_name;
            l->has_arg = o->has_arg;
            l->val = o->key ? o->key : o->short_name;
        }
    }
    opterr = strchr(mode, ':') == NULL;
}

int cli_next(const struct cli_parser *parser, int argc, char **argv)
{
    return getopt_long(argc, argv, parser->shorts, parser->longs, NULL);
}

int cli_fail(int status, const char *format, ...)
{
    va_list args;

    fprintf(stderr, "%s: ", program_invocation_short_name);
    va_start(args, format);
    vfprintf(stderr, format, args);
    va_end(args);
    fputc('\n', stderr);
    return status;
}

int cli_make_temp_dir(char *buf, size_t size, const char *name,
                      size_t tmpdir_max)
{
    const char *tmp = getenv("TMPDIR");
    int n, error;

    if (!tmp || !*tmp || strlen(tmp) > tmpdir_max)
        tmp = "/tmp";
    n = snprintf(buf, size, "%s/%s-XXXXXX", tmp, name);
    if (n < 0 || (size_t)n >= size) {
        errno = ENAMETOOLONG;
        return -1;
    }
    if (mkdtemp(buf))
        return 0;
    error = errno;
    snprintf(buf, size, "%s/%s-XXXXXX", tmp, name);   /* what was tried */
    errno = error;
    return -1;
}

void cli_test_point(const char *point)
{
    const char *list = getenv("COPROF_TEST_PAUSE");
    size_t len = strlen(point);

    while (list && *list) {
        size_t n = strcspn(list, ",");

        if (n == len && strncmp(list, point, n) == 0) {
            raise(SIGSTOP);
            return;
        }
        list += n + (list[n] == ',');
    }
}

int cli_say_word(int fd, const char *word)
{
    char line[64];
    int n = snprintf(line, sizeof(line), "%s\n", word);
    ssize_t done;

    if (n < 0 || (size_t)n >= sizeof(line)) {
        errno = EINVAL;
        return -1;
    }
    errno = 0;
    done = write(fd, line, (size_t)n);
    if (done != n) {
        if (done >= 0)
            errno = EPIPE;          /* a short write: the pipe is closing */
        return -1;
    }
    return 0;
}
