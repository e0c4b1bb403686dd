/*
 * text.c — the text form of the stream (see text.h).
 *
 * A line is "OFFSET TYPE key=value ...".  Records print every field of
 * their layout (layout.h) in order, in the field's style; words a later
 * minor version added print as extra=0x..,0x..; an unknown code prints its
 * payload as words=.  So the text form loses nothing that was well framed,
 * and encoding a dump gives back the records and samples byte for byte.
 * Paths print with every byte outside '!' .. '~', and the backslash, as
 * \xHH, so a line never holds a space that is not a separator.
 *
 * Reading accepts the same lines, with or without the leading offset, and
 * ignores error and resync lines, blank lines and # comments.
 */
#include "escape-protocol/text.h"
#include "escape-protocol/layout.h"

#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#define SEPARATORS " \t\r\n"

/* ---- Writing ------------------------------------------------------------ */

static void write_words(FILE *out, const char *key, const uint8_t *payload,
                        uint32_t first, uint32_t end)
{
    fprintf(out, " %s=", key);
    for (uint32_t i = first; i < end; i++)
        fprintf(out, "%s0x%" PRIx64, i > first ? "," : "",
                load_word(payload + COPSTREAM_WORD_BYTES * i));
}

static void write_path(FILE *out, const struct copstream_image *image)
{
    for (uint32_t i = 0; i < image->path_length; i++) {
        uint8_t c = image->path[i];
        if (c > ' ' && c <= '~' && c != '\\')
            fputc(c, out);
        else
            fprintf(out, "\\x%02x", c);
    }
}

/* CALLSTACK's frames: 0xADDRESS, with @OVERLAY when not 0, comma-separated;
 * "-" for none. */
static void write_frames(FILE *out, const struct copstream_callstack *c)
{
    if (!c->n_frames)
        fputc('-', out);
    for (uint32_t i = 0; i < c->n_frames; i++) {
        uint64_t w = copstream_frame(c->frames, i);

        fprintf(out, "%s0x%05" PRIx32, i ? "," : "", (uint32_t)w);
        if (w >> 32)
            fprintf(out, "@%" PRIu64, w >> 32);
    }
}

/* REASONS' stalls: one hex digit a sample, in order. */
static void write_stalls(FILE *out, const struct copstream_reasons *r)
{
    for (uint32_t i = 0; i < r->count; i++)
        fputc("0123456789abcdef"[copstream_reason_at(r->stalls, i)], out);
}

static void write_field(FILE *out, const struct copstream_record *rec,
                        const struct field_layout *f)
{
    uint64_t v = field_get(&rec->u, f);
    const char *cause;

    fprintf(out, " %s=", f->name);
    switch (f->style) {
    case FIELD_DECIMAL:
        fprintf(out, "%" PRIu64, v);
        break;
    case FIELD_HEX:
        fprintf(out, "0x%" PRIx64, v);
        break;
    case FIELD_HEX6:
        fprintf(out, "0x%06" PRIx64, v);
        break;
    case FIELD_HEX16:
        fprintf(out, "0x%016" PRIx64, v);
        break;
    case FIELD_VERSION:
        fprintf(out, "%u.%u", (unsigned)(v >> 16), (unsigned)(v & 0xFFFF));
        break;
    case FIELD_CAUSE:
        cause = copstream_cause_name((uint32_t)v);
        if (cause)
            fputs(cause, out);
        else
            fprintf(out, "%" PRIu64, v);
        break;
    case FIELD_PATH:
        write_path(out, &rec->u.image);
        break;
    case FIELD_FRAMES:
        write_frames(out, &rec->u.callstack);
        break;
    case FIELD_REASONS:
        write_stalls(out, &rec->u.reasons);
        break;
    }
}

/* The payload words the known fields of rec take. */
static uint32_t known_words(const struct copstream_record *rec)
{
    return layout_fields_present(&copstream_layouts[rec->code],
                                 rec->payload_words) + variable_words(rec);
}

