#!/bin/bash
# The systemd units, installed into a throwaway PREFIX (so ExecStart names
# a real file):
#   - `systemd-analyze verify` passes on both, and their Documentation=
#     man pages are the ones installed;
#   - `systemd-analyze security --offline=true` exposure stays at or below
#     EXPOSURE_MAX (36 on systemd's 0-100 scale, shown as 3.6);
#   - options users depend on are still there (ProtectHome=no: snippets
#     work in home directories; no MemoryDenyWriteExecute=: JITs...);
#   - as root: the installed broker, started with exactly the unit's
#     CapabilityBoundingSet= and no_new_privs, as systemd would, becomes
#     the service user, runs a snippet for another user, reloads on SIGHUP
#     and stops cleanly on SIGTERM.
#
# Environment: BUILD (absolute), MAKE, EXPOSURE_MAX.
set -u
SRC=$(cd "$(dirname "$0")/../.." && pwd)
cd "$SRC"
BUILD=${BUILD:-$SRC/build}
MAKE=${MAKE:-make}
EXPOSURE_MAX=${EXPOSURE_MAX:-36}
SERVICE_USER=kotoba
# Outside BUILD (the Makefile includes every *.d under it) and reachable by
# every user (the snippet's user must exec the installed worker).
T=$(mktemp -d "${TMPDIR:-/tmp}/kotoba-units-test.XXXXXX")
chmod 0755 "$T"
PFX=$T/prefix
ETC=$T/etc
UNITS=$PFX/lib/systemd/system
bpid=
. "$SRC/tests/install/lib.sh"
cleanup() {
	[ -n "$bpid" ] && kill -KILL "$bpid" 2>/dev/null
	if [ "$fail" -eq 0 ]; then rm -rf "$T"; else echo "kept $T"; fi
}
trap cleanup EXIT

if ! $MAKE -s --no-print-directory install-files BUILD="$BUILD" PREFIX="$PFX" \
	SYSCONFDIR="$ETC" >"$T/install.log" 2>&1; then
	cat "$T/install.log"
	bad "make install PREFIX=$PFX"
	echo "units: $pass passed, $fail failed"
	exit 1
fi

# ---- systemd-analyze ------------------------------------------------------------
check "systemd-analyze verify: both units, no message" bash -c \
	'out=$(systemd-analyze verify --man=no "$1" "$2" 2>&1) && [ -z "$out" ] ||
		{ echo "$out" >&2; exit 1; }' _ "$UNITS/kotoba-brokerd.socket" "$UNITS/kotoba-brokerd.service"
check "Documentation= names the installed man pages" \
	env MANPATH="$PFX/share/man" systemd-analyze verify "$UNITS/kotoba-brokerd.service"
systemd-analyze security --offline=true "$UNITS/kotoba-brokerd.service" >"$T/security" 2>&1
echo "     $(grep 'Overall exposure' "$T/security")"
check "exposure at most $EXPOSURE_MAX/100 (systemd-analyze security --offline=true)" \
	systemd-analyze security --offline=true --threshold="$EXPOSURE_MAX" \
	"$UNITS/kotoba-brokerd.service"

# What lowers the exposure score but breaks users (see the unit's comments).
svc=$UNITS/kotoba-brokerd.service
for want in Type=notify ProtectHome=no ProtectProc=default ProcSubset=all \
	NoNewPrivileges=yes PrivateTmp=yes ProtectSystem=strict KillMode=mixed \
	'ReadWritePaths=-/home /var/lib/kotoba -/run/kotoba' 'RestrictAddressFamilies=AF_UNIX AF_INET AF_INET6 AF_NETLINK'; do
	grep -qxF "$want" "$svc" || bad "the service lost $want"
done
for unwanted in MemoryDenyWriteExecute PrivateNetwork=yes PrivateUsers=yes User= \
	DynamicUser StateDirectory RuntimeDirectory 'ProtectHome=read-only' 'ProtectHome=yes'; do
	grep -q "^$unwanted" "$svc" && bad "the service sets $unwanted (see its comments)"
done
ok "the service keeps the options snippets need, and none that break them"
check "the socket: /run/kotoba/broker.sock, kotoba:kotoba 0660" bash -c \
	'grep -qx ListenStream=/run/kotoba/broker.sock "$1" && grep -qx SocketUser=kotoba "$1" &&
	 grep -qx SocketGroup=kotoba "$1" && grep -qx SocketMode=0660 "$1"' _ "$UNITS/kotoba-brokerd.socket"

