/* histogram.c — overlay "histogram" (region 1): median brightness. */
#include "examples/overlays/overlays.h"

#define SAMPLE 64

static uint32_t counts[256];

/* The brightness below which half of the blurred pixels lie, checked
 * against a sorted sample taken with the sort overlay (region 2). */
uint32_t histogram_median(void)
{
    uint32_t sample[SAMPLE], seen = 0, median = 0;

    for (int i = 0; i < 256; i++)
        counts[i] = 0;
    for (int i = 0; i < IMAGE_SIDE * IMAGE_SIDE; i++)
        counts[blurred[i]]++;
    while (median < 255 && seen + counts[median] < IMAGE_SIDE * IMAGE_SIDE / 2)
        seen += counts[median++];
    for (int i = 0; i < SAMPLE; i++)
        sample[i] = blurred[(i * 61) % (IMAGE_SIDE * IMAGE_SIDE)];
    shell_sort(sample, SAMPLE);
    return median << 8 | sample[SAMPLE / 2];
}
