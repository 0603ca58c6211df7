# Reliability suites (issue 11), included from the Makefile. See RELIABILITY.md.
#
#   make chaos   faults on a real control plane: kill -9 of the scheduler (VOLCANO_CHAOS_ROUNDS rounds, default
#                3; run 10 locally), kube-apiserver and etcd restarts, a node going NotReady, 410 Gone.
#   make fuzz    hypothesis over everything a user writes, VOLCANO_FUZZ_EXAMPLES examples per target (10,000).
#   make fuzz-api  hostile Pods, PodGroups, Volcano Jobs and Queues (1 to 5 fields each gone wrong) created on a real
#                control plane while a normal gang is scheduled in another namespace (issue 31, tests/fuzz_api):
#                VOLCANO_FUZZ_API_EXAMPLES examples (200; each ~6 s). Fixed seed; VOLCANO_FUZZ_RANDOM=1 draws afresh.
#   make soak    SOAK_MINUTES (60) of Jobs and nodes coming and going on the test control plane: the scheduler's
#                and controllers' RSS and threads flat after warm-up, no partial gang, no over-commit. Not in
#                `make test`. SOAK_ARGS passes more flags (tools/soak.py --help).
#
# CI: `make test` also runs `chaos` with the default 3 rounds (about 2-3 minutes on 2 cores; the budget is 8), and
# `fuzz-api-ci`: the API fuzz with its fixed seed and 12 examples (about 2 minutes, its own control plane).
# The fuzz targets already run under `make unit` with ~100 examples each (tests/fuzz is not marked e2e).

.PHONY: chaos fuzz fuzz-api fuzz-api-ci soak

VOLCANO_CHAOS_ROUNDS ?= 3
VOLCANO_FUZZ_EXAMPLES ?= 10000
VOLCANO_FUZZ_API_EXAMPLES ?= 200
SOAK_MINUTES ?= 60
SOAK_ARGS ?=

chaos: venv cluster-bins
	VOLCANO_PY_E2E_REQUIRE=1 VOLCANO_CHAOS_ROUNDS=$(VOLCANO_CHAOS_ROUNDS) $(BIN)/pytest -q -s -m chaos tests/chaos

fuzz: venv
	VOLCANO_FUZZ_EXAMPLES=$(VOLCANO_FUZZ_EXAMPLES) $(BIN)/pytest -q tests/fuzz

fuzz-api: venv cluster-bins
	VOLCANO_PY_E2E_REQUIRE=1 VOLCANO_FUZZ_API_EXAMPLES=$(VOLCANO_FUZZ_API_EXAMPLES) $(BIN)/pytest -q -s -m fuzz_api tests/fuzz_api

# The fixed seed, 12 examples (the test's default): what `make test` runs.
fuzz-api-ci: venv cluster-bins
	VOLCANO_PY_E2E_REQUIRE=1 $(BIN)/pytest -q -s -m fuzz_api tests/fuzz_api

soak: venv cluster-bins
	$(BIN)/python tools/soak.py --duration $(SOAK_MINUTES) $(SOAK_ARGS)

test: chaos fuzz-api-ci
