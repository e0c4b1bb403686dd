/* ovl1_a.c — the smallest overlay of region 1. */
int ovl1_a_square(int x)
{
    return x * x;
}
