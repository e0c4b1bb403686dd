# bench/trace-unit: the trace unit's overhead against bare QEMU.

$(BENCHBIN)/trace-unit: bench/trace-unit/trace-unit.py
	@mkdir -p $(@D)
	$(call say,INSTALL,$@)install -m 755 $< $@

BENCHES += $(BENCHBIN)/trace-unit
