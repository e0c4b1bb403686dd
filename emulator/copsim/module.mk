# emulator/copsim/: the copsim daemon (the emulated coprocessor complex),
# its library for the hosted kernel driver, and its tests.  libcop, the
# client side, is in sdk/libcop/.

COPSIM_LIB := $(LIB)/libcopsim.a
COPSIM_OBJS := $(addprefix $(OBJ)/emulator/copsim/, \
	console.o copsim.o emulator.o resolve.o schedlog.o scheduler.o \
	server.o slots.o slot-stub-blob.o) $(OBJ)/common/copsim-socket.o

# What a program that hosts a copsim links after libcopsim.a.
COPSIM_DEPS := $(LIB)/libtraceunit.a $(LIB)/libcoploader.a $(LIB)/libcoplog.a \
	$(LIB)/liblfsr.a $(LIB)/libcopsafe.a

$(OBJ)/emulator/copsim/%.o: CFLAGS += $(GLIB_CFLAGS)

$(COPSIM_LIB): $(COPSIM_OBJS)
	@mkdir -p $(@D)
	$(call say,AR,$@)$(AR) rcs $@ $^

# The driver hosted in copsim: the hooks, the control requests and the
# one-command mode (copsim --event ... --stream-out FILE -- COMMAND), linked
# into build/bin/copsim.
COPSIM_DRIVER_LIB := $(LIB)/libcopsim-driver.a

$(COPSIM_DRIVER_LIB): $(OBJ)/emulator/copsim/copsim-host.o \
		$(OBJ)/emulator/copsim/copsim-run.o
	@mkdir -p $(@D)
	$(call say,AR,$@)$(AR) rcs $@ $^

ALL_TARGETS += $(COPSIM_DRIVER_LIB)
INSTALL_LIBS += $(COPSIM_DRIVER_LIB)
INSTALL_HEADERS += emulator/copsim/copsim-host.h

# copsim hosts the kernel driver (emulator/copsim/copsim-host.h).
$(BIN)/copsim: $(OBJ)/emulator/copsim/main.o $(OBJ)/common/cli.o \
		$(LIB)/libcopsim-driver.a $(COPSIM_LIB) $(LIB)/libcopdrv.a \
		$(COPSIM_DEPS) $(LIB)/libcopstream.a
	@mkdir -p $(@D)
	$(call say,LD,$@)$(CC) $(LDFLAGS) $^ $(GLIB_LIBS) -lm -o $@

ALL_TARGETS += $(COPSIM_LIB) $(BIN)/copsim
INSTALL_BINS += $(BIN)/copsim
INSTALL_LIBS += $(COPSIM_LIB)
INSTALL_HEADERS += emulator/copsim/copsim.h emulator/copsim/copsim-hooks.h

# ---- Tests ---------------------------------------------------------------
# copsim-probe, a coprocessor program with one behaviour per command, run by
# cop-host, a libcop host program that embeds it twice: in the executable
# and in a shared library it links (an image mapped with a page offset).

include sdk/cop.mk

copsim_probe_SOURCES := emulator/copsim/tests/copsim-probe.c
copsim_probe_NAME := copsim-probe
copsim_probe_OUT := $(TESTBIN)/cop/copsim-probe.elf
$(eval $(call cop_program,copsim_probe))

COPSIM_TEST_OBJ := $(OBJ)/emulator/copsim/tests

$(COPSIM_TEST_OBJ)/probe-embed.o: $(copsim_probe_IMAGE) $(BIN)/cop-embed
	@mkdir -p $(@D)
	$(call say,EMBED,$@)$(BIN)/cop-embed $< copsim_probe $@

$(COPSIM_TEST_OBJ)/probe-library-embed.o: $(copsim_probe_IMAGE) $(BIN)/cop-embed
	@mkdir -p $(@D)
	$(call say,EMBED,$@)$(BIN)/cop-embed $< copsim_probe_in_library $@

$(TESTBIN)/libcop-host-probe.so: $(COPSIM_TEST_OBJ)/probe-library-embed.o
	@mkdir -p $(@D)
	$(call say,LD,$@)$(CC) $(LDFLAGS) -shared $^ -o $@

$(TESTBIN)/cop-host: $(COPSIM_TEST_OBJ)/cop-host.o \
		$(COPSIM_TEST_OBJ)/probe-embed.o $(TESTBIN)/libcop-host-probe.so \
		$(LIB)/libcop.so
	@mkdir -p $(@D)
	$(call say,LD,$@)$(CC) $(LDFLAGS) $(filter %.o,$^) \
		-L$(TESTBIN) -lcop-host-probe -L$(LIB) -lcop \
		-Wl,-rpath,'$$ORIGIN' -Wl,-rpath,'$$ORIGIN/../lib' -o $@

ALL_TARGETS += $(copsim_probe_IMAGE) $(TESTBIN)/cop-host

# mbox-probe and mbox-host: the mailboxes' test program and its host.
mbox_probe_SOURCES := emulator/copsim/tests/mbox-probe.c
mbox_probe_NAME := mbox-probe
mbox_probe_OUT := $(TESTBIN)/cop/mbox-probe.elf
$(eval $(call cop_program,mbox_probe))

