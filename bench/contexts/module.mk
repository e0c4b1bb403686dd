# bench/contexts: slots as long-lived emulators against a QEMU per context.

$(BENCHBIN)/contexts: bench/contexts/contexts.py
	@mkdir -p $(@D)
	$(call say,INSTALL,$@)install -m 755 $< $@

BENCHES += $(BENCHBIN)/contexts
