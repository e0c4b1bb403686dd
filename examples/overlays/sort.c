/* sort.c — overlay "sort" (region 2): Shell sort with Ciura's gaps. */
#include "examples/overlays/overlays.h"

static const size_t gaps[] = {701, 301, 132, 57, 23, 10, 4, 1};

void shell_sort(uint32_t *values, size_t n)
{
    for (size_t g = 0; g < sizeof(gaps) / sizeof(gaps[0]); g++) {
        size_t gap = gaps[g];
        for (size_t i = gap; i < n; i++) {
            uint32_t value = values[i];
            size_t j = i;
            while (j >= gap && values[j - gap] > value) {
                values[j] = values[j - gap];
                j -= gap;
            }
            values[j] = value;
        }
    }
}
