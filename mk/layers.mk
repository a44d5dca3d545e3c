# The broker's modules in layers, with no call cycle among them
# (ARCHITECTURE.md, "Layers"): tests/layers.sh reads the calls from the
# built objects.  The monitor's objects and executable are checked too:
# nothing it links reaches a parser (msgpack, PCRE2, SQLite).
.PHONY: check-layers
check-layers: $(BROKER_OBJ) $(MONITOR_OBJ) $(BUILD)/kotoba-monitor
	@./tests/layers.sh $(BUILD) $(MONITOR_OBJ)
CHECK_EXTRA += check-layers
