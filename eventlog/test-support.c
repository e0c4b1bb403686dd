/*
 * test-support.c — helpers shared by the eventlog GTest programs.
 */
#include "eventlog/test-support.h"

#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

static char *temporary_folder;

static int remove_entry(const char *path, const struct stat *status, int type,
                        struct FTW *walk)
{
    (void)status, (void)type, (void)walk;
    return remove(path);
}

static void remove_folder(void)
{
    if (temporary_folder != NULL)
        nftw(temporary_folder, remove_entry, 16, FTW_DEPTH | FTW_PHYS);
}

void test_support_init(int *argc, char ***argv)
{
    GError *error = NULL;

    g_test_init(argc, argv, NULL);
    temporary_folder = g_dir_make_tmp("coplog-test-XXXXXX", &error);
    g_assert_no_error(error);
    atexit(remove_folder);
}

char *test_path(const char *name)
{
    static unsigned serial;

    return g_strdup_printf("%s/%u-%s", temporary_folder, serial++, name);
}

struct coplog *test_create(const char *path,
                           const struct coplog_subsys_config *subsys,
                           unsigned count)
{
    struct coplog_config config = { .subsys = subsys, .subsys_count = count };
    char error[COPLOG_ERROR_MAX] = "";
    struct coplog *log = coplog_create(path, &config, error);

    if (log == NULL)
        g_error("coplog_create: %s", error);
    return log;
}

struct coplog_reader *test_reader(const char *path)
{
    char error[COPLOG_ERROR_MAX] = "";
    struct coplog_reader *reader = coplog_reader_open(path, error);

    if (reader == NULL)
        g_error("coplog_reader_open: %s", error);
    return reader;
}

size_t test_read(struct coplog_reader *reader, GArray *events, unsigned flags)
{
    struct coplog_event event;
    size_t count = 0;
    int status;

    while ((status = coplog_reader_next(reader, &event, flags)) > 0) {
        struct test_event copy = { .event = event };

        g_strlcpy(copy.subsys, event.subsys_name, sizeof copy.subsys);
        coplog_event_format(&event, copy.message, sizeof copy.message);
        for (unsigned i = 0; i < COPLOG_MAX_ARGS; i++)
            if (event.strings[i] != NULL)
                g_strlcpy(copy.strings[i], event.strings[i],
                          sizeof copy.strings[i]);
        g_array_append_val(events, copy);
        count++;
    }
    g_assert_cmpint(status, ==, 0);
    return count;
}

GArray *test_read_all(const char *path)
{
    GArray *events = g_array_new(FALSE, TRUE, sizeof(struct test_event));
    struct coplog_reader *reader = test_reader(path);

    test_read(reader, events, COPLOG_READ_ALL);
    coplog_reader_close(reader);
    return events;
}

gsize test_file_size(const char *path)
{
    struct stat status;

    g_assert_cmpint(stat(path, &status), ==, 0);
    return (gsize)status.st_size;
}
