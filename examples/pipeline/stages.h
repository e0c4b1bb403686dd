/*
 * stages.h — the pipeline example's stages (stages.c), for the coprocessor
 * program and for host programs that check its results.
 */
#ifndef COPROF_EXAMPLES_PIPELINE_STAGES_H
#define COPROF_EXAMPLES_PIPELINE_STAGES_H

#include "examples/pipeline/frames.h"

#include <stdint.h>

/* The DMA tag of stage_fetch's get in the coprocessor build; source is
 * then in the data window, 16-byte aligned (a DMA's rule). */
#define STAGES_FETCH_TAG 0u

uint32_t stage_fetch(const uint8_t *source);
uint32_t stage_denoise(void);
uint32_t stage_edges(void);
uint32_t stage_threshold(void);
void stage_encode(uint32_t threshold, struct frame_result *result);

/*
 * Runs frame k (FRAME_BYTES at source) through every stage into *result;
 * returns the frame's mean brightness (stage_fetch's value).
 */
uint32_t stages_process(const uint8_t *source, uint32_t k,
                        struct frame_result *result);

#endif
