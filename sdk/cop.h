/*
 * cop.h — the coprocessor runtime, for programs built with sdk/cop.mk.
 *
 * A program defines main(int argc, char **argv) (or main(void)); crt0 calls
 * it with the arguments of the boot block and passes its return value to
 * cop_exit().
 * The console is the virt UART, the exit status goes through the virt test
 * device and becomes the emulator's.  picolibc supplies <string.h>,
 * <stdlib.h> (atoi, strtoul, ...) and the like; exit() and abort() work too.
 * docs/coprocessor-abi.md is the ABI behind these functions.
 * The ABI is ilp32: uint32_t is unsigned long and int32_t long, so
 * cop_printf takes them with %lu and %ld.
 */
#ifndef COPROF_SDK_COP_H
#define COPROF_SDK_COP_H

#include "abi/cop-abi.h"

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

/* Console output. cop_puts appends a newline, as puts does. */
void cop_putchar(int c);
int cop_puts(const char *s);

/*
 * printf for the console: %d %i %u %x %X %c %s %p %%, the flags '-' and
 * '0', a width (or '*'), and the sizes 'l', 'll' and 'z'.  Returns the
 * number of characters written.
 */
int cop_printf(const char *format, ...) __attribute__((format(printf, 1, 2)));
int cop_vprintf(const char *format, va_list args);

/* Ends the program: the emulator exits with status & 0xff. */
_Noreturn void cop_exit(int status);

/* Prints "cop: MESSAGE" and exits with COP_STATUS_FATAL. */
_Noreturn void cop_fatal(const char *format, ...)
    __attribute__((format(printf, 1, 2)));

/* The data window shared with the host program, and its size. */
void *cop_data_window(size_t *size);

/* The ELF image in main memory, and its size. */
const void *cop_image_window(size_t *size);

/* The image's short name, from its note ("" without one). */
const char *cop_program_name(void);

/* The index of the overlay loaded in region (1-based), 0 for none. */
unsigned cop_overlay_loaded(unsigned region);

/* How many times the overlay manager has copied an overlay in. */
unsigned long cop_overlay_load_count(void);

/*
 * DMA between the local store and the data window, the Cell MFC's way
 * (docs/coprocessor-abi.md, "DMA").  A get copies size bytes from main
 * memory at ea (in the data window) to the local store at ls, a put the
 * other way; both are queued under a tag (0..31) and complete in the
 * background, after the timing model's latency plus size over the bus's
 * bandwidth.  Nothing moves until the program waits for the tag: the
 * local store (get) or main memory (put) holds the old bytes until then.
 * Addresses and sizes are multiples of 16, a size at most 16 KiB, at
 * most COP_MFC_QUEUE_DEPTH (16) commands outstanding; anything else ends
 * the program with "cop: dma: ..." and status 134.  Do not touch a
 * transfer's local-store bytes before its wait.  Commands still queued
 * when the program ends are dropped.
 *
 * The wait functions return the tags of the mask that have completed:
 * cop_dma_wait_all the whole mask, cop_dma_wait_any at least one,
 * cop_dma_status without waiting.  The issue and the wait are inline, so
 * their cycles (a wait's are DMA wait) show in the calling function.
 */
void __cop_mfc_enqueue(uint32_t op, uint32_t ls, uint32_t ea, uint32_t size,
                       uint32_t tag);
uint32_t __cop_mfc_complete(void);

static inline __attribute__((always_inline)) void
cop_dma_issue(uint32_t op, uint32_t ls, uint32_t ea, size_t size, unsigned tag)
{
    __cop_mfc_enqueue(op, ls, ea, (uint32_t)size, tag);
    __asm__ volatile(".word %0" : : "i"(COP_MARK_DMA_ISSUE) : "memory");
}

static inline __attribute__((always_inline)) void
cop_dma_get(void *ls, const void *ea, size_t size, unsigned tag)
{
    cop_dma_issue(COP_MFC_GET, (uint32_t)(uintptr_t)ls,
                  (uint32_t)(uintptr_t)ea, size, tag);
}

static inline __attribute__((always_inline)) void
cop_dma_put(const void *ls, void *ea, size_t size, unsigned tag)
{
    cop_dma_issue(COP_MFC_PUT, (uint32_t)(uintptr_t)ls,
                  (uint32_t)(uintptr_t)ea, size, tag);
}

static inline __attribute__((always_inline)) uint32_t
cop_dma_wait(uint32_t tag_mask, unsigned mode)
{
    volatile struct cop_mfc *mfc =
        (volatile struct cop_mfc *)(uintptr_t)COP_MFC_BASE;

    mfc->wait_mask = tag_mask;
    mfc->wait_mode = mode;
    mfc->now_lo = 0xffffffffu;
    mfc->now_hi = 0xffffffffu;
    __asm__ volatile(".word %0" : : "i"(COP_MARK_DMA_WAIT) : "memory");
    return __cop_mfc_complete();
}

static inline __attribute__((always_inline)) uint32_t
cop_dma_wait_all(uint32_t tag_mask)
{
    return cop_dma_wait(tag_mask, COP_MFC_WAIT_ALL);
}

static inline __attribute__((always_inline)) uint32_t
cop_dma_wait_any(uint32_t tag_mask)
{
    return cop_dma_wait(tag_mask, COP_MFC_WAIT_ANY);
}

static inline __attribute__((always_inline)) uint32_t
cop_dma_status(uint32_t tag_mask)
{
    return cop_dma_wait(tag_mask, COP_MFC_WAIT_NONE);
}

/*
 * The mailboxes, the Cell's way (docs/coprocessor-abi.md, "Mailboxes"):
 * 32-bit messages from the host program (the inbound mailbox, 4 deep)
 * and to it (the outbound one, 1 deep), which the host reaches with
 * libcop's cop_mailbox_write and cop_mailbox_read.  cop_mbox_read takes
 * the oldest inbound message, waiting while there is none;
 * cop_mbox_write sends one, waiting while the outbound mailbox is full
 * (until the host reads); cop_mbox_count says how many inbound messages
 * have arrived.  They are inline, so a wait (mailbox wait, in the model's
 * cycles: its rule is in the docs) shows in the calling function.  The
 * trace unit serves them; without one the program ends with "cop:
 * mailbox: ..." and status 134.
 */
_Noreturn void __cop_mbox_unserved(void);

static inline __attribute__((always_inline)) uint32_t
cop_mbox_call(uint32_t value, int marker_read, int marker_write)
{
    volatile struct cop_mfc *mfc =
        (volatile struct cop_mfc *)(uintptr_t)COP_MFC_BASE;

    mfc->mbox_value = value;
    mfc->mbox_done = 0;
    if (marker_read)
        __asm__ volatile(".word %0" : : "i"(COP_MARK_MBOX_READ) : "memory");
    else if (marker_write)
        __asm__ volatile(".word %0" : : "i"(COP_MARK_MBOX_WRITE) : "memory");
    else
        __asm__ volatile(".word %0" : : "i"(COP_MARK_MBOX_COUNT) : "memory");
    if (!mfc->mbox_done)
        __cop_mbox_unserved();
    return mfc->mbox_value;
}

static inline __attribute__((always_inline)) uint32_t
cop_mbox_read(void)
{
    return cop_mbox_call(0, 1, 0);
}

static inline __attribute__((always_inline)) void
cop_mbox_write(uint32_t value)
{
    cop_mbox_call(value, 0, 1);
}

static inline __attribute__((always_inline)) unsigned
cop_mbox_count(void)
{
    return cop_mbox_call(0, 0, 0);
}

#endif
