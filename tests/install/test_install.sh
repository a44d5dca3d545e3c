#!/bin/bash
# `make install` into a staging directory (DESTDIR), checked file by file:
# the layout and modes, the paths written into the units and the config,
# that each installed program runs, that the man pages render without a
# groff warning and document every option and every config key, the
# sysusers.d/tmpfiles.d files, a reinstall over an edited config, and
# `make uninstall`.  Runs as any user; the sysusers/tmpfiles part needs root.
#
# Environment: BUILD (the build directory, absolute), MAKE.
set -u
SRC=$(cd "$(dirname "$0")/../.." && pwd)
cd "$SRC"
BUILD=${BUILD:-$SRC/build}
MAKE=${MAKE:-make}
# Outside BUILD: the Makefile includes every *.d it finds there, and an
# install tree has sysusers.d and tmpfiles.d.  Kept when something fails.
T=$(mktemp -d "${TMPDIR:-/tmp}/kotoba-install-test.XXXXXX")
chmod 0755 "$T"
R=$T/root
. "$SRC/tests/install/lib.sh"
stage() { # stage DESTDIR [make variables...]
	local dest=$1
	shift
	$MAKE -s --no-print-directory install-files BUILD="$BUILD" DESTDIR="$dest" "$@" \
		>"$T/install.log" 2>&1 || { cat "$T/install.log"; return 1; }
}
mode_is() { [ "$(stat -c %a "$1")" = "${2#0}" ]; }

# ---- the layout -----------------------------------------------------------
check "make install DESTDIR=... succeeds" stage "$R"

P=usr/local
expected="
0755 $P/bin/kotoba
0755 $P/libexec/kotoba/kotoba-admin
0755 $P/sbin/kotoba-brokerd
0755 $P/libexec/kotoba/kotoba-monitor
0755 $P/libexec/kotoba/kotoba-egress
0755 $P/libexec/kotoba/kotoba-worker
0644 $P/libexec/kotoba/kotoba_receipt.py
0644 $P/lib/systemd/system/kotoba-brokerd.service
0644 $P/lib/systemd/system/kotoba-brokerd.socket
0644 $P/lib/sysusers.d/kotoba.conf
0644 $P/lib/tmpfiles.d/kotoba.conf
0644 $P/share/man/man1/kotoba.1
0644 $P/share/man/man1/kotoba-mcp.1
0644 $P/share/man/man5/kotoba-broker.conf.5
0644 $P/share/man/man8/kotoba-brokerd.8
0644 $P/share/kotoba/selinux/kotoba.te
0644 $P/share/kotoba/selinux/kotoba.fc
0644 $P/share/kotoba/selinux/kotoba.if
0644 etc/kotoba/broker.conf.example
0644 etc/kotoba/broker.conf
"
while read -r mode path; do
	[ -n "$path" ] || continue
	if [ ! -f "$R/$path" ]; then
		bad "installed: /$path is missing"
	elif ! mode_is "$R/$path" "$mode"; then
		bad "installed: /$path has mode $(stat -c %a "$R/$path"), not $mode"
	else
		ok "installed: /$path $mode"
	fi
done <<<"$expected"
# Anything else is another fragment's (a library, headers): listed, not failed.
extra=$(cd "$R" && find . -type f | sed 's|^\./||' | sort |
	grep -vxF -f <(echo "$expected" | awk 'NF { print $2 }'))
[ -z "$extra" ] || echo "note: also installed: $(echo "$extra" | tr '\n' ' ')"
check "no setuid, setgid or group/world-writable file or directory" \
	test -z "$(find "$R" ! -type l -perm /6022)"
check "every directory is 0755" test -z "$(find "$R" -type d ! -perm 0755)"
check "no temporary file left behind" test -z "$(find "$R" -name '*.tmp')"

# The client library and Python package (mk/client.mk), when built.
if [ -f "$BUILD/libkotoba-client.a" ]; then
	L=$R/$P/lib
	check "client library: header, .a 0644, .so.N 0755, .so link, .pc" bash -c \
		'so=$(readlink "$2/libkotoba-client.so") &&
		 [ "$(stat -c %a "$1/include/kotoba-client.h")" = 644 ] &&
		 [ "$(stat -c %a "$2/libkotoba-client.a")" = 644 ] &&
		 [ "$so" = "$(readlink "$3/libkotoba-client.so")" ] &&
		 [ "$(stat -c %a "$2/$so")" = 755 ] &&
		 grep -qx "prefix=/usr/local" "$2/pkgconfig/kotoba-client.pc" &&
		 grep -qx "libdir=/usr/local/lib" "$2/pkgconfig/kotoba-client.pc"' _ "$R/$P" "$L" "$BUILD"
	check "Python package kotoba_broker where /usr/bin/python3 finds it, no bytecode" bash -c \
		'd=$(ls -d "$1"/lib/python3.*/dist-packages/kotoba_broker) &&
		 [ -f "$d/__init__.py" ] && [ -f "$d/py.typed" ] &&
		 [ -z "$(find "$d" -name "*.pyc")" ]' _ "$R/$P"