void copstream_text_record(FILE *out, const struct copstream_record *rec)
{
    const char *name = copstream_code_name(rec->code);

    fprintf(out, "%" PRIu64 " ", rec->offset);
    if (name == NULL) {
        fprintf(out, "unknown code=%u", rec->code);
        if (rec->payload_words > 0)
            write_words(out, "words", rec->payload, 0, rec->payload_words);
        fputc('\n', out);
        return;
    }
    fputs(name, out);
    const struct record_layout *layout = &copstream_layouts[rec->code];
    uint32_t present = layout_fields_present(layout, rec->payload_words);
    for (uint32_t i = 0; i < present; i++)
        write_field(out, rec, &layout->fields[i]);
    if (rec->payload_words > known_words(rec))
        write_words(out, "extra", rec->payload, known_words(rec),
                    rec->payload_words);
    if (rec->repeat)
        fputs(" repeat=1", out);
    fputc('\n', out);
}

void copstream_text_samples(FILE *out, uint64_t offset,
                            const struct copstream_sample *samples,
                            size_t count)
{
    for (size_t i = 0; i < count; i++)
        fprintf(out, "%" PRIu64 " sample slot=%" PRIu32 " address=0x%05"
                PRIx32 "\n", offset + COPSTREAM_WORD_BYTES * i,
                samples[i].slot, samples[i].address);
}

void copstream_text_error(FILE *out, const struct copstream_error *err)
{
    fprintf(out, "%" PRIu64 " error %s", err->offset,
            copstream_error_name(err->kind));
    if (err->code != 0)
        fprintf(out, " code=%u", err->code);
    fputc('\n', out);
}

void copstream_text_resync(FILE *out, uint64_t offset, uint64_t skipped)
{
    fprintf(out, "%" PRIu64 " resync skipped=%" PRIu64 "\n", offset, skipped);
}

/* ---- Reading ------------------------------------------------------------ */

/* The line being encoded: its tokens and where a failure is described. */
struct reader {
    char *save;                 /* strtok_r state */
    char *why;
    size_t why_size;
};

static long fail(struct reader *r, const char *format, ...)
{
    va_list args;

    va_start(args, format);
    vsnprintf(r->why, r->why_size, format, args);
    va_end(args);
    return -1;
}

static char *next_token(struct reader *r)
{
    return strtok_r(NULL, SEPARATORS, &r->save);
}

/* A decimal number or 0x hexadecimal, the whole text, in 64 bits. */
static int parse_number(const char *text, uint64_t *value)
{
    int base = 10;
    char *end;

    if (text[0] == '0' && (text[1] == 'x' || text[1] == 'X')) {
        base = 16;
        text += 2;
    }
    if (!(base == 16 ? isxdigit((unsigned char)text[0])
                     : text[0] >= '0' && text[0] <= '9'))
        return -1;
    errno = 0;
    *value = strtoull(text, &end, base);
    return errno == 0 && *end == '\0' ? 0 : -1;
}

static int all_digits(const char *text)
{
    if (*text == '\0')
        return 0;
    for (; *text; text++)
        if (*text < '0' || *text > '9')
            return 0;
    return 1;
}

/* Key and value of "key=value"; NULL value when there is no '='. */
static char *split_pair(char *token)
{
    char *eq = strchr(token, '=');

    if (eq == NULL)
        return NULL;
    *eq = '\0';
    return eq + 1;
}

/* A comma-separated list of words, split in place. */
static int parse_words(char *text, uint64_t *words, uint32_t *count,
                       uint32_t room)
{
    char *save = NULL, *item;

    *count = 0;
    for (item = strtok_r(text, ",", &save); item;
         item = strtok_r(NULL, ",", &save)) {
        if (*count == room || parse_number(item, &words[*count]) != 0)
            return -1;
        (*count)++;
    }
    return 0;
}

