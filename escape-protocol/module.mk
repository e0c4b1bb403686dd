# escape-protocol/: the stream format library, copstream, tests and fuzzing.

COPSTREAM_LIB := $(LIB)/libcopstream.a
COPSTREAM_TEXT := $(OBJ)/escape-protocol/text.o

$(COPSTREAM_LIB): $(OBJ)/escape-protocol/encode.o $(OBJ)/escape-protocol/decode.o
	@mkdir -p $(@D)
	$(call say,AR,$@)$(AR) rcs $@ $^

$(BIN)/copstream: $(OBJ)/escape-protocol/cli.o $(COPSTREAM_TEXT) $(COPSTREAM_LIB)
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