fi

# ---- paths written into what was installed -------------------------------------
U=$R/$P/lib/systemd/system
check "the service runs the installed broker with the installed config" \
	grep -qx 'ExecStart=/usr/local/sbin/kotoba-brokerd --config /etc/kotoba/broker.conf' \
	"$U/kotoba-brokerd.service"
check "the installed config points at the installed worker" \
	grep -qx 'worker = /usr/local/libexec/kotoba/kotoba-worker' "$R/etc/kotoba/broker.conf"
check "broker.conf is a copy of the example" cmp "$R/etc/kotoba/broker.conf" \
	"$R/etc/kotoba/broker.conf.example"
# The example differs from dist/broker.conf in the worker line only.
check "the example is dist/broker.conf with worker set" \
	bash -c 'diff "$1" "$2" | grep "^[<>]" | sort | tr "\n" "|" |
		grep -qx "< worker = /usr/local/libexec/kotoba/kotoba-worker|> worker =|"' _ \
	"$R/etc/kotoba/broker.conf.example" dist/broker.conf

# ---- the installed programs run ---------------------------------------------
B=$R/$P
check "kotoba --help" bash -c '"$1" --help | grep -q "^usage: kotoba run"' _ "$B/bin/kotoba"
check "kotoba-brokerd --help" bash -c '"$1" --help | grep -q "^usage: kotoba-brokerd"' _ \
	"$B/sbin/kotoba-brokerd"
check "kotoba-worker --help prints its usage (64: it is started by the broker)" \
	bash -c '"$1" --help >/dev/null 2>&1; rc=$?; [ $rc = 64 ] &&
		"$1" --help 2>&1 | grep -q "usage: kotoba-worker"' _ "$B/libexec/kotoba/kotoba-worker"
check "kotoba-worker --list-syscall-groups" "$B/libexec/kotoba/kotoba-worker" --list-syscall-groups
check "kotoba-brokerd --check-config accepts the installed config" \
	"$B/sbin/kotoba-brokerd" --config "$R/etc/kotoba/broker.conf" --check-config
check "kotoba scan runs offline (kotoba-admin, found from bin/)" \
	bash -c 'echo "print(1)" | "$1" scan -' _ "$B/bin/kotoba"
check "kotoba links no PCRE2 or SQLite (they are kotoba-admin's)" \
	bash -c '! readelf -d "$1" | grep -E "NEEDED.*(pcre2|sqlite)"' _ "$B/bin/kotoba"

# ---- man pages ------------------------------------------------------------------
M=$B/share/man
for page in man1/kotoba.1 man1/kotoba-mcp.1 man5/kotoba-broker.conf.5 man8/kotoba-brokerd.8; do
	if ! command -v groff >/dev/null; then
		bad "groff is missing (Debian package groff-base)"
		break
	fi
	check "$page renders with groff -man, no warning" \
		bash -c 'out=$(groff -t -man -Tutf8 -ww -z "$1" 2>&1) && [ -z "$out" ] ||
			{ echo "$out" >&2; exit 1; }' _ "$M/$page"
	if man -l /dev/null >/dev/null 2>&1 || command -v man >/dev/null; then
		check "$page renders with man -l" \
			bash -c 'MANWIDTH=80 man -l "$1" 2>&1 >/dev/null | { ! grep .; } &&
				[ "$(MANWIDTH=80 man -l "$1" 2>/dev/null | wc -l)" -gt 20 ]' _ "$M/$page"
	fi
done

# Every option the programs print is in their page (backslashes dropped,
# since man source writes \-\-socket).
plain() { sed 's/\\//g' "$1"; }
for opt in $("$B/sbin/kotoba-brokerd" --help | grep -o -- '--[a-z-]*' | sort -u); do
	plain "$M/man8/kotoba-brokerd.8" | grep -q -- "$opt" && continue
	bad "kotoba-brokerd(8) does not document $opt"
done
ok "kotoba-brokerd(8) documents every option of --help"
for opt in $( ("$B/bin/kotoba" --help; "$B/bin/kotoba" run --help) 2>&1 |
	grep -o -- ' -[-a-z]*' | sort -u); do
	plain "$M/man1/kotoba.1" | grep -q -- "$opt" && continue
	bad "kotoba(1) does not document $opt"
done
for cmd in run scan approvals audit; do
	grep -q "^\.SS \"$cmd" "$M/man1/kotoba.1" || bad "kotoba(1) has no section for $cmd"
done
ok "kotoba(1) documents every command and option of --help"

