# bench/hostreport: copreport on a session of thousands of contexts with
# its host side.

$(BENCHBIN)/hostreport: bench/hostreport/hostreport.py
	@mkdir -p $(@D)
	$(call say,INSTALL,$@)install -m 755 $< $@

BENCHES += $(BENCHBIN)/hostreport
