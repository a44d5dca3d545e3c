#!/bin/sh
# Runs inside the bare root file system of tests/fresh/check.sh, as root.
set -eu
export DEBIAN_FRONTEND=noninteractive
step() { echo "check-fresh: $*"; }

step "apt-get install make (nothing else by hand)"
apt-get update -qq
apt-get install -y -qq --no-install-recommends make >/dev/null

cd /src
step "make run, as the README says"
setsid make run >/tmp/make-run.log 2>&1 &
run_pid=$!
sock=/run/kotoba/broker.sock
i=0
while [ ! -S "$sock" ]; do
	if ! kill -0 "$run_pid" 2>/dev/null; then
		tail -n 40 /tmp/make-run.log >&2
		echo "check-fresh: make run ended before the broker listened" >&2
		exit 1
	fi
	i=$((i + 1))
	[ "$i" -lt 1800 ] || { tail -n 40 /tmp/make-run.log >&2; echo "check-fresh: no socket after 900 s" >&2; exit 1; }
	sleep 0.5
done

grep -m1 'installing Debian packages' /tmp/make-run.log || true
step "one snippet end to end"
mkdir -p /srv/work && chmod 755 /srv/work
out=$(build/kotoba run --no-channel --cwd /srv/work -c 'print(6*7)')
kill -TERM -"$run_pid" 2>/dev/null || true
wait "$run_pid" 2>/dev/null || true
if [ "$out" != 42 ]; then
	tail -n 40 /tmp/make-run.log >&2
	echo "check-fresh: the snippet printed '$out', not 42" >&2
	exit 1
fi

step "make check-unit"
make check-unit >/tmp/check-unit.log 2>&1 || { tail -n 60 /tmp/check-unit.log >&2; exit 1; }
grep -cE '^\[  PASSED  \]' /tmp/check-unit.log | sed 's/^/check-fresh: unit suites passed: /'
