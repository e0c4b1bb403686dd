# bench/: what the benchmarks share (benchlib.py), installed beside them in
# build/bench/; each benchmark's own fragment is bench/NAME/module.mk.

$(BENCHBIN)/benchlib.py: bench/benchlib.py
	@mkdir -p $(@D)
	$(call say,INSTALL,$@)install -m 644 $< $@

ALL_TARGETS += $(BENCHBIN)/benchlib.py
