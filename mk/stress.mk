# The timing-sensitive suites again with every CPU loaded (tests/stress.sh,
# stress-ng): a verdict that depends on the machine's speed fails here.
#
#   make check-stress   the integration suite cold and warm, the client
#                       libraries and the fault suite, under load (not part
#                       of `make check`: it takes as long again as the
#                       suites it runs; README.md, "Testing")

STRESS_SUITES := check-integration check-client check-faults

.PHONY: check-stress stress-deps
stress-deps:
	@./tests/deps.sh stress-ng

check-stress: all reachable stress-deps
	./tests/stress.sh $(MAKE) --no-print-directory $(STRESS_SUITES)
	./tests/stress.sh $(MAKE) --no-print-directory INTEGRATION_WARM=yes check-integration
	@echo "make check-stress: all suites passed under load"
