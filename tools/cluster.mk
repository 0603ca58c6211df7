# Test control plane: kube-apiserver, kube-controller-manager, kubectl (k8s.io/kubernetes), etcd, kwok.
# Included by the top-level Makefile. See docs/control-plane.md.
#
#   make cluster-bins          build the pinned binaries into a cache outside the checkout (skips what exists)
#                              and symlink them into .bin/
#   make dev-cluster           local control plane with fake GPU nodes; runs until Ctrl-C
#        NODES=4 GPUS=8 NODES_PER_RACK=2 RACKS_PER_ZONE=1 KUBECONFIG_OUT=.bin/dev-cluster.kubeconfig
.PHONY: cluster-bins dev-cluster cluster-bins-dir

NODES ?= 4
GPUS ?= 8
NODES_PER_RACK ?= 2
RACKS_PER_ZONE ?= 1
KUBECONFIG_OUT ?= .bin/dev-cluster.kubeconfig

cluster-bins:
	@tools/build-bins.sh

cluster-bins-dir:
	@tools/build-bins.sh --print-dir

dev-cluster: venv cluster-bins
	$(BIN)/python tools/dev_cluster.py --nodes $(NODES) --gpus $(GPUS) --nodes-per-rack $(NODES_PER_RACK) \
		--racks-per-zone $(RACKS_PER_ZONE) --kubeconfig $(KUBECONFIG_OUT)
