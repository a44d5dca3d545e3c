#!/bin/bash
# The SELinux module, beyond "it compiles": linked with the distribution's
# reference policy (base, unconfined and staff modules) and expanded into
# a kernel policy, which resolves every type and attribute it requires and
# checks every neverallow; then the expanded policy is queried for what
# its domains may and may not do.
#
# The reference policy comes from the Debian package selinux-policy-default
# (the version matching selinux-policy-dev): used where installed, else
# fetched with `apt-get download` and unpacked under build/selinux/ (it is
# never installed: its scripts would build a policy store on this host).
#
# Needs: build/selinux/kotoba.pp (make selinux), setools (sesearch).
set -u
SRC=$(cd "$(dirname "$0")/../.." && pwd)
BUILD=${BUILD:-$SRC/build}
OUT=$BUILD/selinux
PP=$OUT/kotoba.pp
. "$SRC/tests/install/lib.sh"

finish() {
	echo "selinux: $pass passed, $fail failed"
	[ "$fail" -eq 0 ]
	exit $?
}

[ -f "$PP" ] || { bad "no $PP: run make selinux"; finish; }

# ---- the reference policy ------------------------------------------------
refdir=""
for d in /usr/share/selinux/default "$OUT/refpolicy/usr/share/selinux/default"; do
	if [ -e "$d/base.pp" ] || [ -e "$d/base.pp.bz2" ]; then
		refdir=$d
		break
	fi
done
if [ -z "$refdir" ]; then
	ver=$(dpkg-query -W -f='${Version}' selinux-policy-dev 2>/dev/null)
	rm -rf "$OUT/refpolicy" "$OUT/refpolicy-deb"
	mkdir -p "$OUT/refpolicy-deb"
	if (cd "$OUT/refpolicy-deb" &&
	    apt-get download -q "selinux-policy-default${ver:+=$ver}" >download.log 2>&1) &&
	   dpkg-deb -x "$OUT"/refpolicy-deb/selinux-policy-default_*.deb "$OUT/refpolicy"; then
		refdir=$OUT/refpolicy/usr/share/selinux/default
	else
		cat "$OUT/refpolicy-deb/download.log" 2>/dev/null
		bad "cannot fetch selinux-policy-default to link against (apt-get download)"
		finish
	fi
fi

mods=$OUT/link
rm -rf "$mods"
mkdir -p "$mods"
for m in base unconfined staff; do
	if [ -e "$refdir/$m.pp.bz2" ]; then
		bzcat "$refdir/$m.pp.bz2" >"$mods/$m.pp"
	elif [ -e "$refdir/$m.pp" ]; then
		cp "$refdir/$m.pp" "$mods/$m.pp"
	fi
