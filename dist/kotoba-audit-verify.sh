#!/bin/sh
# SPDX-License-Identifier: MIT
# Checks a copy of the kotoba audit database with sqlite3 and openssl
# alone, following AUDIT.md step by step; it shares no code with kotoba.
#
#   kotoba-audit-verify.sh COPY.db [--key HEX|--key-file FILE] [--anchors LOG]
#
# Prints what it checked and one line per problem, "<chain|seal|anchor> at
# row N: ...", as `kotoba audit verify --db` does.  Exit 0: no problem;
# 1: problems; 2: usage or a tool failed.  Slow on big trails (one openssl
# run per key step); it is a cross-check, not the everyday tool.
set -eu

usage() { echo "usage: $0 COPY.db [--key HEX|--key-file FILE] [--anchors LOG]" >&2; exit 2; }
[ $# -ge 1 ] || usage
db=$1; shift
key=""; anchors=""
while [ $# -gt 0 ]; do
	case $1 in
	--key) [ $# -ge 2 ] || usage; key=$2; shift 2 ;;
	--key-file) [ $# -ge 2 ] || usage; key=$(head -n 1 "$2"); shift 2 ;;
	--anchors) [ $# -ge 2 ] || usage; anchors=$2; shift 2 ;;
	*) usage ;;
	esac
done
[ -r "$db" ] || { echo "$0: cannot read $db" >&2; exit 2; }
case $key in
"") ;;
*[!0-9a-fA-F]*) echo "$0: the key is 64 hex digits" >&2; exit 2 ;;
*) [ ${#key} -eq 64 ] || { echo "$0: the key is 64 hex digits" >&2; exit 2; } ;;
esac
for tool in sqlite3 openssl; do
	command -v $tool >/dev/null || { echo "$0: needs $tool" >&2; exit 2; }
done

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
q() { sqlite3 -batch -readonly -noheader -list "$db" "$@"; }
ZERO=0000000000000000000000000000000000000000000000000000000000000000

# Versions 3 and 4 have the same audit tables (4 added grant terms); 5
# added the receipt column `blocked`, which a row hashes only when it is
# not empty, so a copy of 3 or 4 reads it as empty; 6 added `after_seq`,
# hashed only when not 0, read as 0 from an older copy.
case "$(q 'PRAGMA user_version')" in
3|4) blocked="X''" after=0 ;;
5) blocked="a.blocked" after=0 ;;
6) blocked="a.blocked" after="a.after_seq" ;;
*) echo "$0: $db is not a version 3 to 6 kotoba audit database" >&2; exit 2 ;;
esac

# 1. The hashed bytes of every row (AUDIT.md, "Row hash"), as hex: a
# field is 'i' + 8-byte big-endian integer, 's' + 8-byte big-endian length
# + bytes, or 'n'.  The snippet text is audit_code's when code_ref is 1.
enc() {
	echo "CASE typeof($1) WHEN 'integer' THEN '69' || printf('%016X', $1)" \
	     "WHEN 'null' THEN '6E'" \
	     "ELSE '73' || printf('%016X', length(CAST($1 AS BLOB))) || hex($1) END"
}
fields=""
for f in seq time_ms uid pid run_id event code sha256 labels mode decision approver \
	 profile has_exit exit_code signal timed_out duration_ms; do
	fields="$fields || $(enc "r.$f")"
done
fields="$fields || CASE WHEN length(r.blocked) > 0 THEN $(enc r.blocked) ELSE '' END"
fields="$fields || CASE WHEN r.after_seq != 0 THEN $(enc r.after_seq) ELSE '' END"
rows="SELECT a.seq, a.time_ms, a.uid, a.pid, a.run_id, a.event,
	CASE WHEN NOT a.code_ref THEN a.code WHEN a.code IS NULL THEN
	  (SELECT c.code FROM audit_code c WHERE c.sha256 = a.sha256) END AS code,
	a.sha256, a.labels, a.mode, a.decision, a.approver, a.profile, a.has_exit,
	a.exit_code, a.signal, a.timed_out, a.duration_ms, a.prev_hash, a.hash,
	$blocked AS blocked, $after AS after_seq
	FROM audit a"
