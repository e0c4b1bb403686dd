# sdk/cop.mk — build coprocessor programs from C sources.
#
#   include PATH/cop.mk
#   demo_SOURCES  := demo/main.c                 resident code
#   demo_OVERLAYS := 1:fft 1:filter 2:codec      REGION:NAME, in index order
#   demo_OVERLAY_fft := demo/fft.c               objects of each overlay
#   ...
#   demo_NAME, demo_CFLAGS, demo_OUT             optional
#   $(eval $(call cop_program,demo))
#
# cop_program adds the image ($(demo_OUT), default $(COP_OUT)/demo.elf) to
# COP_IMAGES and sets demo_IMAGE.  The steps (sdk/README.md): compile each
# source once per program into $(COP_OBJ)/PROGRAM/SOURCE.o, write the
# linker script and the overlay call stubs with cop-overlays, link with
# crt0 and libcoprt.a, picolibc and libgcc, then `cop-overlays finish`.
#
# Two places it works from, told apart by what lies beside it:
#   the coprof tree (sdk/cop.mk, with sdk/runtime/ sources): the runtime is
#     built into $(COP_LIB), the host tools are the tree's build/bin;
#   an installed SDK (PREFIX/share/coprof/sdk/cop.mk, `make install`): the
#     runtime is prebuilt in PREFIX/lib/coprof/cop, the host tools are in
#     PREFIX/bin, the headers in PREFIX/include/coprof.
# Set before the include to change them: COP_BIN (host tools), COP_OBJ
# (objects, default build/obj), COP_OUT (images, default build), COP_LIB
# (the tree's runtime, default build/lib), COP_CC, COP_PICOLIBC.  The
# defaults of COP_OBJ, COP_OUT and COP_LIB are relative to the directory
# make runs in.  Including this file does not change the default goal:
# a Makefile's own first target stays the one a bare `make` builds.

ifndef COP_MK_INCLUDED
COP_MK_INCLUDED := 1
cop_default_goal := $(.DEFAULT_GOAL)

ifndef COP_SDK
COP_SDK      := $(patsubst %/,%,$(dir $(lastword $(MAKEFILE_LIST))))
endif
ifneq ($(wildcard $(COP_SDK)/runtime/crt0.S),)
  COP_INSTALLED :=
  COP_BIN      ?= $(COP_SDK)/../build/bin
  COP_LIB      ?= build/lib
  COP_INCLUDE  := $(COP_SDK)/..
else
  COP_INSTALLED := 1
  COP_PREFIX   := $(abspath $(COP_SDK)/../../..)
  COP_BIN      ?= $(COP_PREFIX)/bin
  COP_LIB      := $(COP_PREFIX)/lib/coprof/cop
  COP_INCLUDE  := $(COP_PREFIX)/include/coprof
endif
COP_OBJ      ?= build/obj
COP_OUT      ?= build
COP_CC       ?= riscv64-unknown-elf-gcc
COP_AR       ?= riscv64-unknown-elf-ar
COP_PICOLIBC ?= /usr/lib/picolibc/riscv64-unknown-elf

# RV32IM, no compressed instructions; csrr and fence.i need the Z names.
# ilp32: uint32_t is `unsigned long` and int32_t `long` with this
# toolchain, so printf takes them with %lu / %ld (or PRIu32 / PRId32).
COP_ARCH_FLAGS := -march=rv32im_zicsr_zifencei -mabi=ilp32
# GCC 12 picks libgcc's multilib from -march and has none for the Z names.
COP_LINK_ARCH  := -march=rv32im -mabi=ilp32
COP_PICOLIBC_LIB := $(COP_PICOLIBC)/lib/rv32im/ilp32

COP_CFLAGS   ?= -O2 -g -Wall -Wextra -Wshadow -fno-common
COP_COMPILE  := $(COP_ARCH_FLAGS) -I$(COP_INCLUDE) -isystem $(COP_PICOLIBC)/include
COP_LDFLAGS  := $(COP_LINK_ARCH) -nostdlib -static -Wl,--nmagic -Wl,--no-warn-rwx-segments \
                -L$(COP_PICOLIBC_LIB)

ifeq ($(V),1)
  cop_say :=
  cop_quiet :=
else
  cop_say = @printf '  %-6s %s\n' $(1) $(2);
  cop_quiet := @
endif

COP_IMAGES :=

# The one-line answer to a missing toolchain; runs before any cop compile.
.PHONY: cop-toolchain-check
cop-toolchain-check:
	@command -v $(COP_CC) >/dev/null 2>&1 || { echo "cop.mk: $(COP_CC) not found: install the Debian package gcc-riscv64-unknown-elf" >&2; exit 1; }
	@test -f $(COP_PICOLIBC)/include/string.h -a -f $(COP_PICOLIBC_LIB)/libc.a || { echo "cop.mk: picolibc not found in $(COP_PICOLIBC): install the Debian package picolibc-riscv64-unknown-elf" >&2; exit 1; }

# The runtime: crt0 is linked as an object, the rest as libcoprt.a; both
# are built here in the tree, and prebuilt in an installed SDK.
COP_CRT0 := $(COP_LIB)/crt0.o
COP_RUNTIME_LIB := $(COP_LIB)/libcoprt.a

ifndef COP_INSTALLED
COP_RUNTIME_OBJECTS := $(addprefix $(COP_OBJ)/runtime/,\
    start.c.o exit.c.o console.c.o overlay.c.o overlay-call.S.o mfc.c.o)

