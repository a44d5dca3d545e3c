# The broker's modules in layers, with no call cycle among them
# (ARCHITECTURE.md, "Layers"): tests/layers.sh reads the calls from the
# built objects.
.PHONY: check-layers
check-layers: $(BROKER_OBJ)
	@./tests/layers.sh $(BUILD)
CHECK_EXTRA += check-layers
