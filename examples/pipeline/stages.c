/*
 * stages.c — the pipeline example's stages, one frame at a time.
 *
 *   stage_fetch      copy the frame into the local store         (cheap)
 *   stage_denoise    3x3 median filter                  (most expensive)
 *   stage_edges      Sobel magnitude, count strong edges         (heavy)
 *   stage_threshold  histogram and Otsu's threshold             (medium)
 *   stage_encode     threshold, run-length count, Adler-32      (light)
 *
 * Plain C, so that a host program builds the same file to check what the
 * coprocessor computed (examples/host-pipeline does).  The working buffers
 * are static: in the coprocessor they live in the local store.  Only
 * stage_fetch's copy differs: the coprocessor build (STAGES_DMA defined,
 * examples/module.mk) gets the frame from main memory by DMA and waits
 * for it, as an SPU program does, where a host build copies with memcpy.
 */
#include "examples/pipeline/stages.h"

#include <stdlib.h>
#include <string.h>

#ifdef STAGES_DMA
#include "sdk/cop.h"
#endif

#define EDGE_STRENGTH 96

static uint8_t frame[FRAME_BYTES] __attribute__((aligned(16)));
static uint8_t denoised[FRAME_BYTES];
static uint8_t binary[FRAME_BYTES];
static uint32_t histogram[256];

/* The frame at source into the local store: a DMA get, waited for at
 * once (inline, so the wait's cycles are stage_fetch's), or a memcpy. */
static inline __attribute__((always_inline)) void
fetch_frame(const uint8_t *source)
{
#ifdef STAGES_DMA
    cop_dma_get(frame, source, FRAME_BYTES, STAGES_FETCH_TAG);
    cop_dma_wait_all(1u << STAGES_FETCH_TAG);
#else
    memcpy(frame, source, FRAME_BYTES);
#endif
}

__attribute__((noinline)) uint32_t stage_fetch(const uint8_t *source)
{
    uint32_t sum = 0;

    fetch_frame(source);
    for (int i = 0; i < FRAME_BYTES; i++)
        sum += frame[i];
    return sum / FRAME_BYTES;
}

static uint8_t median9(uint8_t v[9])
{
    for (int i = 1; i < 9; i++) {
        uint8_t key = v[i];
        int j = i;
        while (j > 0 && v[j - 1] > key) {
            v[j] = v[j - 1];
            j--;
        }
        v[j] = key;
    }
    return v[4];
}

/* 3x3 median of frame into denoised; the border is copied. */
__attribute__((noinline)) uint32_t stage_denoise(void)
{
    uint8_t window[9];

    memcpy(denoised, frame, FRAME_BYTES);
    for (int y = 1; y < FRAME_HEIGHT - 1; y++)
        for (int x = 1; x < FRAME_WIDTH - 1; x++) {
            int n = 0;
            for (int dy = -1; dy <= 1; dy++)
                for (int dx = -1; dx <= 1; dx++)
                    window[n++] = frame[(y + dy) * FRAME_WIDTH + x + dx];
            denoised[y * FRAME_WIDTH + x] = median9(window);
        }
    return denoised[FRAME_BYTES / 2];
}

static int pixel(int x, int y)
{
    return denoised[y * FRAME_WIDTH + x];
}

/* Pixels of denoised whose Sobel |gx| + |gy| reaches EDGE_STRENGTH. */
__attribute__((noinline)) uint32_t stage_edges(void)
{
    uint32_t edges = 0;

    for (int y = 1; y < FRAME_HEIGHT - 1; y++)
        for (int x = 1; x < FRAME_WIDTH - 1; x++) {
            int gx = pixel(x + 1, y - 1) + 2 * pixel(x + 1, y) +
                     pixel(x + 1, y + 1) - pixel(x - 1, y - 1) -
                     2 * pixel(x - 1, y) - pixel(x - 1, y + 1);
            int gy = pixel(x - 1, y + 1) + 2 * pixel(x, y + 1) +
                     pixel(x + 1, y + 1) - pixel(x - 1, y - 1) -
                     2 * pixel(x, y - 1) - pixel(x + 1, y - 1);
            edges += abs(gx) + abs(gy) >= EDGE_STRENGTH;
        }
    return edges;
}

/* Otsu's threshold of denoised: the level that maximises the between-class
 * variance (integer arithmetic; the first maximum wins). */
__attribute__((noinline)) uint32_t stage_threshold(void)
{
    uint64_t total_sum = 0, below_sum = 0, best = 0;
    uint32_t below = 0, threshold = 0;

    memset(histogram, 0, sizeof(histogram));
    for (int i = 0; i < FRAME_BYTES; i++)
        histogram[denoised[i]]++;
    for (int level = 0; level < 256; level++)
        total_sum += (uint64_t)level * histogram[level];
    for (int level = 0; level < 256; level++) {
        below += histogram[level];
        below_sum += (uint64_t)level * histogram[level];
        uint32_t above = FRAME_BYTES - below;
        if (below == 0 || above == 0)
            continue;
        /* below * above * (mean_above - mean_below)^2, scaled by
         * below * above to stay in integers. */
        int64_t diff = (int64_t)(total_sum - below_sum) * below -
                       (int64_t)below_sum * above;
        uint64_t step = (uint64_t)(diff / FRAME_BYTES);
        uint64_t score = step * step / ((uint64_t)below * above);
        if (score > best) {
            best = score;
            threshold = (uint32_t)level;
        }
    }
    return threshold;
}

/* Thresholds denoised, counts its runs and checksums it (Adler-32). */
__attribute__((noinline)) void stage_encode(uint32_t threshold,
                                            struct frame_result *result)
{
    uint32_t a = 1, b = 0, runs = 0;

    for (int i = 0; i < FRAME_BYTES; i++) {
        binary[i] = denoised[i] > threshold;
        if (i == 0 || binary[i] != binary[i - 1])
            runs++;
        a = (a + binary[i]) % 65521;
        b = (b + a) % 65521;
    }
    result->runs = runs;
    result->checksum = b << 16 | a;
}

uint32_t stages_process(const uint8_t *source, uint32_t k,
                        struct frame_result *result)
{
    uint32_t mean = stage_fetch(source);

    memset(result, 0, sizeof(*result));
    result->frame = k;
    stage_denoise();
    result->edges = stage_edges();
    result->threshold = stage_threshold();
    stage_encode(result->threshold, result);
    return mean;
}
