# bench/record: what `coprof record` costs a host program.

$(BENCHBIN)/record: bench/record/record.py
	@mkdir -p $(@D)
	$(call say,INSTALL,$@)install -m 755 $< $@

BENCHES += $(BENCHBIN)/record