$(COP_OBJ)/runtime/%.o: $(COP_SDK)/runtime/% | cop-toolchain-check
	@mkdir -p $(@D)
	$(call cop_say,COPCC,$<)$(COP_CC) $(COP_COMPILE) $(COP_CFLAGS) -MMD -MP -c $< -o $@

$(COP_RUNTIME_LIB): $(COP_RUNTIME_OBJECTS)
	@mkdir -p $(@D)
	$(call cop_say,COPAR,$@)rm -f $@ && $(COP_AR) rcs $@ $^

$(COP_CRT0): $(COP_OBJ)/runtime/crt0.S.o
	@mkdir -p $(@D)
	$(call cop_say,CP,$@)cp $< $@
endif

-include $(shell find $(COP_OBJ) -name '*.d' 2>/dev/null)

# $(call cop_objects,PROGRAM,SOURCES): the objects of SOURCES for PROGRAM.
cop_objects = $(addprefix $(COP_OBJ)/$(1)/,$(addsuffix .o,$(2)))

# REGION:NAME -> NAME, REGION
cop_overlay_name = $(word 2,$(subst :, ,$(1)))
cop_overlay_region = $(word 1,$(subst :, ,$(1)))

cop_comma := ,
cop_empty :=
cop_space := $(cop_empty) $(cop_empty)

# $(call cop_overlay_sources,PROGRAM): every overlay's sources.
cop_overlay_sources = $(foreach o,$($(1)_OVERLAYS),\
    $($(1)_OVERLAY_$(call cop_overlay_name,$(o))))

# $(call cop_overlay_spec,PROGRAM,REGION:NAME): REGION:NAME:OBJ,OBJ...
cop_overlay_spec = $(call cop_overlay_region,$(2)):$(call cop_overlay_name,$(2)):$(subst $(cop_space),$(cop_comma),$(strip \
    $(call cop_objects,$(1),$($(1)_OVERLAY_$(call cop_overlay_name,$(2))))))

cop_specs = $(foreach o,$($(1)_OVERLAYS),$(call cop_overlay_spec,$(1),$(o)))

# $(call cop_program,PROGRAM): the rules of one program (use with $(eval)).
define cop_program
$(1)_IMAGE := $(or $($(1)_OUT),$(COP_OUT)/$(1).elf)
$(1)_OBJECTS := $(call cop_objects,$(1),$($(1)_SOURCES) $(call cop_overlay_sources,$(1)))
$(1)_LINK_OBJECTS := $(COP_CRT0) $$($(1)_OBJECTS) $(COP_OBJ)/$(1)/name-note.o \
    $(COP_OBJ)/$(1)/stubs.o

$$($(1)_OBJECTS): $(COP_OBJ)/$(1)/%.o: % | cop-toolchain-check
	@mkdir -p $$(@D)
	$$(call cop_say,COPCC,$$<)$(COP_CC) $(COP_COMPILE) $(COP_CFLAGS) $($(1)_CFLAGS) -MMD -MP -c $$< -o $$@

$(COP_OBJ)/$(1)/name-note.o: $(COP_SDK)/runtime/name-note.S | cop-toolchain-check
	@mkdir -p $$(@D)
	$$(call cop_say,COPAS,$$@)$(COP_CC) $(COP_ARCH_FLAGS) '-DCOP_NAME_STRING="$(or $($(1)_NAME),$(1))"' -c $$< -o $$@

$(COP_OBJ)/$(1)/$(1).ld: $(COP_SDK)/cop.ld $(COP_BIN)/cop-overlays
	@mkdir -p $$(@D)
	$$(call cop_say,GEN,$$@)$(COP_BIN)/cop-overlays script $$< $$@ $(call cop_specs,$(1))

$(COP_OBJ)/$(1)/stubs.S $(COP_OBJ)/$(1)/wrap.opt &: $$($(1)_OBJECTS) $(COP_BIN)/cop-overlays
	@mkdir -p $(COP_OBJ)/$(1)
	$$(call cop_say,GEN,$(COP_OBJ)/$(1)/stubs.S)$(COP_BIN)/cop-overlays stubs $(COP_OBJ)/$(1)/stubs.S $(COP_OBJ)/$(1)/wrap.opt \
		$(call cop_specs,$(1)) --resident $(call cop_objects,$(1),$($(1)_SOURCES))

$(COP_OBJ)/$(1)/stubs.o: $(COP_OBJ)/$(1)/stubs.S | cop-toolchain-check
	$$(call cop_say,COPAS,$$@)$(COP_CC) $(COP_ARCH_FLAGS) -c $$< -o $$@

$$($(1)_IMAGE): $$($(1)_LINK_OBJECTS) $(COP_OBJ)/$(1)/$(1).ld $(COP_OBJ)/$(1)/wrap.opt $(COP_RUNTIME_LIB) $(COP_BIN)/cop-overlays
	@mkdir -p $$(@D)
	$$(call cop_say,COPLD,$$@)$(COP_CC) $(COP_LDFLAGS) -T $(COP_OBJ)/$(1)/$(1).ld -Wl,@$(COP_OBJ)/$(1)/wrap.opt \
		$$($(1)_LINK_OBJECTS) -Wl,--start-group $(COP_RUNTIME_LIB) -lc -lgcc -Wl,--end-group -o $$@.tmp
	$(cop_quiet)$(COP_BIN)/cop-overlays finish $$@.tmp && mv $$@.tmp $$@

COP_IMAGES += $$($(1)_IMAGE)
.DEFAULT_GOAL := $(.DEFAULT_GOAL)
endef

.DEFAULT_GOAL := $(cop_default_goal)
endif
