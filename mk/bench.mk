# `make bench`: performance figures for issue 7, printed as ratios against
# baselines measured in the same run (tests/bench/README.md).  Not part of
# `make check`: it takes a few minutes and asserts no wall times.
# BENCH_BASELINE=/path/to/another/build adds the warm exec->ready of that
# build's broker against this one's, interleaved (abbroker.py).
BENCH_BUILD = $(BUILD)/bench

# seccomp_build() takes options (profile, Landlock ABI, pid) in newer trees.
BENCH_SECCOMP_API = $(if $(shell grep -l 'struct seccomp_opts' worker/seccomp.h 2>/dev/null),1,0)

# ... and the programs are built at build time (mk/worker.mk) in newer still;
# then the floor links them too, to time what the worker does instead.
BENCH_PREBUILT_API = $(if $(shell grep -l 'seccomp_program_for' worker/seccomp.h 2>/dev/null),1,0)
BENCH_PREBUILT_OBJ = $(if $(filter 1,$(BENCH_PREBUILT_API)),$(BUILD)/worker/seccomp_load.o \
	$(BUILD)/worker/seccomp_programs.o)

$(BENCH_BUILD)/floor: tests/bench/floor.c $(BUILD)/worker/seccomp.o $(BUILD)/proto/names.o \
		$(BENCH_PREBUILT_OBJ) \
		worker/seccomp.h
	@mkdir -p $(dir $@)
	$(CC) $(ALL_CFLAGS) -DSECCOMP_OPTS_API=$(BENCH_SECCOMP_API) \
		-DSECCOMP_PREBUILT_API=$(BENCH_PREBUILT_API) $(ALL_LDFLAGS) -o $@ \
		$(filter %.c %.o,$^) $(LIBS)

$(BENCH_BUILD)/scanbench: tests/bench/scanbench.c $(BUILD)/broker/scan.o
	@mkdir -p $(dir $@)
	$(CC) $(ALL_CFLAGS) $(ALL_LDFLAGS) -o $@ $^ $(LIBS)

.PHONY: bench
bench: all $(BENCH_BUILD)/floor $(BENCH_BUILD)/scanbench
	/usr/bin/python3 tests/bench/bench.py --build $(abspath $(BUILD)) \
		--out $(abspath $(BUILD))/bench.txt $(BENCH_ARGS)
	/usr/bin/python3 tests/bench/mcp_rt.py --build $(abspath $(BUILD))
	/usr/bin/python3 tests/bench/egress.py --build $(abspath $(BUILD))
	$(if $(BENCH_BASELINE),/usr/bin/python3 tests/bench/abbroker.py $(BENCH_BASELINE) \
		$(abspath $(BUILD)))

# The round trip of an MCP tools/call against `kotoba run` (also the end
# of `make bench`).
.PHONY: bench-mcp
bench-mcp: all reachable
	/usr/bin/python3 tests/bench/mcp_rt.py --build $(abspath $(BUILD)) $(BENCH_MCP_ARGS)

# Where the time of one `kotoba run -c pass` goes, phase by phase, from
# syscall tracepoints (needs perf and root; not part of `make bench`).
.PHONY: bench-phases
bench-phases: all
	/usr/bin/python3 tests/bench/phases.py --build $(abspath $(BUILD))

# Worker binaries side by side (tests/bench/abworker.py): one broker per
# binary, interleaved with bare python3, e.g.
#   make bench-ab WORKERS="/tmp/old/kotoba-worker build/kotoba-worker"
.PHONY: bench-ab
bench-ab: all
	/usr/bin/python3 tests/bench/abworker.py --build $(abspath $(BUILD)) $(BENCH_AB_ARGS) \
		$(WORKERS)

# Whole builds side by side (tests/bench/abbroker.py): one broker per build
# directory, warm runs interleaved, the broker's exec->ready p50 of each
# against the first, e.g. a tree before and after a change of the broker:
#   make bench-ab-broker BUILDS="/tmp/old/build build"
.PHONY: bench-ab-broker
bench-ab-broker: all reachable
	/usr/bin/python3 tests/bench/abbroker.py $(BENCH_AB_BROKER_ARGS) $(BUILDS)

# How long a system broker waits for its monitor to start a worker, for
# several builds' monitors interleaved (root; tests/bench/monspawn.py):
#   make bench-monspawn BUILDS="/tmp/old/build build"
.PHONY: bench-monspawn
bench-monspawn: all reachable
	/usr/bin/python3 tests/bench/monspawn.py $(BENCH_MONSPAWN_ARGS) $(BUILDS)
