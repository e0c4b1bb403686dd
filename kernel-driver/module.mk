# kernel-driver/: the portable driver core, its hosted OS shim, the tests.

COPDRV_LIB := $(LIB)/libcopdrv.a
COPDRV_CORE_OBJS := $(OBJ)/kernel-driver/core.o \
	$(OBJ)/kernel-driver/event-buffer.o

# The core is freestanding: no builtins turned into libc calls, no loops
# turned into memcpy.  test_driver_core.py checks its undefined symbols.
$(COPDRV_CORE_OBJS): CFLAGS += -ffreestanding -fno-tree-loop-distribute-patterns

$(COPDRV_LIB): $(COPDRV_CORE_OBJS) $(OBJ)/kernel-driver/os-hosted.o
	@mkdir -p $(@D)
	$(call say,AR,$@)$(AR) rcs $@ $^

# What a program that hosts the driver links, in order.
COPDRV_LINK := $(COPDRV_LIB) $(LIB)/libtraceunit.a $(LIB)/libcopstream.a

ALL_TARGETS += $(COPDRV_LIB)
INSTALL_LIBS += $(COPDRV_LIB)
INSTALL_HEADERS += kernel-driver/copdrv.h kernel-driver/copdrv-os.h \
	kernel-driver/copdrv-hosted.h

# Tests: the GTest suite with a synthetic producer, and the rule checker
# it shares with the QEMU harness.
COPDRV_RULES := $(OBJ)/kernel-driver/tests/stream-rules.o
$(OBJ)/kernel-driver/tests/%.o: CFLAGS += $(GLIB_CFLAGS)

$(TESTBIN)/test-driver: $(OBJ)/kernel-driver/tests/test-driver.o \
		$(COPDRV_RULES) $(COPDRV_LINK) $(LIB)/liblfsr.a
	@mkdir -p $(@D)
	$(call say,LD,$@)$(CC) $(LDFLAGS) $^ $(GLIB_LIBS) -o $@

GTESTS += $(TESTBIN)/test-driver

# The same checker for a stream file (copsim's streams).
$(TESTBIN)/copdrv-rules: $(OBJ)/kernel-driver/tests/copdrv-rules.o \
		$(COPDRV_RULES) $(LIB)/libcopstream.a
	@mkdir -p $(@D)
	$(call say,LD,$@)$(CC) $(LDFLAGS) $^ $(GLIB_LIBS) -o $@

ALL_TARGETS += $(TESTBIN)/copdrv-rules

# The QEMU harness: images under the plugin, the driver polling in-process.
$(TESTBIN)/copdrv-qemu: $(OBJ)/kernel-driver/tests/copdrv-qemu.o \
		$(COPDRV_RULES) $(COPDRV_LINK) $(LIB)/liblfsr.a \
		$(LIB)/libcoploader.a | $(LIB)/libcoptrace.so
	@mkdir -p $(@D)
	$(call say,LD,$@)$(CC) $(LDFLAGS) $(filter %.o %.a,$^) $(GLIB_LIBS) -o $@

ALL_TARGETS += $(TESTBIN)/copdrv-qemu
PYTESTS += kernel-driver/tests

