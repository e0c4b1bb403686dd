# bench/module: copdrv.ko's cost per sample against the hosted driver's.

$(BENCHBIN)/module: bench/module/module.py
	@mkdir -p $(@D)
	$(call say,INSTALL,$@)install -m 755 $< $@

BENCHES += $(BENCHBIN)/module
