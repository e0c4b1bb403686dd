/*
 * overlay-calls.c — resident part of a coprocessor program that calls
 * overlay functions in the ways that can go wrong, for
 * sdk/tests/test_overlays.py.  Each command prints its result and the
 * guard words, "guards=G1,G2", at the end.
 *
 *   chain X       left_chain(X): left calls right in the same region
 *   via X         right_via_other(X): region 1 calls region 2
 *   pointer X     other_apply(right_scale, X): a call through a pointer
 *   wide          left_wide(1, ..., 10): stack arguments, 64-bit result
 *   recurse N     left_recurse(N): left and right call each other N deep
 */
#include "sdk/cop.h"
#include "sdk/tests/overlay-calls.h"

#include <stdlib.h>
#include <string.h>

int main(int argc, char **argv)
{
    const char *command = argc > 1 ? argv[1] : "";
    int x = argc > 2 ? atoi(argv[2]) : 0;

    if (strcmp(command, "chain") == 0)
        cop_printf("chain=%d\n", left_chain(x));
    else if (strcmp(command, "via") == 0)
        cop_printf("via=%d\n", right_via_other(x));
    else if (strcmp(command, "pointer") == 0)
        cop_printf("pointer=%d\n", other_apply(right_scale, x));
    else if (strcmp(command, "wide") == 0)
        cop_printf("wide=%lld\n", left_wide(1, 2, 3, 4, 5, 6, 7, 8, 9, 10));
    else if (strcmp(command, "recurse") == 0)
        cop_printf("recurse=%d\n", left_recurse(x));
    else
        return 64;
    cop_printf("guards=%u,%u\n", cop_overlay_loaded(1), cop_overlay_loaded(2));
    return 0;
}
