# kotoba-worker's seccomp programs, compiled once at build time (issue 7).
#
# $(BUILD)/gen/seccomp-gen links the policy (worker/seccomp.c) with
# libseccomp and writes every program the worker can load, each profile at
# each Landlock ABI, into $(BUILD)/gen/worker/seccomp_programs.c; see
# worker/seccomp.h.  The worker links that file and worker/seccomp_load.c
# instead of the policy, so it needs libseccomp neither at run time nor per
# snippet.  The unit tests and the bench still link worker/seccomp.c: the
# unit test checks the generated programs against seccomp_build().

SECCOMP_GEN := $(BUILD)/gen/seccomp-gen
SECCOMP_PROGRAMS_C := $(BUILD)/gen/worker/seccomp_programs.c
SECCOMP_PROGRAMS_O := $(BUILD)/worker/seccomp_programs.o
SECCOMP_POLICY_O := $(BUILD)/worker/seccomp.o

WORKER_OBJ := $(filter-out $(SECCOMP_POLICY_O),$(WORKER_OBJ)) $(SECCOMP_PROGRAMS_O)

$(SECCOMP_GEN): $(BUILD)/worker/gen/seccomp_gen.o $(SECCOMP_POLICY_O) $(BUILD)/proto/names.o
	@mkdir -p $(dir $@)
	$(CC) $(ALL_LDFLAGS) -o $@ $^ $(SECCOMP_LIBS)

# Written aside and moved, so a failed run leaves no half file behind.
$(SECCOMP_PROGRAMS_C): $(SECCOMP_GEN)
	@mkdir -p $(dir $@)
	$(SECCOMP_GEN) > $@.tmp
	mv $@.tmp $@

$(SECCOMP_PROGRAMS_O): $(SECCOMP_PROGRAMS_C)
	@mkdir -p $(dir $@)
	$(CC) $(ALL_CFLAGS) -MMD -MP -c $< -o $@

# The unit test compares the generated programs with the policy's.
$(BUILD)/tests/test_seccomp: $(SECCOMP_POLICY_O) $(SECCOMP_PROGRAMS_O)
# The engine's commands run confined in the test, with the prebuilt programs.
$(BUILD)/tests/test_engine: $(SECCOMP_PROGRAMS_O)

# The worker is exec'd once per snippet, so its start is on every run's
# path: it links libcap-ng, msgpack-c and Nettle statically when their archives
# are installed (Debian's -dev packages ship them), which spares the
# dynamic loader three libraries (~0.2 ms a run here, `make bench`);
# libseccomp it does not link at all (above).  libc stays shared, for its
# security updates.  Without an archive, the shared library is used
# (prefer_archive, in the Makefile).
$(BUILD)/kotoba-worker: LIBS = $(call prefer_archive,cap-ng) $(call prefer_archive,msgpackc) \
	$(call prefer_archive,nettle)
