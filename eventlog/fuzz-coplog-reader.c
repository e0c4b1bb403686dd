/*
 * fuzz-coplog-reader.c — libFuzzer target for the reader: any bytes, as a
 * log file, must give a one-line error or be read (live and post-mortem,
 * every record formatted, every subsystem's state), never crash.  Built
 * with AddressSanitizer and UndefinedBehaviorSanitizer by `make fuzz`; the
 * seed corpus is a small log written by coplog.
 */
#include "eventlog/coplog.h"

#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void read_log(const char *path)
{
    char error[COPLOG_ERROR_MAX], text[4096];
    struct coplog_reader *reader = coplog_reader_open(path, error);
    struct coplog_file_info info;
    struct coplog_subsys_stat stat;
    struct coplog_event event;

    if (reader == NULL) {
        if (strchr(error, '\n') != NULL)
            __builtin_trap();   /* errors are one line */
        return;
    }
    coplog_reader_set_stall(reader, 0);
    while (coplog_reader_next(reader, &event, COPLOG_READ_LIVE) > 0)
        coplog_event_format(&event, text, sizeof text);
    while (coplog_reader_next(reader, &event, COPLOG_READ_ALL) > 0)
        coplog_event_format(&event, text, sizeof text);
    for (unsigned i = 0; i < coplog_reader_subsys_count(reader); i++)
        coplog_reader_stat(reader, i, &stat);
    coplog_reader_info(reader, &info);
    coplog_reader_order_ns(reader, 12345);
    coplog_reader_ns_order(reader, 12345);
    coplog_reader_close(reader);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    int fd = memfd_create("coplog-fuzz", 0);
    char path[64];

    if (fd < 0)
        return 0;
    if (write(fd, data, size) == (ssize_t)size) {
        snprintf(path, sizeof path, "/proc/self/fd/%d", fd);
        read_log(path);
    }
    close(fd);
    return 0;
}
