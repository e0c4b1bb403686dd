/*
 * overlays — five overlays in two regions, swapped many times: the example
 * for profiling code that shares local-store addresses.
 *
 *   overlays [ROUNDS]       (default 3)
 *
 * Each round makes a new picture and key set, then calls, in this order:
 * blur_picture (region 1; it calls crc16_bitwise, in the same region, so
 * blur is loaded again when the call returns), count_primes (region 2),
 * crc16_bitwise (region 1), shell_sort (region 2) and histogram_median
 * (region 1; it calls shell_sort, already loaded in region 2).  That is 7
 * overlay loads per round, and the run ends with histogram in region 1 and
 * sort in region 2.  It prints one line of digests, the number of overlay
 * loads and the final guard words.  One round is about 0.5 million
 * instructions.
 */
#include "sdk/cop.h"
#include "examples/overlays/overlays.h"
#include "examples/xorshift.h"

#include <errno.h>
#include <stdlib.h>

#define DEFAULT_ROUNDS 3

uint8_t picture[IMAGE_SIDE * IMAGE_SIDE];
uint8_t blurred[IMAGE_SIDE * IMAGE_SIDE];
uint8_t sieve_marks[SIEVE_LIMIT];
uint32_t keys[KEY_COUNT];

/* A diagonal gradient with noise, and random keys. */
static void make_inputs(uint32_t round)
{
    uint32_t state = 0x2545f491u + round * 0x9e3779b9u;

    for (int y = 0; y < IMAGE_SIDE; y++)
        for (int x = 0; x < IMAGE_SIDE; x++)
            picture[y * IMAGE_SIDE + x] =
                (uint8_t)((x + y) * 2 + (xorshift32(&state) & 31));
    for (int i = 0; i < KEY_COUNT; i++)
        keys[i] = xorshift32(&state);
}

static uint32_t keys_digest(void)
{
    uint32_t digest = 0;

    for (int i = 0; i < KEY_COUNT; i++)
        digest = digest * 31 + keys[i];
    return digest;
}

int main(int argc, char **argv)
{
    long rounds = argc > 1 ? strtol(argv[1], NULL, 10) : DEFAULT_ROUNDS;
    uint32_t digest = 0;

    if (rounds < 1 || errno == ERANGE) {
        cop_printf("overlays: ROUNDS must be a positive number\n");
        return 2;
    }
    for (long round = 0; round < rounds; round++) {
        make_inputs((uint32_t)round);
        digest = digest * 33 + blur_picture();
        digest = digest * 33 +
                 count_primes(SIEVE_LIMIT - (uint32_t)round % 100);
        digest = digest * 33 + crc16_bitwise(picture, sizeof(picture));
        shell_sort(keys, KEY_COUNT);
        digest = digest * 33 + keys_digest();
        digest = digest * 33 + histogram_median();
    }
    cop_printf("overlays rounds=%ld digest=%08lx loads=%lu guards=%u,%u\n",
               rounds, (unsigned long)digest, cop_overlay_load_count(),
               cop_overlay_loaded(1), cop_overlay_loaded(2));
    return 0;
}
