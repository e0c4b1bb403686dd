/* ping.c — overlay "ping" (region 1) of the calltree test program. */
#include "emulator/tests/calltree/calltree.h"

/* Calls pong, which replaces this code while it runs; the manager puts
 * ping back before pong returns here. */
uint32_t ping(uint32_t n)
{
    return pong(n) + 3;
}
