# hostprof/: coprof-host, the host side of a session (the Linux
# scheduler's events through libtracefs, host CPU samples through
# perf_event_open and libpfm4, symbols through elfutils' libdwfl), and
# the library it is made of.

HOSTPROF_LIB := $(LIB)/libhostprof.a
HOSTPROF_OBJS := $(addprefix $(OBJ)/hostprof/, \
	hostprof.o aggregate.o lives.o sched.o samples.o symbols.o store.o)
HOSTPROF_CFLAGS := $(shell pkg-config --cflags libtracefs libtraceevent \
	libdw glib-2.0 sqlite3)
HOSTPROF_LIBS := $(shell pkg-config --libs libtracefs libtraceevent libdw \
	glib-2.0 sqlite3) $(ELF_LIBS) -lpfm

# Messages are bounded (HOST_ERR_MAX); a cut one is still one line.
$(OBJ)/hostprof/%.o: CFLAGS += $(HOSTPROF_CFLAGS) -Wno-format-truncation
# store.c creates the host tables of abi/session-schema.sql.
$(OBJ)/hostprof/store.o: CPPFLAGS += $(ABI_GEN_CPPFLAGS)
$(OBJ)/hostprof/store.o: $(SESSION_SCHEMA_H)

$(HOSTPROF_LIB): $(HOSTPROF_OBJS)
	@mkdir -p $(@D)
	$(call say,AR,$@)$(AR) rcs $@ $^

$(BIN)/coprof-host: $(OBJ)/hostprof/coprof-host.o $(OBJ)/common/cli.o \
		$(HOSTPROF_LIB) $(LIB)/libcoplog.a
	@mkdir -p $(@D)
	$(call say,LD,$@)$(CC) $(LDFLAGS) $^ $(HOSTPROF_LIBS) -o $@

ALL_TARGETS += $(HOSTPROF_LIB) $(BIN)/coprof-host
INSTALL_BINS += $(BIN)/coprof-host
PYTESTS += hostprof/tests

# The tests' host program with a known host/coprocessor split: the
# kernels example embedded as host-pipeline embeds it.
SPLIT_HOST := $(TESTBIN)/split-host
SPLIT_HOST_OBJS := $(OBJ)/hostprof/tests/split-host.o \
	$(OBJ)/examples/host-pipeline/kernels-embed.o

$(SPLIT_HOST): $(SPLIT_HOST_OBJS) $(LIB)/libcop.so
	@mkdir -p $(@D)
	$(call say,LD,$@)$(CC) $(LDFLAGS) $(SPLIT_HOST_OBJS) -L$(LIB) -lcop \
		-Wl,-rpath,'$$ORIGIN/../lib' -o $@

ALL_TARGETS += $(SPLIT_HOST)
