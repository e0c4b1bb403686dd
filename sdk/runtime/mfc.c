/*
 * mfc.c — the coprocessor's side of the memory flow controller: DMA
 * between the local store and the data window (docs/coprocessor-abi.md,
 * "DMA"; cop.h's cop_dma_* functions).
 *
 * The channel is the block at COP_MFC_BASE (abi/cop-abi.h).
 * __cop_mfc_enqueue checks a command and appends it to the block's queue;
 * cop.h then executes the issue marker, at which the trace unit stamps
 * the command's modelled completion (emulator/mfc.c).  A wait writes its
 * tag mask and mode and all ones as the wait's end, executes the wait
 * marker (the trace unit charges the wait's cycles to it and writes the
 * cycle it ends at), and calls the transfer engine, __cop_mfc_complete:
 * every queued command complete by then has its bytes copied, with guest
 * stores, and leaves the queue; a fence.i follows.  Without a trace unit
 * the end stays all ones: every transfer completes at the wait.
 *
 * The engine lives in section .text.cop_mfc_engine, whose bounds cop.ld
 * names and __cop_mfc_init publishes in the block: the trace unit neither
 * counts nor samples that code, which stands for the MFC's own work (its
 * time is the model's).  So the engine calls nothing and copies with its
 * own loop.  Copying at the wait is what makes data arrive only then (a
 * program that reads before it waits sees the old bytes) and what keeps
 * DMA into code safe: QEMU sees the stores and drops stale translations.
 */
#include "sdk/cop.h"

extern char __cop_mfc_engine_start[], __cop_mfc_engine_end[];

void __cop_mfc_init(void);
uint32_t __cop_mfc_complete(void)
    __attribute__((section(".text.cop_mfc_engine"), noinline));

static volatile struct cop_mfc *channel(void)
{
    return (volatile struct cop_mfc *)(uintptr_t)COP_MFC_BASE;
}

/* Called by __cop_start before main: an empty queue, the engine named. */
void __cop_mfc_init(void)
{
    volatile struct cop_mfc *mfc = channel();

    mfc->count = 0;
    mfc->bus_lo = mfc->bus_hi = 0;
    mfc->engine_start = (uint32_t)(uintptr_t)__cop_mfc_engine_start;
    mfc->engine_end = (uint32_t)(uintptr_t)__cop_mfc_engine_end;
    mfc->magic = COP_MFC_MAGIC;
}

/* Whether [addr, addr + size) lies in [base, base + limit). */
static int inside(uint32_t addr, uint32_t size, uint32_t base, uint32_t limit)
{
    return addr >= base && addr - base <= limit && size <= limit - (addr - base);
}

void __cop_mfc_enqueue(uint32_t op, uint32_t ls, uint32_t ea, uint32_t size,
                       uint32_t tag)
{
    volatile struct cop_mfc *mfc = channel();
    volatile struct cop_mfc_command *c;
    size_t data_size;
    uint32_t data = (uint32_t)(uintptr_t)cop_data_window(&data_size);
    const char *what = op == COP_MFC_GET ? "get" : "put";

    if (tag >= COP_MFC_TAGS)
        cop_fatal("dma: %s with tag %lu: tags are 0..%u", what,
                  (unsigned long)tag, COP_MFC_TAGS - 1);
    if (!size || size > COP_MFC_MAX_SIZE || size % COP_MFC_ALIGN
        || ls % COP_MFC_ALIGN || ea % COP_MFC_ALIGN)
        cop_fatal("dma: %s of %lu bytes ls 0x%08lx ea 0x%08lx: sizes and "
                  "addresses are multiples of 16, sizes at most 16384", what,
                  (unsigned long)size, (unsigned long)ls, (unsigned long)ea);
    if (!inside(ls, size, COP_LS_BASE, COP_LS_SIZE))
        cop_fatal("dma: %s of %lu bytes at ls 0x%08lx: outside the local "
                  "store", what, (unsigned long)size, (unsigned long)ls);
    if (!inside(ea, size, data, (uint32_t)data_size))
        cop_fatal("dma: %s of %lu bytes at ea 0x%08lx: outside the data "
                  "window", what, (unsigned long)size, (unsigned long)ea);
    if (mfc->count >= COP_MFC_QUEUE_DEPTH)
        cop_fatal("dma: %s with %u commands outstanding: the queue is full "
                  "(wait for a tag first)", what, COP_MFC_QUEUE_DEPTH);
    c = &mfc->queue[mfc->count];
    c->op = op;
    c->ls = ls;
    c->ea = ea;
    c->size = size;
    c->tag = tag;
    c->pc = 0;
    c->done_lo = c->done_hi = 0;
    mfc->count = mfc->count + 1;
}

/* The transfer engine (see the top): moves every command complete at the
 * wait's end and returns the waited tags that have nothing left queued. */
uint32_t __cop_mfc_complete(void)
{
    volatile struct cop_mfc *mfc = channel();
    uint32_t n = mfc->count, kept = 0, pending = 0;
    uint32_t now_hi = mfc->now_hi, now_lo = mfc->now_lo;

    for (uint32_t i = 0; i < n; i++) {
        volatile struct cop_mfc_command *c = &mfc->queue[i];
        uint32_t hi = c->done_hi, lo = c->done_lo;

        if (hi < now_hi || (hi == now_hi && lo <= now_lo)) {
            volatile uint32_t *to, *from;

            to = (volatile uint32_t *)(uintptr_t)(c->op == COP_MFC_GET
                                                  ? c->ls : c->ea);
            from = (volatile uint32_t *)(uintptr_t)(c->op == COP_MFC_GET
                                                    ? c->ea : c->ls);
            for (uint32_t w = 0; w < c->size / 4; w++)
                to[w] = from[w];
            continue;
        }
        pending |= 1u << c->tag;
        if (kept != i) {
            volatile uint32_t *to = (volatile uint32_t *)&mfc->queue[kept];
            volatile uint32_t *from = (volatile uint32_t *)c;

            for (uint32_t w = 0; w < sizeof(*c) / 4; w++)
                to[w] = from[w];
        }
        kept++;
    }
    mfc->count = kept;
    __asm__ volatile("fence.i" ::: "memory");
    return mfc->wait_mask & ~pending;
}

/* A mailbox marker nobody served (no trace unit with the channel mapped):
 * the message cannot arrive, so the program ends here. */
void __cop_mbox_unserved(void)
{
    cop_fatal("mailbox: no trace unit serves the mailboxes (run the "
              "program under copsim or cop-run with its trace unit)");
}
