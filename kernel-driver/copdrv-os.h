/* SPDX-License-Identifier: GPL-2.0 */
/*
 * copdrv-os.h - the thin OS shim under the portable driver core.
 *
 * The core (core.c, event-buffer.c) calls nothing but the functions
 * declared here, the freestanding stream encoder (escape-protocol/) and the
 * freestanding trace-unit register primitives (emulator/trace-regs.h).  It
 * uses no libc and no GLib, so that a Linux module port implements this
 * header with kernel services and builds the core unchanged:
 *
 *   shim function               hosted (os-hosted.c)      Linux module
 *   copdrv_os_alloc/free        calloc/free               kvzalloc/kvfree
 *   copdrv_os_lock/unlock       pthread mutex             mutex
 *   copdrv_os_now_ns            CLOCK_MONOTONIC           ktime_get_ns
 *   copdrv_os_timer_start/stop  poll thread, doorbell     kthread on hrtimer
 *                               futex                     deadlines
 *   copdrv_os_wake_producer     FUTEX_WAKE                nothing (host)
 *   copdrv_os_buffer_wake       non-blocking send         wake_up on a queue
 *   copdrv_os_read_ls           loads from mapped RAM     -EFAULT (no RAM)
 *
 * (linux/os-linux.c is the module's shim.)
 *
 * Every function takes the shim instance the host gave to copdrv_create().
 * kernel-driver/README.md describes the contract of each.
 */
#ifndef COPROF_COPDRV_OS_H
#define COPROF_COPDRV_OS_H

#ifdef __KERNEL__
#include <linux/build_bug.h>
#include <linux/types.h>
#include <linux/errno.h>
#include <linux/compiler.h>
#include <asm/barrier.h>
#else
#include <errno.h>
#include <stddef.h>
#include <stdint.h>

typedef uint8_t u8;
typedef uint16_t u16;
typedef uint32_t u32;
typedef uint64_t u64;
typedef int32_t s32;

#define BIT_ULL(n)	(1ull << (n))
#endif

/*
 * Memory accessors for words another agent writes at the same time (the
 * register file, which the emulators share, and the event buffer's
 * positions, which the reader moves).  Each access is one whole load or
 * store of a naturally aligned 32- or 64-bit word:
 *
 *   copdrv_read_once(p)          no ordering (READ_ONCE)
 *   copdrv_load_acquire(p)       later accesses stay after it
 *   copdrv_store_release(p, v)   earlier accesses stay before it
 *   copdrv_load_full(p)          a full barrier, then the load: orders an
 *                                earlier store before it (the producer's
 *                                stall handshake, a Dekker pair)
 *
 * Kernel: READ_ONCE and the virt_* barriers (the register file's other
 * party is a host process, not another CPU of this kernel, so the barriers
 * must hold on a !SMP guest, where the smp_* ones are compiler barriers).
 * Hosted: the GCC __atomic builtins the trace unit's accessors use too.
 * Each use in the core names the access of the other party it pairs with.
 */
#ifdef __KERNEL__
#define copdrv_read_once(p)		READ_ONCE(*(p))
/* each use in the core says which access of the other party it pairs with */
#define copdrv_load_acquire(p)		virt_load_acquire(p)
/* each use in the core says which access of the other party it pairs with */
#define copdrv_store_release(p, v)	virt_store_release(p, v)

static inline u32 copdrv_load_full_u32(const u32 *p)
{
	virt_mb();	/* pairs with the producer's full barrier in its stall */
	return READ_ONCE(*p);
}

#define copdrv_load_full(p)		copdrv_load_full_u32(p)
#else
#define copdrv_read_once(p)		__atomic_load_n(p, __ATOMIC_RELAXED)
#define copdrv_load_acquire(p)		__atomic_load_n(p, __ATOMIC_ACQUIRE)
#define copdrv_store_release(p, v)	__atomic_store_n(p, v, __ATOMIC_RELEASE)
#define copdrv_load_full(p)		__atomic_load_n(p, __ATOMIC_SEQ_CST)
#endif

struct copdrv_os;

/* Zeroed memory, or NULL.  May sleep; never called from the poll path. */
void *copdrv_os_alloc(struct copdrv_os *os, size_t bytes);
void copdrv_os_free(struct copdrv_os *os, void *ptr);

/*
 * The driver lock: serialises start, stop, poll and the context-switch
 * hooks.  It is held while a hook drains a slot, so it must be a lock that
 * the hook's caller may block on.
 */
void copdrv_os_lock(struct copdrv_os *os);
void copdrv_os_unlock(struct copdrv_os *os);

/* CLOCK_MONOTONIC, in nanoseconds. */
u64 copdrv_os_now_ns(struct copdrv_os *os);

/*
 * Calls copdrv_poll() every interval_ns from now on, from a context that
 * may take the driver lock, and copdrv_poll_doorbell() as soon as the
 * trace unit rings its doorbell: `doorbell` is the register file's
 * doorbell word, which producers increment (and FUTEX_WAKE, hosted) when
 * a FIFO passes its watermark or stalls.  The core says nothing more: how
 * the wait happens is the shim's (hosted: a futex wait with the time to
 * the next deadline as timeout; a module: the trace unit's interrupt
 * wakes the poll thread now).  Returns 0 or a negative errno.
 * timer_stop returns once no poll runs and none will; it is called
 * without the lock.
 */
int copdrv_os_timer_start(struct copdrv_os *os, u64 interval_ns,
			  u32 *doorbell);
void copdrv_os_timer_stop(struct copdrv_os *os);

/*
 * A producer is stalled on a full FIFO, waiting for the consumer to move
 * the slot's fifo_tail (`tail`): the core drained the slot, wake it.
 * Called with the lock held; must not sleep.
 */
void copdrv_os_wake_producer(struct copdrv_os *os, u32 *tail);

/*
 * The reader should come: the event buffer is past its watermark, has
 * waited long enough, or holds the stream's end.  Called without the lock.
 */
void copdrv_os_buffer_wake(struct copdrv_os *os);

/*
 * Reads count 32-bit little-endian words at byte offset `offset` of the
 * local store behind `ls` (the handle the host put in struct
 * copdrv_context).  The coprocessor may be writing them: each word is read
 * whole.  Returns 0, or -EFAULT when the words lie outside the local store.
 */
int copdrv_os_read_ls(struct copdrv_os *os, void *ls, u32 offset,
		      u32 *words, u32 count);

#endif /* COPROF_COPDRV_OS_H */
