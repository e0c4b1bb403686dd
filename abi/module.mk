# abi/: the contracts between coprof's processes (abi/README.md).  The
# headers are installed with the rest, under include/coprof/abi/.

INSTALL_HEADERS += $(wildcard abi/*.h)

# The session schema (session-schema.sql) as the C header its writers,
# daemon/store.c and hostprof/store.c, include as "abi/session-schema.h":
# written into ABI_GEN, which is on their include path (ABI_GEN_CPPFLAGS).
# copreport reads the .sql itself at run time (report/module.mk).
ABI_GEN := $(BUILD)/gen
ABI_GEN_CPPFLAGS := -I$(ABI_GEN)
SESSION_SCHEMA := abi/session-schema.sql
SESSION_SCHEMA_H := $(ABI_GEN)/abi/session-schema.h

$(SESSION_SCHEMA_H): $(SESSION_SCHEMA) abi/session_schema.py
	@mkdir -p $(@D)
	$(call say,GEN,$@)$(PYTHON) abi/session_schema.py c-header \
		--schema $(SESSION_SCHEMA) $@

ALL_TARGETS += $(SESSION_SCHEMA_H)
PYTESTS += abi/tests
