/*
 * message.c — printf formats whose arguments are stored as 64-bit words.
 *
 * The flight recorder keeps a record's format as a reference and its
 * arguments as raw words, and formats only when someone reads.  Both ends
 * walk the format with one parser, parse_conversion(): the writer to know
 * each argument's kind (how to va_arg it, and which are strings to copy),
 * the reader to render each conversion by handing one rebuilt conversion
 * and one typed value to snprintf.
 *
 * Supported: flags - + space # 0 ' I; a width and a precision, given or '*';
 * the length modifiers hh h l ll q L j z Z t; the conversions d i o u x X c
 * e E f F g G a A s p n % m.  A '*' is an int argument of its own.  Integers
 * are stored sign- or zero-extended to 64 bits, so rendering with the
 * original length modifier gives printf's result.  An unknown conversion, or
 * a positional argument ("%1$d"), ends the conversions: the rest of the
 * format is printed as it is.  Widths and precisions are capped at
 * FIELD_MAX, since a reader also renders formats from corrupt files.
 */
#include "eventlog/message.h"

#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#define FIELD_MAX    1024
#define SPEC_MAX     48

enum field_type { FIELD_NONE, FIELD_GIVEN, FIELD_STAR };

enum length_modifier {
    LENGTH_NONE, LENGTH_HH, LENGTH_H, LENGTH_L, LENGTH_LL, LENGTH_BIG_L,
    LENGTH_OTHER_64     /* j z Z t q: 64 bits on this ABI */
};

struct conversion {
    const char *start;          /* the '%' */
    const char *end;            /* just after the conversion character */
    char flags[8];
    enum field_type width_type, precision_type;
    int width, precision;
    enum length_modifier length;
    char conversion;            /* 0 when the conversion is not supported */
    enum message_arg_kind kind; /* of the value; 0 when it takes none */
};

static int parse_number(const char **at)
{
    int value = 0;

    while (**at >= '0' && **at <= '9') {
        if (value <= FIELD_MAX)
            value = value * 10 + (**at - '0');
        (*at)++;
    }
    return value > FIELD_MAX ? FIELD_MAX : value;
}

static const char *parse_flags(const char *at, struct conversion *c)
{
    size_t count = 0;

    while (*at != '\0' && strchr("-+ #0'I", *at) != NULL) {
        if (count + 1 < sizeof c->flags && strchr(c->flags, *at) == NULL)
            c->flags[count++] = *at;
        at++;
    }
    c->flags[count] = '\0';
    return at;
}

static const char *parse_length(const char *at, struct conversion *c)
{
    c->length = LENGTH_NONE;
    switch (*at) {
    case 'h':
        c->length = at[1] == 'h' ? LENGTH_HH : LENGTH_H;
        return at + (at[1] == 'h' ? 2 : 1);
    case 'l':
        c->length = at[1] == 'l' ? LENGTH_LL : LENGTH_L;
        return at + (at[1] == 'l' ? 2 : 1);
    case 'L':
        c->length = LENGTH_BIG_L;
        return at + 1;
    case 'q': case 'j': case 'z': case 'Z': case 't':
        c->length = LENGTH_OTHER_64;
        return at + 1;
    default:
        return at;
    }
}

static bool length_is_64(enum length_modifier length)
{
    return length == LENGTH_L || length == LENGTH_LL ||
           length == LENGTH_OTHER_64;
}

static enum message_arg_kind kind_of(char conversion,
                                     enum length_modifier length)
{
    switch (conversion) {
    case 'd': case 'i':
        return length_is_64(length) ? ARG_LONG : ARG_INT;
    case 'o': case 'u': case 'x': case 'X':
        return length_is_64(length) ? ARG_LONG : ARG_UINT;
    case 'c':
        return length == LENGTH_L ? ARG_UINT : ARG_INT;
    case 'e': case 'E': case 'f': case 'F':
    case 'g': case 'G': case 'a': case 'A':
        return length == LENGTH_BIG_L ? ARG_LONG_DOUBLE : ARG_DOUBLE;
    case 's':
        return length == LENGTH_L ? ARG_POINTER : ARG_STRING;
    case 'p': case 'n':
        return ARG_POINTER;
    default:
        return 0;
    }
}

