/*
 * frames.h — the pipeline example's frames in the data window.
 *
 * The data window (docs/coprocessor-abi.md) holds a header, the input
 * frames one after the other (8-bit grey, width x height), and one result
 * record per frame that the pipeline writes back.  A host program that
 * wants the coprocessor to process its own frames writes the header and
 * the frames before it runs the program; under cop-run the window starts
 * zeroed and the program makes its own frames ("camera" mode).  The
 * program moves them all by DMA (pipeline.c), so frames_offset is a
 * multiple of 16; results_offset may be any.
 */
#ifndef COPROF_EXAMPLES_PIPELINE_FRAMES_H
#define COPROF_EXAMPLES_PIPELINE_FRAMES_H

#include <stdint.h>

#define FRAMES_MAGIC 0x534d5246u        /* "FRMS" */
#define FRAME_WIDTH 64
#define FRAME_HEIGHT 48
#define FRAME_BYTES (FRAME_WIDTH * FRAME_HEIGHT)

struct frames_header {
    uint32_t magic;             /* FRAMES_MAGIC */
    uint32_t width;             /* FRAME_WIDTH */
    uint32_t height;            /* FRAME_HEIGHT */
    uint32_t frame_count;
    uint32_t frames_offset;     /* from the window start: the frames,
                                   a multiple of 16 */
    uint32_t results_offset;    /* from the window start: the results */
    uint32_t frames_done;       /* written by the pipeline after each frame */
    uint32_t reserved;
};

struct frame_result {
    uint32_t frame;
    uint32_t edges;             /* pixels with a Sobel magnitude >= 96 */
    uint32_t threshold;         /* Otsu's threshold of the denoised frame */
    uint32_t runs;              /* run-length runs of the thresholded frame */
    uint32_t checksum;          /* Adler-32 of the thresholded frame */
};

#endif
