#!/bin/sh
# `make check-container`: setup.sh, the pytest suite, teardown.sh.
#
# Runs at the same time on one machine share the engine: each holds a
# shared lock on $KOTOBA_CT_RUN/users.lock from setup to the end of its
# tests, and the last one out (the one that can turn it into an exclusive
# lock) stops the service; an earlier one leaves it to the others.
#
# usage: check.sh PYTEST...   (KOTOBA_BUILD in the environment)
set -u
HERE=$(cd "$(dirname "$0")" && pwd)
RUN=${KOTOBA_CT_RUN:-/run/kotoba-test-engine}
SKIP_FILE=${KOTOBA_CT_SKIP_FILE:-$RUN/skip}
export KOTOBA_CT_SKIP_FILE="$SKIP_FILE"

if [ "$(id -u)" = 0 ]; then
	mkdir -p "$RUN" && chmod 0755 "$RUN" || exit 1
	exec 9>>"$RUN/users.lock"
	flock -s 9
fi

"$HERE/setup.sh"
rc=$?
if [ $rc -eq 77 ]; then
	reason=$(cat "$SKIP_FILE" 2>/dev/null || echo "see above")
	KOTOBA_CT_SKIP="$reason" "$@" -rs "$HERE"
	rc=$?
	echo "check-container: SKIPPED: $reason"
	exit $rc
fi
if [ $rc -ne 0 ]; then
	echo "check-container: tests/container/setup.sh failed (exit $rc)" >&2
else
	KOTOBA_CT_READY=1 "$@" -rs "$HERE"
	rc=$?
fi
if flock -n -x 9; then
	"$HERE/teardown.sh"
else
	echo "check-container: another run still uses the podman service: left running"
fi
exit $rc
