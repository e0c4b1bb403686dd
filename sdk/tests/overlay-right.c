/* overlay-right.c — overlay "right" (region 1) of the overlay-calls test. */
#include "sdk/tests/overlay-calls.h"

int right_scale(int x)
{
    return x * 3;
}

int right_recurse(int depth)
{
    return depth == 0 ? 0 : 1 + left_recurse(depth - 1);
}

/* Calls into region 2 and then multiplies in its own code. */
int right_via_other(int x)
{
    return other_add(x, 5) * 2;
}
