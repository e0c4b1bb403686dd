# report/: copreport, the reports of a session (Python, /usr/bin/python3).
#
# build/bin/copreport is the launcher report/copreport; it imports the
# coprof_report package from ../lib/coprof/python beside it, so the build
# tree and an installed PREFIX have the same layout:
#   build/bin/copreport                    PREFIX/bin/copreport
#   build/lib/coprof/python/coprof_report  PREFIX/lib/coprof/python/coprof_report
# INSTALL_LIBS installs flat into lib/coprof, so the package is installed by
# this fragment's own rule, made a prerequisite of `install`.

# session_schema.py and session-schema.sql (the session schema), cheader.py
# and session-dir.h (the session directory's names) in the package are links
# to abi/'s, read at run time; the copies made here are their contents.
REPORT_PY := $(wildcard report/coprof_report/*.py) \
	report/coprof_report/session-schema.sql \
	report/coprof_report/session-dir.h
REPORT_PKG := $(LIB)/coprof/python/coprof_report
REPORT_PKG_FILES := $(patsubst report/coprof_report/%,$(REPORT_PKG)/%,$(REPORT_PY))

$(REPORT_PKG)/%: report/coprof_report/%
	@mkdir -p $(@D)
	$(call say,CP,$@)cp $< $@

$(BIN)/copreport: report/copreport $(REPORT_PKG_FILES)
	@mkdir -p $(@D)
	$(call say,CP,$@)install -m 755 $< $@

# The HTML report's own script and style sheet, and the JavaScript
# libraries it inlines (mk/js-deps.sh installs them from npm), copied to
# lib/coprof/js where html.py finds them.
REPORT_ASSETS := $(REPORT_PKG)/page.js $(REPORT_PKG)/page.css
$(REPORT_PKG)/page.%: report/coprof_report/page.%
	@mkdir -p $(@D)
	$(call say,CP,$@)cp $< $@

REPORT_JS := $(LIB)/coprof/js
REPORT_JS_FILES := $(REPORT_JS)/d3.min.js $(REPORT_JS)/d3-flamegraph.min.js
$(REPORT_JS)/d3.min.js: report/js/node_modules/d3/dist/d3.min.js
	@mkdir -p $(@D)
	$(call say,CP,$@)cp $< $@
$(REPORT_JS)/d3-flamegraph.min.js: \
		report/js/node_modules/d3-flame-graph/dist/d3-flamegraph.umd.min.js
	@mkdir -p $(@D)
	$(call say,CP,$@)cp $< $@

ALL_TARGETS += $(BIN)/copreport $(REPORT_PKG_FILES) $(REPORT_ASSETS) \
	$(REPORT_JS_FILES)
INSTALL_BINS += $(BIN)/copreport
PYTESTS += report/tests

.PHONY: install-report
install: install-report
install-report: build-all
	install -d $(DESTDIR)$(PREFIX)/lib/coprof/python/coprof_report
	install -m 644 $(REPORT_PKG_FILES) $(REPORT_ASSETS) \
		$(DESTDIR)$(PREFIX)/lib/coprof/python/coprof_report
	install -d $(DESTDIR)$(PREFIX)/lib/coprof/js
	install -m 644 $(REPORT_JS_FILES) $(DESTDIR)$(PREFIX)/lib/coprof/js

# knob: a coprocessor program of known shape for the tests (diff,
# annotate), built twice: knob_work at its cost and twice as slow.  Both
# images are named "knob", so a diff matches them by name.
include sdk/cop.mk

knob_SOURCES := report/tests/knob/knob.c
knob_NAME := knob
knob_OUT := $(TESTBIN)/report/knob.elf
$(eval $(call cop_program,knob))

knob_slow_SOURCES := report/tests/knob/knob.c
knob_slow_NAME := knob
knob_slow_CFLAGS := -DKNOB_FACTOR=2
knob_slow_OUT := $(TESTBIN)/report/knob-slow.elf
$(eval $(call cop_program,knob_slow))

ALL_TARGETS += $(knob_IMAGE) $(knob_slow_IMAGE)