$(COPSIM_TEST_OBJ)/mbox-probe-embed.o: $(mbox_probe_IMAGE) $(BIN)/cop-embed
	@mkdir -p $(@D)
	$(call say,EMBED,$@)$(BIN)/cop-embed $< mbox_probe $@

$(TESTBIN)/mbox-host: $(COPSIM_TEST_OBJ)/mbox-host.o \
		$(COPSIM_TEST_OBJ)/mbox-probe-embed.o $(LIB)/libcop.so
	@mkdir -p $(@D)
	$(call say,LD,$@)$(CC) $(LDFLAGS) $(filter %.o,$^) -L$(LIB) -lcop \
		-lpthread -Wl,-rpath,'$$ORIGIN/../lib' -o $@

ALL_TARGETS += $(mbox_probe_IMAGE) $(TESTBIN)/mbox-host
PYTESTS += emulator/copsim/tests

# GLib tests of object-id resolution and message framing.
$(TESTBIN)/test-copsim-resolve: $(COPSIM_TEST_OBJ)/test-copsim-resolve.o \
		$(COPSIM_LIB) $(COPSIM_DEPS)
	@mkdir -p $(@D)
	$(call say,LD,$@)$(CC) $(LDFLAGS) $^ $(GLIB_LIBS) -lm -o $@

GTESTS += $(TESTBIN)/test-copsim-resolve

# GLib tests of the driver's hooks, with a copsim in the test process.
$(TESTBIN)/test-copsim-hooks: $(COPSIM_TEST_OBJ)/test-copsim-hooks.o \
		$(COPSIM_LIB) $(COPSIM_DEPS) $(LIB)/libcop.so \
		| $(copsim_probe_IMAGE) $(BUILD)/examples/overlays.elf $(LIB)/libcoptrace.so
	@mkdir -p $(@D)
	$(call say,LD,$@)$(CC) $(LDFLAGS) $(filter %.o %.a,$^) -L$(LIB) -lcop \
		-Wl,-rpath,'$$ORIGIN/../lib' $(GLIB_LIBS) -lm -o $@

GTESTS += $(TESTBIN)/test-copsim-hooks

# The slot stub's bytes inside libcopsim (slots.c lays them into every slot
# emulator's RAM): its raw image, as an object with the symbols
# _binary_slot_stub_bin_start and _end.
$(OBJ)/emulator/copsim/slot-stub-blob.o: $(TESTBIN)/slot/slot-stub.elf
	@mkdir -p $(@D)
	$(call say,BLOB,$@)riscv64-unknown-elf-objcopy -O binary $< \
		$(@D)/slot-stub.bin && cd $(@D) && \
		ld -r -b binary -z noexecstack -o $(@F) slot-stub.bin

# ---- The resident slot stub (stub/) ---------------------------------------
# The stub and the test guests that run as its contexts: the trace unit's
# test guests (emulator/tests/guest/) with slot-crt0.S, whose exit is an
# ecall, and trap.c, which faults.  slotrun.py runs them; the tests and
# bench/contexts use these builds.

SLOT_DIR    := emulator/copsim/stub
SLOT_OUT    := $(TESTBIN)/slot
SLOT_STUB   := $(SLOT_OUT)/slot-stub.elf
SLOT_GUESTS := $(patsubst $(GUEST_DIR)/%.c,$(SLOT_OUT)/%.elf,\
                 $(wildcard $(GUEST_DIR)/*.c)) $(SLOT_OUT)/trap.elf

$(SLOT_STUB): $(SLOT_DIR)/slot-stub.S abi/slot-stub.h $(SLOT_DIR)/slot-stub.ld
	@mkdir -p $(@D)
	$(call say,GUEST,$@)$(GUEST_CC) -march=rv32im_zicsr_zifencei \
		-mabi=ilp32 -nostdlib -ffreestanding -Wl,--no-warn-rwx-segments \
		-I. -T $(SLOT_DIR)/slot-stub.ld $< -o $@

$(SLOT_OUT)/%.elf: $(GUEST_DIR)/%.c $(SLOT_DIR)/slot-crt0.S $(GUEST_DIR)/guest.ld
	@mkdir -p $(@D)
	$(call say,GUEST,$@)$(GUEST_CC) $(GUEST_CFLAGS) -T $(GUEST_DIR)/guest.ld \
		$(SLOT_DIR)/slot-crt0.S $< -o $@

$(SLOT_OUT)/trap.elf: $(SLOT_DIR)/trap.c $(SLOT_DIR)/slot-crt0.S $(GUEST_DIR)/guest.ld
	@mkdir -p $(@D)
	$(call say,GUEST,$@)$(GUEST_CC) $(GUEST_CFLAGS) -I$(GUEST_DIR) \
		-T $(GUEST_DIR)/guest.ld $(SLOT_DIR)/slot-crt0.S $< -o $@

ALL_TARGETS += $(SLOT_STUB) $(SLOT_GUESTS)
PYTESTS += emulator/copsim/stub/tests
