# The escape suite (tests/escape): hostile snippets through the real broker,
# worker and kernel, under both profiles, once with [sandbox] landlock = yes
# and once with landlock = no (each mode writes its own broker config).
# Prints one line per case and mode, then "N passed, N failed".
.PHONY: check-escape
check-escape: all reachable
	KOTOBA_BUILD=$(abspath $(BUILD)) /usr/bin/python3 tests/escape/run.py

CHECK_EXTRA += check-escape
