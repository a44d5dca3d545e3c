# `kotoba mcp` (client/mcp*.c) driven by the official MCP TypeScript SDK as
# a real client (tests/mcp/driver.mjs) against a real broker, and one smoke
# run of the MCP Inspector's CLI mode.  Their versions are pinned in
# tests/mcp/package.json and package-lock.json and installed with `npm ci`
# into $(BUILD)/mcp.  node and npm come from Debian
# (nodejs, npm) through tests/deps.sh when npm is missing; a machine whose
# nodejs package already carries npm (NodeSource's conflicts with Debian's
# npm) keeps its own.  `make check` runs check-mcp and check-mcp-asan.

MCP_NODE_DIR := $(BUILD)/mcp
MCP_DEB_PKGS := nodejs npm

$(MCP_NODE_DIR)/node_modules/.package-lock.json: tests/mcp/package.json tests/mcp/package-lock.json
	@command -v npm >/dev/null 2>&1 || ./tests/deps.sh $(MCP_DEB_PKGS)
	@mkdir -p $(MCP_NODE_DIR)
	cp tests/mcp/package.json tests/mcp/package-lock.json $(MCP_NODE_DIR)/
	cd $(MCP_NODE_DIR) && npm ci --no-audit --no-fund --loglevel=error

.PHONY: check-mcp check-mcp-asan mcp-deps
mcp-deps: $(MCP_NODE_DIR)/node_modules/.package-lock.json

check-mcp: all reachable mcp-deps
	@./tests/deps.sh python3-matplotlib
	KOTOBA_BUILD=$(abspath $(BUILD)) $(PYTEST) tests/mcp/test_mcp.py

# The same against the sanitizer build's kotoba and broker.
check-mcp-asan: asan-build reachable mcp-deps
	@./tests/deps.sh python3-matplotlib
	KOTOBA_BUILD=$(abspath $(BUILD))/asan KOTOBA_MCP_NODE=$(abspath $(MCP_NODE_DIR)) \
		$(PYTEST) tests/mcp/test_mcp.py

CHECK_EXTRA += check-mcp check-mcp-asan
