# `make bench-peers` (issue 20): volcano-py against Volcano's vc-scheduler and kube-scheduler, with a Go client-go
# bind loop as the apiserver's ceiling (and, as the `limit`, the same loop sending the events and PodGroup status
# Volcano writes after a bind), in one run. Included (optionally) from the top-level Makefile. Not part of
# `make test`. See bench/bench_peers.py and BENCHMARKS.md.
#
#   make bench-peers                                   all five sizes, 3 rounds
#   make bench-peers BENCH_PEERS_ARGS=--profile        and one more volcano-py run at 1,000 x 10,000 under py-spy
#   make bench-peers BENCH_PEERS_ARGS='--size tp:300x2000 --rounds 1'
#   make bench-peers BENCH_PEERS_ARGS='--size churn:300x30 --rounds 2'   the churn size (bench/peers_churn.py;
#                                                     not in the default run: 2 rounds took 10 min)
#   make bench-peers BENCH_PEERS_ARGS='--py-off events'   and volcano-py with its events off (information only)
#   HEAVY_LOCK=/tmp/volcano-py-heavy.lock              held by the Go builds and by the whole run ('' = none)
.PHONY: bench-peers bench-peers-build

HEAVY_LOCK ?= /tmp/volcano-py-heavy.lock
BENCH_PEERS_ARGS ?=

# Volcano's components (not its e2e suites) from the snapshot, and the bind loop from tools/k8s; both no-ops when
# their cache already holds them (the bind loop and the churn sizes' generator, churngen).
bench-peers-build: venv cluster-bins
	@$(if $(HEAVY_LOCK),flock $(HEAVY_LOCK)) tools/conformance/build-volcano.sh --no-suites
	@$(if $(HEAVY_LOCK),flock $(HEAVY_LOCK)) tools/build-bindloop.sh --all >/dev/null

bench-peers: bench-peers-build
	$(if $(findstring --profile,$(BENCH_PEERS_ARGS)),@test -x $(BIN)/py-spy || $(BIN)/pip install -q py-spy)
	$(if $(HEAVY_LOCK),flock $(HEAVY_LOCK)) $(BIN)/python bench/bench_peers.py $(BENCH_PEERS_ARGS)
