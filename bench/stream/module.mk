# bench/stream: the escape-protocol decoder and sample encoder's speed.

$(BENCHBIN)/stream: $(OBJ)/bench/stream/bench-stream.o $(LIB)/libcopstream.a
	@mkdir -p $(@D)
	$(call say,LD,$@)$(CC) $(LDFLAGS) $^ -o $@

BENCHES += $(BENCHBIN)/stream
