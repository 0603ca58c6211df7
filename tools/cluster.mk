# Placeholder until the control-plane harness lands.
.PHONY: cluster-bins dev-cluster
cluster-bins:
	@true
