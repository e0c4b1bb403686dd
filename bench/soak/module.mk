# bench/soak: coprofd's and copsim's memory over thousands of contexts.

$(BENCHBIN)/soak: bench/soak/soak.py
	@mkdir -p $(@D)
	$(call say,INSTALL,$@)install -m 755 $< $@

BENCHES += $(BENCHBIN)/soak
