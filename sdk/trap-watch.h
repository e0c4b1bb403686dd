/*
 * trap-watch.h — cop-run's watch for a trap storm: a program whose trap
 * vector's first instruction traps, taken there for ever
 * (docs/coprocessor-abi.md, "Traps"; trap-watch.c says how it is seen).
 *
 *   trap_watch_prepare(&w, &command);    before QEMU starts
 *   cop_qemu_spawn(&command, ...);
 *   trap_watch_start(&w);                 looks while QEMU runs
 *   cop_qemu_wait(...);
 *   trap_watch_end(&w);                   w.storm, w.pc, w.mtvec
 */
#ifndef COPROF_SDK_TRAP_WATCH_H
#define COPROF_SDK_TRAP_WATCH_H

#include "common/loader.h"

#include <pthread.h>
#include <stdint.h>

struct trap_watch {
    int fd;                 /* our end of QEMU's monitor */
    int qemu_fd;            /* QEMU's end, until QEMU has it */
    pthread_t thread;
    int running;
    int storm;              /* a storm was seen; QEMU was asked to quit */
    uint32_t pc;            /* where: the vector's first instruction */
    uint32_t mtvec;
    char line[16384];       /* the monitor's last line */
};

/* Adds QEMU's monitor to the command.  0, or -1 with errno. */
int trap_watch_prepare(struct trap_watch *w, struct cop_argv *command);

/* Once QEMU runs: starts looking.  0, or -1 (no watch). */
int trap_watch_start(struct trap_watch *w);

/* Once QEMU has ended: stops looking and closes the monitor. */
void trap_watch_end(struct trap_watch *w);

#endif
