# control/: copcontrol (opcontrol-style control of a shared copsim, the
# driver and coprofd) and coprof (`coprof record -- CMD`, the one-shot
# path), built on one small library: rate.c, driver.c (driver-linux.c
# for --driver=linux), daemons.c,
# session.c, state.c, events.c, options.c, sampling.c.

CONTROL_LIB := $(LIB)/libcopcontrol.a
CONTROL_OBJS := $(addprefix $(OBJ)/control/, \
	rate.o driver.o driver-linux.o daemons.o session.o state.o events.o \
	options.o sampling.o host-options.o)
# What a program linking libcopcontrol.a needs after it.
CONTROL_DEPS := $(LIB)/libhostprof.a $(LIB)/liblfsr.a $(LIB)/libcopstream.a $(LIB)/libcopsafe.a
CONTROL_LIBS := $(SQLITE_LIBS) -lpfm -lm

# Paths are bounded by PATH_MAX; where a cut path would matter it is checked.
$(OBJ)/control/%.o: CFLAGS += $(SQLITE_CFLAGS) -Wno-format-truncation
# copsim-socket.c, linked from its own object (as libcop does); it needs
# libcopsafe.a (CONTROL_DEPS).
CONTROL_PROTOCOL := $(OBJ)/common/copsim-socket.o

$(CONTROL_LIB): $(CONTROL_OBJS)
	@mkdir -p $(@D)
	$(call say,AR,$@)$(AR) rcs $@ $^

$(BIN)/copcontrol: $(OBJ)/control/copcontrol.o $(OBJ)/common/cli.o \
		$(CONTROL_LIB) $(CONTROL_PROTOCOL) $(CONTROL_DEPS)
	@mkdir -p $(@D)
	$(call say,LD,$@)$(CC) $(LDFLAGS) $^ $(CONTROL_LIBS) -o $@

$(BIN)/coprof: $(OBJ)/control/coprof.o $(OBJ)/common/cli.o \
		$(CONTROL_LIB) $(CONTROL_PROTOCOL) $(CONTROL_DEPS)
	@mkdir -p $(@D)
	$(call say,LD,$@)$(CC) $(LDFLAGS) $^ $(CONTROL_LIBS) -o $@

# The daemons they start, found beside them.
$(BIN)/copcontrol $(BIN)/coprof: | $(BIN)/copsim $(BIN)/coprofd \
	$(BIN)/coprof-host

ALL_TARGETS += $(CONTROL_LIB) $(BIN)/copcontrol $(BIN)/coprof
INSTALL_BINS += $(BIN)/copcontrol $(BIN)/coprof
PYTESTS += control/tests
FAULT_PYTESTS += control/tests/fault_session.py
