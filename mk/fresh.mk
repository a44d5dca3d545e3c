# make check-fresh: the README's commands on a bare Debian 12 root file
# system with none of the build's packages (tests/fresh/check.sh).  Part of
# `make check`; as an ordinary user it is skipped, with the reason.
.PHONY: check-fresh
CHECK_EXTRA += check-fresh
check-fresh:
	./tests/fresh/check.sh $(abspath $(BUILD))
