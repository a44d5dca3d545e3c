# Clients for agent programs (issue 9): libkotoba-client, the C library the
# `kotoba` CLI is built on, and the Python package kotoba_broker.
#
# Built by `all`: $(BUILD)/libkotoba-client.a, $(BUILD)/libkotoba-client.so.N
# (and the .so symlink), $(BUILD)/kotoba-client.pc.  `make check` runs
# check-client (the C library and the Python package against a real broker)
# and check-client-asan (the C library's test again under the sanitizers).

# The version is written once, in the header (KOTOBA_CLIENT_VERSION, which
# kotoba_version() returns); the .pc file and the soname's checks read it
# from there.  The soname changes when the ABI does.
KOTOBA_CLIENT_VERSION := $(shell sed -n 's/^\#define KOTOBA_CLIENT_VERSION "\(.*\)"$$/\1/p' \
	client/kotoba-client.h)
KOTOBA_CLIENT_SOVERSION := 2
KOTOBA_CLIENT_SONAME := libkotoba-client.so.$(KOTOBA_CLIENT_SOVERSION)

KOTOBA_CLIENT_SRC := $(wildcard client/lib/*.c)
KOTOBA_CLIENT_OBJ := $(KOTOBA_CLIENT_SRC:%.c=$(BUILD)/%.o)
# The shared library needs position-independent objects of its own and of
# the protocol codec it carries; the static one reuses the ordinary objects.
KOTOBA_CLIENT_PIC_OBJ := $(patsubst %.c,$(BUILD)/pic/%.o,$(KOTOBA_CLIENT_SRC) $(PROTO_SRC))

# What the install target copies (header to $(INCLUDEDIR), libraries and
# the symlink to $(LIBDIR), the .pc file to $(LIBDIR)/pkgconfig, the
# package directory to a site-packages directory).
KOTOBA_CLIENT_HEADERS := client/kotoba-client.h
KOTOBA_CLIENT_LIBS := $(BUILD)/libkotoba-client.a $(BUILD)/$(KOTOBA_CLIENT_SONAME)
KOTOBA_CLIENT_SO_LINK := $(BUILD)/libkotoba-client.so
KOTOBA_CLIENT_PC := $(BUILD)/kotoba-client.pc
KOTOBA_CLIENT_PYTHON := client/python/kotoba_broker
LIBDIR ?= $(PREFIX)/lib
INCLUDEDIR ?= $(PREFIX)/include

all: $(KOTOBA_CLIENT_LIBS) $(KOTOBA_CLIENT_SO_LINK) $(KOTOBA_CLIENT_PC)

# The CLI links the library (the Makefile's rule links $^).
$(BUILD)/kotoba $(BUILD)/kotoba-admin: $(BUILD)/libkotoba-client.a

# The codec's objects go in too, so the archive stands alone for a program
# that links it; the CLI already has them and pulls only client/lib.  The
# archive holds one object, linked from all of them with everything but
# kotoba_* made local: the codec's and the library's own names (write_all,
# proto_decode, kc_*) cannot collide with a program's, as in the .so.
OBJCOPY ?= objcopy
$(BUILD)/libkotoba-client.a: $(KOTOBA_CLIENT_OBJ) $(PROTO_OBJ)
	@rm -f $@ $(@:.a=.o)
	$(CC) -nostdlib -r -o $(@:.a=.o) $^
	$(OBJCOPY) --wildcard --keep-global-symbol='kotoba_*' $(@:.a=.o)
	$(AR) rcs $@ $(@:.a=.o)

$(BUILD)/pic/%.o: %.c
	@mkdir -p $(dir $@)
	$(CC) $(ALL_CFLAGS) -fPIC -MMD -MP -c $< -o $@

$(BUILD)/$(KOTOBA_CLIENT_SONAME): $(KOTOBA_CLIENT_PIC_OBJ) client/libkotoba-client.map
	$(CC) -shared -Wl,-soname,$(KOTOBA_CLIENT_SONAME) \
		-Wl,--version-script=client/libkotoba-client.map -Wl,-z,relro,-z,now $(LDFLAGS) \
		-o $@ $(KOTOBA_CLIENT_PIC_OBJ) $(MSGPACK_LIBS) -lpthread

$(KOTOBA_CLIENT_SO_LINK): $(BUILD)/$(KOTOBA_CLIENT_SONAME)
	ln -sf $(KOTOBA_CLIENT_SONAME) $@

# Made again by install-client with that install's directories.
KOTOBA_CLIENT_PC_SED = -e 's|@PREFIX@|$(PREFIX)|' -e 's|@LIBDIR@|$(LIBDIR)|' \
	-e 's|@INCLUDEDIR@|$(INCLUDEDIR)|' -e 's|@VERSION@|$(KOTOBA_CLIENT_VERSION)|'
$(KOTOBA_CLIENT_PC): client/kotoba-client.pc.in client/kotoba-client.h
	@mkdir -p $(dir $@)
	sed $(KOTOBA_CLIENT_PC_SED) $< > $@

# The renderer's unit test links client/lib/render.o (its `// link:` line):
# rebuilt when that changes.
$(BUILD)/tests/test_render: $(BUILD)/client/lib/render.o

# The library's test program: only the public header, only the archive.
$(BUILD)/client/tests/kc-test: client/tests/kc-test.c client/kotoba-client.h \
		$(BUILD)/libkotoba-client.a
	@mkdir -p $(dir $@)
	$(CC) $(ALL_CFLAGS) -Iclient $(ALL_LDFLAGS) -o $@ $< $(BUILD)/libkotoba-client.a \
		$(MSGPACK_LIBS) -lpthread

.PHONY: check-client check-client-c check-client-python check-client-asan
check-client: check-client-c check-client-python

# The test also builds kc-test against a staged `make install` (PREFIX=/usr)
# of the header, the archive and the shared library, as a user would.
KOTOBA_CLIENT_STAGE := $(BUILD)/client-stage
check-client-c: all reachable $(BUILD)/client/tests/kc-test
	rm -rf $(KOTOBA_CLIENT_STAGE)
	$(MAKE) --no-print-directory install-client PREFIX=/usr \
		DESTDIR=$(abspath $(KOTOBA_CLIENT_STAGE)) >/dev/null
	KOTOBA_BUILD=$(abspath $(BUILD)) KOTOBA_CLIENT_STAGE=$(abspath $(KOTOBA_CLIENT_STAGE)) \
		$(PYTEST) client/tests

# mypy checks the package's annotations; the venv, setuptools and wheel
# packages let it be pip-installed offline into a venv.
check-client-python: all reachable
	@./tests/deps.sh mypy python3-venv python3-setuptools python3-wheel
	KOTOBA_BUILD=$(abspath $(BUILD)) PYTHONPATH=$(abspath client/python) \
		$(PYTEST) client/python/tests

ASAN_BUILD_GOALS += client-test-bin
.PHONY: client-test-bin
client-test-bin: $(BUILD)/client/tests/kc-test
check-client-asan: asan-build
	$(ASAN_MAKE) check-client-c

CHECK_EXTRA += check-client check-client-asan
