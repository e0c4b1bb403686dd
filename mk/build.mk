# coprof — the real build, run by the top-level Makefile once the Debian
# packages are present.
#
# Every part of the project lives in its own folder with a fragment
# FOLDER/module.mk (or FOLDER/SUB/module.mk, e.g. bench/NAME/module.mk),
# included below.  A fragment defines how to build its own
# programs and libraries and adds them to these lists (and touches nothing
# else, so parts can be added without editing this file):
#
#   ALL_TARGETS     what `make` builds (anything in build/)
#   GTESTS          GTest programs that `make check` runs (TAP output)
#   PYTESTS         files or folders of pytest tests that `make check` runs
#   BENCHES         programs that `make bench` runs, one after another
#   FAULT_PYTESTS   pytest files of fault-injection tests that need root or
#                   a mount (tmpfs), run by `make check-faults`; they are
#                   named fault_*.py so that `make check`'s pytest run,
#                   which collects test_*.py, leaves them out
#   FUZZ_RUNS       commands (make targets) that `make fuzz` runs
#   INSTALL_BINS    files installed into $(PREFIX)/bin
#   INSTALL_LIBS    files installed into $(PREFIX)/lib/coprof
#   INSTALL_PKGCONFIG templates NAME.pc.in of pkg-config files, written by
#                   install to $(PREFIX)/lib/pkgconfig/NAME.pc with @PREFIX@,
#                   @LIBDIR@ ($(PREFIX)/lib/coprof) and @INCLUDEDIR@
#                   ($(PREFIX)/include/coprof) replaced
#   INSTALL_HEADERS headers installed into $(PREFIX)/include/coprof/FOLDER/,
#                   so their own #include "FOLDER/x.h" lines resolve with
#                   -I$(PREFIX)/include/coprof
#   INSTALL_DATA    files installed into $(PREFIX)/share/coprof/FOLDER/ (the
#                   SDK's cop.mk, cop.ld)
#   INSTALL_COP_LIBS coprocessor objects and libraries (the runtime) installed
#                   into $(PREFIX)/lib/coprof/cop
#
# `make check-sanitize` runs this file with BUILD=build-sanitize SANITIZE=1:
# every object and program is built with AddressSanitizer and
# UndefinedBehaviorSanitizer (SAN_FLAGS), except what is loaded into a
# process the project does not build: the QEMU plugin runs inside
# qemu-system-riscv32, which has no ASan runtime and must not get one
# preloaded (its own allocations and exit-time leaks are not ours), so the
# plugin's objects are compiled apart, into PLUGIN_OBJ, with UBSan alone
# (PLUGIN_SAN_FLAGS, and PLUGIN_LDFLAGS to link it; libubsan loads into
# any process).  The trace unit's code in the plugin is the same
# trace-unit.c that the ASan-built tools and tests link.  In a normal build
# PLUGIN_OBJ is OBJ and PLUGIN_LDFLAGS is LDFLAGS.
#
# Objects go to build/obj/FOLDER/FILE.o from FOLDER/FILE.c by one pattern
# rule, with header dependencies tracked by -MMD.  A fragment that needs extra
# flags for its objects sets them as target-specific variables, e.g.
#   $(OBJ)/daemon/%.o: CFLAGS += $(GLIB_CFLAGS)
# Fragments are included in alphabetical order, top-level folders first, so a
# prerequisite on another part's output names it by its path
# ($(LIB)/liblfsr.a), not by a variable that a later fragment defines.
# `make V=1` shows the full commands.

BUILD   := build
BIN     := $(BUILD)/bin
LIB     := $(BUILD)/lib
OBJ     := $(BUILD)/obj
TESTBIN := $(BUILD)/tests
BENCHBIN := $(BUILD)/bench

PREFIX  ?= /usr/local
DESTDIR ?=
PYTHON  := /usr/bin/python3

CC       := gcc
CPPFLAGS := -I. -D_GNU_SOURCE
CFLAGS   := -std=gnu11 -O2 -g -fPIC -pthread -Wall -Wextra -Wshadow \
            -Wstrict-prototypes -Wmissing-prototypes -Wno-unused-parameter
LDFLAGS  := -pthread

SANITIZE ?=
ifeq ($(SANITIZE),1)
  SAN_FLAGS := -fsanitize=address,undefined -fno-sanitize-recover=all \
               -fno-omit-frame-pointer
  PLUGIN_SAN_FLAGS := -fsanitize=undefined -fno-sanitize-recover=all
  PLUGIN_OBJ := $(BUILD)/obj-plugin
else
  SAN_FLAGS :=
  PLUGIN_SAN_FLAGS :=
  PLUGIN_OBJ := $(OBJ)
endif
PLUGIN_LDFLAGS = $(filter-out $(SAN_FLAGS),$(LDFLAGS)) $(PLUGIN_SAN_FLAGS)
CFLAGS  += $(SAN_FLAGS)
LDFLAGS += $(SAN_FLAGS)

GLIB_CFLAGS   := $(shell pkg-config --cflags glib-2.0)
GLIB_LIBS     := $(shell pkg-config --libs glib-2.0)
ELF_CFLAGS    := $(shell pkg-config --cflags libelf)
ELF_LIBS      := $(shell pkg-config --libs libelf)
SQLITE_CFLAGS := $(shell pkg-config --cflags sqlite3)
SQLITE_LIBS   := $(shell pkg-config --libs sqlite3)

