/* ovl2_a.c — the first overlay of region 2. */
int ovl2_a_count(int x)
{
    int bits = 0;

    while (x) {
        bits += x & 1;
        x = (int)((unsigned)x >> 1);
    }
    return bits;
}
