# common/: what the tools above it share: the coprocessor ABI's numbers,
# the image loader (libcoploader.a), private files (libcopsafe.a) and the
# command-line helpers (cli.o).  It includes nothing from the folders above.

COPLOADER_LIB := $(LIB)/libcoploader.a

# Private directories and the files in them (safe-file.h): for every tool
# that keeps state where other users reach it (copsim, libcop, copcontrol,
# coprof, coprofd).  It holds cli.o too, for the test points
# (cli_test_point); a tool that links cli.o itself uses its own.
SAFE_FILE_LIB := $(LIB)/libcopsafe.a

$(SAFE_FILE_LIB): $(OBJ)/common/safe-file.o $(OBJ)/common/cli.o
	@mkdir -p $(@D)
	$(call say,AR,$@)$(AR) rcs $@ $^

$(COPLOADER_LIB): $(OBJ)/common/image.o $(OBJ)/common/loader.o \
		$(OBJ)/common/qemu.o
	@mkdir -p $(@D)
	$(call say,AR,$@)$(AR) rcs $@ $^

$(TESTBIN)/test-loader: $(OBJ)/common/test-loader.o $(COPLOADER_LIB)
	@mkdir -p $(@D)
	$(call say,LD,$@)$(CC) $(LDFLAGS) $^ $(GLIB_LIBS) -o $@

$(OBJ)/common/test-loader.o: CFLAGS += $(GLIB_CFLAGS)

$(TESTBIN)/test-cli: $(OBJ)/common/test-cli.o $(OBJ)/common/cli.o
	@mkdir -p $(@D)
	$(call say,LD,$@)$(CC) $(LDFLAGS) $^ $(GLIB_LIBS) -o $@

$(OBJ)/common/test-cli.o: CFLAGS += $(GLIB_CFLAGS)

ALL_TARGETS += $(COPLOADER_LIB) $(SAFE_FILE_LIB) $(OBJ)/common/cli.o
GTESTS += $(TESTBIN)/test-loader $(TESTBIN)/test-cli
INSTALL_LIBS += $(COPLOADER_LIB) $(SAFE_FILE_LIB)
INSTALL_HEADERS += common/copsim-socket.h common/image.h common/loader.h \
	common/safe-file.h
