# Faults and crash safety (tests/faults/), and the broker under valgrind.
#
#   make check-faults     kill -9 of the broker and of workers, a full or
#                         read-only state directory, a missing interpreter,
#                         a vanished working directory, /proc unreadable;
#                         cold and with spare interpreters ([sandbox] warm)
#   make check-valgrind   the integration suite with every broker under
#                         valgrind memcheck: 0 errors, 0 bytes definitely
#                         lost (not part of `make check`: README.md,
#                         "Testing")

VALGRIND_DIR := $(abspath $(BUILD))/valgrind
VALGRIND := valgrind --tool=memcheck --leak-check=full --show-leak-kinds=definite \
	--errors-for-leak-kinds=definite --error-exitcode=99 --track-fds=no \
	--log-file=$(VALGRIND_DIR)/vg-%p.log

.PHONY: check-faults check-valgrind

check-faults: all reachable
	KOTOBA_BUILD=$(abspath $(BUILD)) KOTOBA_WARM=no $(PYTEST) tests/faults
	KOTOBA_BUILD=$(abspath $(BUILD)) KOTOBA_WARM=yes $(PYTEST) tests/faults

check-valgrind: all reachable
	@./tests/deps.sh valgrind
	@# valgrind opens a log per process, also in the broker's forked children,
	@# which run as the service user: the directory must take their files
	@rm -rf $(VALGRIND_DIR) && mkdir -p $(VALGRIND_DIR) && chmod 1777 $(VALGRIND_DIR)
	KOTOBA_BUILD=$(abspath $(BUILD)) KOTOBA_BROKER_WRAPPER="$(VALGRIND)" \
		$(PYTEST) tests/integration
	@/usr/bin/python3 tests/faults/valgrind_report.py $(VALGRIND_DIR)

CHECK_EXTRA += check-faults
