# daemon/: coprofd, the library it is made of (also used by bench/daemon),
# its tests and its fuzz target.

DAEMON_LIB  := $(LIB)/libcoprofd.a
DAEMON_SRCS := $(addprefix daemon/,counts.c images.c recorder.c schedlog.c \
               session.c store.c)
DAEMON_OBJS := $(patsubst %.c,$(OBJ)/%.o,$(DAEMON_SRCS))
# What a program linking libcoprofd.a needs after it.
DAEMON_DEPS := $(LIB)/liboverlay.a $(LIB)/libcoploader.a \
               $(LIB)/libcopstream.a $(LIB)/libcoplog.a $(LIB)/libcopsafe.a
DAEMON_LIBS := $(GLIB_LIBS) $(ELF_LIBS) $(SQLITE_LIBS)

$(OBJ)/daemon/%.o: CFLAGS += $(GLIB_CFLAGS) $(ELF_CFLAGS) $(SQLITE_CFLAGS)
# store.c creates the tables of abi/session-schema.sql.
$(OBJ)/daemon/store.o: CPPFLAGS += $(ABI_GEN_CPPFLAGS)
$(OBJ)/daemon/store.o: $(SESSION_SCHEMA_H)

$(DAEMON_LIB): $(DAEMON_OBJS)
	@mkdir -p $(@D)
	$(call say,AR,$@)$(AR) rcs $@ $^

$(BIN)/coprofd: $(OBJ)/daemon/coprofd.o $(OBJ)/common/cli.o $(DAEMON_LIB) \
		$(DAEMON_DEPS)
	@mkdir -p $(@D)
	$(call say,LD,$@)$(CC) $(LDFLAGS) $^ $(DAEMON_LIBS) -o $@

$(TESTBIN)/test-daemon: $(OBJ)/daemon/test-daemon.o $(DAEMON_LIB) $(DAEMON_DEPS)
	@mkdir -p $(@D)
	$(call say,LD,$@)$(CC) $(LDFLAGS) $^ $(DAEMON_LIBS) -o $@

$(OBJ)/daemon/test-daemon.o: CFLAGS += \
	-DDAEMON_TEST_IMAGES='"$(abspath $(TESTBIN))/overlay"'
$(TESTBIN)/test-daemon: | $(TESTBIN)/overlay/overlays.elf $(TESTBIN)/overlay/plain.elf

ALL_TARGETS += $(DAEMON_LIB) $(BIN)/coprofd
GTESTS += $(TESTBIN)/test-daemon
PYTESTS += daemon/tests
INSTALL_BINS += $(BIN)/coprofd

# The libFuzzer target: the session's sources built again by clang with the
# fuzzer and sanitizers.  `make check` runs it briefly
# (tests/test_fuzz_session.py); `make fuzz` for DAEMON_FUZZ_SECONDS on a
# corpus kept in build/fuzz/daemon.
DAEMON_FUZZER := $(TESTBIN)/fuzz-session
DAEMON_FUZZ_SOURCES := daemon/fuzz-session.c \
	$(addprefix daemon/,counts.c images.c session.c store.c) \
	$(addprefix overlay/,container.c image.c note.c symbols.c overlays.c \
	lsmap.c) escape-protocol/encode.c escape-protocol/decode.c \
	common/safe-file.c common/cli.c common/image.c
DAEMON_FUZZ_SECONDS ?= 300

$(DAEMON_FUZZER): $(DAEMON_FUZZ_SOURCES) $(wildcard daemon/*.h) \
		$(SESSION_SCHEMA_H) | $(TESTBIN)/overlay/overlays.elf
	@mkdir -p $(@D)
	$(call say,CLANG,$@)clang $(CPPFLAGS) $(ABI_GEN_CPPFLAGS) -std=gnu11 -g -O1 \
		-fsanitize=fuzzer,address,undefined -fno-sanitize-recover=all \
		-DFUZZ_IMAGE='"$(abspath $(TESTBIN))/overlay/overlays.elf"' \
		$(GLIB_CFLAGS) $(ELF_CFLAGS) $(SQLITE_CFLAGS) \
		$(DAEMON_FUZZ_SOURCES) $(GLIB_LIBS) $(ELF_LIBS) $(SQLITE_LIBS) -o $@

.PHONY: fuzz-daemon
fuzz-daemon: $(DAEMON_FUZZER) $(BIN)/coprofd
	@mkdir -p $(BUILD)/fuzz/daemon
	$(Q)$(PYTHON) daemon/tests/fuzz_seeds.py $(BUILD)/fuzz/daemon
	$(DAEMON_FUZZER) -max_total_time=$(DAEMON_FUZZ_SECONDS) -max_len=65536 \
		-artifact_prefix=$(BUILD)/fuzz/daemon- $(BUILD)/fuzz/daemon

ALL_TARGETS += $(DAEMON_FUZZER)
FUZZ_RUNS += fuzz-daemon