static int hex_digit(char c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    if (c >= 'A' && c <= 'F')
        return c - 'A' + 10;
    return -1;
}

/* Undoes write_path's escapes; returns the length or -1. */
static long parse_path(const char *text, uint8_t *path)
{
    size_t n = 0;

    while (*text) {
        if (n == COPSTREAM_MAX_PATH)
            return -1;
        if (*text != '\\') {
            path[n++] = (uint8_t)*text++;
            continue;
        }
        if (text[1] != 'x' || hex_digit(text[2]) < 0 || hex_digit(text[3]) < 0)
            return -1;
        path[n++] = (uint8_t)(hex_digit(text[2]) << 4 | hex_digit(text[3]));
        text += 4;
    }
    return (long)n;
}

/* Undoes write_frames into frame words at frames; returns the count or
 * -1. */
static long parse_frames(const char *text, uint8_t *frames)
{
    uint32_t n = 0;

    if (strcmp(text, "-") == 0)
        return 0;
    for (;;) {
        char *end;
        unsigned long long address, overlay = 0;

        if (n == COPSTREAM_MAX_FRAMES || strncmp(text, "0x", 2) != 0)
            return -1;
        address = strtoull(text + 2, &end, 16);
        if (end == text + 2 || address > UINT32_MAX)
            return -1;
        if (*end == '@') {
            text = end + 1;
            overlay = strtoull(text, &end, 10);
            if (end == text || overlay > 0xFFFF)
                return -1;
        }
        copstream_put_frame(frames, n++,
                            copstream_frame_word((uint32_t)address,
                                                 (uint32_t)overlay));
        if (*end == '\0')
            return (long)n;
        if (*end != ',')
            return -1;
        text = end + 1;
    }
}

/* Undoes write_stalls into stalls (zeroed first); returns the count or
 * -1. */
static long parse_stalls(const char *text, uint8_t *stalls)
{
    uint32_t n = 0;

    for (; text[n] != '\0'; n++) {
        if (n == COPSTREAM_MAX_REASONS || hex_digit(text[n]) < 0 ||
            (text[n] >= 'A' && text[n] <= 'F'))
            return -1;
        if (n % 2 == 0)
            stalls[n / 2] = 0;
        copstream_put_reason(stalls, n, (uint32_t)hex_digit(text[n]));
    }
    return (long)n;
}

static int parse_cause(const char *text, uint64_t *value)
{
    for (uint32_t cause = 0; cause < COPSTREAM_LOST_CAUSE_END; cause++) {
        const char *name = copstream_cause_name(cause);
        if (name && strcmp(name, text) == 0) {
            *value = cause;
            return 0;
        }
    }
    return parse_number(text, value);
}

static int parse_version(const char *text, uint64_t *value)
{
    unsigned major, minor;
    int used = 0;

    if (sscanf(text, "%u.%u%n", &major, &minor, &used) != 2 ||
        text[used] != '\0' || major > 0xFFFF || minor > 0xFFFF)
        return -1;
    *value = (uint64_t)major << 16 | minor;
    return 0;
}

/* Sets field f of rec from text; path holds an IMAGE path's bytes or a
 * CALLSTACK's frames. */
static int parse_field(struct copstream_record *rec,
                       const struct field_layout *f, const char *text,
                       uint8_t *path)
{
    uint64_t value;
    long length;

    switch (f->style) {
    case FIELD_VERSION:
        if (parse_version(text, &value) != 0)
            return -1;
        break;
    case FIELD_CAUSE:
        if (parse_cause(text, &value) != 0)
            return -1;
        break;
    case FIELD_PATH:
    case FIELD_FRAMES:
        length = f->style == FIELD_PATH ? parse_path(text, path)
                                        : parse_frames(text, path);
        if (length < 0)
            return -1;
        if (f->style == FIELD_PATH)
            rec->u.image.path = path;
        else
            rec->u.callstack.frames = path;
        value = (uint64_t)length;
        break;
    case FIELD_REASONS:
        length = parse_stalls(text, path);
        if (length < 0)
            return -1;
        rec->u.reasons.stalls = path;
        value = (uint64_t)length;
        break;
    default:
        if (parse_number(text, &value) != 0)
            return -1;
    }
    if (f->width == 4 && value > UINT32_MAX)
        return -1;
    field_set(&rec->u, f, value);
    return 0;
}

