/*
 * pipeline — frames through stages of different cost, the shape of a video
 * pipeline, for timelines of what the coprocessor does frame by frame.
 *
 *   pipeline [FRAMES]       (default 4; ignored when the host gave frames)
 *
 * Frames come from the data window (frames.h).  If the host put none there,
 * the program first makes FRAMES frames itself (make_frames: a bright
 * square moving over a gradient, with noise).  Each frame then goes
 * through the stages of stages.c, in order:
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
#include "examples/pipeline/stages.h"
#include "examples/xorshift.h"

#include <errno.h>
#include <stdlib.h>

#define DEFAULT_FRAMES 4

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

static void process_frame(struct frames_header *header, uint32_t k)
{
    const uint8_t *frames = (const uint8_t *)header + header->frames_offset;
    struct frame_result *results =
        (struct frame_result *)((uint8_t *)header + header->results_offset);
    struct frame_result result;
    uint32_t mean = stages_process(frames + k * FRAME_BYTES, k, &result);

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

    if (wanted < 1 || errno == ERANGE) {
        cop_printf("pipeline: FRAMES must be a positive number\n");
        return 2;
    }
    header = open_frames((uint32_t)wanted);
    for (uint32_t k = 0; k < header->frame_count; k++)
        process_frame(header, k);
    cop_printf("pipeline frames=%lu\n", (unsigned long)header->frame_count);
    return 0;
}
