#!/bin/sh
# Installs the Debian packages named on the command line when any is
# missing: with apt-get when run as root, otherwise by printing the one
# command to run.  Quiet when everything is present (one dpkg-query).
set -eu
installed=$(dpkg-query -W -f='${Package} ${db:Status-Status}\n' "$@" 2>/dev/null |
	awk '$2 == "installed" { print $1 }') || true
missing=""
for p in "$@"; do
	case " $(echo $installed) " in
	*" $p "*) ;;
	*) missing="$missing $p" ;;
	esac
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
