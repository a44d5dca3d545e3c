#!/bin/sh
# Installs the Debian packages named on the command line when any is
# missing: with apt-get when run as root, otherwise by printing the one
# command to run.  Quiet when everything is present.
set -eu
missing=""
for p in "$@"; do
	if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
		missing="$missing $p"
	fi
done
[ -z "$missing" ] && exit 0
if [ "$(id -u)" = 0 ]; then
	echo "installing Debian packages:$missing" >&2
	export DEBIAN_FRONTEND=noninteractive
	apt-get update -qq >&2
	apt-get install -y -qq --no-install-recommends $missing >&2
else
	echo "missing Debian packages; run as root:" >&2
	echo "  apt-get install -y$missing" >&2
	exit 1
fi
