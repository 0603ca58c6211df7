# `make bench-shards`: N scheduler replicas, each the real `volcano-py scheduler` in its own process, against a
# simulated apiserver in virtual time (bench/bench_shards.py, bench/shardsim/; docs/scale-out.md, "Simulated
# apiserver"). Included (optionally) from the top-level Makefile. Not part of `make test`. No control plane and no
# Go build: it needs only the venv.
#
#   make bench-shards                                   one replica at 2,000 nodes, then 4 at 8,000 nodes
#   make bench-shards BENCH_SHARDS_ARGS='--skip-one --nodes 50000 --running 500000 --pending 20000 --replicas 4'
#   make bench-shards BENCH_SHARDS_ARGS='--active --nodes 8000 --running 80000 --replicas 4'   volcano-py's
#                                                       --active-shards, both phases on one cluster (--kill-one S)
#   make bench-shards BENCH_SHARDS_ARGS='--active --nodes 500 --running 0 --pending 48000 --queues 1,2,3
#       --turnover 0.05 --turnover-after 60 --turnover-for 160'   queues of those weights, 5% of the gangs ended
#                                                       and replaced every 10 s: each queue's allocation, 4 vs 1
#   HEAVY_LOCK=/tmp/volcano-py-heavy.lock               held by the whole run ('' = none)
.PHONY: bench-shards

HEAVY_LOCK ?= /tmp/volcano-py-heavy.lock
BENCH_SHARDS_ARGS ?=

bench-shards: venv
	$(if $(HEAVY_LOCK),flock $(HEAVY_LOCK)) nice -n 10 $(BIN)/python bench/bench_shards.py $(BENCH_SHARDS_ARGS)
