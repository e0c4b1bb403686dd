/* overlay-left.c — overlay "left" (region 1) of the overlay-calls test. */
#include "sdk/tests/overlay-calls.h"

static int left_mix(int y)
{
    return y * 7 - 2;
}

/* Calls right, which replaces this code; the rest must still be ours. */
int left_chain(int x)
{
    int y = right_scale(x);

    return left_mix(y) + 1;
}

int left_recurse(int depth)
{
    return depth == 0 ? 0 : 1 + right_recurse(depth - 1);
}

/* Ten arguments: the last two travel on the stack through the stub. */
long long left_wide(int a, int b, int c, int d, int e, int f, int g, int h,
                    int i, int j)
{
    long long sum = a + b + c + d + e + f + g + h;

    return sum * 1000000000000LL + (long long)i * 100 + j;
}
