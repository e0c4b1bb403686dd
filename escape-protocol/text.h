/*
 * text.h — the text form of the stream: one line per sample, record, error
 * or resynchronisation, as `copstream dump` prints it and `copstream
 * encode` reads it back.  escape-protocol/README.md describes the lines;
 * coprof_stream.py prints the same lines, byte for byte.
 *
 * Unlike encode.c and decode.c this uses libc (stdio); it is for tools.
 */
#ifndef COPROF_COPSTREAM_TEXT_H
#define COPROF_COPSTREAM_TEXT_H

#include "escape-protocol/copstream.h"

#include <stdio.h>

void copstream_text_samples(FILE *out, uint64_t offset,
                            const struct copstream_sample *samples,
                            size_t count);
void copstream_text_record(FILE *out, const struct copstream_record *rec);
void copstream_text_error(FILE *out, const struct copstream_error *err);
void copstream_text_resync(FILE *out, uint64_t offset, uint64_t skipped);

/*
 * Encodes one line of text (modified in place) into out[0 .. room).
 * Returns the bytes written, 0 for a line that encodes to nothing (blank,
 * a # comment, an error or resync line of a dump), or -1 with the reason
 * in why[0 .. why_size).
 */
long copstream_text_encode(char *line, uint8_t *out, size_t room,
                           char *why, size_t why_size);

#endif /* COPROF_COPSTREAM_TEXT_H */
