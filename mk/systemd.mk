# The systemd units (dist/systemd/), checked by `make check`:
#   make check-systemd   installs into a throwaway PREFIX and runs
#                        tests/install/test_units.sh: systemd-analyze verify,
#                        the offline security exposure (at most
#                        EXPOSURE_MAX, 35 = "3.5"), and, as root, the broker
#                        started with exactly the unit's capability bounding
#                        set and no_new_privs.
#
#   systemd-analyze security --offline=true dist/systemd/kotoba-brokerd.service
# shows the per-option table (it needs no installed binary).

# 3.5: the worker makes a user and a mount namespace per unattended
# snippet and mounts its secret masks there (RestrictNamespaces=user mnt,
# mount in SystemCallFilter=), which systemd scores 0.5.
EXPOSURE_MAX ?= 35

.PHONY: check-systemd
CHECK_EXTRA += check-systemd
check-systemd: all reachable
	@./tests/deps.sh systemd util-linux
	BUILD=$(abspath $(BUILD)) EXPOSURE_MAX=$(EXPOSURE_MAX) \
		./tests/install/test_units.sh