/* Parses the conversion at start (a '%').  Returns false when it is not
 * one this module supports (conversion is then 0). */
static bool parse_conversion(const char *start, struct conversion *c)
{
    const char *at = start + 1;

    memset(c, 0, sizeof *c);
    c->start = start;
    at = parse_flags(at, c);
    if (*at == '*') {
        c->width_type = FIELD_STAR;
        at++;
    } else if (*at >= '0' && *at <= '9') {
        c->width_type = FIELD_GIVEN;
        c->width = parse_number(&at);
    }
    if (*at == '$')
        return false;
    if (*at == '.') {
        at++;
        if (*at == '*') {
            c->precision_type = FIELD_STAR;
            at++;
        } else {
            c->precision_type = FIELD_GIVEN;
            c->precision = parse_number(&at);
        }
    }
    at = parse_length(at, c);
    if (*at == '\0' || strchr("diouxXceEfFgGaAspn%m", *at) == NULL)
        return false;
    c->conversion = *at;
    c->kind = kind_of(*at, c->length);
    c->end = at + 1;
    return true;
}

/* Walks the arguments format takes: fills kinds[] and conversions[] (the
 * conversion character, '*' for a width or precision) for the first max,
 * and returns how many it takes in all. */
static unsigned walk_arguments(const char *format, enum message_arg_kind *kinds,
                               char *conversions, unsigned max)
{
    unsigned count = 0;
    struct conversion c;

    for (const char *at = format; (at = strchr(at, '%')) != NULL; at = c.end) {
        enum message_arg_kind kind[3];
        char character[3];
        unsigned n = 0;

        if (!parse_conversion(at, &c))
            break;
        if (c.width_type == FIELD_STAR) {
            kind[n] = ARG_INT;
            character[n++] = '*';
        }
        if (c.precision_type == FIELD_STAR) {
            kind[n] = ARG_INT;
            character[n++] = '*';
        }
        if (c.kind != 0) {
            kind[n] = c.kind;
            character[n++] = c.conversion;
        }
        for (unsigned i = 0; i < n; i++, count++) {
            if (count >= max)
                continue;
            if (kinds != NULL)
                kinds[count] = kind[i];
            if (conversions != NULL)
                conversions[count] = character[i];
        }
    }
    return count;
}

uint64_t message_kinds(const char *format, unsigned max, unsigned *wanted)
{
    enum message_arg_kind kinds[MESSAGE_MAX_KINDS];
    unsigned count, stored;
    uint64_t packed;

    if (max > MESSAGE_MAX_KINDS)
        max = MESSAGE_MAX_KINDS;
    count = walk_arguments(format, kinds, NULL, max);
    stored = count < max ? count : max;
    packed = stored;
    for (unsigned i = 0; i < stored; i++)
        packed |= (uint64_t)kinds[i] << (MESSAGE_COUNT_BITS +
                                         i * MESSAGE_KIND_BITS);
    if (wanted != NULL)
        *wanted = count;
    return packed;
}

unsigned message_conversions(const char *format, char *conversions,
                             unsigned max)
{
    return walk_arguments(format, NULL, conversions, max);
}

/* The output buffer: keeps counting past its end, like snprintf. */
struct output {
    char *text;
    size_t size;
    size_t length;
};

static void output_bytes(struct output *out, const char *bytes, size_t count)
{
    if (out->length < out->size) {
        size_t room = out->size - out->length;
        memcpy(out->text + out->length, bytes, count < room ? count : room);
    }
    out->length += count;
}

static void output_printf(struct output *out, const char *spec, ...)
    __attribute__((format(printf, 2, 3)));

static void output_printf(struct output *out, const char *spec, ...)
{
    char piece[256];
    va_list args;
    int length;

    va_start(args, spec);
    length = vsnprintf(piece, sizeof piece, spec, args);
    va_end(args);
    if (length < 0) {
        output_bytes(out, "?", 1);
    } else if ((size_t)length < sizeof piece) {
        output_bytes(out, piece, (size_t)length);
    } else {
        /* Longer than a piece (wide fields, long strings): write in place
         * when there is room, else count it. */
        size_t room = out->length < out->size ? out->size - out->length : 0;

        va_start(args, spec);
        if (room > 0)
            vsnprintf(out->text + out->length, room, spec, args);
        va_end(args);
        out->length += (size_t)length;
    }
}

