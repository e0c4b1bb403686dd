# overlay/: resolution of local-store addresses through ELF load segments and
# overlays (library), copovl, their tests and the fuzz target.

OVERLAY_LIB  := $(LIB)/liboverlay.a
OVERLAY_SRCS := $(addprefix overlay/,container.c image.c note.c symbols.c \
                overlays.c lsmap.c)
OVERLAY_OBJS := $(patsubst %.c,$(OBJ)/%.o,$(OVERLAY_SRCS))

$(OBJ)/overlay/%.o: CFLAGS += $(ELF_CFLAGS)
$(OBJ)/overlay/test-overlay.o: CFLAGS += $(GLIB_CFLAGS) \
	-DOVERLAY_TEST_IMAGES='"$(abspath $(TESTBIN))/overlay"'

$(OVERLAY_LIB): $(OVERLAY_OBJS)
	@mkdir -p $(@D)
	$(call say,AR,$@)$(AR) rcs $@ $^

# The library checks every image with common/'s validator (libcoploader.a's
# image.o) first, so a program linking liboverlay.a links that after it.
$(BIN)/copovl: $(OBJ)/overlay/copovl.o $(OBJ)/common/cli.o $(OVERLAY_LIB) \
		$(COPLOADER_LIB)
	@mkdir -p $(@D)
	$(call say,LD,$@)$(CC) $(LDFLAGS) $^ $(ELF_LIBS) -o $@

$(TESTBIN)/test-overlay: $(OBJ)/overlay/test-overlay.o $(OVERLAY_LIB) \
		$(COPLOADER_LIB)
	@mkdir -p $(@D)
	$(call say,LD,$@)$(CC) $(LDFLAGS) $^ $(GLIB_LIBS) $(ELF_LIBS) -o $@

# Test images: small RV32 programs linked with overlays by
# overlay/tests/overlay-test.ld (a layout sdk/cop.mk would not make: an
# unused region, a gap), finished by the SDK's cop-overlays, and without
# overlays by plain.ld.
OVERLAY_IMAGES    := $(TESTBIN)/overlay
OVERLAY_RV_CC     := riscv64-unknown-elf-gcc
OVERLAY_RV_CFLAGS := -march=rv32im_zifencei -mabi=ilp32 -O1 -g \
                     -ffreestanding -fno-builtin -fno-pic
OVERLAY_RV_LDFLAGS := -nostdlib -nostartfiles -static
OVERLAY_RV_OBJS   := $(addprefix $(OVERLAY_IMAGES)/,main.o ovl1_a.o ovl1_b.o \
                     ovl1_c.o ovl2_a.o ovl2_b.o)

$(OVERLAY_IMAGES)/%.o: overlay/tests/%.c
	@mkdir -p $(@D)
	$(call say,RVCC,$<)$(OVERLAY_RV_CC) $(OVERLAY_RV_CFLAGS) -c $< -o $@

$(OVERLAY_IMAGES)/overlays.elf: $(OVERLAY_RV_OBJS) overlay/tests/overlay-test.ld \
		$(BIN)/cop-overlays
	$(call say,RVLD,$@)$(OVERLAY_RV_CC) $(OVERLAY_RV_CFLAGS) \
		$(OVERLAY_RV_LDFLAGS) -T overlay/tests/overlay-test.ld \
		$(OVERLAY_RV_OBJS) -o $@.tmp
	$(Q)$(BIN)/cop-overlays finish $@.tmp
	$(Q)mv $@.tmp $@

$(OVERLAY_IMAGES)/plain.elf: $(OVERLAY_RV_OBJS) overlay/tests/plain.ld
	$(call say,RVLD,$@)$(OVERLAY_RV_CC) $(OVERLAY_RV_CFLAGS) \
		$(OVERLAY_RV_LDFLAGS) -T overlay/tests/plain.ld \
		$(OVERLAY_RV_OBJS) -o $@

OVERLAY_TEST_IMAGES := $(OVERLAY_IMAGES)/overlays.elf $(OVERLAY_IMAGES)/plain.elf

# The fuzz target: the library's sources built again by clang with libFuzzer
# and the address and undefined-behaviour sanitizers.
OVERLAY_FUZZER    := $(TESTBIN)/fuzz-overlay
OVERLAY_FUZZ_CC   := clang
OVERLAY_FUZZ_SECONDS ?= 600

$(OVERLAY_FUZZER): overlay/fuzz-overlay.c $(OVERLAY_SRCS) overlay/overlay.h abi/cop-abi.h \
		overlay/overlay-internal.h common/image.c common/image.h
	@mkdir -p $(@D)
	$(call say,FUZZ,$@)$(OVERLAY_FUZZ_CC) -std=gnu11 -g -O1 \
		-fsanitize=fuzzer,address,undefined -fno-sanitize-recover=all \
		$(CPPFLAGS) $(ELF_CFLAGS) overlay/fuzz-overlay.c $(OVERLAY_SRCS) \
		common/image.c $(ELF_LIBS) -o $@

# `make fuzz`: a long run, keeping its corpus in build/fuzz/overlay.
.PHONY: fuzz-overlay
fuzz-overlay: $(OVERLAY_FUZZER) $(OVERLAY_TEST_IMAGES)
	@mkdir -p $(BUILD)/fuzz/overlay
	$(Q)cp $(OVERLAY_TEST_IMAGES) $(BUILD)/fuzz/overlay/
	$(OVERLAY_FUZZER) -max_total_time=$(OVERLAY_FUZZ_SECONDS) -timeout=10 \
		-print_final_stats=1 -artifact_prefix=$(BUILD)/fuzz/overlay- \
		$(BUILD)/fuzz/overlay

# `make fuzz`: many crafted images through every tool, which must accept
# or refuse each alike (tests/test_image_agreement.py; make check runs 150).
CRAFTED_IMAGES ?= 3000
CRAFTED_SEED ?= $(shell date +%s)
.PHONY: fuzz-images
fuzz-images: build-all
	$(Q)COPROF_BUILD=$(BUILD) COPROF_CRAFTED_IMAGES=$(CRAFTED_IMAGES) \
		COPROF_CRAFTED_SEED=$(CRAFTED_SEED) $(PYTHON) -m pytest -q \
		tests/test_image_agreement.py -k crafted

ALL_TARGETS += $(OVERLAY_LIB) $(BIN)/copovl $(OVERLAY_TEST_IMAGES) $(OVERLAY_FUZZER)
GTESTS += $(TESTBIN)/test-overlay
PYTESTS += overlay/tests
FUZZ_RUNS += fuzz-overlay fuzz-images
INSTALL_BINS += $(BIN)/copovl
INSTALL_LIBS += $(OVERLAY_LIB)
INSTALL_HEADERS += overlay/overlay.h
