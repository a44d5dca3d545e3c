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

# The offline procedure and its document go with the programs, for an
# auditor's machine: $(DATADIR)/kotoba/kotoba-audit-verify.sh and AUDIT.md.
.PHONY: install-audit uninstall-audit
install: install-audit
install-audit:
	install -d -m 0755 $(DESTDIR)$(DATADIR)/kotoba
	install -m 0755 dist/kotoba-audit-verify.sh $(DESTDIR)$(DATADIR)/kotoba/kotoba-audit-verify.sh
	install -m 0644 AUDIT.md $(DESTDIR)$(DATADIR)/kotoba/AUDIT.md
uninstall: uninstall-audit
uninstall-audit:
	rm -f $(DESTDIR)$(DATADIR)/kotoba/kotoba-audit-verify.sh $(DESTDIR)$(DATADIR)/kotoba/AUDIT.md
