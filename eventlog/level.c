/*
 * level.c — the names of coplog levels, shared by writers (echo), readers
 * and the coplog command.
 */
#include "eventlog/coplog.h"

#include <stdlib.h>
#include <string.h>

static const char *const level_names[COPLOG_LEVEL_MAX + 1] = {
    [COPLOG_ERROR] = "error",
    [COPLOG_WARNING] = "warning",
    [COPLOG_TERSE] = "terse",
    [COPLOG_VERBOSE] = "verbose",
    [COPLOG_PROLOG] = "prolog",
};

const char *coplog_level_name(unsigned level)
{
    if (level < COPLOG_ERROR || level > COPLOG_LEVEL_MAX)
        return "level?";
    return level_names[level];
}

int coplog_level_parse(const char *text)
{
    char *end;
    long number;

    for (int level = COPLOG_ERROR; level <= COPLOG_LEVEL_MAX; level++)
        if (strcmp(text, level_names[level]) == 0)
            return level;
    number = strtol(text, &end, 10);
    if (end != text && *end == '\0' && number >= COPLOG_ERROR &&
        number <= COPLOG_LEVEL_MAX)
        return (int)number;
    return -1;
}
