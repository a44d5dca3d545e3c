# sandbox = docker against a real container engine (tests/container/).
#
#   make check-container   as root: tests/container/setup.sh (installs podman,
#                          runc and debootstrap; the group kotoba-engine and the
#                          test user kotoba-ct; a rootful podman API service on
#                          /run/kotoba-test-engine/podman.sock; the image
#                          localhost/kotoba-test-python:bookworm, built once by
#                          debootstrap and cached in /var/cache/kotoba-test),
#                          then the pytest suite against $(BUILD), then
#                          teardown.sh (stops the service setup started, once
#                          no other run uses it): tests/container/check.sh.
#
# Not root, or podman not installable: every test is skipped with the reason,
# which is printed; any other setup failure fails the target.

.PHONY: check-container
CHECK_EXTRA += check-container
check-container: all reachable
	@mkdir -p $(abspath $(BUILD))/container
	KOTOBA_BUILD=$(abspath $(BUILD)) KOTOBA_SANITIZED=$(SANITIZED) \
		KOTOBA_CT_SKIP_FILE=$(abspath $(BUILD))/container/skip \
		./tests/container/check.sh $(PYTEST)

# The same suite against the sanitizer build (check-asan builds it): the
# broker's container table and the worker's engine commands under
# AddressSanitizer and UBSan, with real containers.
.PHONY: check-container-asan
CHECK_EXTRA += check-container-asan
check-container-asan: asan-build
	$(ASAN_MAKE) check-container
