# Conformance (issue 16): Volcano's own e2e suites, run against Volcano itself and against volcano-py.
# Included (optionally) from the top-level Makefile. See tools/conformance/harness.py and CONFORMANCE.md.
#
#   make conformance              build everything, run the suites against both sides, rewrite CONFORMANCE.md
#   make conformance-volcano      only against Volcano (vc-scheduler, vc-controller-manager, vc-webhook-manager)
#   make conformance-volcano-py   only against volcano-py (scheduler + controllers as scheduler name "volcano")
#   make conformance-build        only build Volcano and its suite binaries (tools/conformance/build-volcano.sh)
#   make conformance-report       only rewrite CONFORMANCE.md from the last results
#
#   SUITES="schedulingbase jobp"  suites to build and run (default: all five)
#   FOCUS='Gang'                  ginkgo focus regex
#   CONFORMANCE_TIMEOUT=3600      per-suite timeout, seconds
#   HEAVY_LOCK=/tmp/volcano-py-heavy.lock   held by the Go build and by each suite's control plane ('' = none)
.PHONY: conformance conformance-volcano conformance-volcano-py conformance-build conformance-report

CONFORMANCE_SUITES_ALL := schedulingbase jobp jobseq schedulingaction vcctl
SUITES ?= $(CONFORMANCE_SUITES_ALL)
FOCUS ?=
CONFORMANCE_TIMEOUT ?= 3600
HEAVY_LOCK ?= /tmp/volcano-py-heavy.lock
export HEAVY_LOCK

CONFORMANCE_RUN = $(BIN)/python tools/conformance/harness.py $(foreach s,$(SUITES),--suite $(s)) \
	--timeout $(CONFORMANCE_TIMEOUT) $(if $(FOCUS),--focus '$(FOCUS)')
CONFORMANCE_CMD = make $(MAKECMDGOALS)$(if $(filter-out $(CONFORMANCE_SUITES_ALL),$(SUITES))$(filter-out $(SUITES),$(CONFORMANCE_SUITES_ALL)), SUITES="$(SUITES)")$(if $(FOCUS), FOCUS="$(FOCUS)")

conformance-build: cluster-bins
	@SUITES="$(SUITES)" $(if $(HEAVY_LOCK),flock $(HEAVY_LOCK)) tools/conformance/build-volcano.sh

conformance: venv helm-bin conformance-build
	$(CONFORMANCE_RUN) --side volcano --side volcano-py; \
	rc=$$?; $(BIN)/python tools/conformance/report.py --command '$(CONFORMANCE_CMD)'; exit $$rc

conformance-volcano: venv helm-bin conformance-build
	$(CONFORMANCE_RUN) --side volcano; \
	rc=$$?; $(BIN)/python tools/conformance/report.py --command '$(CONFORMANCE_CMD)'; exit $$rc

conformance-volcano-py: venv helm-bin conformance-build
	$(CONFORMANCE_RUN) --side volcano-py; \
	rc=$$?; $(BIN)/python tools/conformance/report.py --command '$(CONFORMANCE_CMD)'; exit $$rc

conformance-report: venv
	$(BIN)/python tools/conformance/report.py --command '$(CONFORMANCE_CMD)'
