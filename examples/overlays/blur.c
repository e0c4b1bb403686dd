/* blur.c — overlay "blur" (region 1): a 3x3 box blur. */
#include "examples/overlays/overlays.h"

static uint32_t sum_3x3(int x, int y)
{
    uint32_t sum = 0;

    for (int dy = -1; dy <= 1; dy++)
        for (int dx = -1; dx <= 1; dx++)
            sum += picture[(y + dy) * IMAGE_SIDE + (x + dx)];
    return sum;
}

/* Blurs the inside of picture, then checksums it with the crc overlay,
 * which replaces this code until the call returns. */
uint32_t blur_picture(void)
{
    for (int y = 1; y < IMAGE_SIDE - 1; y++)
        for (int x = 1; x < IMAGE_SIDE - 1; x++)
            blurred[y * IMAGE_SIDE + x] = (uint8_t)(sum_3x3(x, y) / 9);
    return crc16_bitwise(blurred, sizeof(blurred)) ^ blurred[IMAGE_SIDE + 1];
}
