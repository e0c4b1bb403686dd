# bench/hostprof: what the host side of coprof record costs a host program.

$(BENCHBIN)/hostprof: bench/hostprof/hostprof.py
	@mkdir -p $(@D)
	$(call say,INSTALL,$@)install -m 755 $< $@

BENCHES += $(BENCHBIN)/hostprof
