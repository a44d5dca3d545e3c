#!/bin/sh
# make check-stress: runs a command (the suites) while stress-ng keeps every
# CPU busy, so that a verdict that depends on the machine's speed shows up
# here rather than on a busy CI machine.  The load ends with the command,
# whatever way it ends; the command's status is the script's.
set -eu
[ $# -gt 0 ] || { echo "usage: stress.sh COMMAND..." >&2; exit 2; }
cpus=$(nproc)
stress-ng --cpu "$cpus" --cpu-load 100 --quiet &
load=$!
trap 'kill "$load" 2>/dev/null; wait "$load" 2>/dev/null || true' EXIT INT TERM
echo "check-stress: $cpus stress-ng CPU workers (pid $load) run beside: $*"
status=0
"$@" || status=$?
exit "$status"
