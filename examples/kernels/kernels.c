/*
 * kernels — three hot functions of clearly different cost, run round after
 * round on fresh inputs: the first thing to profile.
 *
 *   kernels [ROUNDS]        (default 4)
 *
 * Per round, with inputs drawn from a xorshift32 generator seeded by the
 * round number: matrix_multiply (32x32 integer matrices, about 52% of the
 * instructions), crc32_bitwise (a bit-at-a-time CRC-32 of 2 KiB, about
 * 28%) and insertion_sort (160 keys, about 11%); filling the inputs takes
 * the other 9%.  One round is about 451,000 instructions (measured with
 * QEMU's -icount), so ROUNDS = 1200 runs about 540 million.  The output is
 * one line of digests that depends only on ROUNDS; examples/test_examples.py
 * recomputes it in Python.
 */
#include "sdk/cop.h"
#include "examples/xorshift.h"

#include <errno.h>
#include <stdlib.h>

#define DEFAULT_ROUNDS 4
#define MATRIX_N 32
#define CRC_BYTES 2048
#define SORT_KEYS 160

static int32_t matrix_a[MATRIX_N][MATRIX_N];
static int32_t matrix_b[MATRIX_N][MATRIX_N];
static int32_t matrix_c[MATRIX_N][MATRIX_N];
static uint8_t crc_input[CRC_BYTES];
static uint32_t sort_keys[SORT_KEYS];

uint32_t matrix_multiply(void);
uint32_t crc32_bitwise(const uint8_t *bytes, size_t len);
uint32_t insertion_sort(uint32_t *keys, size_t n);

static void fill_inputs(uint32_t round)
{
    uint32_t state = 0x9e3779b9u ^ (round * 0x85ebca6bu + 1);

    for (int i = 0; i < MATRIX_N; i++)
        for (int j = 0; j < MATRIX_N; j++) {
            matrix_a[i][j] = (int32_t)(xorshift32(&state) % 201) - 100;
            matrix_b[i][j] = (int32_t)(xorshift32(&state) % 201) - 100;
        }
    for (int i = 0; i < CRC_BYTES; i++)
        crc_input[i] = (uint8_t)xorshift32(&state);
    for (int i = 0; i < SORT_KEYS; i++)
        sort_keys[i] = xorshift32(&state);
}

/* C = A * B; returns the trace of C. */
__attribute__((noinline)) uint32_t matrix_multiply(void)
{
    uint32_t trace = 0;

    for (int i = 0; i < MATRIX_N; i++)
        for (int j = 0; j < MATRIX_N; j++) {
            int32_t sum = 0;
            for (int k = 0; k < MATRIX_N; k++)
                sum += matrix_a[i][k] * matrix_b[k][j];
            matrix_c[i][j] = sum;
        }
    for (int i = 0; i < MATRIX_N; i++)
        trace += (uint32_t)matrix_c[i][i];
    return trace;
}

/* CRC-32 (IEEE, reflected), one bit at a time. */
__attribute__((noinline)) uint32_t crc32_bitwise(const uint8_t *bytes,
                                                 size_t len)
{
    uint32_t crc = 0xffffffffu;

    for (size_t i = 0; i < len; i++) {
        crc ^= bytes[i];
        for (int bit = 0; bit < 8; bit++)
            crc = (crc >> 1) ^ (0xedb88320u & (0u - (crc & 1)));
    }
    return ~crc;
}

/* Sorts keys ascending; returns a digest of the sorted order. */
__attribute__((noinline)) uint32_t insertion_sort(uint32_t *keys, size_t n)
{
    uint32_t digest = 0;

    for (size_t i = 1; i < n; i++) {
        uint32_t key = keys[i];
        size_t j = i;
        while (j > 0 && keys[j - 1] > key) {
            keys[j] = keys[j - 1];
            j--;
        }
        keys[j] = key;
    }
    for (size_t i = 0; i < n; i++)
        digest = digest * 31 + keys[i];
    return digest;
}

int main(int argc, char **argv)
{
    long rounds = argc > 1 ? strtol(argv[1], NULL, 10) : DEFAULT_ROUNDS;
    uint32_t matrix = 0, crc = 0, sort = 0;

    if (rounds < 1 || errno == ERANGE) {
        cop_printf("kernels: ROUNDS must be a positive number\n");
        return 2;
    }
    for (long round = 0; round < rounds; round++) {
        fill_inputs((uint32_t)round);
        matrix = matrix * 33 + matrix_multiply();
        crc = crc * 33 + crc32_bitwise(crc_input, CRC_BYTES);
        sort = sort * 33 + insertion_sort(sort_keys, SORT_KEYS);
    }
    cop_printf("kernels rounds=%ld matrix=%08lx crc=%08lx sort=%08lx\n",
               rounds, (unsigned long)matrix, (unsigned long)crc,
               (unsigned long)sort);
    return 0;
}
