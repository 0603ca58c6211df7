# `make bench-live-shards`: two scheduler replicas with `--active-shards 2` against one plain replica, on one test
# control plane, alternating rounds (bench/bench_live_shards.py; docs/scale-out.md, "N active replicas"). Included
# (optionally) from the top-level Makefile. Not part of `make test`.
#
#   make bench-live-shards                                                  300 x 2,000, 3 rounds
#   make bench-live-shards BENCH_LIVE_SHARDS_ARGS='--size 300x2000 --size 1000x10000'
#   HEAVY_LOCK=/tmp/volcano-py-heavy.lock                                   held by the whole run ('' = none)
.PHONY: bench-live-shards

HEAVY_LOCK ?= /tmp/volcano-py-heavy.lock
BENCH_LIVE_SHARDS_ARGS ?=

# the Go loader (tools/k8s/bindloop) creates the nodes, PodGroups and pods; a no-op when its cache holds it
bench-live-shards: venv cluster-bins
	@$(if $(HEAVY_LOCK),flock $(HEAVY_LOCK)) tools/build-bindloop.sh >/dev/null
	$(if $(HEAVY_LOCK),flock $(HEAVY_LOCK)) $(BIN)/python bench/bench_live_shards.py $(BENCH_LIVE_SHARDS_ARGS)
