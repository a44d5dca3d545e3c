#!/bin/sh
# Stops the podman API service that setup.sh started (its pid is in
# $KOTOBA_CT_RUN/service.pid), and only that one: a service setup.sh found
# already answering is left running.  The cached tarball and the image stay.
set -eu
RUN=${KOTOBA_CT_RUN:-/run/kotoba-test-engine}
SOCK=${KOTOBA_CT_SOCKET:-$RUN/podman.sock}
PIDFILE=$RUN/service.pid

[ -f "$PIDFILE" ] || exit 0
pid=$(cat "$PIDFILE")
# The pid is ours only while it is still that service on that socket.
if [ -n "$pid" ] && tr '\0' ' ' < "/proc/$pid/cmdline" 2>/dev/null |
		grep -q "system service .*unix://$SOCK"; then
	kill -TERM "$pid"
	i=0
	while kill -0 "$pid" 2>/dev/null && [ $i -lt 100 ]; do
		sleep 0.1
		i=$((i + 1))
	done
	if kill -0 "$pid" 2>/dev/null; then
		echo "container teardown: the podman service $pid ignored TERM; killing it" >&2
		kill -KILL "$pid" 2>/dev/null || true
	fi
	echo "container teardown: stopped the podman service on $SOCK (pid $pid)"
fi
rm -f "$PIDFILE" "$SOCK"
