/*
 * test-support.h — helpers shared by the eventlog GTest programs: a private
 * temporary folder, log creation, and reading a whole log into an array.
 */
#ifndef COPROF_EVENTLOG_TEST_SUPPORT_H
#define COPROF_EVENTLOG_TEST_SUPPORT_H

#include "eventlog/coplog.h"

#include <glib.h>

/* A copy of an event that outlives the reader. */
struct test_event {
    struct coplog_event event;      /* its pointers are not valid */
    char subsys[COPLOG_NAME_MAX + 1];
    char message[2048];
    char strings[COPLOG_MAX_ARGS][64];
};

/* Makes the temporary folder; call first in main().  Removed at exit. */
void test_support_init(int *argc, char ***argv);

/* A new path in the temporary folder (g_free it). */
char *test_path(const char *name);

/* Creates a log with these subsystems, asserting success. */
struct coplog *test_create(const char *path,
                           const struct coplog_subsys_config *subsys,
                           unsigned count);

/* Opens a reader, asserting success. */
struct coplog_reader *test_reader(const char *path);

/* Appends the events the reader returns now to events (a GArray of struct
 * test_event), with flags; returns how many. */
size_t test_read(struct coplog_reader *reader, GArray *events, unsigned flags);

/* Every record of the log, READ_ALL. */
GArray *test_read_all(const char *path);

/* The size of a file. */
gsize test_file_size(const char *path);

#endif /* COPROF_EVENTLOG_TEST_SUPPORT_H */
