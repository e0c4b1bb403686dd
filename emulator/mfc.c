/*
 * mfc.c - the timing of the coprocessor's DMA transfers (mfc.h): checks
 * the commands the runtime queues in the channel block, stamps each with
 * its modelled completion, and decides how long a wait for tags lasts.
 *
 * The guest wrote the block; nothing in it is trusted: every index and
 * address is checked before use, and a bad one is an error for the
 * plugin to end the context with, never an access outside the block.
 */
#include "emulator/mfc.h"

#include <endian.h>
#include <stdio.h>

static uint64_t get64(const volatile uint32_t *lo, const volatile uint32_t *hi)
{
    return (uint64_t)le32toh(*hi) << 32 | le32toh(*lo);
}

static void put64(volatile uint32_t *lo, volatile uint32_t *hi, uint64_t v)
{
    *lo = htole32((uint32_t)v);
    *hi = htole32((uint32_t)(v >> 32));
}

static uint32_t queued(const volatile struct cop_mfc *mfc)
{
    uint32_t count = le32toh(mfc->count);

    return count > COP_MFC_QUEUE_DEPTH ? COP_MFC_QUEUE_DEPTH + 1 : count;
}

int mfc_engine_range(const volatile struct cop_mfc *mfc, uint32_t *start,
                     uint32_t *end)
{
    if (le32toh(mfc->magic) != COP_MFC_MAGIC)
        return 0;
    *start = le32toh(mfc->engine_start);
    *end = le32toh(mfc->engine_end);
    return 1;
}

/* Whether [addr, addr + size) lies in [base, base + limit). */
static int inside(uint32_t addr, uint32_t size, uint32_t base, uint32_t limit)
{
    return addr >= base && addr - base <= limit && size <= limit - (addr - base);
}

static const char *check_command(const volatile struct cop_mfc_command *c,
                                 const struct mfc_bounds *b)
{
    uint32_t op = le32toh(c->op), size = le32toh(c->size);
    uint32_t ls = le32toh(c->ls), ea = le32toh(c->ea);

    if (op != COP_MFC_GET && op != COP_MFC_PUT)
        return "not a get or a put";
    if (le32toh(c->tag) >= COP_MFC_TAGS)
        return "tag out of 0..31";
    if (!size || size > COP_MFC_MAX_SIZE || size % COP_MFC_ALIGN
        || ls % COP_MFC_ALIGN || ea % COP_MFC_ALIGN)
        return "size or address not a multiple of 16, or size over 16 KiB";
    if (!inside(ls, size, b->ls_base, b->ls_size))
        return "local-store range outside the local store";
    if (!inside(ea, size, b->data_base, b->data_size))
        return "main-memory range outside the data window";
    return NULL;
}

int mfc_issue(volatile struct cop_mfc *mfc, const struct timing_model *m,
              const struct mfc_bounds *bounds, uint64_t now, uint32_t pc,
              char *err, size_t errlen)
{
    uint32_t n = queued(mfc);
    volatile struct cop_mfc_command *c;
    uint64_t start, bus, hold;
    const char *why;

    if (!n || n > COP_MFC_QUEUE_DEPTH) {
        snprintf(err, errlen, "DMA issued at 0x%08x with %u commands queued "
                 "(1..%u expected)", pc, le32toh(mfc->count),
                 COP_MFC_QUEUE_DEPTH);
        return -1;
    }
    c = &mfc->queue[n - 1];
    why = check_command(c, bounds);
    if (why) {
        snprintf(err, errlen, "DMA command issued at 0x%08x (ls 0x%08x ea "
                 "0x%08x size %u tag %u): %s", pc, le32toh(c->ls),
                 le32toh(c->ea), le32toh(c->size), le32toh(c->tag), why);
        return -1;
    }
    c->pc = htole32(pc);
    if (!m) {
        put64(&c->done_lo, &c->done_hi, now);
        return 0;
    }
    bus = get64(&mfc->bus_lo, &mfc->bus_hi);
    start = now > bus ? now : bus;
    hold = ((uint64_t)le32toh(c->size) + m->dma_bytes_per_cycle - 1)
           / m->dma_bytes_per_cycle;
    put64(&mfc->bus_lo, &mfc->bus_hi, start + hold);
    put64(&c->done_lo, &c->done_hi, start + hold + m->dma_latency);
    return 0;
}

/* The latest completion among the queued commands of tag t; 0 if none. */
static uint64_t tag_done(const volatile struct cop_mfc *mfc, uint32_t n,
                         uint32_t t, uint32_t *which)
{
    uint64_t done = 0;

    for (uint32_t i = 0; i < n; i++) {
        uint64_t d = get64(&mfc->queue[i].done_lo, &mfc->queue[i].done_hi);

        if (le32toh(mfc->queue[i].tag) == t && d >= done) {
            done = d;
            *which = i;
        }
    }
    return done;
}

/* The cycle a wait ends: every tag of the mask done (all), the first of
 * them (any: a tag with nothing outstanding is done now), or now (none);
 * *which is the command it waited for last. */
static uint64_t wait_end(const volatile struct cop_mfc *mfc, uint32_t n,
                         uint32_t mask, uint32_t mode, uint64_t now,
                         uint32_t *which)
{
    uint64_t end = mode == COP_MFC_WAIT_ANY ? UINT64_MAX : now;

    if (mode == COP_MFC_WAIT_NONE || !mask)
        return now;
    for (uint32_t t = 0; t < COP_MFC_TAGS; t++) {
        uint32_t i = 0;
        uint64_t done;

        if (!(mask >> t & 1))
            continue;
        done = tag_done(mfc, n, t, &i);
        if (done < now)
            done = now;
        if (mode == COP_MFC_WAIT_ALL ? done > end : done < end) {
            end = done;
            *which = i;
        }
    }
    return end;
}

int mfc_wait(volatile struct cop_mfc *mfc, uint64_t now, uint64_t *cycles,
             struct mfc_wait_info *info, char *err, size_t errlen)
{
    uint32_t n = queued(mfc), mode = le32toh(mfc->wait_mode);
    uint32_t which = 0;
    uint64_t end;

    info->valid = 0;
    if (n > COP_MFC_QUEUE_DEPTH || mode > COP_MFC_WAIT_NONE) {
        snprintf(err, errlen, "DMA wait with %u commands queued and mode %u "
                 "(at most %u commands; modes 0..2)", le32toh(mfc->count),
                 mode, COP_MFC_QUEUE_DEPTH);
        return -1;
    }
    end = wait_end(mfc, n, le32toh(mfc->wait_mask), mode, now, &which);
    *cycles = end - now;
    if (*cycles) {
        info->valid = 1;
        info->tag = le32toh(mfc->queue[which].tag);
        info->pc = le32toh(mfc->queue[which].pc);
    }
    put64(&mfc->now_lo, &mfc->now_hi, end);
    return 0;
}
