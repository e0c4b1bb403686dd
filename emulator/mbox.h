/*
 * mbox.h - the trace unit's side of the coprocessor's mailboxes
 * (docs/coprocessor-abi.md, "Mailboxes"): which message a read takes,
 * where a write goes, and how many cycles each waits in the model.
 *
 * The mailboxes are struct cop_mbox (abi/cop-abi.h), the data window's
 * last page, which the host program (libcop) and the plugin both map.
 * The runtime asks through its markers (each the last instruction of its
 * block); the plugin calls these with the context's cycle at the marker:
 *
 *   read   an inbound message is there: take the oldest; it arrived at
 *          its stamp + mailbox.host_latency (the stamp: the write cycle of
 *          the newest outbound message the host had read when it wrote
 *          it, 0 if none), so the read waits until then;
 *   write  the outbound slot is free: put the message there, stamped
 *          with the cycle it is written; the slot was freed at the
 *          previous message's stamp + mailbox.host_latency, which a write
 *          issued earlier waits for;
 *   count  the inbound messages there that have arrived by now.
 *
 * When a read finds no message or a write a full slot, the functions say
 * so and change nothing: the plugin sleeps until the host writes or reads
 * (a futex on in_put or out_taken) and calls again.  How long it slept
 * costs nothing in the model, so the cycles are the same in every run of
 * a program whose host answers what it reads.  With m NULL (a clock
 * without cycles) nothing waits.
 *
 * Freestanding: no QEMU, no I/O.  The host wrote half of the block;
 * nothing in it is trusted: a counter pair that says more messages than
 * the depth is an error, never an access outside the block.
 */
#ifndef COPROF_MBOX_H
#define COPROF_MBOX_H

#include "abi/cop-abi.h"
#include "emulator/timing.h"

#include <stddef.h>
#include <stdint.h>

/* mbox_read and mbox_write: served, or must sleep and try again. */
enum mbox_result {
    MBOX_ERROR = -1,
    MBOX_BLOCKED = 0,
    MBOX_DONE = 1,
};

/* A read at context cycle now: *value and the *cycles it waits. */
enum mbox_result mbox_read(volatile struct cop_mbox *mb,
                           const struct timing_model *m, uint64_t now,
                           uint32_t *value, uint64_t *cycles, char *err,
                           size_t errlen);

/* A write of value at context cycle now: the *cycles it waits. */
enum mbox_result mbox_write(volatile struct cop_mbox *mb,
                            const struct timing_model *m, uint64_t now,
                            uint32_t value, uint64_t *cycles, char *err,
                            size_t errlen);

/* The inbound messages there that have arrived by cycle now, or -1 with
 * err set. */
int mbox_count(const volatile struct cop_mbox *mb,
               const struct timing_model *m, uint64_t now, char *err,
               size_t errlen);

#endif /* COPROF_MBOX_H */
