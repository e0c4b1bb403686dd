# escape-protocol/: the stream format library, copstream, tests and fuzzing.

COPSTREAM_LIB := $(LIB)/libcopstream.a
COPSTREAM_TEXT := $(OBJ)/escape-protocol/text.o

$(COPSTREAM_LIB): $(OBJ)/escape-protocol/encode.o $(OBJ)/escape-protocol/decode.o
	@mkdir -p $(@D)
	$(call say,AR,$@)$(AR) rcs $@ $^

$(BIN)/copstream: $(OBJ)/escape-protocol/cli.o $(OBJ)/common/cli.o $(COPSTREAM_TEXT) $(COPSTREAM_LIB) \
		$(LIB)/libcopsafe.a
	@mkdir -p $(@D)
	$(call say,LD,$@)$(CC) $(LDFLAGS) $^ -o $@

ALL_TARGETS += $(COPSTREAM_LIB) $(BIN)/copstream
INSTALL_BINS += $(BIN)/copstream
INSTALL_LIBS += $(COPSTREAM_LIB)
INSTALL_HEADERS += escape-protocol/copstream.h

$(TESTBIN)/test-copstream: $(OBJ)/escape-protocol/test-copstream.o $(COPSTREAM_TEXT) $(COPSTREAM_LIB)
	@mkdir -p $(@D)
	$(call say,LD,$@)$(CC) $(LDFLAGS) $^ $(GLIB_LIBS) -o $@

$(OBJ)/escape-protocol/test-copstream.o: CFLAGS += $(GLIB_CFLAGS)

GTESTS += $(TESTBIN)/test-copstream

# The libFuzzer target: the library's sources again, built by clang with
# the fuzzer and sanitizers.  `make check` runs it briefly (test_fuzz.py);
# `make fuzz` runs it for COPSTREAM_FUZZ_SECONDS on a kept corpus.
COPSTREAM_FUZZER := $(TESTBIN)/fuzz-copstream
COPSTREAM_FUZZ_SOURCES := escape-protocol/fuzz-decoder.c \
	escape-protocol/encode.c escape-protocol/decode.c
COPSTREAM_FUZZ_CORPUS := $(BUILD)/fuzz/copstream
COPSTREAM_FUZZ_SECONDS ?= 300

$(COPSTREAM_FUZZER): $(COPSTREAM_FUZZ_SOURCES) escape-protocol/copstream.h escape-protocol/layout.h
	@mkdir -p $(@D)
	$(call say,CLANG,$@)clang $(CPPFLAGS) -std=gnu11 -g -O1 \
		-fsanitize=fuzzer,address,undefined -fno-sanitize-recover=all \
		$(COPSTREAM_FUZZ_SOURCES) -o $@

.PHONY: fuzz-copstream
fuzz-copstream: $(COPSTREAM_FUZZER)
	$(Q)$(PYTHON) escape-protocol/fuzz_seeds.py $(COPSTREAM_FUZZ_CORPUS)
	$(COPSTREAM_FUZZER) -max_total_time=$(COPSTREAM_FUZZ_SECONDS) \
		-max_len=16384 -dict=escape-protocol/fuzz.dict \
		-artifact_prefix=$(BUILD)/fuzz/copstream- $(COPSTREAM_FUZZ_CORPUS)

ALL_TARGETS += $(COPSTREAM_FUZZER)
FUZZ_RUNS += fuzz-copstream

PYTESTS += escape-protocol/test_copstream.py escape-protocol/test_fuzz.py
