/* ovl1_c.c — a middle-sized overlay of region 1, with a lookup table. */
static const int ovl1_c_table[8] = { 3, 1, 4, 1, 5, 9, 2, 6 };

int ovl1_c_fold(int x)
{
    int folded = 0;

    for (int i = 0; i < 8; i++)
        folded += ovl1_c_table[(x + i) & 7] * (x >> i);
    return folded;
}
