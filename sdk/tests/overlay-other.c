/* overlay-other.c — overlay "other" (region 2) of the overlay-calls test. */
#include "sdk/tests/overlay-calls.h"

int other_add(int a, int b)
{
    return a + b;
}

/* Calls through a pointer that resident code took: the stub of its target. */
int other_apply(int (*function)(int), int x)
{
    return function(x) + 1;
}
