# bench/eventlog: the cost of a coplog record against fprintf.

$(BENCHBIN)/eventlog: $(OBJ)/bench/eventlog/bench-eventlog.o $(LIB)/libcoplog.a
	@mkdir -p $(@D)
	$(call say,LD,$@)$(CC) $(LDFLAGS) $^ -o $@

BENCHES += $(BENCHBIN)/eventlog
