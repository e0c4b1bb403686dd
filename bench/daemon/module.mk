# bench/daemon: coprofd's replay throughput against a decode-only pass.

$(OBJ)/bench/daemon/%.o: CFLAGS += $(GLIB_CFLAGS) $(ELF_CFLAGS) \
	-DBENCH_IMAGE='"$(abspath $(TESTBIN))/overlay/overlays.elf"'

$(BENCHBIN)/daemon: $(OBJ)/bench/daemon/bench-daemon.o $(LIB)/libcoprofd.a \
		$(LIB)/liboverlay.a $(LIB)/libcopstream.a $(LIB)/libcoplog.a \
		$(LIB)/libcoploader.a $(LIB)/libcopsafe.a \
		| $(TESTBIN)/overlay/overlays.elf
	@mkdir -p $(@D)
	$(call say,LD,$@)$(CC) $(LDFLAGS) $(filter %.o %.a,$^) $(GLIB_LIBS) \
		$(ELF_LIBS) $(SQLITE_LIBS) -o $@

BENCHES += $(BENCHBIN)/daemon
