# Reliability suites (issue 11), included from the Makefile. See RELIABILITY.md.
#
#   make chaos   faults on a real control plane: kill -9 of the scheduler (VOLCANO_CHAOS_ROUNDS rounds, default
#                3; run 10 locally), kube-apiserver and etcd restarts, a node going NotReady, 410 Gone.
#   make fuzz    hypothesis over everything a user writes, VOLCANO_FUZZ_EXAMPLES examples per target (10,000).
#   make soak    SOAK_MINUTES (60) of Jobs and nodes coming and going on the test control plane: the scheduler's
#                and controllers' RSS and threads flat after warm-up, no partial gang, no over-commit. Not in
#                `make test`. SOAK_ARGS passes more flags (tools/soak.py --help).
#
# CI: `make test` also runs `chaos` with the default 3 rounds (about 2-3 minutes on 2 cores; the budget is 8).
# The fuzz targets already run under `make unit` with ~100 examples each (tests/fuzz is not marked e2e).

.PHONY: chaos fuzz soak

VOLCANO_CHAOS_ROUNDS ?= 3
VOLCANO_FUZZ_EXAMPLES ?= 10000
SOAK_MINUTES ?= 60
SOAK_ARGS ?=

chaos: venv cluster-bins
	VOLCANO_PY_E2E_REQUIRE=1 VOLCANO_CHAOS_ROUNDS=$(VOLCANO_CHAOS_ROUNDS) $(BIN)/pytest -q -s -m chaos tests/chaos

fuzz: venv
	VOLCANO_FUZZ_EXAMPLES=$(VOLCANO_FUZZ_EXAMPLES) $(BIN)/pytest -q tests/fuzz

soak: venv cluster-bins
	$(BIN)/python tools/soak.py --duration $(SOAK_MINUTES) $(SOAK_ARGS)

test: chaos
