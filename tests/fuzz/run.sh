#!/bin/sh
# Runs the libFuzzer targets: `run.sh fuzz|check BUILD_FUZZ_DIR SECONDS TARGET...`.
#   check: replay tests/fuzz/regressions/TARGET/* and the seed corpus once,
#          then fuzz for SECONDS;  fuzz: fuzz for SECONDS.
# Prints one line per target (executions, crashes); exits 1 if any crashed.
# New corpus entries go to BUILD_FUZZ_DIR/corpus/TARGET, never into the
# checked-in seeds; crashes to BUILD_FUZZ_DIR/crashes/TARGET.
set -u
mode=$1 dir=$2 secs=$3
shift 3
failed=0
for t in "$@"; do
	bin=$dir/fuzz_$t
	seeds=tests/fuzz/corpus/$t
	work=$dir/corpus/$t
	crashes=$dir/crashes/$t
	log=$dir/fuzz_$t.log
	mkdir -p "$work" "$crashes"
	dict=""
	[ -f "tests/fuzz/dict/$t.dict" ] && dict="-dict=tests/fuzz/dict/$t.dict"
	if [ "$mode" = check ]; then
		# libFuzzer runs each file given as an argument once.
		set -- $(ls -d tests/fuzz/regressions/"$t"/* "$seeds"/* 2>/dev/null)
		if [ $# -gt 0 ] && ! "$bin" -runs=1 "$@" >"$log.replay" 2>&1; then
			echo "fuzz_$t: a regression or seed input fails; see $log.replay"
			tail -30 "$log.replay"
			failed=1
			continue
		fi
		echo "fuzz_$t: replayed $# regression and seed inputs"
	fi
	before=$(ls "$crashes" | wc -l)
	# One job, bounded time and memory: the machine is shared.
	"$bin" -max_total_time="$secs" -timeout=10 -rss_limit_mb=2048 -max_len=8192 \
		-print_final_stats=1 -artifact_prefix="$crashes/" $dict "$work" "$seeds" \
		>"$log" 2>&1
	rc=$?
	execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
	new=$(( $(ls "$crashes" | wc -l) - before ))
	line="fuzz_$t: ${execs:-?} executions in ${secs} s, $new crashes (exit $rc)"
	echo "$line"
	if [ "$rc" -ne 0 ] || [ "$new" -ne 0 ]; then
		failed=1
		grep -m5 -E "ERROR|invariant|SUMMARY" "$log"
		echo "  log: $log; inputs: $crashes/ (copy each, once fixed, to tests/fuzz/regressions/$t/)"
	fi
done
exit $failed
