/*
 * stream.c — a streaming kernel over the data window through DMA, single-
 * or double-buffered: the classic SPU pattern (examples/README.md).
 *
 *   stream single|double [BLOCKS]
 *
 * The data window holds BLOCKS (default 64) input blocks of 4 KiB and as
 * many output blocks after them.  The program touches main memory only by
 * DMA, as an SPU program does (a direct load or store to the data window
 * costs the timing model's main-memory latency): fill_input makes each
 * input block in the local store and puts it, digest gets each output
 * block back and hashes it, both double-buffered so their transfers
 * overlap the work.  In between, each input block is fetched into the
 * local store with cop_dma_get, transformed into an output buffer (scale),
 * and sent back with cop_dma_put: single_buffered waits for each transfer
 * as soon as it is issued; double_buffered fetches block b + 1 into the
 * other input buffer while it computes block b, and waits for an output
 * buffer's put only when it is reused, so the transfers overlap the work
 * and the DMA-wait cycles all but vanish.  Only those two functions
 * differ between the modes; both print the same digest.
 */
#include "sdk/cop.h"

#include <stdlib.h>
#include <string.h>

#define BLOCK_BYTES 4096u
#define BLOCK_WORDS (BLOCK_BYTES / 4)

static uint32_t inputs[2][BLOCK_WORDS] __attribute__((aligned(16)));
static uint32_t outputs[2][BLOCK_WORDS] __attribute__((aligned(16)));

/* Tags: the streaming functions use 0..3 (input k under k, output k
 * under 2 + k), fill_input's puts 4 and 5, digest's gets 6 and 7. */
#define FILL_TAG 4u
#define DIGEST_TAG 6u

/* Makes the blocks of input (an xorshift32 sequence) in the local store,
 * block b in outputs[b & 1], and puts each to in; a buffer is written
 * again only after its previous put has completed.  Returns when every
 * put has. */
__attribute__((noinline)) static void fill_input(uint32_t *in,
                                                 unsigned blocks)
{
    uint32_t x = 2463534242u;

    for (unsigned b = 0; b < blocks; b++) {
        unsigned k = b & 1;
        uint32_t *buf = outputs[k];

        cop_dma_wait_all(1u << (FILL_TAG + k));
        for (unsigned i = 0; i < BLOCK_WORDS; i++) {
            x ^= x << 13;
            x ^= x >> 17;
            x ^= x << 5;
            buf[i] = x;
        }
        cop_dma_put(buf, in + b * BLOCK_WORDS, BLOCK_BYTES, FILL_TAG + k);
    }
    cop_dma_wait_all(3u << FILL_TAG);
}

/* The work on one block: a small polynomial per word. */
__attribute__((noinline)) static void scale(const uint32_t *from,
                                            uint32_t *to)
{
    for (unsigned i = 0; i < BLOCK_WORDS; i++)
        to[i] = from[i] * 3u + (from[i] >> 7) + i;
}

/* One buffer each way: every transfer is waited for when issued. */
__attribute__((noinline)) static void single_buffered(uint32_t *in,
                                                      uint32_t *out,
                                                      unsigned blocks)
{
    for (unsigned b = 0; b < blocks; b++) {
        cop_dma_get(inputs[0], in + b * BLOCK_WORDS, BLOCK_BYTES, 0);
        cop_dma_wait_all(1u << 0);
        scale(inputs[0], outputs[0]);
        cop_dma_put(outputs[0], out + b * BLOCK_WORDS, BLOCK_BYTES, 2);
        cop_dma_wait_all(1u << 2);
    }
}

/* Two buffers each way: input k under tag k, output k under tag 2 + k.
 * Block b + 1 is fetched while block b is computed, and an output buffer
 * is waited for only when it is about to be written again. */
__attribute__((noinline)) static void double_buffered(uint32_t *in,
                                                      uint32_t *out,
                                                      unsigned blocks)
{
    cop_dma_get(inputs[0], in, BLOCK_BYTES, 0);
    for (unsigned b = 0; b < blocks; b++) {
        unsigned cur = b & 1, next = cur ^ 1;

        if (b + 1 < blocks)
            cop_dma_get(inputs[next], in + (b + 1) * BLOCK_WORDS,
                        BLOCK_BYTES, next);
        cop_dma_wait_all(1u << cur);
        cop_dma_wait_all(1u << (2 + cur));
        scale(inputs[cur], outputs[cur]);
        cop_dma_put(outputs[cur], out + b * BLOCK_WORDS, BLOCK_BYTES,
                    2 + cur);
    }
    cop_dma_wait_all(0xf);
}

/* The FNV-1a hash of the output blocks, each got into inputs[b & 1]
 * while the one before is hashed. */
__attribute__((noinline)) static uint32_t digest(const uint32_t *out,
                                                 unsigned blocks)
{
    uint32_t h = 2166136261u;

    cop_dma_get(inputs[0], out, BLOCK_BYTES, DIGEST_TAG);
    for (unsigned b = 0; b < blocks; b++) {
        unsigned cur = b & 1, next = cur ^ 1;

        if (b + 1 < blocks)
            cop_dma_get(inputs[next], out + (b + 1) * BLOCK_WORDS,
                        BLOCK_BYTES, DIGEST_TAG + next);
        cop_dma_wait_all(1u << (DIGEST_TAG + cur));
        for (unsigned i = 0; i < BLOCK_WORDS; i++)
            h = (h ^ inputs[cur][i]) * 16777619u;
    }
    return h;
}

int main(int argc, char **argv)
{
    size_t size;
    uint32_t *in = cop_data_window(&size), *out;
    unsigned blocks = argc > 2 ? (unsigned)atoi(argv[2]) : 64;

    if (argc < 2 || (strcmp(argv[1], "single") && strcmp(argv[1], "double"))
        || !blocks || 2ull * blocks * BLOCK_BYTES > size) {
        cop_puts("usage: stream single|double [BLOCKS]");
        return 2;
    }
    out = in + blocks * BLOCK_WORDS;
    fill_input(in, blocks);
    if (!strcmp(argv[1], "single"))
        single_buffered(in, out, blocks);
    else
        double_buffered(in, out, blocks);
    cop_printf("stream %s blocks=%u digest=%08lx\n", argv[1], blocks,
               (unsigned long)digest(out, blocks));
    return 0;
}
