/* ovl2_b.c — the second overlay of region 2, with two functions. */
static int __attribute__((noinline)) ovl2_b_step(int x)
{
    return x * 31 + 17;
}

int ovl2_b_mix(int x, int y)
{
    for (int i = 0; i < 3; i++)
        x = ovl2_b_step(x ^ y);
    return x;
}
