# trace-unit/: the library of the trace unit's register file
# (abi/trace-regs.h), below every process that maps it: the QEMU plugin
# (emulator/), copsim, the hosted driver, cop-run and coptrace.

TRACE_LIB := $(LIB)/libtraceunit.a

$(TRACE_LIB): $(OBJ)/trace-unit/trace-unit.o
	@mkdir -p $(@D)
	$(call say,AR,$@)$(AR) rcs $@ $^

$(OBJ)/trace-unit/tests/test-trace-unit.o: CFLAGS += $(GLIB_CFLAGS)
$(TESTBIN)/test-trace-unit: $(OBJ)/trace-unit/tests/test-trace-unit.o \
		$(TRACE_LIB) $(LIB)/liblfsr.a
	@mkdir -p $(@D)
	$(call say,LD,$@)$(CC) $(LDFLAGS) $^ $(GLIB_LIBS) -lm -o $@

ALL_TARGETS += $(TRACE_LIB)
GTESTS += $(TESTBIN)/test-trace-unit
INSTALL_LIBS += $(TRACE_LIB)
INSTALL_HEADERS += trace-unit/trace-unit.h