q "SELECT 'SELECT writefile(''$tmp/h' || r.seq || ''', X''' ||
	hex(r.prev_hash) || hex('kotoba-audit-v1') || '00' $fields || ''');'
	FROM ($rows) r ORDER BY r.seq" > "$tmp/gen.sql"
sqlite3 -batch :memory: < "$tmp/gen.sql" > /dev/null

# 2. SHA-256 of each, back as SQL rows of a temporary table.
echo "CREATE TEMP TABLE calc (seq INTEGER PRIMARY KEY, h TEXT);" > "$tmp/calc.sql"
if [ -s "$tmp/gen.sql" ]; then
	(cd "$tmp" && find . -maxdepth 1 -name 'h*' | sed 's|^\./||' |
		xargs openssl dgst -sha256 -r) |
		sed -n "s/^\([0-9a-f]\{64\}\) \*h\([0-9-]*\)\$/INSERT INTO calc VALUES (\2, '\1');/p" \
		>> "$tmp/calc.sql"
fi
echo "CREATE TEMP TABLE anchor (seq INTEGER, h TEXT);" >> "$tmp/calc.sql"
if [ -n "$anchors" ]; then
	sed -n "s/.*audit-anchor seq=\([0-9][0-9]*\) hash=\([0-9a-f]\{64\}\)\([ ].*\)\{0,1\}\$/INSERT INTO anchor VALUES (\1, '\2');/p" \
		"$anchors" >> "$tmp/calc.sql"
fi

# 3. The chain, the head and the anchors, in SQL.
cat > "$tmp/check.sql" <<EOF
CREATE TEMP VIEW w AS SELECT a.seq, a.prev_hash, a.hash, c.h,
	lag(a.seq, 1, 0) OVER (ORDER BY a.seq) AS pseq,
	lag(a.hash, 1, '$ZERO') OVER (ORDER BY a.seq) AS phash
	FROM audit a LEFT JOIN calc c ON c.seq = a.seq;
CREATE TEMP VIEW last AS SELECT coalesce(max(seq), 0) AS seq,
	coalesce((SELECT hash FROM audit ORDER BY seq DESC LIMIT 1), '$ZERO') AS hash FROM audit;
SELECT 'chain at row ' || (pseq + 1) || ': rows ' || (pseq + 1) || ' to ' || (seq - 1) ||
	' are missing' FROM w WHERE seq != pseq + 1;
SELECT 'chain at row ' || seq || ': does not link to the row before' FROM w
	WHERE seq = pseq + 1 AND prev_hash IS NOT phash;
SELECT 'chain at row ' || seq || ': its contents do not match its hash' FROM w
	WHERE h IS NOT hash;
SELECT CASE WHEN NOT EXISTS (SELECT 1 FROM audit_head)
		THEN 'chain at row ' || (l.seq + 1) || ': the head row is missing'
	WHEN h.seq > l.seq THEN 'chain at row ' || (l.seq + 1) || ': the head names row ' ||
		h.seq || ', rows after ' || l.seq || ' were deleted'
	WHEN h.seq < l.seq THEN 'chain at row ' || (h.seq + 1) || ': rows after the head'
	WHEN h.hash IS NOT l.hash THEN 'chain at row ' || h.seq || ': the head hash differs'
	END FROM last l LEFT JOIN audit_head h ON 1 WHERE 1;
SELECT DISTINCT 'anchor at row ' || n.seq || ': ' ||
	CASE WHEN a.seq IS NULL THEN 'the row of an anchor is missing'
	ELSE 'the hash differs from its anchor' END
	FROM anchor n LEFT JOIN audit a ON a.seq = n.seq, last l
	WHERE n.seq > 0 AND n.seq <= l.seq AND a.hash IS NOT n.h;
SELECT 'anchor at row ' || (l.seq + 1) || ': an anchor names row ' || max(n.seq) ||
	' but the trail ends at row ' || l.seq FROM anchor n, last l WHERE n.seq > l.seq
	GROUP BY l.seq;
EOF
cat "$tmp/calc.sql" "$tmp/check.sql" | q > "$tmp/problems"
sed -i '/^$/d' "$tmp/problems"
nanch=0
[ -z "$anchors" ] || nanch=$(grep -c '^INSERT INTO anchor' "$tmp/calc.sql" || true)

# 4. The seals (AUDIT.md, "Seals"), with key[0]: walk the sealed rows in
# order, evolving the key one step at a time.
sealed=$(q "SELECT count(*) FROM audit_seal s JOIN audit a ON a.seq = s.seq")
if [ -n "$key" ]; then
	printf 'kotoba-audit-evolve-v1\001' > "$tmp/evolve"
	cat "$tmp/calc.sql" > "$tmp/seal.sql"
	echo "SELECT a.seq, coalesce(s.key_index, ''), coalesce(s.mac, ''),
		a.event = 'epoch' AND a.decision = 'sealed',
		'SELECT writefile(''$tmp/m' || a.seq || ''', X''' || hex('kotoba-audit-seal-v1') ||
		'00' || printf('%016X', coalesce(s.key_index, 0)) || hex(coalesce(c.h, '')) || ''');'
		FROM audit a LEFT JOIN audit_seal s ON s.seq = a.seq
		LEFT JOIN calc c ON c.seq = a.seq ORDER BY a.seq;" >> "$tmp/seal.sql"
	q < "$tmp/seal.sql" > "$tmp/seals"
	cut -d'|' -f5- "$tmp/seals" | sqlite3 -batch :memory: > /dev/null
	k=$(echo "$key" | tr 'A-F' 'a-f'); ki=0; start=""; last=0
	while IFS='|' read -r seq idx mac is_start rest; do
		last=$seq
		if [ -z "$idx" ]; then
			[ -z "$start" ] || echo "seal at row $seq: not sealed, though sealing began at row $start"
			continue
		fi
		if [ -z "$start" ] && ! { [ "$is_start" = 1 ] && [ "$idx" = 0 ]; }; then
			echo "seal at row $seq: sealed under key $idx, but no row began sealing before it"
			continue
		fi
		if [ -n "$start" ] && [ "$is_start" = 1 ] && [ "$idx" = 0 ]; then
			echo "seal at row $seq: begins sealing again"; continue
		fi
		if [ "$idx" -lt "$ki" ]; then
			echo "seal at row $seq: key $idx is older than key $ki"; continue
		fi
		[ -n "$start" ] || start=$seq
		while [ "$ki" -lt "$idx" ]; do
			k=$(openssl dgst -sha256 -mac HMAC -macopt "hexkey:$k" -r "$tmp/evolve" | cut -c1-64)
			ki=$((ki + 1))
		done
		want=$(openssl dgst -sha256 -mac HMAC -macopt "hexkey:$k" -r "$tmp/m$seq" | cut -c1-64)
		[ "$want" = "$mac" ] || echo "seal at row $seq: its seal does not verify under key $idx"
	done < "$tmp/seals" >> "$tmp/problems"
	[ -n "$start" ] ||
		echo "seal at row $((last + 1)): no row begins sealing under key 0" >> "$tmp/problems"
fi

# 5. The report.
set -- $(q "SELECT coalesce(min(seq), 0) || ' ' || coalesce(max(seq), 0) || ' ' || count(*) FROM audit")
echo "$db: rows $1 to $2 ($3 rows), head row $(q 'SELECT seq FROM audit_head')" \
	"hash $(q 'SELECT hash FROM audit_head')"
if grep -q '^chain' "$tmp/problems"; then echo "chain: BROKEN"; else echo "chain: intact"; fi
if [ -n "$key" ]; then
	if grep -q '^seal' "$tmp/problems"; then s=BROKEN; else s="every seal verifies"; fi
	echo "seals: $s; $sealed rows sealed"
elif [ "$sealed" = 0 ]; then
	echo "seals: rows are not sealed (no key was ever set up)"
else
	echo "seals: not checked (no --key); $sealed rows sealed"
fi
if [ -z "$anchors" ]; then
	echo "anchors: not checked (no --anchors)"
elif grep -q '^anchor' "$tmp/problems"; then
	echo "anchors: BROKEN; $nanch anchors read"
else
	echo "anchors: every anchor matches; $nanch anchors read"
fi
cat "$tmp/problems"
[ ! -s "$tmp/problems" ]