static const struct field_layout *find_field(uint16_t code, const char *key)
{
    const struct record_layout *layout = &copstream_layouts[code];

    for (uint32_t i = 0; i < layout->words; i++)
        if (strcmp(layout->fields[i].name, key) == 0)
            return &layout->fields[i];
    return NULL;
}

/* Re-frames the record at out with extra words after its payload. */
static long append_extra(struct reader *r, uint8_t *out, size_t room,
                         const struct copstream_record *rec,
                         const uint64_t *extra, uint32_t extra_count)
{
    uint64_t words[COPSTREAM_MAX_PAYLOAD];
    uint32_t known = known_words(rec);

    if (known + extra_count > COPSTREAM_MAX_PAYLOAD)
        return fail(r, "%s: too many extra words",
                    copstream_code_name(rec->code));
    for (uint32_t i = 0; i < known; i++)
        words[i] = load_word(out + COPSTREAM_WORD_BYTES * (2 + i));
    for (uint32_t i = 0; i < extra_count; i++)
        words[known + i] = extra[i];
    return copstream_encode_raw(out, room, rec->code, words,
                                known + extra_count);
}

/*
 * How many fixed fields a text record gave: all of them, or the earlier
 * form's when a field a later minor version added is absent (a 1.0 OVERLAY
 * without placed=), so that a dump re-encodes byte for byte.
 */
static uint32_t fields_given(const struct record_layout *layout,
                             const uint8_t *seen)
{
    uint32_t n = layout->min_words;

    while (n < layout->words && seen[n])
        n++;
    return n;
}

static long encode_record(struct reader *r, uint16_t code, uint8_t *out,
                          size_t room)
{
    const char *name = copstream_code_name(code);
    const struct record_layout *layout = &copstream_layouts[code];
    struct copstream_record rec = { .code = code };
    uint8_t seen[COPSTREAM_MAX_PAYLOAD] = { 0 };
    uint8_t path[COPSTREAM_WORD_BYTES * COPSTREAM_MAX_PAYLOAD]; /* or stalls */
    uint64_t extra[COPSTREAM_MAX_PAYLOAD];
    uint32_t extra_count = 0;
    char *token, *value;

    while ((token = next_token(r)) != NULL) {
        if ((value = split_pair(token)) == NULL)
            return fail(r, "%s: '%s' is not key=value", name, token);
        if (strcmp(token, "repeat") == 0)
            continue;
        if (strcmp(token, "extra") == 0) {
            if (parse_words(value, extra, &extra_count,
                            COPSTREAM_MAX_PAYLOAD) != 0)
                return fail(r, "%s: extra '%s' is not a list of words such "
                            "as 0x1,0x2", name, value);
            continue;
        }
        const struct field_layout *f = find_field(code, token);
        if (f == NULL)
            return fail(r, "%s has no field '%s'", name, token);
        if (parse_field(&rec, f, value, path) != 0)
            return fail(r, "%s: %s '%s' is not a valid value", name, token,
                        value);
        seen[f - layout->fields] = 1;
    }
    for (uint32_t i = 0; i < layout->words; i++)
        if (!seen[i] && i < layout->min_words)
            return fail(r, "%s needs the field %s", name,
                        layout->fields[i].name);
    rec.payload_words = (uint16_t)fields_given(layout, seen);

    long bytes = copstream_encode_record(out, room, &rec);
    if (bytes == COPSTREAM_INVALID)
        return fail(r, "%s: a field is out of range (see the format in "
                    "escape-protocol/README.md)", name);
    if (bytes > 0 && extra_count > 0)
        bytes = append_extra(r, out, room, &rec, extra, extra_count);
    if (bytes == COPSTREAM_NO_ROOM)
        return fail(r, "%s: the record does not fit", name);
    return bytes;
}

