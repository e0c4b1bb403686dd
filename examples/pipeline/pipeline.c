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
 * updated, and one line to the console.
 *
 * The program reaches main memory by DMA only, as an SPU program does (a
 * direct load or store to the data window costs the timing model's
 * main-memory latency, docs/coprocessor-abi.md): the header is got into
 * the local store once; make_frames builds each frame in a local-store
 * buffer and puts it, double-buffered; stage_fetch gets a frame and waits
 * for it; write_back puts the result record (a read-modify-write of the
 * 16-byte blocks that hold it) and the header with frames_done, and waits.
 *
 * A frame is about 0.80 million instructions and 2.04 million cycles
 * (cop-run --exact-counts; the stages with what they call): stage_denoise
 * 72% of the instructions and 69% of the cycles, stage_edges 14% and 6%,
 * stage_threshold 7% and 8%, stage_encode 5% and 16% (its divisions by
 * 65521 are slow), stage_fetch 1.5% and 1.2% (the DMA wait 0.03%).
 */
#include "sdk/cop.h"
#include "examples/pipeline/stages.h"
#include "examples/xorshift.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#define DEFAULT_FRAMES 4

/* DMA tags: stage_fetch's get is STAGES_FETCH_TAG (0); make_frames puts
 * frame buffer b under MADE_TAG + b (1, 2); write_back uses BACK_TAG. */
#define MADE_TAG 1u
#define BACK_TAG 3u

_Static_assert(sizeof(struct frames_header) % COP_MFC_ALIGN == 0,
               "the header moves by DMA as it is");
_Static_assert(FRAME_BYTES % COP_MFC_ALIGN == 0,
               "frames move by DMA as they are");

/* The data window's header, in the local store: got once, put back with
 * frames_done after each frame. */
static struct frames_header header __attribute__((aligned(16)));
/* make_frames' two frame buffers. */
static uint8_t made[2][FRAME_BYTES] __attribute__((aligned(16)));
/* The 16-byte blocks of the data window that hold one result record. */
static uint8_t record_blocks[3 * COP_MFC_ALIGN] __attribute__((aligned(16)));

/* The camera: frame k shows a 16x16 square at (3k mod 48, 2k mod 32).
 * Each frame is made in a local-store buffer and put to main memory at
 * frames; double-buffered: frame k + 1 is made in the other buffer while
 * frame k's put completes, and a buffer is written again only after its
 * previous put has.  Returns when every put has. */
static void make_frames(uint8_t *frames, uint32_t count)
{
    uint32_t state = 0x1234567u;

    for (uint32_t k = 0; k < count; k++) {
        unsigned b = k & 1;
        uint8_t *f = made[b];
        uint32_t left = (3 * k) % (FRAME_WIDTH - 16);
        uint32_t top = (2 * k) % (FRAME_HEIGHT - 16);

        cop_dma_wait_all(1u << (MADE_TAG + b));
        for (uint32_t y = 0; y < FRAME_HEIGHT; y++)
            for (uint32_t x = 0; x < FRAME_WIDTH; x++) {
                uint32_t v = x + y;
                if (x >= left && x < left + 16 && y >= top && y < top + 16)
                    v = 200;
                f[y * FRAME_WIDTH + x] =
                    (uint8_t)(v + (xorshift32(&state) & 15));
            }
        cop_dma_put(f, frames + k * FRAME_BYTES, FRAME_BYTES, MADE_TAG + b);
    }
    cop_dma_wait_all(3u << MADE_TAG);
}

/* The header from the local store to the data window, waited for. */
static void put_header(uint8_t *window)
{
    cop_dma_put(&header, window, sizeof(header), BACK_TAG);
    cop_dma_wait_all(1u << BACK_TAG);
}

/* Gets the header the host wrote, or makes a new one with frames made
 * here; returns the data window. */
static uint8_t *open_frames(uint32_t frames_wanted)
{
    size_t size;
    uint8_t *window = cop_data_window(&size);
    uint32_t frames_offset = 64;

    cop_dma_get(&header, window, sizeof(header), BACK_TAG);
    cop_dma_wait_all(1u << BACK_TAG);
    if (header.magic == FRAMES_MAGIC) {
        if (header.width != FRAME_WIDTH || header.height != FRAME_HEIGHT)
            cop_fatal("pipeline: host frames are %lux%lu, expected %dx%d",
                      (unsigned long)header.width,
                      (unsigned long)header.height, FRAME_WIDTH, FRAME_HEIGHT);
        if (header.frames_offset % COP_MFC_ALIGN)
            cop_fatal("pipeline: host frames at offset %lu, expected a "
                      "multiple of %u (DMA)",
                      (unsigned long)header.frames_offset, COP_MFC_ALIGN);
        return window;
    }
    if (frames_offset + (size_t)frames_wanted * (FRAME_BYTES +
        sizeof(struct frame_result)) > size)
        cop_fatal("pipeline: %lu frames do not fit in the data window",
                  (unsigned long)frames_wanted);
    header = (struct frames_header){
        .width = FRAME_WIDTH,
        .height = FRAME_HEIGHT,
        .frame_count = frames_wanted,
        .frames_offset = frames_offset,
        .results_offset = frames_offset + frames_wanted * FRAME_BYTES,
    };
    make_frames(window + frames_offset, frames_wanted);
    header.magic = FRAMES_MAGIC;
    put_header(window);
    return window;
}

/*
 * Result k and frames_done back to the data window.  DMA moves whole
 * 16-byte blocks and a record is 20 bytes, so the blocks that hold record
 * k are got, patched and put back (their other bytes stay as they were);
 * the header follows with frames_done = k + 1.
 */
static void write_back(uint8_t *window, const struct frame_result *result,
                       uint32_t k)
{
    uint32_t at = header.results_offset + k * sizeof(*result);
    uint32_t first = at / COP_MFC_ALIGN * COP_MFC_ALIGN;
    uint32_t end = (at + sizeof(*result) + COP_MFC_ALIGN - 1) /
                   COP_MFC_ALIGN * COP_MFC_ALIGN;

    cop_dma_get(record_blocks, window + first, end - first, BACK_TAG);
    cop_dma_wait_all(1u << BACK_TAG);
    memcpy(record_blocks + (at - first), result, sizeof(*result));
    cop_dma_put(record_blocks, window + first, end - first, BACK_TAG);
    header.frames_done = k + 1;
    put_header(window);
}

static void process_frame(uint8_t *window, uint32_t k)
{
    struct frame_result result;
    uint32_t mean = stages_process(window + header.frames_offset +
                                   k * FRAME_BYTES, k, &result);

    write_back(window, &result, k);
    cop_printf("frame %lu mean=%lu edges=%lu threshold=%lu runs=%lu "
               "checksum=%08lx\n", (unsigned long)k, (unsigned long)mean,
               (unsigned long)result.edges, (unsigned long)result.threshold,
               (unsigned long)result.runs, (unsigned long)result.checksum);
}

int main(int argc, char **argv)
{
    long wanted = argc > 1 ? strtol(argv[1], NULL, 10) : DEFAULT_FRAMES;
    uint8_t *window;

    if (wanted < 1 || errno == ERANGE) {
        cop_printf("pipeline: FRAMES must be a positive number\n");
        return 2;
    }
    window = open_frames((uint32_t)wanted);
    for (uint32_t k = 0; k < header.frame_count; k++)
        process_frame(window, k);
    cop_printf("pipeline frames=%lu\n", (unsigned long)header.frame_count);
    return 0;
}
