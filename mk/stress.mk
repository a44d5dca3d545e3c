# make check-stress: the suites whose verdicts involve waiting (integration
# cold, faults, clients, and the sanitizer pass with spares, the slowest
# build) again with every CPU kept busy by stress-ng (tests/stress.sh).
# Not part of `make check`: it takes two to three times as long as those
# suites on a quiet machine.
.PHONY: check-stress
check-stress: all reachable service-user
	@./tests/deps.sh stress-ng
	./tests/stress.sh $(MAKE) --no-print-directory check-integration \
		check-client check-faults
	./tests/stress.sh $(MAKE) --no-print-directory check-asan
	@echo "make check-stress: all suites passed under load"
