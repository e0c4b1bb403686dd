/*
 * mailbox.c — the host's side of a context's mailboxes (sdk/libcop.h,
 * docs/coprocessor-abi.md "Mailboxes").
 *
 * The mailboxes are struct cop_mbox (abi/cop-abi.h), the last page of
 * the data window that cop_context_create mapped, in memory the context's
 * trace unit maps too (the guest RAM file of a QEMU of its own, or the
 * slot model's main memory): so they work in both context models, without
 * a request to copsim, from any thread while another is blocked in
 * cop_context_run.  The host writes in_put, out_taken and seen and the
 * inbound messages; the trace unit the rest.  Counters are stored with
 * release order after the message words and woken through futexes (the
 * mapping is shared, so the futex is the file page's: the trace unit
 * sleeps on in_put and out_taken, we on out_put).
 *
 * Timing: the host has no modelled time of its own.  It keeps `seen`, the
 * write cycle (stamp) of the newest outbound message it read, and stamps
 * each inbound message with it; the trace unit makes the message arrive
 * mailbox.host_latency cycles after that stamp (emulator/mbox.h).  So the
 * modelled cycles never depend on how long the host took in wall time.
 */
#include "sdk/libcop.h"

#include "abi/cop-abi.h"
#include "sdk/libcop/libcop-int.h"

#include <endian.h>
#include <errno.h>
#include <limits.h>
#include <linux/futex.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

static uint32_t load(const volatile uint32_t *word)
{
    return le32toh(__atomic_load_n(word, __ATOMIC_ACQUIRE));
}

static void store_and_wake(volatile uint32_t *word, uint32_t v)
{
    __atomic_store_n(word, htole32(v), __ATOMIC_RELEASE);
    syscall(SYS_futex, word, FUTEX_WAKE, INT_MAX, NULL, NULL, 0);
}

int cop_mailbox_write(cop_context_t *ctx, uint32_t value)
{
    volatile struct cop_mbox *mb = libcop_mailbox(ctx);
    uint32_t put = load(&mb->in_put), taken = load(&mb->in_taken);
    volatile struct cop_mbox_message *msg;

    if (put - taken >= COP_MBOX_IN_DEPTH) {
        errno = EAGAIN;
        return libcop_fail("context %llu: the inbound mailbox is full (%u "
                           "messages unread)",
                           (unsigned long long)cop_context_id(ctx),
                           COP_MBOX_IN_DEPTH);
    }
    msg = &mb->in[put % COP_MBOX_IN_DEPTH];
    msg->value = htole32(value);
    msg->stamp_lo = mb->seen_lo;
    msg->stamp_hi = mb->seen_hi;
    store_and_wake(&mb->in_put, put + 1);
    return 0;
}

/* Milliseconds since an arbitrary start, on the monotonic clock. */
static int64_t now_ms(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Sleeps until out_put may differ from `seen` or `deadline` (ms, -1:
 * none) has passed. */
static void sleep_for_message(volatile uint32_t *out_put, uint32_t seen,
                              int64_t deadline)
{
    struct timespec ts, *timeout = NULL;

    if (deadline >= 0) {
        int64_t left = deadline - now_ms();

        if (left < 0)
            left = 0;
        ts.tv_sec = left / 1000;
        ts.tv_nsec = (left % 1000) * 1000000;
        timeout = &ts;
    }
    syscall(SYS_futex, out_put, FUTEX_WAIT, htole32(seen), timeout, NULL, 0);
}

int cop_mailbox_read(cop_context_t *ctx, uint32_t *value, int timeout_ms)
{
    volatile struct cop_mbox *mb = libcop_mailbox(ctx);
    int64_t deadline = timeout_ms < 0 ? -1 : now_ms() + timeout_ms;
    uint32_t put, taken = load(&mb->out_taken);
    const volatile struct cop_mbox_message *msg;
    uint64_t stamp, seen;

    while ((put = load(&mb->out_put)) == taken) {
        if (deadline >= 0 && now_ms() >= deadline) {
            errno = ETIMEDOUT;
            return libcop_fail("context %llu: no message in the outbound "
                               "mailbox within %d ms",
                               (unsigned long long)cop_context_id(ctx),
                               timeout_ms);
        }
        sleep_for_message(&mb->out_put, put, deadline);
    }
    msg = &mb->out[taken % COP_MBOX_OUT_DEPTH];
    *value = le32toh(msg->value);
    stamp = (uint64_t)le32toh(msg->stamp_hi) << 32 | le32toh(msg->stamp_lo);
    seen = (uint64_t)le32toh(mb->seen_hi) << 32 | le32toh(mb->seen_lo);
    if (stamp > seen) {
        mb->seen_lo = htole32((uint32_t)stamp);
        mb->seen_hi = htole32((uint32_t)(stamp >> 32));
    }
    store_and_wake(&mb->out_taken, taken + 1);
    return 0;
}
