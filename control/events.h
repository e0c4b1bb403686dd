/*
 * events.h — --list-events: the coprocessor's events, SPU_CYCLES and
 * SPU_INSTRUCTIONS, with their valid range, and the host CPU's events as
 * libpfm4 knows them.
 */
#ifndef COPROF_CONTROL_EVENTS_H
#define COPROF_CONTROL_EVENTS_H

#include <stdint.h>
#include <stdio.h>

/*
 * Lists the events on out.  clock_hz and fifo_depth are copsim's (or its
 * defaults when none runs: say so through from_copsim = 0).  Returns 0, or
 * -1 when libpfm4 cannot be initialised (the SPU_CYCLES part is printed
 * anyway, with a line saying why the host's part is missing).
 */
int events_list(FILE *out, double clock_hz, uint32_t fifo_depth,
                int from_copsim);

#endif
