#!/bin/sh
# Sets up what tests/container needs, idempotently, and prints how long
# each step took:
#
#   - the Debian packages podman, runc and debootstrap (tests/deps.sh);
#   - the group kotoba-engine (its members may use the engine's API socket,
#     as the docker group does) and the test user kotoba-ct (no home, no
#     login, in kotoba-engine and kotoba): a root client's snippets run as
#     that user (root_user), and so do the engine commands the worker runs;
#   - a rootful podman API service on $KOTOBA_CT_SOCKET (runtime runc:
#     crun rejects hybrid cgroup hosts), socket root:kotoba-engine 0660,
#     started only when nothing answers there; its pid goes in
#     $KOTOBA_CT_RUN/service.pid so teardown.sh stops only what this started;
#   - the image $KOTOBA_CT_IMAGE: Debian bookworm minbase with
#     python3-minimal (no json, no shutil: the tests do without), made by
#     debootstrap once and kept as a tarball in $KOTOBA_CT_CACHE;
#     imported only when the engine does not have it.
#
# Exit status: 0 ready; 77 skip (not root, or podman cannot be installed),
# with the reason on stderr and in $KOTOBA_CT_SKIP_FILE (default
# $KOTOBA_CT_RUN/skip); anything else is a failure.  The KOTOBA_CT_*
# variables below override the defaults.
set -eu

