# daemon/: coprofd, the library it is made of (also used by bench/daemon),
# its tests and its fuzz target.

DAEMON_LIB  := $(LIB)/libcoprofd.a
DAEMON_SRCS := $(addprefix daemon/,counts.c images.c recorder.c schedlog.c \
               session.c store.c)
DAEMON_OBJS := $(patsubst %.c,$(OBJ)/%.o,$(DAEMON_SRCS))
# What a program linking libcoprofd.a needs after it.
DAEMON_DEPS := $(LIB)/liboverlay.a $(LIB)/libcopstream.a $(LIB)/libcoplog.a
DAEMON_LIBS := $(GLIB_LIBS) $(ELF_LIBS) $(SQLITE_LIBS)

$(OBJ)/daemon/%.o: CFLAGS += $(GLIB_CFLAGS) $(ELF_CFLAGS) $(SQLITE_CFLAGS)

$(DAEMON_LIB): $(DAEMON_OBJS)
	@mkdir -p $(@D)
	$(call say,AR,$@)$(AR) rcs $@ $^

$(BIN)/coprofd: $(OBJ)/daemon/coprofd.o $(DAEMON_LIB) $(DAEMON_DEPS)
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
