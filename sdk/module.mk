# sdk/: the host tools, the coprocessor runtime (through
# cop.mk), small coprocessor test programs, and the tests.

include sdk/cop.mk

# cop-run --sample-every attaches the trace unit (emulator/); its plugin
# must be built for cop-run to find it.
$(BIN)/cop-run: $(OBJ)/sdk/cop-run.o $(OBJ)/sdk/trap-watch.o $(OBJ)/common/cli.o $(COPLOADER_LIB) \
                $(LIB)/libtraceunit.a $(LIB)/liblfsr.a $(SAFE_FILE_LIB) \
                | $(LIB)/libcoptrace.so
	@mkdir -p $(@D)
	$(call say,LD,$@)$(CC) $(LDFLAGS) $(filter %.o %.a,$^) -o $@

$(BIN)/cop-embed: $(OBJ)/sdk/cop-embed.o $(OBJ)/common/cli.o $(COPLOADER_LIB) \
                  $(SAFE_FILE_LIB)
	@mkdir -p $(@D)
	$(call say,LD,$@)$(CC) $(LDFLAGS) $^ -o $@

$(BIN)/cop-overlays: $(OBJ)/sdk/cop-overlays.o $(OBJ)/common/cli.o \
                     $(COPLOADER_LIB) $(SAFE_FILE_LIB)
	@mkdir -p $(@D)
	$(call say,LD,$@)$(CC) $(LDFLAGS) $^ $(ELF_LIBS) -o $@

$(OBJ)/sdk/cop-overlays.o: CFLAGS += $(ELF_CFLAGS)

# Coprocessor programs that exercise the runtime (sdk/tests/).
runtime_probe_SOURCES := sdk/tests/runtime-probe.c
runtime_probe_NAME := runtime-probe
runtime_probe_OUT := $(TESTBIN)/cop/runtime-probe.elf
overlay_calls_SOURCES := sdk/tests/overlay-calls.c
overlay_calls_OVERLAYS := 1:left 1:right 2:other
overlay_calls_OVERLAY_left := sdk/tests/overlay-left.c
overlay_calls_OVERLAY_right := sdk/tests/overlay-right.c
overlay_calls_OVERLAY_other := sdk/tests/overlay-other.c
overlay_calls_NAME := overlay-calls
overlay_calls_OUT := $(TESTBIN)/cop/overlay-calls.elf
dma_probe_SOURCES := sdk/tests/dma-probe.c
dma_probe_NAME := dma-probe
dma_probe_OUT := $(TESTBIN)/cop/dma-probe.elf
memory_probe_SOURCES := sdk/tests/memory-probe.c
memory_probe_NAME := memory-probe
memory_probe_OUT := $(TESTBIN)/cop/memory-probe.elf
$(eval $(call cop_program,runtime_probe))
$(eval $(call cop_program,overlay_calls))
$(eval $(call cop_program,dma_probe))
$(eval $(call cop_program,memory_probe))

ALL_TARGETS += $(BIN)/cop-run $(BIN)/cop-embed \
               $(BIN)/cop-overlays $(COP_RUNTIME_LIB) $(COP_CRT0) \
               $(runtime_probe_IMAGE) $(overlay_calls_IMAGE) $(dma_probe_IMAGE) \
               $(memory_probe_IMAGE)
PYTESTS += sdk/tests
INSTALL_BINS += $(BIN)/cop-run $(BIN)/cop-embed $(BIN)/cop-overlays
INSTALL_HEADERS += sdk/cop-handle.h sdk/cop.h

# The SDK for programs built outside the tree: cop.mk finds the rest from
# where it is installed (PREFIX/share/coprof/sdk/), cop-sdk.pc names it.
INSTALL_DATA += sdk/cop.mk sdk/cop.ld sdk/runtime/name-note.S
INSTALL_COP_LIBS += $(COP_CRT0) $(COP_RUNTIME_LIB)
INSTALL_PKGCONFIG += sdk/cop-sdk.pc.in
