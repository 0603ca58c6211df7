# `make bench-shards-chaos`: the safety row of the scale-out benchmark: RUNS short seeded runs of 3 active replicas
# (--active-shards) on the simulated apiserver, each with a replica SIGKILLed, one SIGSTOPped past its Lease and
# nodes moved between shards while binds are in flight (bench/shards_chaos.py; docs/scale-out.md, "Chaos runs").
# Included (optionally) from the top-level Makefile. Not part of `make test`. Needs only the venv.
#
#   make bench-shards-chaos RUNS=50 SEED=1               runs with seeds 1..50, added to CHAOS_OUT
#   make bench-shards-chaos RUNS=1000 SEED=1 BUDGET=840  stops starting runs after 14 minutes (chunks under the lock)
#   PARALLEL=4                                           runs at once, each its own apiserver and replicas
#   HEAVY_LOCK=/tmp/volcano-py-heavy.lock                held by the whole call ('' = none)
.PHONY: bench-shards-chaos

HEAVY_LOCK ?= /tmp/volcano-py-heavy.lock
RUNS ?= 20
SEED ?= 1
BUDGET ?= 0
PARALLEL ?= 4
CHAOS_OUT ?= bench/results/shards-chaos.jsonl

bench-shards-chaos: venv
	$(if $(HEAVY_LOCK),flock $(HEAVY_LOCK)) nice -n 10 $(BIN)/python bench/shards_chaos.py --runs $(RUNS) \
		--seed $(SEED) --parallel $(PARALLEL) --budget $(BUDGET) --out $(CHAOS_OUT)
