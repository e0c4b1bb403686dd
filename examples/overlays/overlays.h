/*
 * overlays.h — the overlays example's shared buffers and overlay functions.
 *
 * Region 1 holds blur, crc and histogram; region 2 holds sieve and sort
 * (examples/module.mk gives the overlays in that order, so their indexes
 * are blur 1, crc 2, histogram 3, sieve 4, sort 5).  The buffers are
 * resident: an overlay's data lives only while it is loaded.
 */
#ifndef COPROF_EXAMPLES_OVERLAYS_H
#define COPROF_EXAMPLES_OVERLAYS_H

#include <stddef.h>
#include <stdint.h>

#define IMAGE_SIDE 64
#define SIEVE_LIMIT 12000
#define KEY_COUNT 400

extern uint8_t picture[IMAGE_SIDE * IMAGE_SIDE];
extern uint8_t blurred[IMAGE_SIDE * IMAGE_SIDE];
extern uint8_t sieve_marks[SIEVE_LIMIT];
extern uint32_t keys[KEY_COUNT];

/* overlay blur (region 1): 3x3 box blur of picture into blurred; returns
 * the CRC of the result, computed by the crc overlay (same region). */
uint32_t blur_picture(void);

/* overlay crc (region 1): CRC-16/CCITT, bit by bit. */
uint32_t crc16_bitwise(const uint8_t *bytes, size_t len);

/* overlay histogram (region 1): the median brightness of blurred, found
 * by sorting a sample with the sort overlay (region 2). */
uint32_t histogram_median(void);

/* overlay sieve (region 2): the number of primes below limit. */
uint32_t count_primes(uint32_t limit);

/* overlay sort (region 2): Shell sort, ascending. */
void shell_sort(uint32_t *values, size_t n);

#endif
