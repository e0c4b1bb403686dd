/*
 * trap.c — a slot-stub test guest that does some work, prints it, and
 * then executes an illegal instruction: its context must fault (mcause 2)
 * and leave the slot to the others.
 */
#include "guest.h"

int main(void)
{
    uint32_t h = 7;

    for (uint32_t i = 0; i < 20000; i++)
        h = h * 31u + i;
    guest_puts("trap ");
    guest_put_hex(h);
    guest_puts("\n");
    __asm__ volatile(".word 0x00000000");     /* illegal instruction */
    return 0;
}
