/*
 * cli.c — one-line error messages for coprof's command-line tools, and
 * their private temporary directories.
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
