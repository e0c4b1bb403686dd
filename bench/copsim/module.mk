# bench/copsim: what copsim's scheduling costs (time slicing, round trip).

$(BENCHBIN)/copsim: bench/copsim/copsim.py
	@mkdir -p $(@D)
	$(call say,INSTALL,$@)install -m 755 $< $@

BENCHES += $(BENCHBIN)/copsim
