/*
 * pipeline — frames through stages of different cost, the shape of a video
 * pipeline, for timelines of what the coprocessor does frame by frame.
 *
 *   pipeline [FRAMES]       (default 4; ignored when the host gave frames)
 *
 * Frames come from the data window (frames.h).  If the host put none there,
 * the program first makes FRAMES frames itself (make_frames: a bright
 * square moving over a gradient, with noise).  Each frame then goes
 * through, in order:
 *
 *   stage_fetch      copy the frame into the local store         (cheap)
 *   stage_denoise    3x3 median filter                  (most expensive)
 *   stage_edges      Sobel magnitude, count strong edges         (heavy)
 *   stage_threshold  histogram and Otsu's threshold             (medium)
 *   stage_encode     threshold, run-length count, Adler-32      (light)
 *
 * and its result record goes back to the data window, with frames_done
 * updated, and one line to the console.  A frame is about 0.8 million
 * instructions, 70% of them in stage_denoise, 13% in stage_edges, 8% in
 * stage_threshold, 5% in stage_encode and 2% in stage_fetch.
 */
#include "sdk/cop.h"
#include "examples/pipeline/frames.h"
#include "examples/xorshift.h"

#include <stdlib.h>
#include <string.h>

#define DEFAULT_FRAMES 4
#define EDGE_STRENGTH 96

static uint8_t frame[FRAME_BYTES];
static uint8_t denoised[FRAME_BYTES];
static uint8_t binary[FRAME_BYTES];
static uint32_t histogram[256];

uint32_t stage_fetch(const uint8_t *source);
uint32_t stage_denoise(void);
uint32_t stage_edges(void);
uint32_t stage_threshold(void);
void stage_encode(uint32_t threshold, struct frame_result *result);

/* The camera: frame k shows a 16x16 square at (3k mod 48, 2k mod 32). */
static void make_frames(struct frames_header *header, uint32_t count)
{
    uint8_t *frames = (uint8_t *)header + header->frames_offset;
    uint32_t state = 0x1234567u;

    for (uint32_t k = 0; k < count; k++) {
        uint8_t *f = frames + k * FRAME_BYTES;
        uint32_t left = (3 * k) % (FRAME_WIDTH - 16);
        uint32_t top = (2 * k) % (FRAME_HEIGHT - 16);
        for (uint32_t y = 0; y < FRAME_HEIGHT; y++)
            for (uint32_t x = 0; x < FRAME_WIDTH; x++) {
                uint32_t v = x + y;
                if (x >= left && x < left + 16 && y >= top && y < top + 16)
                    v = 200;
                f[y * FRAME_WIDTH + x] =
                    (uint8_t)(v + (xorshift32(&state) & 15));
            }
    }
}

/* The header the host wrote, or a new one with frames made here. */
static struct frames_header *open_frames(uint32_t frames_wanted)
{
    size_t size;
    struct frames_header *header = cop_data_window(&size);
    uint32_t frames_offset = 64;

    if (header->magic == FRAMES_MAGIC) {
        if (header->width != FRAME_WIDTH || header->height != FRAME_HEIGHT)
            cop_fatal("pipeline: host frames are %lux%lu, expected %dx%d",
                      (unsigned long)header->width,
                      (unsigned long)header->height, FRAME_WIDTH, FRAME_HEIGHT);
        return header;
    }
    if (frames_offset + (size_t)frames_wanted * (FRAME_BYTES +
        sizeof(struct frame_result)) > size)
        cop_fatal("pipeline: %lu frames do not fit in the data window",
                  (unsigned long)frames_wanted);
    header->width = FRAME_WIDTH;
    header->height = FRAME_HEIGHT;
    header->frame_count = frames_wanted;
    header->frames_offset = frames_offset;
    header->results_offset = frames_offset + frames_wanted * FRAME_BYTES;
    header->frames_done = 0;
    make_frames(header, frames_wanted);
    header->magic = FRAMES_MAGIC;
    return header;
}

__attribute__((noinline)) uint32_t stage_fetch(const uint8_t *source)
{
    uint32_t sum = 0;

    for (int i = 0; i < FRAME_BYTES; i++) {
        frame[i] = source[i];
        sum += source[i];
    }
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

static void process_frame(struct frames_header *header, uint32_t k)
{
    const uint8_t *frames = (const uint8_t *)header + header->frames_offset;
    struct frame_result *results =
        (struct frame_result *)((uint8_t *)header + header->results_offset);
    struct frame_result result = {.frame = k};
    uint32_t mean = stage_fetch(frames + k * FRAME_BYTES);

    stage_denoise();
    result.edges = stage_edges();
    result.threshold = stage_threshold();
    stage_encode(result.threshold, &result);
    results[k] = result;
    header->frames_done = k + 1;
    cop_printf("frame %lu mean=%lu edges=%lu threshold=%lu runs=%lu "
               "checksum=%08lx\n", (unsigned long)k, (unsigned long)mean,
               (unsigned long)result.edges, (unsigned long)result.threshold,
               (unsigned long)result.runs, (unsigned long)result.checksum);
}

int main(int argc, char **argv)
{
    long wanted = argc > 1 ? strtol(argv[1], NULL, 10) : DEFAULT_FRAMES;
    struct frames_header *header;

    if (wanted < 1) {
        cop_printf("pipeline: FRAMES must be a positive number\n");
        return 2;
    }
    header = open_frames((uint32_t)wanted);
    for (uint32_t k = 0; k < header->frame_count; k++)
        process_frame(header, k);
    cop_printf("pipeline frames=%lu\n", (unsigned long)header->frame_count);
    return 0;
}
