/* pong.c — overlay "pong" (region 1) of the calltree test program. */
#include "emulator/tests/calltree/calltree.h"

uint32_t pong(uint32_t n)
{
    return hot_b(n) + 4;
}
