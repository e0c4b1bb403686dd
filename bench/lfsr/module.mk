# bench/lfsr: exact LFSR values against brute force and the Cell table.

$(BENCHBIN)/lfsr: $(OBJ)/bench/lfsr/bench-lfsr.o $(LIB)/liblfsr.a
	@mkdir -p $(@D)
	$(call say,LD,$@)$(CC) $(LDFLAGS) $^ -lm -o $@

BENCHES += $(BENCHBIN)/lfsr