static long encode_unknown(struct reader *r, uint8_t *out, size_t room)
{
    uint64_t words[COPSTREAM_MAX_PAYLOAD], code = 0;
    uint32_t count = 0;
    int have_code = 0;
    char *token, *value;

    while ((token = next_token(r)) != NULL) {
        if ((value = split_pair(token)) == NULL)
            return fail(r, "unknown: '%s' is not key=value", token);
        if (strcmp(token, "code") == 0) {
            if (parse_number(value, &code) != 0 || code > 0xFFFF)
                return fail(r, "unknown: code '%s' is not 0 to 65535", value);
            have_code = 1;
        } else if (strcmp(token, "words") == 0) {
            if (parse_words(value, words, &count, COPSTREAM_MAX_PAYLOAD) != 0)
                return fail(r, "unknown: words '%s' is not a list of at most "
                            "%u words", value, COPSTREAM_MAX_PAYLOAD);
        } else {
            return fail(r, "unknown has no field '%s'", token);
        }
    }
    if (!have_code)
        return fail(r, "unknown needs the field code");
    long bytes = copstream_encode_raw(out, room, (uint16_t)code, words, count);
    return bytes < 0 ? fail(r, "unknown: the record does not fit") : bytes;
}

static long encode_sample(struct reader *r, uint8_t *out, size_t room)
{
    uint64_t slot = UINT64_MAX, address = UINT64_MAX;
    char *token, *value;

    while ((token = next_token(r)) != NULL) {
        value = split_pair(token);
        uint64_t *field = value == NULL ? NULL
                          : strcmp(token, "slot") == 0 ? &slot
                          : strcmp(token, "address") == 0 ? &address : NULL;
        if (field == NULL || parse_number(value, field) != 0)
            return fail(r, "sample: '%s' is not slot=N or address=N", token);
    }
    if (slot > UINT32_MAX || address > UINT32_MAX)
        return fail(r, "sample needs slot and address, each below 2^32");
    uint64_t word = copstream_sample_word((uint32_t)slot, (uint32_t)address);
    if (word == COPSTREAM_ESCAPE)
        return fail(r, "sample: slot %" PRIu64 " or address 0x%" PRIx64
                    " out of range (slot below %u, address a multiple of 4)",
                    slot, address, COPSTREAM_MAX_SLOTS);
    if (room < COPSTREAM_WORD_BYTES)
        return fail(r, "sample: no room");
    store_word(out, word);
    return COPSTREAM_WORD_BYTES;
}

static uint16_t code_for_name(const char *name)
{
    for (uint16_t code = 1; code < COPSTREAM_CODE_END; code++)
        if (strcmp(copstream_code_name(code), name) == 0)
            return code;
    return 0;
}

long copstream_text_encode(char *line, uint8_t *out, size_t room,
                           char *why, size_t why_size)
{
    struct reader r = { NULL, why, why_size };
    char *type = strtok_r(line, SEPARATORS, &r.save);

    if (type != NULL && all_digits(type))
        type = next_token(&r);
    if (type == NULL || type[0] == '#' || strcmp(type, "error") == 0 ||
        strcmp(type, "resync") == 0)
        return 0;
    if (strcmp(type, "sample") == 0)
        return encode_sample(&r, out, room);
    if (strcmp(type, "unknown") == 0)
        return encode_unknown(&r, out, room);
    uint16_t code = code_for_name(type);
    if (code == 0)
        return fail(&r, "'%s' is not a record type (start, context, overlay, "
                    "lost, time, stop, image, release, unknown, sample)", type);
    return encode_record(&r, code, out, room);
}
