/* SPDX-License-Identifier: GPL-2.0 */
/*
 * event-buffer.h - the driver's bounded event buffer: a byte ring with one
 * writer (the driver, under its lock) and one reader.
 *
 * Positions are byte counts since the start of the session (head: written,
 * tail: read), taken modulo the size.  The writer publishes head with a
 * release store after the bytes; the reader publishes tail the same way
 * after it has copied them out, so neither side locks.
 *
 * The last `reserve` bytes of room are kept for the end of the session
 * (the pending LOST records and STOP), so a stream always ends whole and
 * its totals are always told, however full the buffer ran.
 */
#ifndef COPROF_COPDRV_EVENT_BUFFER_H
#define COPROF_COPDRV_EVENT_BUFFER_H

#include "kernel-driver/copdrv-os.h"
#include "escape-protocol/copstream.h"

struct copdrv_buffer {
	u8 *data;
	u64 size;		/* bytes, a multiple of 8 */
	u64 reserve;		/* room only the end of the session may use */
	u64 head;		/* bytes ever written */
	u64 tail;		/* bytes ever read */
	u64 high_water;		/* most bytes ever waiting */
	u32 ended;		/* STOP is written: no byte will follow */
};

/* Writer space for the end of the session, or for everything else. */
enum copdrv_buffer_use {
	COPDRV_BUFFER_NORMAL,
	COPDRV_BUFFER_FINAL
};

void copdrv_buffer_init(struct copdrv_buffer *buf, u8 *data, u64 size,
			u64 reserve);

/* Bytes waiting for the reader. */
u64 copdrv_buffer_used(const struct copdrv_buffer *buf);

/* Bytes the writer may still write for `use`. */
u64 copdrv_buffer_room(const struct copdrv_buffer *buf,
		       enum copdrv_buffer_use use);

/*
 * Writes one record, if it fits while `keep` bytes of room stay free,
 * encoding it in place or, where it would wrap, in scratch
 * (COPSTREAM_MAX_RECORD_BYTES) first.  Returns its bytes, -ENOSPC with
 * nothing written when it does not fit, -EINVAL for a bad record.
 */
int copdrv_buffer_put_record(struct copdrv_buffer *buf, u8 *scratch,
			     const struct copstream_record *rec,
			     enum copdrv_buffer_use use, u64 keep);

/*
 * Writes samples of one slot from trace-unit PC fields, as many as fit
 * while `keep` bytes of room stay free.  Returns the number written.
 */
u64 copdrv_buffer_put_samples(struct copdrv_buffer *buf, u32 slot,
			      const u16 *fields, u64 count, u64 keep);

/* Marks the stream complete (after STOP). */
void copdrv_buffer_end(struct copdrv_buffer *buf);

/* Reader: see copdrv_buffer_peek() and copdrv_buffer_consume(). */
u64 copdrv_buffer_readable(struct copdrv_buffer *buf, const u8 **bytes,
			   int *ended);
void copdrv_buffer_take(struct copdrv_buffer *buf, u64 bytes);

#endif /* COPROF_COPDRV_EVENT_BUFFER_H */
