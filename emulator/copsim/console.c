/*
 * console.c — a context's console on its way to its host program.
 *
 * The UART's bytes (QEMU's stdout: an emulator of its own per context, or
 * a slot's emulator while the context is bound to it) are copied to the
 * descriptor the client gave, a whole line per write: a line goes out in
 * one write (atomic on a pipe up to PIPE_BUF), so the consoles of contexts
 * that share the host's stdout do not interleave within lines.  A line
 * longer than the buffer goes out in pieces; the rest goes at the end.
 * On the way the last line starting with "cop: " (the runtime's trap and
 * error reports) is kept, for the reason of a fault.
 */
#include "emulator/copsim/copsim-int.h"

#include <errno.h>
#include <string.h>
#include <unistd.h>

void tracker_feed(struct line_tracker *t, const char *bytes, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        if (bytes[i] == '\n') {
            t->current[t->length] = '\0';
            if (strncmp(t->current, t->prefix, strlen(t->prefix)) == 0
                && t->length > 0)
                memcpy(t->last, t->current, t->length + 1);
            t->length = 0;
        } else if (t->length + 1 < sizeof(t->current)) {
            t->current[t->length++] = bytes[i];
        }
    }
}

const char *tracker_last(struct line_tracker *t)
{
    if (t->length > 0)
        tracker_feed(t, "\n", 1);
    return t->last;
}

void console_out_init(struct console_out *out, int client)
{
    memset(out, 0, sizeof(*out));
    out->client = client;
    out->cop_lines.prefix = "cop: ";
}

static void write_client(struct console_out *out, const char *bytes, size_t n)
{
    while (n > 0 && out->client >= 0) {
        ssize_t put = write(out->client, bytes, n);

        if (put < 0 && errno == EINTR)
            continue;
        if (put <= 0) {
            out->client = -1;       /* the host's output is gone */
            return;
        }
        bytes += put;
        n -= (size_t)put;
    }
}

void console_out_feed(struct console_out *out, const char *bytes, size_t n)
{
    tracker_feed(&out->cop_lines, bytes, n);
    while (n > 0) {
        size_t room = sizeof(out->partial) - out->partial_length;
        size_t take = n < room ? n : room;
        const char *newline;
        size_t whole;

        memcpy(out->partial + out->partial_length, bytes, take);
        out->partial_length += take;
        bytes += take;
        n -= take;
        newline = memrchr(out->partial, '\n', out->partial_length);
        whole = newline ? (size_t)(newline - out->partial) + 1
                : out->partial_length == sizeof(out->partial)
                    ? out->partial_length : 0;
        write_client(out, out->partial, whole);
        memmove(out->partial, out->partial + whole,
                out->partial_length - whole);
        out->partial_length -= whole;
    }
}

void console_out_flush(struct console_out *out)
{
    write_client(out, out->partial, out->partial_length);
    out->partial_length = 0;
}