# The Linux module, copdrv.ko, for the newest installed Debian kernel that
# has its headers (kernel-driver/linux/guest.py picks it; the image's
# version, not the running kernel's).  Kbuild runs in
# build/kernel-driver/linux/, where the sources are linked from the tree.
# Without the kernel packages nothing is built and the module's tests skip
# naming them; the sanitizer build never builds it (a module cannot link
# the sanitizers' runtimes).  No BTF: the headers package has no vmlinux.
ifneq ($(SANITIZE),1)
COPDRV_KVER := $(shell $(PYTHON) kernel-driver/linux/guest.py kernel-version 2>/dev/null)
ifneq ($(COPDRV_KVER),)
COPDRV_KO_DIR := $(BUILD)/kernel-driver/linux
COPDRV_KO := $(COPDRV_KO_DIR)/copdrv.ko
COPDRV_KO_SRCS := kernel-driver/linux/Kbuild \
	$(wildcard kernel-driver/linux/*.c) \
	kernel-driver/core.c kernel-driver/event-buffer.c \
	escape-protocol/encode.c
COPDRV_KO_HDRS := $(wildcard kernel-driver/linux/*.h \
	kernel-driver/linux/include/*.h) kernel-driver/copdrv.h \
	kernel-driver/copdrv-os.h kernel-driver/event-buffer.h \
	abi/trace-regs.h abi/copdrv-limits.h escape-protocol/copstream.h \
	escape-protocol/layout.h

$(COPDRV_KO): $(COPDRV_KO_SRCS) $(COPDRV_KO_HDRS)
	@mkdir -p $(@D)
	$(Q)ln -sf $(abspath $(COPDRV_KO_SRCS)) $(@D)/
	$(call say,KBUILD,$@)$(MAKE) -s -C /lib/modules/$(COPDRV_KVER)/build \
		M=$(abspath $(@D)) COPROF_SRC=$(abspath .) \
		CONFIG_DEBUG_INFO_BTF_MODULES= modules

ALL_TARGETS += $(COPDRV_KO)

# make check-kernel-style: checkpatch.pl --strict (from the Debian package
# linux-source-6.1's tarball, extracted once into the build folder) over
# every file the module compiles, and sparse (package sparse) through
# Kbuild's C=2, whose own failure fails the target too.  The files shared
# with user space (the encoder, the stream and register-file headers) keep
# the project's user-space style: CHECKPATCH_SHARED_IGNORE lists the
# classes skipped for them, layout and user-space C, each with its reason
# in kernel-driver/linux/README.md ("Style checks").
LINUX_SOURCE_TAR := $(firstword $(wildcard /usr/src/linux-source-*.tar.xz))
CHECKPATCH_DIR := $(BUILD)/kernel-driver/linux/checkpatch
CHECKPATCH := $(CHECKPATCH_DIR)/scripts/checkpatch.pl
CHECKPATCH_FLAGS := --strict --no-tree --terse --show-types --max-line-length=100 \
	--ignore FILE_PATH_CHANGES
CHECKPATCH_KERNEL := $(wildcard kernel-driver/linux/*.c kernel-driver/linux/*.h \
	kernel-driver/linux/include/*.h) kernel-driver/core.c \
	kernel-driver/event-buffer.c kernel-driver/event-buffer.h \
	kernel-driver/copdrv.h kernel-driver/copdrv-os.h abi/copdrv-limits.h
# The two checks left in kernel style files, each with its reason in the
# README: COPDRV_PARAM's token-pasted name, the user-space branch of
# copdrv-os.h that defines u8 ... s32 from <stdint.h>.
CHECKPATCH_KNOWN := MACRO_ARG_REUSE,PREFER_KERNEL_TYPES
CHECKPATCH_SHARED := escape-protocol/encode.c escape-protocol/copstream.h \
	escape-protocol/layout.h abi/trace-regs.h
comma := ,
space := $(subst ,, )
# Layout (4-space indent, aligned comments, blank lines, operators first
# in a broken condition), then user-space C: uint*_t, the parentheses of
# (a == 0) != (b == 0), FIELD()'s member, the hosted branch's
# __attribute__((packed)) and _Static_assert.
CHECKPATCH_SHARED_IGNORE := $(subst $(space),$(comma),$(strip \
	LEADING_SPACE CODE_INDENT SUSPECT_CODE_INDENT PARENTHESIS_ALIGNMENT \
	SWITCH_CASE_INDENT_LEVEL BLOCK_COMMENT_STYLE LINE_SPACING \
	LOGICAL_CONTINUATIONS PREFER_KERNEL_TYPES UNNECESSARY_PARENTHESES \
	MACRO_ARG_REUSE PREFER_DEFINED_ATTRIBUTE_MACRO CAMELCASE))
SPARSE_LOG := $(BUILD)/kernel-driver/linux/sparse.log

$(CHECKPATCH): $(LINUX_SOURCE_TAR)
	@test -n "$(LINUX_SOURCE_TAR)" || { echo "checkpatch.pl: install the Debian package linux-source-6.1 (make deps)" >&2; exit 1; }
	@mkdir -p $(CHECKPATCH_DIR)
	$(Q)tar -xJf $(LINUX_SOURCE_TAR) -C $(CHECKPATCH_DIR) --strip-components=1 \
		--wildcards '*/scripts/checkpatch.pl' '*/scripts/spelling.txt' \
		'*/scripts/const_structs.checkpatch'
	$(Q)touch $@

.PHONY: check-kernel-style
check-kernel-style: $(CHECKPATCH) $(COPDRV_KO)
	@echo "== checkpatch.pl --strict: kernel style files"
	$(Q)perl $(CHECKPATCH) $(CHECKPATCH_FLAGS) \
		--ignore $(CHECKPATCH_KNOWN) -f $(CHECKPATCH_KERNEL)
	@echo "== checkpatch.pl --strict: shared files (user-space style classes skipped)"
	$(Q)perl $(CHECKPATCH) $(CHECKPATCH_FLAGS) \
		--ignore $(CHECKPATCH_SHARED_IGNORE) -f $(CHECKPATCH_SHARED)
	@echo "== sparse (C=2)"
	$(Q)command -v sparse >/dev/null || { echo "sparse: install the Debian package sparse (make deps)" >&2; exit 1; }
	$(Q)$(MAKE) -s -C /lib/modules/$(COPDRV_KVER)/build \
		M=$(abspath $(COPDRV_KO_DIR)) COPROF_SRC=$(abspath .) \
		CONFIG_DEBUG_INFO_BTF_MODULES= C=2 CHECK=sparse modules \
		>$(SPARSE_LOG) 2>&1 || { cat $(SPARSE_LOG); exit 1; }
	$(Q)! grep -E 'warning|error' $(SPARSE_LOG)
	@echo "== clean"
endif
# guest.py beside the module, where coprof and copcontrol --driver=linux
# look for both (build/bin/../kernel-driver/linux/).
COPDRV_GUEST := $(BUILD)/kernel-driver/linux/guest.py
$(COPDRV_GUEST): kernel-driver/linux/guest.py
	@mkdir -p $(@D)
	$(Q)ln -sf $(abspath $<) $@
ALL_TARGETS += $(COPDRV_GUEST)
PYTESTS += kernel-driver/linux/tests
endif