ifeq ($(V),1)
  Q :=
  say :=
else
  Q := @
  say = @printf '  %-6s %s\n' $(1) $(2);
endif

# Coprocessor programs (sdk/cop.mk) go into this build folder too.
COP_BIN := $(BIN)
COP_OBJ := $(OBJ)/cop
COP_LIB := $(LIB)/cop
COP_OUT := $(BUILD)/examples

ALL_TARGETS :=
GTESTS :=
PYTESTS := tests
BENCHES :=
FAULT_PYTESTS :=
FUZZ_RUNS :=
INSTALL_BINS :=
INSTALL_LIBS :=
INSTALL_PKGCONFIG :=
INSTALL_HEADERS :=
INSTALL_DATA :=
INSTALL_COP_LIBS :=

.PHONY: all check check-faults check-sanitize bench install fuzz demo \
        clean-build
all: build-all

include $(sort $(wildcard */module.mk))
include $(sort $(wildcard */*/module.mk))

.PHONY: build-all
build-all: $(ALL_TARGETS)

$(OBJ)/%.o: %.c
	@mkdir -p $(@D)
	$(call say,CC,$<)$(CC) $(CPPFLAGS) $(CFLAGS) -MMD -MP -c $< -o $@

ifneq ($(PLUGIN_OBJ),$(OBJ))
$(PLUGIN_OBJ)/%.o: %.c
	@mkdir -p $(@D)
	$(call say,CC,$<)$(CC) $(CPPFLAGS) \
		$(filter-out $(SAN_FLAGS),$(CFLAGS)) $(PLUGIN_SAN_FLAGS) \
		-MMD -MP -c $< -o $@
-include $(shell find $(PLUGIN_OBJ) -name '*.d' 2>/dev/null)
endif

-include $(shell find $(OBJ) -name '*.d' 2>/dev/null)

check: build-all $(GTESTS)
	$(Q)$(PYTHON) tests/runner.py --build $(BUILD) \
		--gtest $(GTESTS) --pytest $(PYTESTS)

check-faults: build-all
	$(Q)$(PYTHON) tests/runner.py --build $(BUILD) \
		--log-dir $(BUILD)/test-logs-faults --pytest $(FAULT_PYTESTS)

# Every report of a sanitizer goes to a file of SAN_LOGS (not to the
# stderr that tests read), and the runner counts each file as a failure.
# Leaks are reported too.  verify_asan_link_order=0: the tests also link
# libcop.so (built with ASan here) into host programs they compile with a
# plain gcc, which then load the ASan runtime after libc.
SAN_LOGS := $(BUILD)/sanitizer-logs
check-sanitize: build-all $(GTESTS)
ifneq ($(SANITIZE),1)
	$(error check-sanitize needs SANITIZE=1: run make check-sanitize)
endif
	$(Q)rm -rf $(SAN_LOGS) && mkdir -p $(SAN_LOGS)
	$(Q)ASAN_OPTIONS=log_path=$(abspath $(SAN_LOGS))/asan:detect_leaks=1:verify_asan_link_order=0 \
	UBSAN_OPTIONS=log_path=$(abspath $(SAN_LOGS))/ubsan:print_stacktrace=1:halt_on_error=1 \
	$(PYTHON) tests/runner.py --build $(BUILD) --sanitizer-logs $(SAN_LOGS) \
		--gtest $(GTESTS) --pytest $(PYTESTS)

bench: build-all $(BENCHES)
	$(Q)set -e; for b in $(BENCHES); do echo "== $$b"; $$b; done

fuzz: build-all $(FUZZ_RUNS)

demo: build-all
	$(Q)sh mk/demo.sh $(BUILD)

install: build-all
	install -d $(DESTDIR)$(PREFIX)/bin $(DESTDIR)$(PREFIX)/lib/coprof \
		$(DESTDIR)$(PREFIX)/lib/pkgconfig $(DESTDIR)$(PREFIX)/include/coprof
	$(if $(INSTALL_BINS),install -m 755 $(INSTALL_BINS) $(DESTDIR)$(PREFIX)/bin)
	$(if $(INSTALL_LIBS),install -m 644 $(INSTALL_LIBS) $(DESTDIR)$(PREFIX)/lib/coprof)
	$(foreach t,$(INSTALL_PKGCONFIG),sed -e 's|@PREFIX@|$(PREFIX)|' \
		-e 's|@LIBDIR@|$(PREFIX)/lib/coprof|' \
		-e 's|@INCLUDEDIR@|$(PREFIX)/include/coprof|' $(t) \
		> $(DESTDIR)$(PREFIX)/lib/pkgconfig/$(notdir $(t:.in=)) &&) true
	$(foreach h,$(INSTALL_HEADERS),install -D -m 644 $(h) $(DESTDIR)$(PREFIX)/include/coprof/$(h) &&) true
	$(foreach f,$(INSTALL_DATA),install -D -m 644 $(f) $(DESTDIR)$(PREFIX)/share/coprof/$(f) &&) true
	$(if $(INSTALL_COP_LIBS),install -D -m 644 -t $(DESTDIR)$(PREFIX)/lib/coprof/cop $(INSTALL_COP_LIBS))

clean-build:
	rm -rf $(BUILD)
