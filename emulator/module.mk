# emulator/: the trace unit's hardware (the QEMU plugin with its timing
# model, DMA and mailboxes), coptrace and their tests; the register file's
# library is trace-unit/, copsim is emulator/copsim/.

TRACE_PLUGIN := $(LIB)/libcoptrace.so

# The plugin exports only qemu_plugin_install and qemu_plugin_version; the
# trace unit and LFSR code inside it come from an archive and become local,
# so its calls stay direct.  Its objects are PLUGIN_OBJ's: built without
# ASan under make check-sanitize, as QEMU has no ASan runtime (mk/build.mk).
PLUGIN_PARTS := $(PLUGIN_OBJ)/emulator/libcoptrace-parts.a
$(PLUGIN_PARTS): $(PLUGIN_OBJ)/trace-unit/trace-unit.o \
                 $(PLUGIN_OBJ)/emulator/shadow-stack.o $(PLUGIN_OBJ)/lfsr/lfsr.o \
                 $(PLUGIN_OBJ)/emulator/timing.o $(PLUGIN_OBJ)/emulator/mfc.o \
                 $(PLUGIN_OBJ)/emulator/mbox.o \
                 $(PLUGIN_OBJ)/emulator/timing-model.o
	@mkdir -p $(@D)
	$(call say,AR,$@)$(AR) rcs $@ $^

$(PLUGIN_OBJ)/emulator/trace-plugin.o: CFLAGS += $(GLIB_CFLAGS) \
	-fvisibility=hidden
$(TRACE_PLUGIN): $(PLUGIN_OBJ)/emulator/trace-plugin.o $(PLUGIN_PARTS)
	@mkdir -p $(@D)
	$(call say,LD,$@)$(CC) $(PLUGIN_LDFLAGS) -shared \
		-Wl,--exclude-libs,ALL $^ $(GLIB_LIBS) -o $@

# The timing model's built-in machine description (emulator/timing/spu.model)
# becomes a C string, timing_default_model.
TIMING_MODEL_C := $(BUILD)/gen/emulator/timing-model.c
$(TIMING_MODEL_C): emulator/timing/spu.model
	@mkdir -p $(@D)
	$(call say,GEN,$@){ echo 'const char timing_default_model[] ='; \
		sed -e 's/\\/\\\\/g' -e 's/"/\\"/g' -e 's/.*/    "&\\n"/' $<; \
		echo '    ;'; } > $@
$(PLUGIN_OBJ)/emulator/timing-model.o: $(TIMING_MODEL_C)
	@mkdir -p $(@D)
	$(call say,CC,$<)$(CC) $(CPPFLAGS) \
		$(filter-out $(SAN_FLAGS),$(CFLAGS)) $(PLUGIN_SAN_FLAGS) -c $< -o $@
ifneq ($(PLUGIN_OBJ),$(OBJ))
$(OBJ)/emulator/timing-model.o: $(TIMING_MODEL_C)
	@mkdir -p $(@D)
	$(call say,CC,$<)$(CC) $(CPPFLAGS) $(CFLAGS) -c $< -o $@
endif

$(BIN)/coptrace: $(OBJ)/emulator/coptrace.o $(OBJ)/common/cli.o $(LIB)/libtraceunit.a \
                 $(LIB)/liblfsr.a $(LIB)/libcopsafe.a
	@mkdir -p $(@D)
	$(call say,LD,$@)$(CC) $(LDFLAGS) $^ -o $@

# Guest programs for the tests, built for the coprocessor ABI.
GUEST_CC     := riscv64-unknown-elf-gcc
GUEST_CFLAGS := -march=rv32im_zifencei -mabi=ilp32 -O2 -g -ffreestanding \
                -fno-builtin -nostdlib -Wall \
                -Wl,--no-warn-rwx-segments
GUEST_DIR    := emulator/tests/guest
GUEST_ELVES  := $(patsubst $(GUEST_DIR)/%.c,$(TESTBIN)/guest/%.elf,\
                  $(wildcard $(GUEST_DIR)/*.c))

$(TESTBIN)/guest/%.elf: $(GUEST_DIR)/%.c $(GUEST_DIR)/crt0.S $(GUEST_DIR)/guest.ld
	@mkdir -p $(@D)
	$(call say,GUEST,$@)$(GUEST_CC) $(GUEST_CFLAGS) -T $(GUEST_DIR)/guest.ld \
		$(GUEST_DIR)/crt0.S $< -o $@

$(OBJ)/emulator/tests/test-trace-plugin.o: CFLAGS += $(GLIB_CFLAGS)
$(TESTBIN)/test-trace-plugin: $(OBJ)/emulator/tests/test-trace-plugin.o \
		$(OBJ)/emulator/timing.o $(OBJ)/emulator/timing-model.o \
		$(LIB)/libtraceunit.a $(LIB)/liblfsr.a | $(TRACE_PLUGIN) $(GUEST_ELVES)
	@mkdir -p $(@D)
	$(call say,LD,$@)$(CC) $(LDFLAGS) $(filter %.o %.a,$^) $(GLIB_LIBS) -o $@

$(OBJ)/emulator/tests/test-shadow-stack.o: CFLAGS += $(GLIB_CFLAGS)
$(TESTBIN)/test-shadow-stack: $(OBJ)/emulator/tests/test-shadow-stack.o \
		$(PLUGIN_OBJ)/emulator/shadow-stack.o
	@mkdir -p $(@D)
	$(call say,LD,$@)$(CC) $(LDFLAGS) $^ $(GLIB_LIBS) -o $@

$(OBJ)/emulator/tests/test-timing.o: CFLAGS += $(GLIB_CFLAGS)
$(TESTBIN)/test-timing: $(OBJ)/emulator/tests/test-timing.o \
		$(OBJ)/emulator/timing.o $(OBJ)/emulator/timing-model.o
	@mkdir -p $(@D)
	$(call say,LD,$@)$(CC) $(LDFLAGS) $^ $(GLIB_LIBS) -o $@

ALL_TARGETS += $(TRACE_PLUGIN) $(BIN)/coptrace $(GUEST_ELVES)
GTESTS += $(TESTBIN)/test-trace-plugin $(TESTBIN)/test-shadow-stack \
	$(TESTBIN)/test-timing
PYTESTS += emulator/tests
FAULT_PYTESTS += emulator/tests/fault_full_filesystem.py
INSTALL_BINS += $(BIN)/coptrace
INSTALL_LIBS += $(TRACE_PLUGIN)

# calltree: a coprocessor program with a known call tree (recursion, a tail
# call, overlays calling each other, a longjmp) for the call stacks' tests.
include sdk/cop.mk

calltree_SOURCES := emulator/tests/calltree/calltree.c
calltree_OVERLAYS := 1:ping 1:pong
calltree_OVERLAY_ping := emulator/tests/calltree/ping.c
calltree_OVERLAY_pong := emulator/tests/calltree/pong.c
calltree_NAME := calltree
calltree_OUT := $(TESTBIN)/cop/calltree.elf
$(eval $(call cop_program,calltree))

ALL_TARGETS += $(calltree_IMAGE)
