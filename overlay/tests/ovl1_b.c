/* ovl1_b.c — the largest overlay of region 1: it sets the region's size. */
static unsigned ovl1_b_rotate(unsigned value, int by)
{
    return (value << (by & 31)) | (value >> ((32 - by) & 31));
}

int ovl1_b_checksum(const unsigned char *bytes, int length)
{
    unsigned sum = 0x12345678u;

    for (int i = 0; i < length; i++) {
        sum = ovl1_b_rotate(sum, 5) ^ bytes[i];
        sum += (unsigned)i * 2654435761u;
        if (sum & 1)
            sum ^= 0xedb88320u;
    }
    for (int round = 0; round < 4; round++)
        sum = ovl1_b_rotate(sum, round * 7 + 3) * 0x9e3779b1u;
    return (int)sum;
}
