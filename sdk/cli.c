/*
 * cli.c — one-line error messages for coprof's command-line tools.
 *
 * The tool's name comes from glibc's program_invocation_short_name (the
 * basename of argv[0]), so messages read "cop-run: FILE: reason" however
 * the tool was invoked.
 */
#include "sdk/cli.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>

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
