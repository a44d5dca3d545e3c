# kotoba-broker.  `make run` builds and starts the broker in the foreground;
# `make check` runs every test.  Both install the Debian packages they need
# when run as root, and print the apt-get line otherwise.

CC ?= cc
BUILD ?= build
PREFIX ?= /usr/local

DEB_PKGS := gcc make pkg-config libseccomp-dev libcap-ng-dev libpcre2-dev \
	libmsgpack-dev libsqlite3-dev libinih-dev libsystemd-dev libcmocka-dev nettle-dev libjansson-dev \
	libgnutls28-dev \
	python3 python3-msgpack python3-pytest python3-requests
PKGS := libseccomp libcap-ng libpcre2-8 msgpack sqlite3 inih libsystemd nettle jansson

WARN := -Wall -Wextra -Werror -Wshadow -Wmissing-prototypes -Wstrict-prototypes \
	-Wformat=2 -Wformat-nonliteral -Wswitch-default -Wswitch-enum \
	-Wpointer-arith -Wcast-qual -Wvla -Wundef -Wno-unused-parameter
# CFLAGS and LDFLAGS are the caller's (optimisation, sanitizers); the
# project's own flags are always added.
CFLAGS ?= -O2 -g
ALL_CFLAGS = -std=gnu11 -D_GNU_SOURCE $(WARN) -D_FORTIFY_SOURCE=2 -fstack-protector-strong \
	-fPIE -I. $(PKG_CFLAGS) $(CFLAGS)
ALL_LDFLAGS = -pie -Wl,-z,relro,-z,now $(LDFLAGS)

# ---- dependencies, before anything else ------------------------------------
# $(DEPS_MK) installs the packages (tests/deps.sh) and records the flags
# pkg-config gives (tests/pkgflags.sh), once.  Make remakes an included
# makefile before it builds any goal, and then starts again reading it: so
# every target, under any -j, compiles with the packages present and the
# flags read once (PKG_CFLAGS, LIBS, MSGPACK_LIBS, SECCOMP_LIBS).  A missing
# package stops the build there, naming it.  The sanitizer builds are
# sub-makes that inherit DEPS_MK and so never write it.
DEPS_MK ?= $(abspath $(BUILD))/deps.mk
export DEPS_MK
ifneq ($(MAKECMDGOALS),clean)
include $(DEPS_MK)
endif
$(DEPS_MK): Makefile tests/deps.sh tests/pkgflags.sh
	@mkdir -p $(dir $@)
	@./tests/deps.sh $(DEB_PKGS)
	@./tests/pkgflags.sh $(PKGS) > $@.tmp
	@mv $@.tmp $@

