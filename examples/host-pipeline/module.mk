# examples/host-pipeline/: a host program that embeds the three example
# programs with cop-embed and runs them through libcop, checking every
# result (build/examples/host-pipeline).

HOST_PIPELINE := $(BUILD)/examples/host-pipeline
HOST_PIPELINE_OBJ := $(OBJ)/examples/host-pipeline

# One object per embedded image, its handle named PROGRAM_program.
$(HOST_PIPELINE_OBJ)/%-embed.o: $(BUILD)/examples/%.elf $(BIN)/cop-embed
	@mkdir -p $(@D)
	$(call say,EMBED,$@)$(BIN)/cop-embed $< $*_program $@

HOST_PIPELINE_OBJS := $(HOST_PIPELINE_OBJ)/host-pipeline.o \
	$(OBJ)/examples/pipeline/stages.o $(OBJ)/common/cli.o \
	$(addprefix $(HOST_PIPELINE_OBJ)/, kernels-embed.o overlays-embed.o \
		pipeline-embed.o)

$(HOST_PIPELINE): $(HOST_PIPELINE_OBJS) $(LIB)/libcop.so
	@mkdir -p $(@D)
	$(call say,LD,$@)$(CC) $(LDFLAGS) $(HOST_PIPELINE_OBJS) -L$(LIB) -lcop \
		-Wl,-rpath,'$$ORIGIN/../lib' -o $@

ALL_TARGETS += $(HOST_PIPELINE)
