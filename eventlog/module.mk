# eventlog/: the kernel event log library (writers and readers), coplog,
# and their tests.

COPLOG_LIB := $(LIB)/libcoplog.a
COPLOG_OBJS := $(addprefix $(OBJ)/eventlog/, \
	clock.o file.o format-table.o level.o message.o reader.o writer.o)

$(COPLOG_LIB): $(COPLOG_OBJS)
	@mkdir -p $(@D)
	$(call say,AR,$@)$(AR) rcs $@ $^

$(BIN)/coplog: $(OBJ)/eventlog/coplog.o $(COPLOG_LIB)
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
