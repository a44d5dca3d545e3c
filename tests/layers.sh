#!/bin/sh
# SPDX-License-Identifier: MIT
# The broker's modules in layers (ARCHITECTURE.md, "Layers"): each module
# calls only modules of a lower layer, so there is no cycle among them.
# Read from the built objects (nm), so it sees every call, not a grep's
# idea of one.  Usage: tests/layers.sh BUILD_DIR
#
# The one way up: the session's output functions below, which a run and
# the gate call to answer the client whose request they carry.  Anything
# else a lower module needs from a higher one it is given as a callback
# (struct run_ops, container_set_runner()).
set -eu
build=$1
layers='
1 log
2 loop config seal scan env secrets listener
3 store privsep cgroup
4 auditlog container
5 run
6 gate
7 peer
8 session
9 main'
upcalls='session_send session_send_error session_backlogged session_run_gone'

rank() { printf '%s\n' "$layers" | awk -v m="$1" '{ for (i = 2; i <= NF; i++) if ($i == m) print $1 }'; }

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
for o in "$build"/broker/*.o; do
	m=$(basename "$o" .o)
	[ -n "$(rank "$m")" ] || { echo "layers: broker/$m.c is in no layer (tests/layers.sh)"; exit 1; }
	nm --defined-only -g "$o" | awk -v m="$m" 'NF == 3 { print $3, m }'
done | sort > "$tmp/defs"
for o in "$build"/broker/*.o; do
	nm -u "$o" | awk -v m="$(basename "$o" .o)" '{ print $2, m }'
done | sort > "$tmp/uses"

join "$tmp/uses" "$tmp/defs" | while read -r sym caller callee; do
	[ "$caller" != "$callee" ] || continue
	case " $upcalls " in *" $sym "*) [ "$callee" = session ] && continue ;; esac
	if [ "$(rank "$caller")" -le "$(rank "$callee")" ]; then
		echo "layers: broker/$caller.c calls $sym() of broker/$callee.c, a layer not below it"
		echo x >> "$tmp/bad"
	fi
done
[ ! -e "$tmp/bad" ] || exit 1
echo "layers: $(wc -l < "$tmp/defs") broker symbols; every call goes down a layer"