HERE=$(cd "$(dirname "$0")" && pwd)
TOP=$(cd "$HERE/../.." && pwd)
CACHE=${KOTOBA_CT_CACHE:-/var/cache/kotoba-test}
IMAGE=${KOTOBA_CT_IMAGE:-localhost/kotoba-test-python:bookworm}
SUITE=${KOTOBA_CT_SUITE:-bookworm}
MIRROR=${KOTOBA_CT_MIRROR:-http://deb.debian.org/debian}
RUN=${KOTOBA_CT_RUN:-/run/kotoba-test-engine}
SOCK=${KOTOBA_CT_SOCKET:-$RUN/podman.sock}
ENGINE_GROUP=kotoba-engine
CT_USER=kotoba-ct
BROKER_GROUP=kotoba
TARBALL=$CACHE/kotoba-test-python-$SUITE.tar
SKIP_FILE=${KOTOBA_CT_SKIP_FILE:-$RUN/skip}

now() { date +%s.%N; }
T0=$(now)
step_start=$T0
# Prints the step's name and the seconds it took.
done_step() {
	t=$(now)
	awk -v a="$step_start" -v b="$t" -v s="$1" 'BEGIN { printf "container setup: %6.1f s  %s\n", b - a, s }'
	step_start=$t
}
skip() {
	mkdir -p "$(dirname "$SKIP_FILE")" 2>/dev/null && printf '%s\n' "$1" > "$SKIP_FILE" 2>/dev/null || true
	echo "container setup: SKIP: $1" >&2
	exit 77
}
fail() {
	echo "container setup: FAILED: $1" >&2
	exit 1
}

[ "$(id -u)" = 0 ] || skip "needs root: it installs podman, creates the user kotoba-ct and the group kotoba-engine, and runs a rootful podman API service"
rm -f "$SKIP_FILE"
# One setup at a time: two would both start a service, or both import.
mkdir -p "$RUN"
chmod 0755 "$RUN"
exec 8>>"$RUN/setup.lock"
flock -x 8

# ---- packages ---------------------------------------------------------------
# Only podman missing for good is a reason to skip; a package that installs
# but does not work is a failure of this machine the tests must show.
if ! "$TOP/tests/deps.sh" podman runc debootstrap; then
	command -v podman >/dev/null 2>&1 ||
		skip "podman cannot be installed here (apt-get install podman failed, see above): the container tests did not run"
	command -v runc >/dev/null 2>&1 || fail "runc could not be installed (apt-get install runc)"
fi
command -v podman >/dev/null 2>&1 || skip "podman is not installed and could not be installed: the container tests did not run"
command -v runc >/dev/null 2>&1 || fail "runc is not installed"
done_step "packages (podman runc debootstrap)"

# ---- users and groups ---------------------------------------------------------
getent group "$ENGINE_GROUP" >/dev/null || groupadd --system "$ENGINE_GROUP"
getent group "$BROKER_GROUP" >/dev/null || groupadd --system "$BROKER_GROUP"
if ! getent passwd "$CT_USER" >/dev/null; then
	useradd --no-create-home --home-dir /nonexistent --shell /usr/sbin/nologin \
		--user-group --groups "$ENGINE_GROUP,$BROKER_GROUP" "$CT_USER"
else
	for g in "$ENGINE_GROUP" "$BROKER_GROUP"; do
		id -nG "$CT_USER" | tr ' ' '\n' | grep -qx "$g" || usermod -a -G "$g" "$CT_USER"
	done
fi
done_step "group $ENGINE_GROUP, user $CT_USER"

# ---- the API service ----------------------------------------------------------
remote() { podman --remote --url "unix://$SOCK" "$@"; }
answering() { remote version >/dev/null 2>&1; }

if answering; then
	echo "container setup: a podman service already answers on $SOCK: using it"
else
	rm -f "$SOCK"
	# setsid: not in make's process group, so a ^C of make leaves it to
	# teardown.sh rather than killing it half way through a request.  It
	# must not inherit the locks (fds 8, 9: check.sh's), or hold them forever.
	# Started in $RUN: conmon writes an exec session's "oom" marker into
	# its working directory, which would otherwise be the checkout.
	(cd "$RUN" && exec setsid podman --runtime runc system service --time=0 "unix://$SOCK" \
		>"$RUN/service.log" 2>&1 </dev/null 8>&- 9>&-) &
	echo $! > "$RUN/service.pid"
	i=0
	until answering; do
		if ! kill -0 "$(cat "$RUN/service.pid")" 2>/dev/null; then
			cat "$RUN/service.log" >&2
			rm -f "$RUN/service.pid"
			fail "podman system service exited at start (log above)"
		fi
		i=$((i + 1))
		[ $i -lt 300 ] || fail "podman system service did not answer on $SOCK within 30 s (log: $RUN/service.log)"
		sleep 0.1
	done
fi
chgrp "$ENGINE_GROUP" "$SOCK"
chmod 0660 "$SOCK"
done_step "podman API service on $SOCK"

# ---- the image -------------------------------------------------------------------
if remote image exists "$IMAGE"; then
	done_step "image $IMAGE (present)"
else
	mkdir -p "$CACHE"
	if [ ! -s "$TARBALL" ]; then
		# A finished root file system: python3 in it and no debootstrap/
		# directory (debootstrap removes it as its last step).
		if [ -x "$CACHE/rootfs/usr/bin/python3" ] && [ ! -e "$CACHE/rootfs/debootstrap" ]; then
			rootfs=$CACHE/rootfs
			own_rootfs=0
			echo "container setup: using the root file system in $rootfs"
		else
			command -v debootstrap >/dev/null 2>&1 || fail "debootstrap is not installed"
			rootfs=$CACHE/rootfs.build
			own_rootfs=1
			rm -rf "$rootfs"
			echo "container setup: debootstrap $SUITE into $rootfs (about a minute)"
			debootstrap --variant=minbase --include=python3-minimal "$SUITE" "$rootfs" "$MIRROR" \
				>"$CACHE/debootstrap.log" 2>&1 ||
				{ tail -n 30 "$CACHE/debootstrap.log" >&2; fail "debootstrap failed (log: $CACHE/debootstrap.log)"; }
			rm -f "$rootfs"/var/cache/apt/archives/*.deb
			rm -rf "$rootfs"/var/lib/apt/lists/*
		fi
		done_step "root file system ($SUITE minbase + python3)"
		# Written aside and moved: an interrupted run leaves no half tarball.
		tar -C "$rootfs" -cf "$TARBALL.tmp" .
		mv "$TARBALL.tmp" "$TARBALL"
		[ "$own_rootfs" = 0 ] || rm -rf "$rootfs"
		done_step "tarball $TARBALL"
	fi
	remote import --quiet - "$IMAGE" < "$TARBALL" >/dev/null ||
		fail "podman import of $TARBALL as $IMAGE failed"
	done_step "image $IMAGE (imported)"
fi

# One real container with the limits the broker asks for, so a host that
# cannot run them fails here, naming the engine, not in every test.
out=$(remote run --rm --network none --read-only --cap-drop all \
	--security-opt no-new-privileges --memory 256m --memory-swap 256m --pids-limit 64 \
	--ulimit nofile=1024:1024 --ulimit nproc=256:256 \
	--user "$(id -u "$CT_USER"):$(id -g "$CT_USER")" \
	"$IMAGE" python3 -c 'import os; print(os.getuid())' 2>&1) ||
	fail "a test container did not run: $out"
[ "$out" = "$(id -u "$CT_USER")" ] || fail "the test container printed '$out', not $CT_USER's uid"
done_step "a container of $IMAGE runs python3"

awk -v a="$T0" -v b="$(now)" 'BEGIN { printf "container setup: ready in %.1f s\n", b - a }'
