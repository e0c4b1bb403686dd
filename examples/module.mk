# examples/: coprocessor example programs, built with sdk/cop.mk into
# build/examples/NAME.elf, and their tests.

include sdk/cop.mk

kernels_SOURCES := examples/kernels/kernels.c
$(eval $(call cop_program,kernels))

ALL_TARGETS += $(kernels_IMAGE)

overlays_SOURCES := examples/overlays/main.c
overlays_OVERLAYS := 1:blur 1:crc 1:histogram 2:sieve 2:sort
overlays_OVERLAY_blur := examples/overlays/blur.c
overlays_OVERLAY_crc := examples/overlays/crc.c
overlays_OVERLAY_histogram := examples/overlays/histogram.c
overlays_OVERLAY_sieve := examples/overlays/sieve.c
overlays_OVERLAY_sort := examples/overlays/sort.c
$(eval $(call cop_program,overlays))

ALL_TARGETS += $(overlays_IMAGE)

pipeline_SOURCES := examples/pipeline/pipeline.c examples/pipeline/stages.c
pipeline_CFLAGS := -DSTAGES_DMA
$(eval $(call cop_program,pipeline))

ALL_TARGETS += $(pipeline_IMAGE)

alias_SOURCES := examples/alias/alias.c examples/alias/loop.S
$(eval $(call cop_program,alias))

ALL_TARGETS += $(alias_IMAGE)

stream_SOURCES := examples/stream/stream.c
$(eval $(call cop_program,stream))

ALL_TARGETS += $(stream_IMAGE)

PYTESTS += examples

# examples/bare: a plain RISC-V program built without the SDK (its own
# start code and linker script, no runtime, no libc), run unmodified on
# slots (docs/coprocessor-abi.md, "Programs without the SDK").
BARE_IMAGE := $(BUILD)/examples/bare.elf
BARE_SOURCES := examples/bare/start.S examples/bare/bare.c

$(BARE_IMAGE): $(BARE_SOURCES) examples/bare/bare.ld
	@mkdir -p $(@D)
	$(call say,CC,$@)$(COP_CC) -march=rv32im_zicsr -mabi=ilp32 -O2 -g \
	    -ffreestanding -nostdlib -nostartfiles -static \
	    -Wl,--no-warn-rwx-segments \
	    -T examples/bare/bare.ld -o $@ $(BARE_SOURCES)

ALL_TARGETS += $(BARE_IMAGE)