PROTO_SRC := $(wildcard proto/*.c)
BROKER_SRC := $(wildcard broker/*.c)
WORKER_SRC := $(wildcard worker/*.c)
# The CLI is two programs (client/cli.h): kotoba-admin's own files, the one
# both link, and kotoba's.
ADMIN_SRC := client/admin_main.c client/admin.c client/scan.c client/verify.c
CLI_SHARED_SRC := client/conn.c
CLIENT_SRC := $(filter-out $(ADMIN_SRC),$(wildcard client/*.c))
# Broker code kotoba-admin links (`kotoba scan` runs the pre-screen offline,
# `kotoba audit verify --db` checks a copy of the audit trail).
SCAN_SRC := $(wildcard broker/scan.c broker/store.c broker/seal.c)
# The monitor (broker/monitor/): its own sources, and from the broker only
# the identity switch and the log; it links libcap-ng and libc alone.
MONITOR_SRC := $(wildcard broker/monitor/*.c) broker/privsep.c broker/log.c proto/limits.c
# The egress proxy (broker/egress/): its own sources; it links GnuTLS,
# libseccomp and libcap-ng, and no parser of the broker's.
EGRESS_SRC := $(wildcard broker/egress/*.c)

PROTO_OBJ := $(PROTO_SRC:%.c=$(BUILD)/%.o)
BROKER_OBJ := $(BROKER_SRC:%.c=$(BUILD)/%.o)
WORKER_OBJ := $(WORKER_SRC:%.c=$(BUILD)/%.o)
CLIENT_OBJ := $(CLIENT_SRC:%.c=$(BUILD)/%.o)
ADMIN_OBJ := $(ADMIN_SRC:%.c=$(BUILD)/%.o) $(CLI_SHARED_SRC:%.c=$(BUILD)/%.o)
SCAN_OBJ := $(SCAN_SRC:%.c=$(BUILD)/%.o)
MONITOR_OBJ := $(MONITOR_SRC:%.c=$(BUILD)/%.o)
EGRESS_OBJ := $(EGRESS_SRC:%.c=$(BUILD)/%.o)

UNIT_SRC := $(wildcard tests/unit/test_*.c)
UNIT_BIN := $(UNIT_SRC:tests/unit/%.c=$(BUILD)/tests/%)

BINS := $(BUILD)/kotoba-brokerd $(BUILD)/kotoba-monitor $(BUILD)/kotoba-egress \
	$(BUILD)/kotoba-worker $(BUILD)/kotoba $(BUILD)/kotoba-admin

.PHONY: all run check check-unit check-integration check-asan asan-build reachable clean

# A library's archive when its -dev package ships one, else -lNAME: for the
# programs started once per run, whose start the dynamic loader's work on
# each shared library lengthens.  libc stays shared, for its security
# updates.
prefer_archive = $(or $(filter /%,$(shell $(CC) -print-file-name=lib$(1).a)),-l$(1))

# Each harness adds its own targets and, where `make check` should run it,
# appends a target to CHECK_EXTRA (mk/*.mk).
.DEFAULT_GOAL := all
CHECK_EXTRA :=
-include $(sort $(wildcard mk/*.mk))
# The receipt's wrappers (worker/receipt.c), beside the worker, with their
# bytecode cached for the interpreter snippets run under by default: a
# snippet's start reads it rather than compiling the source.
RECEIPT_PY := $(BUILD)/kotoba_receipt.py
RECEIPT_PYTHON ?= /usr/bin/python3
all: $(BINS) $(RECEIPT_PY)

$(RECEIPT_PY): worker/python/kotoba_receipt.py
	@mkdir -p $(dir $@)
	cp $< $@
	$(RECEIPT_PYTHON) -c 'import py_compile, sys; py_compile.compile(sys.argv[1], doraise=True)' $@

$(BUILD)/%.o: %.c
	@mkdir -p $(dir $@)
	$(CC) $(ALL_CFLAGS) -MMD -MP -c $< -o $@

$(BUILD)/kotoba-brokerd: $(BROKER_OBJ) $(PROTO_OBJ) $(BUILD)/broker/egress/policy.o
	$(CC) $(ALL_LDFLAGS) -o $@ $^ $(LIBS)
$(BUILD)/kotoba-monitor: $(MONITOR_OBJ)
	$(CC) $(ALL_LDFLAGS) -o $@ $^ $(CAPNG_LIBS)
$(BUILD)/kotoba-egress: $(EGRESS_OBJ)
	$(CC) $(ALL_LDFLAGS) -o $@ $^ $(GNUTLS_LIBS) $(SECCOMP_LIBS) $(CAPNG_LIBS)
$(BUILD)/kotoba-worker: $(WORKER_OBJ) $(PROTO_OBJ)
	$(CC) $(ALL_LDFLAGS) -o $@ $^ $(LIBS)
# kotoba links only what `run` and `mcp` need, statically where Debian ships
# the archive (prefer_archive): every agent call starts it.
$(BUILD)/kotoba: $(CLIENT_OBJ) $(PROTO_OBJ)
	$(CC) $(ALL_LDFLAGS) -o $@ $^ $(call prefer_archive,msgpackc) \
		$(call prefer_archive,jansson) $(call prefer_archive,nettle)
$(BUILD)/kotoba-admin: $(ADMIN_OBJ) $(PROTO_OBJ) $(SCAN_OBJ)
	$(CC) $(ALL_LDFLAGS) -o $@ $^ $(LIBS)

# Each unit test links the object files of the module it tests; a test
# names them in a `// link:` line, e.g. `// link: proto/frame.c proto/messages.c`.
# -MMD: a test is rebuilt when a header it includes changes (tests/unit/child.h).
$(BUILD)/tests/%: tests/unit/%.c $(PROTO_OBJ) $(BROKER_OBJ) $(WORKER_OBJ) $(EGRESS_OBJ)
	@mkdir -p $(dir $@)
	$(CC) $(ALL_CFLAGS) -MMD -MP $(ALL_LDFLAGS) -o $@ $< \
		$(patsubst %.c,$(BUILD)/%.o,$(shell sed -n 's|^// link: ||p' $<)) \
		$(LIBS) -lcmocka

# As root, snippets and workers run as other users straight from this tree:
# the suites that start a broker make its parents passable first (o+x,
# said on stderr); building alone changes nothing outside the tree.
reachable:
	@./tests/reachable.sh

# ---- running ---------------------------------------------------------------
# As root the broker becomes its service user `kotoba` at once: create it
# (and its group) from the same sysusers.d file an install uses.
# The unit and integration suites need it too, to change uids as production does.
.PHONY: service-user
service-user:
	@if [ "$$(id -u)" = 0 ] && ! getent passwd kotoba >/dev/null; then \
		./tests/deps.sh systemd && \
		echo "creating the service user kotoba (dist/systemd/kotoba.sysusers)" && \
		systemd-sysusers $(abspath dist/systemd/kotoba.sysusers); fi

run: all reachable service-user
	$(BUILD)/kotoba-brokerd $(ARGS)

# ---- tests -----------------------------------------------------------------
PYTEST := /usr/bin/python3 -m pytest -q -p no:cacheprovider

check: all check-unit check-integration check-asan $(CHECK_EXTRA)
	@echo "make check: all suites passed"

check-unit: all unit-bins service-user
	@set -e; for t in $(UNIT_BIN); do echo "== $$t"; $$t; done

# SANITIZED=1 tells the tests that memory figures are the sanitizer's.
# The suite runs on both paths: cold here ([sandbox] warm = no in every
# broker it starts), warm (the default) in check-asan, where the sanitizers
# watch the newer code.
INTEGRATION_WARM ?= no
# tmux: the card is also read from a real terminal emulator's screen;
# python3-matplotlib: plt.show() saves figures into the output directory;
# python3-httpx and python3-pip: the egress proxy serves them unchanged.
check-integration: all reachable
	@./tests/deps.sh tmux python3-matplotlib python3-httpx python3-pip
	KOTOBA_BUILD=$(abspath $(BUILD)) KOTOBA_SANITIZED=$(SANITIZED) \
		KOTOBA_WARM=$(INTEGRATION_WARM) $(PYTEST) tests/integration

# The whole suite again, every program built with AddressSanitizer and
# UndefinedBehaviorSanitizer; any report fails the run.
ASAN_FLAGS := -O1 -g -fsanitize=address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer
ASAN_MAKE = $(MAKE) BUILD=$(BUILD)/asan CFLAGS="$(ASAN_FLAGS)" \
	LDFLAGS="-fsanitize=address,undefined" SANITIZED=1
# One sub-make builds $(BUILD)/asan; the suites that run against it
# (check-asan and the mk/ fragments' *-asan) only wait for it, so no two
# makes ever write there at once under -j.  ASAN_BUILD_GOALS gathers what
# each fragment needs built there (goals, named as in the sub-make).
ASAN_BUILD_GOALS += all unit-bins
.PHONY: unit-bins
unit-bins: $(UNIT_BIN)
asan-build:
	$(ASAN_MAKE) $(ASAN_BUILD_GOALS)
check-asan: asan-build
	$(ASAN_MAKE) INTEGRATION_WARM=yes check-unit check-integration

clean:
	rm -rf $(BUILD)

# (not below $(BUILD)/fresh: a whole Debian root file system, with its own *.d)
-include $(shell find $(BUILD) -path $(BUILD)/fresh -prune -o -name '*.d' -type f -print 2>/dev/null)
