#!/bin/sh
# SPDX-License-Identifier: MIT
# The broker's modules in layers (ARCHITECTURE.md, "Layers", whose numbered
# list this reads): each module calls only modules of a lower layer, so
# there is no cycle among them.
# Read from the built objects (nm), so it sees every call, not a grep's
# idea of one.  Usage: tests/layers.sh BUILD_DIR
#
# There is no way up by name: what a lower module needs from a higher one
# it is given as a callback (struct client_link, struct run_ops,
# container_set_runner()).
set -eu
build=$1
shift
# The numbered list under "## Layers", one line a layer: "1 log", "2 loop config ...".
layers=$(awk '/^## /{ on = $0 == "## Layers"; next }
	on && /^[0-9]+\. / {
		line = $1 + 0
		while (match($0, /`[a-z_]+\.c`/)) {
			line = line " " substr($0, RSTART + 1, RLENGTH - 4)
			$0 = substr($0, RSTART + RLENGTH)
		}
		print line
	}' "$(dirname "$0")/../ARCHITECTURE.md")
if [ -z "$layers" ]; then
	echo "layers: no numbered list under ARCHITECTURE.md's \"## Layers\""
	exit 1
fi

rank() { printf '%s\n' "$layers" | awk -v m="$1" '{ for (i = 2; i <= NF; i++) if ($i == m) print $1 }'; }

# Checked before the pipelines below, whose exit status is sort's.
for o in "$build"/broker/*.o; do
	m=$(basename "$o" .o)
	if [ -z "$(rank "$m")" ]; then
		echo "layers: broker/$m.c is in no layer (ARCHITECTURE.md, \"Layers\")"
		exit 1
	fi
done

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
for o in "$build"/broker/*.o; do
	nm --defined-only -g "$o" | awk -v m="$(basename "$o" .o)" 'NF == 3 { print $3, m }'
done | sort > "$tmp/defs"
for o in "$build"/broker/*.o; do
	nm -u "$o" | awk -v m="$(basename "$o" .o)" '{ print $2, m }'
done | sort > "$tmp/uses"

join "$tmp/uses" "$tmp/defs" | while read -r sym caller callee; do
	[ "$caller" != "$callee" ] || continue
	if [ "$(rank "$caller")" -le "$(rank "$callee")" ]; then
		echo "layers: broker/$caller.c calls $sym() of broker/$callee.c, a layer not below it"
		echo x >> "$tmp/bad"
	fi
done
[ ! -e "$tmp/bad" ] || exit 1
echo "layers: $(wc -l < "$tmp/defs") broker symbols; every call goes down a layer"

# The monitor parses nothing: by symbol, then by library.
parsers='^(msgpack_|pcre2_|sqlite3_)'
if [ $# -eq 0 ]; then
	echo "layers: no monitor objects given"
	exit 1
fi
for o in "$@"; do
	if nm -u "$o" | awk '{ print $2 }' | grep -E "$parsers" > "$tmp/parse"; then
		echo "layers: the monitor's $o calls a parser: $(tr '\n' ' ' < "$tmp/parse")"
		exit 1
	fi
done
needed=$(readelf -d "$build/kotoba-monitor" | awk '/NEEDED/ { gsub(/[][]/, "", $5); print $5 }')
if printf '%s\n' "$needed" | grep -E '^lib(msgpack|pcre2|sqlite3)' > "$tmp/parse"; then
	echo "layers: kotoba-monitor links $(tr '\n' ' ' < "$tmp/parse")"
	exit 1
fi
echo "layers: the monitor's $# objects call no parser; it links $(printf '%s ' $needed)"
