/*
 * pingpong.c — the coprocessor half of the mailbox ping-pong example
 * (examples/pingpong/pingpong-host.c is the host half).
 *
 * Each round the coprocessor sends a number to the host through its
 * outbound mailbox (cop_mbox_write) and waits in its inbound mailbox
 * (cop_mbox_read) for the host's answer, the number's square plus one,
 * which it checks and adds up.  The first message read is the round
 * count.  A profile shows the wait at the read as mailbox wait:
 * mailbox.host_latency cycles (emulator/timing/spu.model) from each write
 * to the answer, less the few cycles the coprocessor spends in between.
 */
#include "sdk/cop.h"

/* A little work between rounds, so the profile is not all waiting. */
static uint32_t next_number(uint32_t x)
{
    for (int i = 0; i < 64; i++)
        x = x * 1664525u + 1013904223u;
    return x & 0xffffu;
}

int main(void)
{
    uint32_t rounds = cop_mbox_read();
    uint32_t x = 1, sum = 0, bad = 0;

    for (uint32_t r = 0; r < rounds; r++) {
        uint32_t answer;

        x = next_number(x);
        cop_mbox_write(x);
        answer = cop_mbox_read();
        bad += answer != x * x + 1;
        sum += answer;
    }
    cop_printf("pingpong: %lu rounds, sum %08lx, %lu wrong answers\n",
               (unsigned long)rounds, (unsigned long)sum, (unsigned long)bad);
    return bad != 0;
}
