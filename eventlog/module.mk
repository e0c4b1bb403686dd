# eventlog/: the kernel event log library (writers and readers), coplog,
# and their tests.

COPLOG_LIB := $(LIB)/libcoplog.a
COPLOG_OBJS := $(addprefix $(OBJ)/eventlog/, \
	clock.o file.o format-table.o level.o message.o reader.o writer.o)

$(COPLOG_LIB): $(COPLOG_OBJS)
	@mkdir -p $(@D)
	$(call say,AR,$@)$(AR) rcs $@ $^

$(BIN)/coplog: $(OBJ)/eventlog/coplog.o $(OBJ)/common/cli.o $(COPLOG_LIB)
	@mkdir -p $(@D)
	$(call say,LD,$@)$(CC) $(LDFLAGS) $^ -o $@

ALL_TARGETS += $(COPLOG_LIB) $(BIN)/coplog
INSTALL_BINS += $(BIN)/coplog
INSTALL_LIBS += $(COPLOG_LIB)
INSTALL_HEADERS += eventlog/coplog.h

# Tests: GTest programs (GLib) and the CLI's pytest file.
$(OBJ)/eventlog/test-%.o: CFLAGS += $(GLIB_CFLAGS)

$(TESTBIN)/test-eventlog: $(OBJ)/eventlog/test-eventlog.o \
		$(OBJ)/eventlog/test-support.o $(COPLOG_LIB)
	@mkdir -p $(@D)
	$(call say,LD,$@)$(CC) $(LDFLAGS) $^ $(GLIB_LIBS) -lm -o $@

$(TESTBIN)/test-eventlog-stress: $(OBJ)/eventlog/test-eventlog-stress.o \
		$(OBJ)/eventlog/test-support.o $(COPLOG_LIB)
	@mkdir -p $(@D)
	$(call say,LD,$@)$(CC) $(LDFLAGS) $^ $(GLIB_LIBS) -o $@

$(TESTBIN)/test-eventlog-corrupt: $(OBJ)/eventlog/test-eventlog-corrupt.o \
		$(OBJ)/eventlog/test-support.o $(COPLOG_LIB)
	@mkdir -p $(@D)
	$(call say,LD,$@)$(CC) $(LDFLAGS) $^ $(GLIB_LIBS) -o $@

GTESTS += $(TESTBIN)/test-eventlog $(TESTBIN)/test-eventlog-stress \
	$(TESTBIN)/test-eventlog-corrupt
PYTESTS += eventlog/test_coplog.py

# `make fuzz`: the reader under libFuzzer, ASan and UBSan, for FUZZ_SECONDS.
FUZZ_SECONDS ?= 60
EVENTLOG_FUZZ := $(BUILD)/fuzz/fuzz-coplog-reader
EVENTLOG_CORPUS := $(BUILD)/fuzz/eventlog-corpus

$(EVENTLOG_FUZZ): eventlog/fuzz-coplog-reader.c $(COPLOG_OBJS:$(OBJ)/%.o=%.c)
	@mkdir -p $(@D)
	$(call say,CLANG,$@)clang -std=gnu11 -g -O1 $(CPPFLAGS) \
		-fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined \
		$^ -o $@

$(EVENTLOG_CORPUS)/seed.coplog: $(BIN)/coplog
	@mkdir -p $(@D)
	$(Q)$(BIN)/coplog create $@ SCHED,records=4 APP,records=2,oneshot,args=12 \
		--formats 16 --format-bytes 512
	$(Q)$(BIN)/coplog write $@ SCHED 'bind %u ctx %d at %.2f %s' 1 2 3.5 text
	$(Q)$(BIN)/coplog write $@ APP '%p %c %lld %x' 0x10 Z 7 255

.PHONY: fuzz-eventlog
fuzz-eventlog: $(EVENTLOG_FUZZ) $(EVENTLOG_CORPUS)/seed.coplog
	$(EVENTLOG_FUZZ) -max_total_time=$(FUZZ_SECONDS) -max_len=65536 \
		-rss_limit_mb=2048 -artifact_prefix=$(BUILD)/fuzz/ \
		-print_final_stats=1 $(EVENTLOG_CORPUS)

FUZZ_RUNS += fuzz-eventlog
