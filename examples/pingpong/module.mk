# examples/pingpong/: the mailbox ping-pong, a coprocessor program
# (build/examples/pingpong.elf) and the host program that embeds it and
# answers its messages through libcop (build/examples/pingpong-host).

pingpong_SOURCES := examples/pingpong/pingpong.c
$(eval $(call cop_program,pingpong))

PINGPONG_HOST := $(BUILD)/examples/pingpong-host
PINGPONG_OBJ := $(OBJ)/examples/pingpong

$(PINGPONG_OBJ)/pingpong-embed.o: $(pingpong_IMAGE) $(BIN)/cop-embed
	@mkdir -p $(@D)
	$(call say,EMBED,$@)$(BIN)/cop-embed $< pingpong_program $@

$(PINGPONG_HOST): $(PINGPONG_OBJ)/pingpong-host.o \
		$(PINGPONG_OBJ)/pingpong-embed.o $(LIB)/libcop.so
	@mkdir -p $(@D)
	$(call say,LD,$@)$(CC) $(LDFLAGS) $(filter %.o,$^) -L$(LIB) -lcop \
		-lpthread -Wl,-rpath,'$$ORIGIN/../lib' -o $@

ALL_TARGETS += $(pingpong_IMAGE) $(PINGPONG_HOST)
