/*
 * mbox.c - the timing and the moves of the coprocessor's mailboxes
 * (mbox.h).  The counters are read with acquire and written with release
 * order, so a message's words are in place before its counter says so:
 * the host does the same on its side (sdk/libcop/mailbox.c).
 */
#include "emulator/mbox.h"

#include <endian.h>
#include <stdio.h>

static uint32_t load(const volatile uint32_t *word)
{
    return le32toh(__atomic_load_n(word, __ATOMIC_ACQUIRE));
}

static void store(volatile uint32_t *word, uint32_t v)
{
    __atomic_store_n(word, htole32(v), __ATOMIC_RELEASE);
}

static uint64_t stamp_of(const volatile struct cop_mbox_message *msg)
{
    return (uint64_t)le32toh(msg->stamp_hi) << 32 | le32toh(msg->stamp_lo);
}

static uint64_t latency(const struct timing_model *m)
{
    return m ? m->mailbox_host_latency : 0;
}

/* The inbound messages written and not yet read; -1 when the counters
 * say more than the mailbox holds. */
static int64_t inbound(const volatile struct cop_mbox *mb, char *err,
                       size_t errlen)
{
    uint32_t put = load(&mb->in_put), taken = load(&mb->in_taken);

    if (put - taken > COP_MBOX_IN_DEPTH) {
        snprintf(err, errlen, "mailbox: the inbound mailbox says %u messages "
                 "written and %u read (it holds %u)", put, taken,
                 COP_MBOX_IN_DEPTH);
        return -1;
    }
    return put - taken;
}

enum mbox_result mbox_read(volatile struct cop_mbox *mb,
                           const struct timing_model *m, uint64_t now,
                           uint32_t *value, uint64_t *cycles, char *err,
                           size_t errlen)
{
    int64_t n = inbound(mb, err, errlen);
    uint32_t taken = load(&mb->in_taken);
    const volatile struct cop_mbox_message *msg;
    uint64_t arrival;

    if (n < 0)
        return MBOX_ERROR;
    if (!n)
        return MBOX_BLOCKED;
    msg = &mb->in[taken % COP_MBOX_IN_DEPTH];
    arrival = m ? stamp_of(msg) + latency(m) : 0;
    *value = le32toh(msg->value);
    *cycles = arrival > now ? arrival - now : 0;
    store(&mb->in_taken, taken + 1);
    return MBOX_DONE;
}

enum mbox_result mbox_write(volatile struct cop_mbox *mb,
                            const struct timing_model *m, uint64_t now,
                            uint32_t value, uint64_t *cycles, char *err,
                            size_t errlen)
{
    uint32_t put = load(&mb->out_put), taken = load(&mb->out_taken);
    volatile struct cop_mbox_message *msg;
    uint64_t free_at = 0, at;

    if (put - taken > COP_MBOX_OUT_DEPTH) {
        snprintf(err, errlen, "mailbox: the outbound mailbox says %u "
                 "messages written and %u read (it holds %u)", put, taken,
                 COP_MBOX_OUT_DEPTH);
        return MBOX_ERROR;
    }
    if (put - taken == COP_MBOX_OUT_DEPTH)
        return MBOX_BLOCKED;
    if (put && m)
        free_at = stamp_of(&mb->out[(put - 1) % COP_MBOX_OUT_DEPTH])
                  + latency(m);
    *cycles = free_at > now ? free_at - now : 0;
    at = now + *cycles;
    msg = &mb->out[put % COP_MBOX_OUT_DEPTH];
    msg->value = htole32(value);
    msg->stamp_lo = htole32((uint32_t)at);
    msg->stamp_hi = htole32((uint32_t)(at >> 32));
    store(&mb->out_put, put + 1);
    return MBOX_DONE;
}

int mbox_count(const volatile struct cop_mbox *mb,
               const struct timing_model *m, uint64_t now, char *err,
               size_t errlen)
{
    int64_t n = inbound(mb, err, errlen);
    uint32_t taken = load(&mb->in_taken);
    int arrived = 0;

    for (int64_t i = 0; i < n; i++) {
        const volatile struct cop_mbox_message *msg =
            &mb->in[(taken + (uint32_t)i) % COP_MBOX_IN_DEPTH];

        if (m && stamp_of(msg) + latency(m) > now)
            break;
        arrived++;
    }
    return n < 0 ? -1 : arrived;
}
