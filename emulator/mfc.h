/*
 * mfc.h - the trace unit's side of the coprocessor's memory flow
 * controller (MFC): the timing of DMA transfers (docs/coprocessor-abi.md,
 * "DMA").
 *
 * The MFC's state is the context's channel block, struct cop_mfc at
 * COP_MFC_BASE (abi/cop-abi.h), which the coprocessor runtime fills
 * (sdk/runtime/mfc.c) and the plugin reads and stamps through its mapping
 * of the guest RAM file.  Keeping every piece of state there makes it the
 * context's: saved and restored with its local store, whatever slot it
 * runs on.  The plugin calls these at the two markers (both the last
 * instruction of their translated block):
 *
 *   issue  the runtime has appended a command to the queue: check it and
 *          stamp its modelled completion and the marker's PC;
 *   wait   the runtime has written a tag mask and mode: the cycles the
 *          wait lasts, and the wait's end, after which the runtime's
 *          transfer engine moves the bytes of every command complete by
 *          then (with guest stores: QEMU sees a store into code, so no
 *          stale translation survives).
 *
 * The model: a command of B bytes issued at cycle t starts on the bus at
 * s = max(t, bus), holds it ceil(B / bytes_per_cycle) cycles (bus = s +
 * that) and completes dma.latency cycles later.  Cycles are the context's
 * own (the plugin's count of the cycles the context ran).
 *
 * Freestanding: no QEMU, no I/O; the block is only read and written.
 */
#ifndef COPROF_MFC_H
#define COPROF_MFC_H

#include "abi/cop-abi.h"
#include "emulator/timing.h"

#include <stddef.h>
#include <stdint.h>

/* The transfer a wait waited for: the last of the waited commands to
 * complete (valid: the wait lasted at least one cycle). */
struct mfc_wait_info {
    int valid;
    uint32_t tag;
    uint32_t pc;                /* its issue marker */
};

/* Where a transfer may go: the context's local store and data window. */
struct mfc_bounds {
    uint32_t ls_base, ls_size;
    uint32_t data_base, data_size;
};

/* Whether the runtime has set the block up; then [*start, *end) is its
 * transfer engine's code. */
int mfc_engine_range(const volatile struct cop_mfc *mfc, uint32_t *start,
                     uint32_t *end);

/* The issue marker at `pc`, at context cycle `now`: checks the newest
 * command and stamps it; with m NULL (a clock without cycles) it
 * completes at once.  Returns 0, or -1 with one line in err. */
int mfc_issue(volatile struct cop_mfc *mfc, const struct timing_model *m,
              const struct mfc_bounds *bounds, uint64_t now, uint32_t pc,
              char *err, size_t errlen);

/* The wait marker at context cycle `now`: *cycles is how long it waits;
 * the block gets its end.  Returns 0, or -1 with one line in err. */
int mfc_wait(volatile struct cop_mfc *mfc, uint64_t now, uint64_t *cycles,
             struct mfc_wait_info *info, char *err, size_t errlen);

#endif /* COPROF_MFC_H */
