# bench/driver: the kernel driver's cost per sample and its poll thread's
# share of a core.

$(BENCHBIN)/driver: $(OBJ)/bench/driver/bench-driver.o $(LIB)/libcopdrv.a \
		$(LIB)/libtraceunit.a $(LIB)/libcopstream.a $(LIB)/liblfsr.a
	@mkdir -p $(@D)
	$(call say,LD,$@)$(CC) $(LDFLAGS) $^ -o $@

BENCHES += $(BENCHBIN)/driver
