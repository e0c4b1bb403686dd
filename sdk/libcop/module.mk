# sdk/libcop/: libcop, the shared library through which host programs run
# coprocessor contexts in copsim (sdk/libcop.h), and its pkg-config files.
#
#   build/lib/libcop.so.1, libcop.so      the library (soname libcop.so.1)
#   build/lib/pkgconfig/libcop.pc         for programs built against the
#                                         build tree (PKG_CONFIG_PATH)
#   build/lib/install/libcop.pc           the installed one, in lib/pkgconfig

LIBCOP_SONAME := libcop.so.1
LIBCOP := $(LIB)/$(LIBCOP_SONAME)
LIBCOP_LINK := $(LIB)/libcop.so
LIBCOP_OBJS := $(OBJ)/sdk/libcop/libcop.o $(OBJ)/sdk/libcop/private.o \
	$(OBJ)/emulator/copsim/protocol.o $(OBJ)/common/safe-file.o
LIBCOP_PC := $(LIB)/pkgconfig/libcop.pc
LIBCOP_INSTALLED_PC := $(LIB)/install/libcop.pc

$(LIBCOP): $(LIBCOP_OBJS) sdk/libcop/libcop.map
	@mkdir -p $(@D)
	$(call say,LD,$@)$(CC) $(LDFLAGS) -shared -Wl,-soname,$(LIBCOP_SONAME) \
		-Wl,--version-script,sdk/libcop/libcop.map $(LIBCOP_OBJS) -o $@

$(LIBCOP_LINK): $(LIBCOP)
	$(call say,LN,$@)ln -sf $(LIBCOP_SONAME) $@

$(LIBCOP_PC): sdk/libcop/libcop.pc.in
	@mkdir -p $(@D)
	$(call say,GEN,$@)sed -e 's|@LIBDIR@|$(CURDIR)/$(LIB)|' \
		-e 's|@INCLUDEDIR@|$(CURDIR)|' $< > $@

# Made at every build from the current PREFIX, replaced only when that
# changed it (install runs with the PREFIX it installs to).
.PHONY: libcop-installed-pc
libcop-installed-pc: sdk/libcop/libcop.pc.in
	@mkdir -p $(dir $(LIBCOP_INSTALLED_PC))
	@sed -e 's|@LIBDIR@|$(PREFIX)/lib/coprof|' \
		-e 's|@INCLUDEDIR@|$(PREFIX)/include/coprof|' $< \
		> $(LIBCOP_INSTALLED_PC).new
	@cmp -s $(LIBCOP_INSTALLED_PC).new $(LIBCOP_INSTALLED_PC) \
		&& rm $(LIBCOP_INSTALLED_PC).new \
		|| { printf '  %-6s %s\n' GEN $(LIBCOP_INSTALLED_PC); \
		     mv $(LIBCOP_INSTALLED_PC).new $(LIBCOP_INSTALLED_PC); }
$(LIBCOP_INSTALLED_PC): libcop-installed-pc

ALL_TARGETS += $(LIBCOP) $(LIBCOP_LINK) $(LIBCOP_PC) $(LIBCOP_INSTALLED_PC)
INSTALL_LIBS += $(LIBCOP) $(LIBCOP_LINK)
INSTALL_PKGCONFIG += $(LIBCOP_INSTALLED_PC)
INSTALL_HEADERS += sdk/libcop.h
