/*
 * message.h — printf formats whose arguments are stored as 64-bit words.
 *
 * A writer learns from a format, once per call site, how to take each
 * argument off its va_list and whether it is a string to copy; a reader
 * renders the message from the format and the stored words.  See message.c.
 */
#ifndef COPROF_EVENTLOG_MESSAGE_H
#define COPROF_EVENTLOG_MESSAGE_H

#include <stddef.h>
#include <stdint.h>

/* How an argument travels through printf's varargs. */
enum message_arg_kind {
    ARG_INT = 1,        /* int: d i c, hh/h of d i, a '*' width/precision */
    ARG_UINT,           /* unsigned int: o u x X (no l), %lc */
    ARG_LONG,           /* a 64-bit integer: l ll q j z Z t of d i o u x X */
    ARG_DOUBLE,         /* double: e E f F g G a A */
    ARG_LONG_DOUBLE,    /* long double: the same with L (stored as double) */
    ARG_STRING,         /* const char *: s */
    ARG_POINTER,        /* void *: p, and the pointers of %n and %ls */
};

#define MESSAGE_KIND_BITS   3u
#define MESSAGE_COUNT_BITS  4u
#define MESSAGE_MAX_KINDS   15u     /* what a packed word holds */

/*
 * The argument kinds of a format, packed in one word: the count in the low
 * MESSAGE_COUNT_BITS bits (at most max), then MESSAGE_KIND_BITS bits per
 * argument.  *wanted is the number of arguments the format asks for, which
 * may be more than max.
 */
uint64_t message_kinds(const char *format, unsigned max, unsigned *wanted);

/* The conversion character of each argument format takes ('*' for a width
 * or precision given as an argument), for the first max; returns how many
 * arguments it takes in all. */
unsigned message_conversions(const char *format, char *conversions,
                             unsigned max);

static inline unsigned message_kinds_count(uint64_t kinds)
{
    return (unsigned)(kinds & ((1u << MESSAGE_COUNT_BITS) - 1));
}

static inline enum message_arg_kind message_kind_at(uint64_t kinds,
                                                    unsigned index)
{
    return (enum message_arg_kind)((kinds >> (MESSAGE_COUNT_BITS +
                                              index * MESSAGE_KIND_BITS)) &
                                   ((1u << MESSAGE_KIND_BITS) - 1));
}

/*
 * Renders format with the nargs stored words.  texts[i] is the text of a
 * string argument (NULL prints "(null)").  Arguments the format asks for but
 * that were not stored print as "<?>"; %n prints nothing and %m prints
 * itself.  Writes at most size bytes including the NUL and returns the full
 * length, like snprintf.
 */
size_t message_format(const char *format, const uint64_t *args, unsigned nargs,
                      const char *const *texts, char *out, size_t size);

#endif /* COPROF_EVENTLOG_MESSAGE_H */
