#!/bin/sh
# As root the broker runs every snippet, and starts every worker, as an
# unprivileged user (the peer, the service user, nobody), straight from
# this tree: build/kotoba-worker, and the tests' working directories.  So
# each directory above the tree must let others pass through (o+x: search,
# not read).  Adds that bit where it is missing and says where.
set -eu
[ "$(id -u)" = 0 ] || exit 0
d=$(pwd -P)
while [ "$d" != "/" ]; do
	if [ "$(( $(stat -c %a "$d" | sed 's/^\(.*\)\(.\)$/\2/') & 1 ))" = 0 ]; then
		echo "making $d passable for the snippet users (chmod o+x)" >&2
		chmod o+x "$d"
	fi
	d=$(dirname "$d")
done
