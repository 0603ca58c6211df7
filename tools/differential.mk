# Differential oracle (issue 16): seeded random workloads under Volcano and under volcano-py, compared per gang
# (bound or not, how many pods bound) and per queue (allocated requests). Included (optionally) from the Makefile.
# See tools/differential/run.py and the differential section of CONFORMANCE.md.
#
#   make differential                          200 workloads from seed 1, both sides, rewrites CONFORMANCE.md's section
#   make differential DIFF_WORKLOADS=5 DIFF_SEED=100
#   make differential RERUN=17                 one workload again (report in ~/.cache/volcano-py/differential/rerun-17)
#   make differential DIFF_ARGS='--only-side volcano-py --schedule-period 0.5'
#   make differential FAMILY=preemption        the gang-eviction family (issue 32: tools/differential/preemption.py,
#                                              Volcano's gang-eviction conf), its own CONFORMANCE.md section
#   make differential FAMILY=preemption DIFF_WORKLOADS=20 DIFF_SEED=1
#   make differential FAMILY=gated             pods opting in to queue admission by scheduling gates (gated.py;
#                                              SchedulingGatesQueueAdmission on in both sides): report only
#
# Volcano's binaries come from tools/conformance/build-volcano.sh (built when missing, without the e2e suites).
.PHONY: differential differential-build

DIFF_WORKLOADS ?= 200
DIFF_SEED ?= 1
RERUN ?=
DIFF_ARGS ?=
FAMILY ?= random
HEAVY_LOCK ?= /tmp/volcano-py-heavy.lock

differential-build: cluster-bins
	@test -x "$$(tools/conformance/build-volcano.sh --print-dir)/bin/vc-scheduler" || \
		SUITES=" " $(if $(HEAVY_LOCK),flock $(HEAVY_LOCK)) tools/conformance/build-volcano.sh

differential: venv helm-bin differential-build
	cd tools && HEAVY_LOCK=$(HEAVY_LOCK) ../$(BIN)/python -m differential.run --family $(FAMILY) \
		$(if $(RERUN),$(foreach s,$(RERUN),--rerun $(s)),--workloads $(DIFF_WORKLOADS) --seed $(DIFF_SEED)) \
		--command 'make differential$(if $(filter-out random,$(FAMILY)), FAMILY=$(FAMILY))$(if $(RERUN), RERUN="$(RERUN)",$(if $(filter-out 200,$(DIFF_WORKLOADS)), DIFF_WORKLOADS=$(DIFF_WORKLOADS))$(if $(filter-out 1,$(DIFF_SEED)), DIFF_SEED=$(DIFF_SEED)))' \
		$(DIFF_ARGS)

# The quick check: Volcano's recorded outcomes of the last `make differential` against volcano-py's simulator
# (no control plane, about a minute). RUN names the recorded run.
.PHONY: differential-sim
RUN ?= seed1-n200
differential-sim: venv
	cd tools && ../$(BIN)/python -m differential.simreplay --run $(RUN)
