// SPDX-License-Identifier: GPL-2.0
/*
 * event-buffer.c - the driver's bounded event buffer (see event-buffer.h).
 *
 * Samples go straight from the drained PC fields into the ring, one word
 * each, in at most two runs around the wrap point.  A record is encoded in
 * place when it does not wrap; otherwise it is encoded into the caller's
 * scratch and copied in two runs.  Since the size is a multiple of 8 and
 * every write is whole words, a word never straddles the wrap point.
 *
 * Portable core: no libc, only the shim's types and accessors.
 */
#include "kernel-driver/event-buffer.h"

/*
 * The positions pair across the writer and the reader: the writer's
 * release store of head (after the bytes) pairs with the reader's acquire
 * load of it (before it reads them), the reader's release store of tail
 * (after it read them) with the writer's acquire load of it (before it
 * overwrites them).
 */
static u64 load_position(const u64 *position)
{
	return copdrv_load_acquire(position);	/* pairs: publish_position() */
}

static void publish_position(u64 *position, u64 value)
{
	copdrv_store_release(position, value);	/* pairs: load_position() */
}

void copdrv_buffer_init(struct copdrv_buffer *buf, u8 *data, u64 size,
			u64 reserve)
{
	buf->data = data;
	buf->size = size;
	buf->reserve = reserve;
	buf->head = 0;
	buf->tail = 0;
	buf->high_water = 0;
	buf->ended = 0;
}

u64 copdrv_buffer_used(const struct copdrv_buffer *buf)
{
	return copdrv_read_once(&buf->head) -
	       load_position(&buf->tail);
}

u64 copdrv_buffer_room(const struct copdrv_buffer *buf,
		       enum copdrv_buffer_use use)
{
	u64 free = buf->size - copdrv_buffer_used(buf);

	if (use == COPDRV_BUFFER_FINAL)
		return free;
	return free > buf->reserve ? free - buf->reserve : 0;
}

/* Advances head by bytes already in place and remembers the high water. */
static void commit(struct copdrv_buffer *buf, u64 bytes)
{
	u64 used;

	publish_position(&buf->head, buf->head + bytes);
	used = copdrv_buffer_used(buf);
	if (used > buf->high_water)
		buf->high_water = used;
}

static void copy_bytes(u8 *to, const u8 *from, u64 count)
{
	u64 i;

	for (i = 0; i < count; i++)
		to[i] = from[i];
}

int copdrv_buffer_put_record(struct copdrv_buffer *buf, u8 *scratch,
			     const struct copstream_record *rec,
			     enum copdrv_buffer_use use, u64 keep)
{
	int bytes = copstream_record_bytes(rec);
	u64 at = buf->head % buf->size;
	u64 to_end = buf->size - at;

	if (bytes < 0)
		return -EINVAL;
	if (copdrv_buffer_room(buf, use) < (u64)bytes + keep)
		return -ENOSPC;
	if (to_end >= (u64)bytes) {
		copstream_encode_record(buf->data + at, to_end, rec);
	} else {
		copstream_encode_record(scratch, COPSTREAM_MAX_RECORD_BYTES,
					rec);
		copy_bytes(buf->data + at, scratch, to_end);
		copy_bytes(buf->data, scratch + to_end, bytes - to_end);
	}
	commit(buf, bytes);
	return bytes;
}

u64 copdrv_buffer_put_samples(struct copdrv_buffer *buf, u32 slot,
			      const u16 *fields, u64 count, u64 keep)
{
	u64 room = copdrv_buffer_room(buf, COPDRV_BUFFER_NORMAL);
	u64 at = buf->head % buf->size;
	u64 first, second;

	room = room > keep ? room - keep : 0;
	if (count > room / COPSTREAM_WORD_BYTES)
		count = room / COPSTREAM_WORD_BYTES;
	first = (buf->size - at) / COPSTREAM_WORD_BYTES;
	if (first > count)
		first = count;
	copstream_encode_pc_fields(buf->data + at, first * COPSTREAM_WORD_BYTES,
				   slot, fields, first);
	second = count - first;
	copstream_encode_pc_fields(buf->data, second * COPSTREAM_WORD_BYTES,
				   slot, fields + first, second);
	commit(buf, count * COPSTREAM_WORD_BYTES);
	return count;
}

void copdrv_buffer_end(struct copdrv_buffer *buf)
{
	/* pairs with the acquire load in copdrv_buffer_readable() */
	copdrv_store_release(&buf->ended, 1);
}

u64 copdrv_buffer_readable(struct copdrv_buffer *buf, const u8 **bytes,
			   int *ended)
{
	/* pairs with copdrv_buffer_end(): ended, then head, as written */
	u32 end = copdrv_load_acquire(&buf->ended);
	u64 head = load_position(&buf->head);
	u64 tail = buf->tail;
	u64 at = tail % buf->size;
	u64 waiting = head - tail;

	*bytes = buf->data + at;
	*ended = end && waiting == 0;
	if (waiting > buf->size - at)
		waiting = buf->size - at;
	return waiting;
}

void copdrv_buffer_take(struct copdrv_buffer *buf, u64 bytes)
{
	publish_position(&buf->tail, buf->tail + bytes);
}
