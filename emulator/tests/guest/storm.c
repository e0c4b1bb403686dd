/*
 * storm.c — a trap storm: the guest points its trap vector (mtvec) at a
 * word of zeros and then executes an illegal instruction.  The vector's
 * first instruction is illegal too, so every trap is taken at the vector
 * itself, for ever, with nothing retired between.  cop-run and copsim's
 * slots must end it with "trap storm at 0x... (mtvec 0x...)" (issue 32).
 */
#include "guest.h"

int main(void)
{
    guest_puts("storm\n");
    __asm__ volatile(".option push\n"
                     ".option arch, +zicsr\n"
                     "    la      t0, 1f\n"
                     "    csrw    mtvec, t0\n"
                     "    .word   0\n"              /* illegal: to 1f */
                     "    .balign 4\n"
                     "1:  .word   0\n"              /* illegal: to 1b */
                     ".option pop\n" ::: "t0");
    return 0;
}
