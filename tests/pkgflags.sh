#!/bin/sh
# Prints the make variables the build compiles and links with, read once
# from pkg-config: PKG_CFLAGS and LIBS for every library named on the
# command line, MSGPACK_LIBS for the client library, SECCOMP_LIBS for the
# seccomp program generator.  A library pkg-config cannot find stops the
# build here, naming it and the Debian package that has it.
set -eu
command -v pkg-config >/dev/null 2>&1 || {
	echo "pkg-config is not installed (Debian package pkg-config)" >&2
	exit 1
}
for lib in "$@"; do
	if ! pkg-config --exists "$lib"; then
		echo "pkg-config cannot find $lib: $(pkg-config --print-errors --exists "$lib" 2>&1 | head -n 1)" >&2
		echo "install its -dev package (make does this when run as root)" >&2
		exit 1
	fi
done
echo "PKG_CFLAGS := $(pkg-config --cflags "$@")"
echo "LIBS := $(pkg-config --libs "$@")"
echo "MSGPACK_LIBS := $(pkg-config --libs msgpack)"
echo "SECCOMP_LIBS := $(pkg-config --libs libseccomp)"
echo "CAPNG_LIBS := $(pkg-config --libs libcap-ng)"
# The egress proxy's alone (Debian package libgnutls28-dev).
if ! pkg-config --exists gnutls; then
	echo "pkg-config cannot find gnutls: install libgnutls28-dev (make does this when run as root)" >&2
	exit 1
fi
echo "GNUTLS_LIBS := $(pkg-config --libs gnutls)"
