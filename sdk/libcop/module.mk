# sdk/libcop/: libcop, the shared library through which host programs run
# coprocessor contexts in copsim (sdk/libcop.h), and its pkg-config files.
#
#   build/lib/libcop.so.1, libcop.so      the library (soname libcop.so.1)
#   build/lib/pkgconfig/libcop.pc         for programs built against the
#                                         build tree (PKG_CONFIG_PATH)
#   PREFIX/lib/pkgconfig/libcop.pc        written by `make install` from
#                                         the same template (mk/build.mk)

LIBCOP_SONAME := libcop.so.1
LIBCOP := $(LIB)/$(LIBCOP_SONAME)
LIBCOP_LINK := $(LIB)/libcop.so
LIBCOP_OBJS := $(OBJ)/sdk/libcop/libcop.o $(OBJ)/sdk/libcop/private.o \
	$(OBJ)/sdk/libcop/mailbox.o \
	$(OBJ)/common/copsim-socket.o $(OBJ)/common/safe-file.o \
	$(OBJ)/common/cli.o
LIBCOP_PC := $(LIB)/pkgconfig/libcop.pc

$(LIBCOP): $(LIBCOP_OBJS) sdk/libcop/libcop.map
	@mkdir -p $(@D)
	$(call say,LD,$@)$(CC) $(LDFLAGS) -shared -Wl,-soname,$(LIBCOP_SONAME) \
		-Wl,--version-script,sdk/libcop/libcop.map $(LIBCOP_OBJS) -o $@

$(LIBCOP_LINK): $(LIBCOP)
	$(call say,LN,$@)ln -sf $(LIBCOP_SONAME) $@

$(LIBCOP_PC): sdk/libcop/libcop.pc.in
	@mkdir -p $(@D)
	$(call say,GEN,$@)sed -e 's|@PREFIX@|$(CURDIR)|' \
		-e 's|@LIBDIR@|$(CURDIR)/$(LIB)|' \
		-e 's|@INCLUDEDIR@|$(CURDIR)|' $< > $@

ALL_TARGETS += $(LIBCOP) $(LIBCOP_LINK) $(LIBCOP_PC)
INSTALL_LIBS += $(LIBCOP) $(LIBCOP_LINK)
INSTALL_PKGCONFIG += sdk/libcop/libcop.pc.in
INSTALL_HEADERS += sdk/libcop.h
