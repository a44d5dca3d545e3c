# Fuzzing (tests/fuzz/): libFuzzer targets built with clang, ASan and UBSan.
#
#   make fuzz FUZZ_SECONDS=600     each target for 600 s; prints executions
#                                  and crashes per target
#   make check-fuzz                replays regressions and the seed corpus,
#                                  then fuzzes each target for FUZZ_CHECK_SECONDS
#   make fuzz-TARGET               one target, e.g. make fuzz-gate FUZZ_SECONDS=60
#
# A crash is saved under $(BUILD)/fuzz/crashes/TARGET/; once fixed, copy it
# to tests/fuzz/regressions/TARGET/ so `make check` replays it for good.

FUZZ_CC ?= clang-14
FUZZ_SECONDS ?= 60
FUZZ_CHECK_SECONDS ?= 10
FUZZ_TARGETS := frame decode scan config gate egress
FUZZ_DIR := $(BUILD)/fuzz
FUZZ_SAN := -fsanitize=address,undefined -fno-sanitize-recover=all
# clang spells a few gcc warnings differently; -Wall -Wextra -Werror stay.
FUZZ_RELAX := -Wno-unknown-warning-option
FUZZ_ALL_CFLAGS = -std=gnu11 -D_GNU_SOURCE $(WARN) $(FUZZ_RELAX) -I. $(PKG_CFLAGS) \
	-O1 -g -fno-omit-frame-pointer $(FUZZ_SAN) -fsanitize=fuzzer-no-link

FUZZ_PROTO := $(PROTO_SRC:%.c=$(FUZZ_DIR)/obj/%.o)
# The gate target drives session.c, gate.c and run.c in-process, with only
# the worker start replaced (in the harness); main.c and listener.c stay out.
FUZZ_GATE_SRC := $(filter-out broker/main.c broker/listener.c,$(BROKER_SRC))
FUZZ_OBJ_frame := $(FUZZ_PROTO)
FUZZ_OBJ_decode := $(FUZZ_PROTO)
FUZZ_OBJ_scan := $(FUZZ_DIR)/obj/broker/scan.o
FUZZ_OBJ_config := $(FUZZ_DIR)/obj/broker/config.o $(FUZZ_DIR)/obj/proto/names.o \
	$(FUZZ_DIR)/obj/broker/egress/policy.o
FUZZ_OBJ_egress := $(FUZZ_DIR)/obj/broker/egress/request.o
FUZZ_OBJ_gate := $(FUZZ_PROTO) $(FUZZ_GATE_SRC:%.c=$(FUZZ_DIR)/obj/%.o) \
	$(FUZZ_DIR)/obj/broker/egress/policy.o
FUZZ_BINS := $(FUZZ_TARGETS:%=$(FUZZ_DIR)/fuzz_%)

.PHONY: fuzz-build fuzz check-fuzz $(FUZZ_TARGETS:%=fuzz-%)

$(FUZZ_DIR)/obj/%.o: %.c
	@mkdir -p $(dir $@)
	$(FUZZ_CC) $(FUZZ_ALL_CFLAGS) -MMD -MP -c $< -o $@

# Objects are intermediates of the pattern rule below: keep them.
.PRECIOUS: $(FUZZ_DIR)/obj/%.o
.SECONDEXPANSION:
$(FUZZ_DIR)/fuzz_%: $(FUZZ_DIR)/obj/tests/fuzz/fuzz_%.o $$(FUZZ_OBJ_$$*)
	$(FUZZ_CC) $(FUZZ_SAN) -fsanitize=fuzzer -o $@ $^ $(LIBS)

# clang and its runtime (libFuzzer) are installed like every other build
# dependency: by tests/deps.sh, as root, when missing.
.PHONY: fuzz-deps
fuzz-deps:
	@./tests/deps.sh clang-14 libclang-rt-14-dev

$(FUZZ_BINS): | fuzz-deps
fuzz-build: fuzz-deps $(FUZZ_BINS)

fuzz: fuzz-build
	@tests/fuzz/run.sh fuzz $(FUZZ_DIR) $(FUZZ_SECONDS) $(FUZZ_TARGETS)

$(FUZZ_TARGETS:%=fuzz-%): fuzz-%: $(FUZZ_DIR)/fuzz_%
	@tests/fuzz/run.sh fuzz $(FUZZ_DIR) $(FUZZ_SECONDS) $*

check-fuzz: fuzz-build
	@tests/fuzz/run.sh check $(FUZZ_DIR) $(FUZZ_CHECK_SECONDS) $(FUZZ_TARGETS)

CHECK_EXTRA += check-fuzz
