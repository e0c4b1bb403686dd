/*
 * format-table.h — the deduplicated table of format strings in a log file.
 * See format-table.c.
 */
#ifndef COPROF_EVENTLOG_FORMAT_TABLE_H
#define COPROF_EVENTLOG_FORMAT_TABLE_H

#include "eventlog/file.h"

#include <stddef.h>

/* The id (1 to format_slots) of format in the table, adding it if it is not
 * there yet; 0 when the table or its heap is full. */
unsigned format_table_insert(const struct log_file *file, const char *format);

/* The format with this id, NUL-terminated inside the heap, or NULL when the
 * id names no valid entry (never registered, or a corrupt file). */
const char *format_table_lookup(const struct log_file *file, unsigned id);

/* Formats registered so far. */
unsigned format_table_count(const struct log_file *file);

#endif /* COPROF_EVENTLOG_FORMAT_TABLE_H */