/* The conversion rebuilt with given width and precision and a length
 * modifier that matches the value handed to snprintf. */
static void build_spec(const struct conversion *c, int width, int precision,
                       char *spec)
{
    const char *length = "";
    char *at = spec;

    at += sprintf(at, "%%%s", c->flags);
    if (width < 0) {
        if (strchr(c->flags, '-') == NULL)
            *at++ = '-';
        width = -width > FIELD_MAX ? FIELD_MAX : -width;
    }
    if (width > FIELD_MAX)
        width = FIELD_MAX;
    if (c->width_type != FIELD_NONE)
        at += sprintf(at, "%d", width);
    if (c->precision_type != FIELD_NONE && precision >= 0)
        at += sprintf(at, ".%d", precision > FIELD_MAX ? FIELD_MAX : precision);
    if (c->kind == ARG_LONG)
        length = "ll";
    else if (c->kind == ARG_INT || c->kind == ARG_UINT)
        length = c->length == LENGTH_HH ? "hh" : c->length == LENGTH_H ? "h" : "";
    /* %n and %ls keep a pointer, which is all a reader can show. */
    sprintf(at, "%s%c", length, c->kind == ARG_POINTER ? 'p' : c->conversion);
}

static int stored_int(const uint64_t *args, unsigned nargs, unsigned *next,
                      bool *missing)
{
    if (*next >= nargs) {
        *missing = true;
        (*next)++;
        return 0;
    }
    return (int)(int64_t)args[(*next)++];
}

/* Renders one value with its conversion. */
static void render_value(struct output *out, const struct conversion *c,
                         const char *spec, uint64_t value, const char *text)
{
    double real;

    switch (c->kind) {
    case ARG_INT:
        output_printf(out, spec, (int)(int64_t)value);
        break;
    case ARG_UINT:
        if (c->conversion == 'c')
            output_printf(out, spec, (int)value);
        else
            output_printf(out, spec, (unsigned)value);
        break;
    case ARG_LONG:
        output_printf(out, spec, (long long)value);
        break;
    case ARG_DOUBLE:
    case ARG_LONG_DOUBLE:
        memcpy(&real, &value, sizeof real);
        output_printf(out, spec, real);
        break;
    case ARG_STRING:
        output_printf(out, spec, text != NULL ? text : "(null)");
        break;
    case ARG_POINTER:
        output_printf(out, spec, (void *)(uintptr_t)value);
        break;
    }
}

/* Renders conversion c, taking its arguments from args at *next. */
static void render_conversion(struct output *out, const struct conversion *c,
                              const uint64_t *args, unsigned nargs,
                              const char *const *texts, unsigned *next)
{
    char spec[SPEC_MAX];
    int width = c->width, precision = c->precision;
    bool missing = false;
    unsigned index;

    if (c->conversion == '%') {
        output_bytes(out, "%", 1);
        return;
    }
    if (c->conversion == 'm') {
        output_bytes(out, "%m", 2);
        return;
    }
    if (c->width_type == FIELD_STAR)
        width = stored_int(args, nargs, next, &missing);
    if (c->precision_type == FIELD_STAR)
        precision = stored_int(args, nargs, next, &missing);
    index = (*next)++;
    if (missing || index >= nargs) {
        output_bytes(out, "<?>", 3);
        return;
    }
    if (c->conversion == 'n')
        return;
    build_spec(c, width, precision, spec);
    render_value(out, c, spec, args[index], texts != NULL ? texts[index] : NULL);
}

size_t message_format(const char *format, const uint64_t *args, unsigned nargs,
                      const char *const *texts, char *text, size_t size)
{
    struct output out = { text, size, 0 };
    unsigned next = 0;
    const char *at = format;

    for (;;) {
        const char *percent = strchr(at, '%');
        struct conversion c;

        if (percent == NULL || !parse_conversion(percent, &c)) {
            output_bytes(&out, at, strlen(at));
            break;
        }
        output_bytes(&out, at, (size_t)(percent - at));
        render_conversion(&out, &c, args, nargs, texts, &next);
        at = c.end;
    }
    if (size > 0)
        text[out.length < size ? out.length : size - 1] = '\0';
    return out.length;
}
