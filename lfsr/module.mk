# lfsr/: the exact LFSR calculator library, its CLI and its tests.

LFSR_LIB := $(LIB)/liblfsr.a

$(LFSR_LIB): $(OBJ)/lfsr/lfsr.o
	@mkdir -p $(@D)
	$(call say,AR,$@)$(AR) rcs $@ $^

$(BIN)/coplfsr: $(OBJ)/lfsr/coplfsr.o $(OBJ)/common/cli.o $(LFSR_LIB)
	@mkdir -p $(@D)
	$(call say,LD,$@)$(CC) $(LDFLAGS) $^ -lm -o $@

$(TESTBIN)/test-lfsr: $(OBJ)/lfsr/test-lfsr.o $(LFSR_LIB)
	@mkdir -p $(@D)
	$(call say,LD,$@)$(CC) $(LDFLAGS) $^ $(GLIB_LIBS) -lm -o $@

$(OBJ)/lfsr/test-lfsr.o: CFLAGS += $(GLIB_CFLAGS)

ALL_TARGETS += $(LFSR_LIB) $(BIN)/coplfsr
GTESTS += $(TESTBIN)/test-lfsr
PYTESTS += lfsr/test_coplfsr.py
INSTALL_BINS += $(BIN)/coplfsr
INSTALL_LIBS += $(LFSR_LIB)
INSTALL_HEADERS += lfsr/lfsr.h
