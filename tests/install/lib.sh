# Sourced by the install tests: counting and reporting checks.
# check() writes the command's output under $T, which the script sets.
pass=0
fail=0

ok() { pass=$((pass + 1)); echo "ok   $*"; }
bad() { fail=$((fail + 1)); echo "FAIL $*"; }
# check DESC CMD...: CMD succeeds; its stderr is shown when it does not.
check() {
	local desc=$1
	shift
	if "$@" >"$T/out" 2>"$T/err"; then
		ok "$desc"
	else
		bad "$desc"
		sed 's/^/     /' "$T/err" "$T/out" | head -20
	fi
}
