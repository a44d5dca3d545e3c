#!/bin/sh
# make check-fresh: the README's commands on a Debian 12 that has none of
# the build's packages.
#
# A bare root file system (debootstrap --variant=minbase bookworm, made
# once and kept as a tarball in $KOTOBA_CT_CACHE) is unpacked afresh, a
# clean copy of this tree (the files git tracks or would track, as they are
# in the work tree, without build/) goes in at /src, and in a mount
# namespace whose root is that file system (pivot_root, so the worker can
# still make its own namespaces there; a chroot could not), as root:
#   apt-get install make        the one tool the README takes as given
#   make run                    as written: installs, builds, starts the broker
#   build/kotoba run ...        one snippet end to end through that broker
#   make check-unit             the unit suites, built there
# The full `make check` is not run in there: its container and SELinux
# suites need services of their own, and it would take most of an hour on
# two cores.  Downloaded .deb files are shared with the host's apt cache
# (a download cache only: nothing of the host's installed state goes in).
#
# Not root: skipped, with the reason.
set -eu
TOP=$(cd "$(dirname "$0")/../.." && pwd)
OUT=${1:?usage: check.sh BUILD_DIR}/fresh
CACHE=${KOTOBA_CT_CACHE:-/var/cache/kotoba-test}
MIRROR=${KOTOBA_CT_MIRROR:-http://deb.debian.org/debian}
TARBALL=$CACHE/fresh-bookworm-minbase.tar

if [ "$(id -u)" != 0 ]; then
	echo "check-fresh: SKIP: needs root (debootstrap, a mount namespace, apt-get inside)"
	exit 0
fi
"$TOP/tests/deps.sh" debootstrap util-linux git

make_tarball() {
	tmp=$CACHE/fresh-rootfs.tmp
	rm -rf "$tmp" && mkdir -p "$tmp"
	echo "check-fresh: debootstrap bookworm (minbase) into $tmp"
	debootstrap --variant=minbase bookworm "$tmp" "$MIRROR" >"$CACHE/fresh-debootstrap.log" 2>&1 ||
		{ tail -n 20 "$CACHE/fresh-debootstrap.log" >&2; echo "check-fresh: debootstrap failed" >&2; exit 1; }
	rm -f "$tmp"/var/cache/apt/archives/*.deb
	tar -C "$tmp" -cf "$TARBALL.tmp" . && mv "$TARBALL.tmp" "$TARBALL"
	rm -rf "$tmp"
}
mkdir -p "$CACHE"
[ -s "$TARBALL" ] || make_tarball

rm -rf "$OUT" && mkdir -p "$OUT/root"
tar -C "$OUT/root" -xf "$TARBALL"
# The tree as a fresh clone would have it, plus uncommitted edits.
mkdir -p "$OUT/root/src"
(cd "$TOP" && git ls-files -z --cached --others --exclude-standard | grep -zv '^build/' |
	xargs -0 tar -cf - --no-recursion) | tar -C "$OUT/root/src" -xf -
cp /etc/resolv.conf "$OUT/root/etc/resolv.conf"
cp "$TOP/tests/fresh/inside.sh" "$OUT/root/inside.sh"

ROOT=$OUT/root
mkdir -p /var/cache/apt/archives/partial
# In a private mount namespace: the new root, its /proc, /dev, /sys, /run
# and /tmp, then pivot_root into it and run inside.sh there.
unshare --mount --fork --propagation private sh -eu -c '
	root=$1
	mount --bind "$root" "$root"
	mount -t proc proc "$root/proc"
	mount --rbind /dev "$root/dev"
	mount --rbind /sys "$root/sys"
	mount -t tmpfs -o mode=755 tmpfs "$root/run"
	mount -t tmpfs -o mode=1777 tmpfs "$root/tmp"
	mount --bind /var/cache/apt/archives "$root/var/cache/apt/archives"
	cd "$root"
	mkdir -p .oldroot
	pivot_root . .oldroot
	umount -l /.oldroot
	rmdir /.oldroot
	exec env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin HOME=/root LANG=C.UTF-8 sh /inside.sh
' sh "$ROOT"
echo "check-fresh: passed (make run, one snippet, make check-unit on a bare Debian 12)"
