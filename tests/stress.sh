#!/bin/sh
# Runs a command with every CPU busy: one stress-ng CPU worker per online
# CPU at the tests' own priority, so the broker, its workers and the tests
# get a share of the machine and no more.  A test whose verdict depends on
# how fast the machine is fails here; one that waits for what it checks
# does not.  stress-ng stops when the command ends, however it ends.
set -eu
[ $# -gt 0 ] || { echo "usage: $0 command [argument...]" >&2; exit 2; }
stress-ng --cpu 0 --cpu-load 100 --timeout 0 --quiet &
load=$!
trap 'kill "$load" 2>/dev/null; wait "$load" 2>/dev/null || true' EXIT
trap 'exit 130' INT TERM
echo "stress-ng pid $load: $(nproc) CPU workers" >&2
"$@"