done
POL=$mods/policy.bin
if semodule_link -o "$mods/linked.pp" "$mods"/*.pp "$PP" >"$mods/link.log" 2>&1 &&
   semodule_expand "$mods/linked.pp" "$POL" >"$mods/expand.log" 2>&1; then
	ok "kotoba.pp links with the reference policy ($refdir) and expands (requires resolved, neverallows hold)"
else
	cat "$mods/link.log" "$mods/expand.log" | grep -v "loading package" | tail -20
	bad "kotoba.pp does not link or expand against the reference policy"
	finish
fi

# ---- queries ---------------------------------------------------------------
# has DESC ARGS...: sesearch ARGS finds at least one rule.
has() {
	local desc=$1
	shift
	if [ -n "$(sesearch "$@" "$POL" 2>/dev/null)" ]; then ok "$desc"; else bad "$desc (sesearch $*)"; fi
}
# none DESC ARGS...: sesearch ARGS finds nothing (attributes expanded).
none() {
	local desc=$1 out
	shift
	out=$(sesearch "$@" "$POL" 2>/dev/null)
	if [ -z "$out" ]; then ok "$desc"; else bad "$desc"; echo "$out" | sed 's/^/     /' | head -5; fi
}

has "systemd starts the broker in kotoba_broker_t" -T -s init_t -t kotoba_broker_exec_t -c process -D kotoba_broker_t
has "the broker's exec of kotoba-monitor enters kotoba_monitor_t" -T -s kotoba_broker_t -t kotoba_monitor_exec_t -c process -D kotoba_monitor_t
has "the monitor's exec of kotoba-worker enters kotoba_worker_t" -T -s kotoba_monitor_t -t kotoba_worker_exec_t -c process -D kotoba_worker_t
none "the broker cannot enter the worker's domain" -A -s kotoba_broker_t -t kotoba_worker_t -c process -p transition
none "the broker cannot enter the snippet's domain" -A -s kotoba_broker_t -t kotoba_snippet_t -c process -p transition
none "the broker runs no program in its own domain" -A -s kotoba_broker_t -c file -p execute_no_trans
none "the broker holds no kill capability" -A -s kotoba_broker_t -c capability -p kill
none "the broker signals no worker" -A -s kotoba_broker_t -t kotoba_worker_t -c process -p sigkill,signal
none "the broker signals no snippet" -A -s kotoba_broker_t -t kotoba_snippet_t -c process -p sigkill,signal
has "the monitor kills a worker" -A -s kotoba_monitor_t -t kotoba_worker_t -c process -p sigkill
none "the monitor touches no grants or audit trail" -A -s kotoba_monitor_t -t kotoba_var_lib_t
none "snippets cannot signal the monitor" -A -s kotoba_snippet_t -t kotoba_monitor_t -c process
has "the worker's exec of python3 (bin_t) enters kotoba_snippet_t" -T -s kotoba_worker_t -t bin_t -c process -D kotoba_snippet_t
has "broker -> monitor allowed under no_new_privs" -A -s kotoba_broker_t -t kotoba_monitor_t -c process2 -p nnp_transition
has "monitor -> worker allowed under no_new_privs" -A -s kotoba_monitor_t -t kotoba_worker_t -c process2 -p nnp_transition
has "worker -> snippet allowed under no_new_privs" -A -s kotoba_worker_t -t kotoba_snippet_t -c process2 -p nnp_transition
has "the snippet keeps its rlimits and TMPDIR (rlimitinh, noatsecure)" -A -s kotoba_worker_t -t kotoba_snippet_t -c process -p rlimitinh,noatsecure
has "the worker can kill every process of its snippet" -A -s kotoba_worker_t -t kotoba_snippet_t -c process -p sigkill
has "the worker reads a refused exec's program from its snippet's memory" -A -s kotoba_worker_t -t kotoba_snippet_t -c process -p ptrace
has "snippets read the receipt's wrappers (usr_t)" -A -s kotoba_snippet_t -t usr_t -c file -p read
has "snippets write the receipt pipe their worker hands them" -A -s kotoba_snippet_t -t kotoba_worker_t -c fifo_file -p write
has "a spare takes its code over its worker's socket" -A -s kotoba_snippet_t -t kotoba_worker_t -c unix_stream_socket -p read,write
none "snippets cannot connect to their worker's sockets" -A -s kotoba_snippet_t -t kotoba_worker_t -c unix_stream_socket -p connectto
none "snippets cannot read their worker's memory" -A -s kotoba_snippet_t -t kotoba_worker_t -c process -p ptrace
has "user domains can connect to the broker" -A -s staff_t -t kotoba_broker_t -c unix_stream_socket -p connectto
has "the broker writes its state" -A -s kotoba_broker_t -t kotoba_var_lib_t -c file -p write
has "snippets write the user's home (tunable on)" -A -s kotoba_snippet_t -t user_home_t -c file -p write
has "snippets connect out over TCP" -A -s kotoba_snippet_t -c tcp_socket -p connect

none "snippets cannot touch the grants and audit trail" -A -s kotoba_snippet_t -t kotoba_var_lib_t
none "workers cannot touch the grants and audit trail" -A -s kotoba_worker_t -t kotoba_var_lib_t
none "snippets cannot connect to the broker" -A -s kotoba_snippet_t -t kotoba_broker_t -c unix_stream_socket
none "snippets cannot read shadow" -A -s kotoba_snippet_t -t shadow_t
none "snippets hold no capability" -A -s kotoba_snippet_t -c capability
none "workers hold no capability (exec'd as the peer)" -A -s kotoba_worker_t -c capability
none "snippets cannot signal the broker or a worker" -A -s kotoba_snippet_t -t kotoba_broker_t -c process
none "snippets create no raw or packet sockets" -A -s kotoba_snippet_t -c rawip_socket,packet_socket -p create
none "snippets cannot transition anywhere but where they are" -T -s kotoba_snippet_t -c process

# The egress proxy: entered only from the broker, only by its program;
# what it holds beside the broker's link and the runs' listeners.
# only DESC WANT ARGS...: the rules sesearch ARGS finds name exactly the
# source types WANT (space-separated, sorted).
only() {
	local desc=$1 want=$2 got
	shift 2
	got=$(sesearch "$@" "$POL" 2>/dev/null | awk '$1 == "allow" { print $2 }' | sort -u | tr '\n' ' ')
	if [ "$got" = "$want " ]; then ok "$desc"; else bad "$desc: [$got], want [$want] (sesearch $*)"; fi
}
has "the broker's exec of kotoba-egress enters kotoba_egress_t" -T -s kotoba_broker_t -t kotoba_egress_exec_t -c process -D kotoba_egress_t
has "broker -> egress proxy allowed under no_new_privs" -A -s kotoba_broker_t -t kotoba_egress_t -c process2 -p nnp_transition
only "only the broker enters the proxy's domain" kotoba_broker_t -A -t kotoba_egress_t -c process -p transition
only "kotoba-egress is the proxy domain's only entry point" kotoba_egress_t -A -t kotoba_egress_exec_t -c file -p entrypoint
none "snippets cannot run kotoba-egress" -A -s kotoba_snippet_t -t kotoba_egress_exec_t -c file -p execute,execute_no_trans
none "workers cannot run kotoba-egress" -A -s kotoba_worker_t -t kotoba_egress_exec_t -c file -p execute,execute_no_trans
has "the proxy keeps the unit's limits (rlimitinh)" -A -s kotoba_broker_t -t kotoba_egress_t -c process -p rlimitinh
has "the broker kills a proxy that does not start" -A -s kotoba_broker_t -t kotoba_egress_t -c process -p sigkill
none "the broker cannot trace the proxy" -A -s kotoba_broker_t -t kotoba_egress_t -c process -p ptrace
has "the proxy uses its link to the broker" -A -s kotoba_egress_t -t kotoba_broker_t -c unix_stream_socket -p read,write
has "the proxy fills the CA bundle the broker opened" -A -s kotoba_egress_t -t kotoba_egress_ca_t -c file -p write
has "the broker's bundle in /run/kotoba is kotoba_egress_ca_t" -T -s kotoba_broker_t -t kotoba_runtime_t -c file -D kotoba_egress_ca_t
has "snippets read the proxy's CA bundle" -A -s kotoba_snippet_t -t kotoba_egress_ca_t -c file -p read
none "snippets cannot change the proxy's CA bundle" -A -s kotoba_snippet_t -t kotoba_egress_ca_t -c file -p write,append,setattr,unlink,rename,relabelfrom
has "the broker takes a run's listener from its worker" -A -s kotoba_broker_t -t kotoba_worker_t -c tcp_socket -p read,write
has "the proxy takes a run's listener from the broker" -A -s kotoba_egress_t -t kotoba_worker_t -c fd -p use
has "the proxy accepts on a run's listener (the worker's socket)" -A -s kotoba_egress_t -t kotoba_worker_t -c tcp_socket -p accept,getopt,setopt,read,write,shutdown
none "the proxy listens or binds on no socket of its own" -A -s kotoba_egress_t -c tcp_socket,udp_socket -p listen,name_bind,node_bind
none "the proxy connects to no socket of a run's" -A -s kotoba_egress_t -t kotoba_worker_t -c tcp_socket -p connect,listen,bind
has "the proxy connects upstream to the web ports" -A -s kotoba_egress_t -t http_port_t -c tcp_socket -p name_connect
has "the proxy connects to every port (tunable on)" -A -s kotoba_egress_t -t port_type -c tcp_socket -p name_connect -b kotoba_egress_connect_all_ports
has "the proxy resolves names (DNS)" -A -s kotoba_egress_t -t dns_port_t -c tcp_socket -p name_connect
has "the proxy reads /etc/hosts and resolv.conf" -A -s kotoba_egress_t -t net_conf_t -c file -p read
has "the proxy reads nsswitch.conf and gai.conf (etc_t)" -A -s kotoba_egress_t -t etc_t -c file -p read
has "the proxy reads the system CAs" -A -s kotoba_egress_t -t cert_t -c file -p read
has "the proxy forks its server and signals it" -A -s kotoba_egress_t -t kotoba_egress_t -c process -p fork,sigkill
none "the proxy holds no capability" -A -s kotoba_egress_t -c capability,capability2,cap_userns,cap2_userns
none "the proxy touches no grants or audit trail" -A -s kotoba_egress_t -t kotoba_var_lib_t
none "the proxy reads no broker.conf (its policy is on its command line)" -A -s kotoba_egress_t -t kotoba_etc_t
none "the proxy runs no program" -A -s kotoba_egress_t -c file -p execute_no_trans
none "the proxy enters no other domain" -A -s kotoba_egress_t -c process -p transition,dyntransition
none "the proxy traces nothing" -A -s kotoba_egress_t -c process -p ptrace
for t in kotoba_broker_t kotoba_monitor_t kotoba_worker_t kotoba_snippet_t; do
	none "the proxy signals no $t" -A -s kotoba_egress_t -t $t -c process -p sigkill,signal,sigstop
done
for t in kotoba_runtime_t kotoba_tmp_t kotoba_broker_tmpfs_t kotoba_log_t; do
	none "the proxy creates or changes no $t file" -A -s kotoba_egress_t -t $t -c file,dir,sock_file -p write,create,setattr,unlink,add_name
done
none "snippets cannot signal or trace the proxy" -A -s kotoba_snippet_t -t kotoba_egress_t -c process
none "snippets cannot reach the proxy's own sockets" -A -s kotoba_snippet_t -t kotoba_egress_t -c unix_stream_socket,tcp_socket,fd

# kotoba.fc labels the paths `make install` uses (PREFIX /usr/local and /usr).
fc_out=$(python3 - "$SRC/selinux/kotoba.fc" <<'PY'
import re, sys
rules = []
for line in open(sys.argv[1]):
    line = line.split("#")[0].strip()
    if not line:
        continue
    parts = line.split()
    rules.append((re.compile("^(?:" + parts[0] + ")$"),
                  re.search(r":(\w+_t),", parts[-1]).group(1)))
want = {}
for prefix in ("/usr/local", "/usr"):
    want.update({
        prefix + "/sbin/kotoba-brokerd": "kotoba_broker_exec_t",
        prefix + "/libexec/kotoba/kotoba-worker": "kotoba_worker_exec_t",
        prefix + "/libexec/kotoba/kotoba-monitor": "kotoba_monitor_exec_t",
        prefix + "/libexec/kotoba/kotoba-egress": "kotoba_egress_exec_t",
        prefix + "/lib/kotoba/kotoba-worker": "kotoba_worker_exec_t",
        prefix + "/libexec/kotoba/kotoba_receipt.py": "usr_t",
        prefix + "/libexec/kotoba/__pycache__/kotoba_receipt.cpython-311.pyc": "usr_t",
        prefix + "/lib/systemd/system/kotoba-brokerd.service": "kotoba_unit_t",
        prefix + "/lib/systemd/system/kotoba-brokerd.socket": "kotoba_unit_t",
    })
want.update({
    "/usr/bin/kotoba-brokerd": "kotoba_broker_exec_t",
    "/etc/kotoba": "kotoba_etc_t",
    "/etc/kotoba/broker.conf": "kotoba_etc_t",
    "/etc/kotoba/upstream-ca.pem": "cert_t",
    "/var/lib/kotoba": "kotoba_var_lib_t",
    "/var/lib/kotoba/kotoba.db-wal": "kotoba_var_lib_t",
    "/run/kotoba/broker.sock": "kotoba_runtime_t",
    "/run/kotoba/egress-ca.pem": "kotoba_egress_ca_t",
    "/var/log/kotoba/broker.log": "kotoba_log_t",
})
bad = []
for path, t in sorted(want.items()):
    got = [ty for rx, ty in rules if rx.match(path)]
    if got[-1:] != [t]:
        bad.append(f"{path}: {got or 'no rule'}, want {t}")
for path in ("/usr/local/bin/kotoba", "/etc/kotoba.conf", "/var/lib/kotobax"):
    if any(rx.match(path) for rx, _ in rules):
        bad.append(f"{path} should keep its default label")
print("\n".join(bad))
PY
)
if [ -z "$fc_out" ]; then
	ok "kotoba.fc labels the installed paths (and nothing else)"
else
	bad "kotoba.fc:"
	echo "$fc_out" | sed 's/^/     /'
fi

# The broker's and the monitor's capabilities in the policy, together, are
# exactly the unit's bounding set (the unit holds both processes).
unit_caps=$(sed -n 's/^CapabilityBoundingSet=//p' "$SRC/dist/systemd/kotoba-brokerd.service" |
	tr ' ' '\n' | sed 's/^CAP_//' | tr 'A-Z' 'a-z' | grep . | sort | tr '\n' ' ')
pol_caps=$(for d in kotoba_broker_t kotoba_monitor_t; do
		sesearch -A -s $d -c capability "$POL" 2>/dev/null
	done | sed -n 's/.*capability \(.*\);.*/\1/p' | tr -d '{}' | tr ' ' '\n' | grep . |
	sort -u | tr '\n' ' ')
if [ -n "$unit_caps" ] && [ "$unit_caps" = "$pol_caps" ]; then
	ok "broker and monitor capabilities: policy = unit's CapabilityBoundingSet ($unit_caps)"
else
	bad "broker and monitor capabilities differ: unit [$unit_caps], policy [$pol_caps]"
fi

finish