# Every key of --check-config, under its section, with its default.
check "kotoba-broker.conf(5) documents every key with its default" python3 - \
	"$B/sbin/kotoba-brokerd" "$M/man5/kotoba-broker.conf.5" <<'EOF'
import re, subprocess, sys
broker, page = sys.argv[1], sys.argv[2]
cfg = subprocess.run([broker, "--check-config"], capture_output=True, text=True,
                     check=True, env={}).stdout
man = open(page).read().replace("\\", "")
sections = {}
for name, body in re.findall(r'^\.SH "\[(\w+)\]"\n(.*?)(?=^\.SH )', man, re.S | re.M):
    sections[name] = body
missing, section, n = [], None, 0
for line in cfg.splitlines():
    m = re.match(r"^\[(\w+)\]$", line)
    if m:
        section = m.group(1)
        continue
    m = re.match(r"^(\w+) = ?(.*)$", line)
    if not m:
        continue
    n += 1
    key, value = m.group(1), m.group(2) or "(empty)"
    want = f'.BR {key} " = ' + (f'" {value}' if m.group(2) else '(empty)"')
    if want not in sections.get(section, ""):
        missing.append(f"[{section}] {key} = {value}")
if missing or n < 30:
    sys.exit(f"{n} keys; not documented as in --check-config: " + ", ".join(missing))
EOF

# ---- sysusers.d and tmpfiles.d ---------------------------------------------------
if [ "$(id -u)" = 0 ] && command -v systemd-sysusers >/dev/null; then
	S=$T/sysroot
	mkdir -p "$S/etc" "$S/var/lib"
	check "sysusers.d/kotoba.conf creates the user and group kotoba" \
		bash -c 'systemd-sysusers --root="$1" "$2" &&
			grep -q "^kotoba:x:[0-9]*:[0-9]*:.*:/var/lib/kotoba:/usr/sbin/nologin$" "$1/etc/passwd" &&
			grep -q "^kotoba:x:" "$1/etc/group"' _ "$S" "$R/$P/lib/sysusers.d/kotoba.conf"
	check "tmpfiles.d/kotoba.conf makes /var/lib/kotoba 0700" \
		bash -c 'systemd-tmpfiles --root="$1" --create "$2" &&
			[ "$(stat -c %a "$1/var/lib/kotoba")" = 700 ]' _ "$S" "$R/$P/lib/tmpfiles.d/kotoba.conf"
else
	echo "skip sysusers.d/tmpfiles.d application (needs root and systemd-sysusers)"
fi

# ---- reinstall over an edited config; another prefix ---------------------------
echo "# edited by the admin" >>"$R/etc/kotoba/broker.conf"
check "reinstall succeeds" stage "$R"
check "reinstall keeps the admin's broker.conf" grep -q "edited by the admin" "$R/etc/kotoba/broker.conf"
check "reinstall refreshes broker.conf.example" bash -c '! grep -q "edited" "$1"' _ \
	"$R/etc/kotoba/broker.conf.example"

R2=$T/root-usr
check "make install PREFIX=/usr DESTDIR=... succeeds" stage "$R2" PREFIX=/usr
check "PREFIX=/usr: units in /usr/lib/systemd/system, ExecStart /usr/sbin" \
	grep -qx 'ExecStart=/usr/sbin/kotoba-brokerd --config /etc/kotoba/broker.conf' \
	"$R2/usr/lib/systemd/system/kotoba-brokerd.service"
check "PREFIX=/usr: worker = /usr/libexec/kotoba/kotoba-worker" \
	grep -qx 'worker = /usr/libexec/kotoba/kotoba-worker' "$R2/etc/kotoba/broker.conf"
check "PREFIX=/usr: the worker is there" test -x "$R2/usr/libexec/kotoba/kotoba-worker"
if [ -f "$BUILD/libkotoba-client.a" ]; then
	check "PREFIX=/usr: kotoba-client.pc says /usr, Python package in dist-packages" bash -c \
		'grep -qx "prefix=/usr" "$1/usr/lib/pkgconfig/kotoba-client.pc" &&
		 [ -f "$1/usr/lib/python3/dist-packages/kotoba_broker/__init__.py" ]' _ "$R2"
fi

# ---- uninstall -------------------------------------------------------------------
check "make uninstall succeeds" $MAKE -s --no-print-directory uninstall BUILD="$BUILD" DESTDIR="$R"
left=$(cd "$R" && find . \( -type f -o -type l \) | sed 's|^\./||' | sort)
check "uninstall leaves only the admin's broker.conf" test "$left" = "etc/kotoba/broker.conf"

echo "install: $pass passed, $fail failed"
if [ "$fail" -eq 0 ]; then
	rm -rf "$T"
else
	echo "the staged trees are in $T"
	exit 1
fi
