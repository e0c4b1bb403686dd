/*
 * test-cli.c — GLib tests of the command-line tools' option parser
 * (cli.h): the getopt tables it makes from one table, and a parse with
 * each kind of option and of mistake, as the tools see them.
 */
#include "common/cli.h"

#include <errno.h>
#include <glib.h>
#include <signal.h>
#include <string.h>
#include <unistd.h>

enum { KEY_LONG_ONLY = 256 };

static const struct cli_option table[] = {
    {'o', "output", required_argument, 0},
    {'q', "quiet", no_argument, 0},
    {0, "call-graph", optional_argument, 'G'},
    {0, "slots", required_argument, KEY_LONG_ONLY},
    {'v', NULL, no_argument, 0},
    {'h', "help", no_argument, 0},
    CLI_END,
};

/* argv from a NULL-terminated list, parsed from the start. */
static int parse(struct cli_parser *parser, const char *mode, char **argv,
                 int *keys, const char **args, int max)
{
    int argc = 0, n = 0, c;

    while (argv[argc])
        argc++;
    cli_parser_init(parser, table, mode);
    optind = 0;
    while ((c = cli_next(parser, argc, argv)) != -1 && n < max) {
        keys[n] = c;
        args[n++] = optarg;
    }
    return n;
}

static void test_tables(void)
{
    struct cli_parser parser;

    cli_parser_init(&parser, table, "+:");
    g_assert_cmpstr(parser.shorts, ==, "+:o:qvh");
    g_assert_cmpstr(parser.longs[0].name, ==, "output");
    g_assert_cmpint(parser.longs[0].val, ==, 'o');
    g_assert_cmpint(parser.longs[2].has_arg, ==, optional_argument);
    g_assert_cmpint(parser.longs[2].val, ==, 'G');
    g_assert_cmpint(parser.longs[3].val, ==, KEY_LONG_ONLY);
    g_assert_cmpstr(parser.longs[4].name, ==, "help");
    g_assert_null(parser.longs[5].name);
    g_assert_cmpint(opterr, ==, 0);
    cli_parser_init(&parser, table, "");
    g_assert_cmpstr(parser.shorts, ==, "o:qvh");
    g_assert_cmpint(opterr, ==, 1);
}

static void test_parse(void)
{
    char *argv[] = {"tool", "-qo", "out", "--call-graph=8", "--slots", "4",
                    "-v", "--call-graph", "cmd", "-h", NULL};
    struct cli_parser parser;
    int keys[16];
    const char *args[16];
    int n = parse(&parser, "+", argv, keys, args, 16);

    g_assert_cmpint(n, ==, 6);
    g_assert_cmpint(keys[0], ==, 'q');
    g_assert_cmpint(keys[1], ==, 'o');
    g_assert_cmpstr(args[1], ==, "out");
    g_assert_cmpint(keys[2], ==, 'G');
    g_assert_cmpstr(args[2], ==, "8");
    g_assert_cmpint(keys[3], ==, KEY_LONG_ONLY);
    g_assert_cmpstr(args[3], ==, "4");
    g_assert_cmpint(keys[4], ==, 'v');
    g_assert_cmpint(keys[5], ==, 'G');
    g_assert_null(args[5]);
    g_assert_cmpstr(argv[optind], ==, "cmd");   /* "+": the operand ends */
}

static void test_mistakes(void)
{
    char *missing[] = {"tool", "--slots", NULL};
    char *unknown[] = {"tool", "--nope", NULL};
    char *letter[] = {"tool", "-G", NULL};    /* long-only key: no -G */
    struct cli_parser parser;
    int keys[4];
    const char *args[4];

    g_assert_cmpint(parse(&parser, ":", missing, keys, args, 4), ==, 1);
    g_assert_cmpint(keys[0], ==, ':');
    g_assert_cmpint(parse(&parser, ":", unknown, keys, args, 4), ==, 1);
    g_assert_cmpint(keys[0], ==, '?');
    g_assert_cmpint(parse(&parser, ":", letter, keys, args, 4), ==, 1);
    g_assert_cmpint(keys[0], ==, '?');
}

/* A word on a --ready-fd pipe: the word and a newline, read whole by its
 * starter; -1 with EPIPE once the reader has gone (SIGPIPE ignored, as
 * the daemons do). */
static void test_say_word(void)
{
    char got[16] = "";
    int ends[2];

    g_assert_cmpint(pipe(ends), ==, 0);
    g_assert_cmpint(cli_say_word(ends[1], "ready"), ==, 0);
    g_assert_cmpint(cli_say_word(ends[1], "stored"), ==, 0);
    g_assert_cmpint(read(ends[0], got, sizeof(got) - 1), ==, 13);
    g_assert_cmpstr(got, ==, "ready\nstored\n");
    close(ends[0]);
    signal(SIGPIPE, SIG_IGN);
    g_assert_cmpint(cli_say_word(ends[1], "ready"), ==, -1);
    g_assert_cmpint(errno, ==, EPIPE);
    close(ends[1]);
}

int main(int argc, char **argv)
{
    g_test_init(&argc, &argv, NULL);
    g_test_add_func("/cli/tables", test_tables);
    g_test_add_func("/cli/parse", test_parse);
    g_test_add_func("/cli/mistakes", test_mistakes);
    g_test_add_func("/cli/say-word", test_say_word);
    return g_test_run();
}
