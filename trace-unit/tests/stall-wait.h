/*
 * stall-wait.h — for the trace-unit tests: waiting, without sleeping for
 * a guessed time, until a slot's producer is stalled on its full FIFO.  A
 * stalled producer rings the register file's doorbell in every wait slice,
 * so the test sleeps on the doorbell and looks at the slot's `stalled`
 * flag each time it rings.
 */
#ifndef COPROF_STALL_WAIT_H
#define COPROF_STALL_WAIT_H

#include "trace-unit/trace-unit.h"

static inline void wait_until_stalled(const struct trace_unit *unit,
                                      const struct trace_regs_slot *slot)
{
    uint32_t *doorbell = &unit->header->doorbell;

    for (;;) {
        uint32_t seen = __atomic_load_n(doorbell, __ATOMIC_ACQUIRE);

        if (__atomic_load_n(&slot->stalled, __ATOMIC_ACQUIRE))
            return;
        trace_doorbell_wait(doorbell, seen, 1000000000ull);
    }
}

#endif /* COPROF_STALL_WAIT_H */