# ---- the unit's capability set, for real (root) --------------------------------
if [ "$(id -u)" != 0 ] || ! command -v setpriv >/dev/null; then
	echo "skip the capability-set run (needs root and setpriv)"
else
	# The service user, as sysusers.d/kotoba.conf would make it.
	getent group "$SERVICE_USER" >/dev/null || groupadd --system "$SERVICE_USER"
	getent passwd "$SERVICE_USER" >/dev/null ||
		useradd --system --gid "$SERVICE_USER" --no-create-home --home-dir /nonexistent \
			--shell /usr/sbin/nologin "$SERVICE_USER"
	caps=$(sed -n 's/^CapabilityBoundingSet=//p' "$svc")
	bset="-all$(for c in $caps; do printf ',+%s' "$(echo "${c#CAP_}" | tr 'A-Z' 'a-z')"; done)"
	mkdir -m 0755 "$T/run"
	# As tmpfiles.d/kotoba.conf leaves it: the broker must cope as root
	# with the capabilities above and nothing else.
	install -d -m 0700 -o "$SERVICE_USER" -g "$SERVICE_USER" "$T/state"
	sock=$T/run/broker.sock
	setpriv --bounding-set "$bset" --inh-caps=-all --no-new-privs \
		"$PFX/sbin/kotoba-brokerd" --config "$ETC/kotoba/broker.conf" \
		--socket "$sock" --state-dir "$T/state" --verbose >"$T/broker.log" 2>&1 &
	bpid=$!
	for _ in $(seq 100); do
		[ -S "$sock" ] && grep -q "running as" "$T/broker.log" && break
		kill -0 "$bpid" 2>/dev/null || break
		sleep 0.1
	done
	if ! kill -0 "$bpid" 2>/dev/null || [ ! -S "$sock" ]; then
		bad "the broker did not start with CapabilityBoundingSet=$caps"
		sed 's/^/     /' "$T/broker.log"
	else
		ok "the broker starts with exactly CapabilityBoundingSet=$caps and no_new_privs"
		status=/proc/$bpid/status
		check "then runs as $SERVICE_USER, no_new_privs, bounding set empty" bash -c \
			'grep -q "^Uid:[[:space:]]*$2[[:space:]]" "$1" && grep -q "^NoNewPrivs:[[:space:]]*1" "$1" &&
			 grep -q "^CapBnd:[[:space:]]*0000000000000000" "$1"' _ "$status" "$(id -u "$SERVICE_USER")"
		check "and keeps no capability, under its seccomp filter" bash -c \
			'grep -q "^CapEff:[[:space:]]*0000000000000000" "$1" &&
			 grep -q "^CapPrm:[[:space:]]*0000000000000000" "$1" &&
			 grep -q "^Seccomp:[[:space:]]*2" "$1"' _ "$status"
		# Its monitor, its one child before any run: CAP_KILL(5),
		# CAP_SETGID(6), CAP_SETUID(7), 0xe0, and nothing else.
		mpid=$(cat /proc/$bpid/task/$bpid/children | awk '{ print $1 }')
		check "its monitor keeps only CAP_SETUID, CAP_SETGID, CAP_KILL" bash -c \
			'grep -q "^Name:[[:space:]]*kotoba-monitor" "$1" &&
			 grep -q "^CapEff:[[:space:]]*00000000000000e0" "$1" &&
			 grep -q "^CapBnd:[[:space:]]*0000000000000000" "$1"' _ "/proc/$mpid/status"
		# A member of the socket's group, not the service user: nobody.
		want_uid=$(id -u nobody)
		check "a snippet for another user (nobody) runs as that user" bash -c \
			'out=$(timeout 30 setpriv --reuid=nobody --regid="$3" --clear-groups \
				"$1" run -c "import os; print(os.getuid())" --cwd / --answer once \
				--socket "$2") && [ "$out" = "$4" ] || { echo "got: $out" >&2; exit 1; }' \
			_ "$PFX/bin/kotoba" "$sock" "$SERVICE_USER" "$want_uid"
		kill -HUP "$bpid"
		for _ in $(seq 50); do grep -q "reloaded" "$T/broker.log" && break; sleep 0.1; done
		check "SIGHUP (ExecReload) reloads the configuration" grep -q "reloaded" "$T/broker.log"
		kill -TERM "$bpid"
		wait "$bpid"
		rc=$?
		bpid=
		check "SIGTERM stops it cleanly (status 0)" test "$rc" = 0
		[ "$fail" -eq 0 ] || sed 's/^/     log: /' "$T/broker.log"
	fi
fi

echo "units: $pass passed, $fail failed"
[ "$fail" -eq 0 ]
