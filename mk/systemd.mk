# The systemd units (dist/systemd/), checked by `make check`:
#   make check-systemd   installs into a throwaway PREFIX and runs
#                        tests/install/test_units.sh: systemd-analyze verify,
#                        the offline security exposure (at most
#                        EXPOSURE_MAX, 36 = "3.6"), and, as root, the broker
#                        started with exactly the unit's capability bounding
#                        set and no_new_privs.
#
#   systemd-analyze security --offline=true dist/systemd/kotoba-brokerd.service
# shows the per-option table (it needs no installed binary).

# 3.6: the worker makes a user, a mount and a network namespace per
# unattended snippet, mounts its secret masks there and gives it a network
# of its own with only the egress proxy (RestrictNamespaces=user mnt net,
# mount in SystemCallFilter=), which systemd scores 0.6.
EXPOSURE_MAX ?= 36

.PHONY: check-systemd
CHECK_EXTRA += check-systemd
check-systemd: all reachable
	@./tests/deps.sh systemd util-linux
	BUILD=$(abspath $(BUILD)) EXPOSURE_MAX=$(EXPOSURE_MAX) \
		./tests/install/test_units.sh
