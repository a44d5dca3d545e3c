# The audit trail (AUDIT.md).  Its tests run the shipped offline procedure,
# dist/kotoba-audit-verify.sh, which needs the sqlite3 and openssl tools:
# installed (tests/deps.sh) before any integration run.
#
#   make check-audit    the tamper cases alone

.PHONY: audit-deps check-audit

audit-deps:
	@./tests/deps.sh sqlite3 openssl

check-integration: audit-deps

check-audit: all reachable audit-deps
	KOTOBA_BUILD=$(abspath $(BUILD)) $(PYTEST) tests/integration/test_audit.py
