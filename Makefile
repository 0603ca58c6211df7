# volcano-py: `make demo` and `make test` work on a fresh machine; they create .venv themselves.
SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed-$(shell cat pyproject.toml | sha1sum | cut -c1-12)

.PHONY: venv demo test unit e2e lint bench bench-day bench-day-slice clean chromium promtool

$(STAMP): pyproject.toml
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -e '.[dev]'
	@# The checkout's own helpers (the e2e harness, the tools, the benchmarks) importable by name from the venv's
	@# python, so no script or test edits sys.path before its imports: one .pth file, dev-only.
	$(BIN)/python -c 'import pathlib, sysconfig; root = pathlib.Path.cwd(); \
	  dirs = ["", "tests/e2e", "tests/chaos", "tests/jobs", "tests/ctl", "tests/fuzz", "tools", "tools/conformance", "bench"]; \
	  pathlib.Path(sysconfig.get_paths()["purelib"], "volcano_py_dev.pth").write_text("".join(f"{root / d}\n" for d in dirs))'
	@rm -f $(VENV)/.installed-* && touch $@

venv: $(STAMP)

DEMO_REPORT := bench/results/demo-report

demo: venv
	$(BIN)/volcano-py simulate examples/sim/gpu-cluster.yaml examples/sim/two-gangs.yaml --compare-per-pod \
	  --report $(DEMO_REPORT)
	@echo "The report, with its plots: file://$(abspath $(DEMO_REPORT))/index.html"

unit: venv lint chromium promtool helm-bin
	$(BIN)/pytest -q -m "not e2e"

# Debian's Chromium, which the report's rendering test (tests/report) opens the HTML report in. Installed once;
# the test fails, rather than skips, without it.
CHROMIUM := /usr/bin/chromium
SUDO := $(if $(filter 0,$(shell id -u)),,sudo)
chromium:
	@test -x $(CHROMIUM) || { $(SUDO) apt-get update -q && \
	  DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -q chromium; }
	@test -x $(CHROMIUM) || { echo "make chromium: $(CHROMIUM) is still missing" >&2; exit 1; }

# promtool, from Debian's prometheus package, which the alert rules' tests (tests/deploy) run: `promtool check
# rules` and `promtool test rules`. Installed once, without the recommended node exporter; the tests fail, rather
# than skip, without it. (The package also ships the Prometheus server's service, which a container's
# policy-rc.d keeps from starting; on a machine with systemd, `systemctl disable --now prometheus` stops it.)
PROMTOOL := /usr/bin/promtool
promtool:
	@test -x $(PROMTOOL) || { $(SUDO) apt-get update -q && \
	  DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -q --no-install-recommends prometheus; }
	@test -x $(PROMTOOL) || { echo "make promtool: $(PROMTOOL) is still missing" >&2; exit 1; }

e2e: venv cluster-bins helm-bin operator-bins image-tools
	VOLCANO_PY_E2E_REQUIRE=1 $(BIN)/pytest -q -m e2e tests/e2e

# The operators the e2e tests run (the Kubeflow training operator, JobSet, LeaderWorkerSet, KubeRay), each built
# from its Go module into ~/.cache/volcano-py/operators/ once (under 20 min cold for the four, at the lowest CPU
# priority).
.PHONY: operator-bins
operator-bins:
	tools/build-operators.sh training-operator jobset lws kuberay

test: unit e2e

bench: venv
	$(BIN)/python bench/bench_cycle.py --repeat 5
	$(BIN)/python bench/bench_cycle.py --repeat 5 --conf bench/gang-only.conf
	$(BIN)/python bench/bench_dra.py --nodes 1000 --devices 8 --pods 64

# A day of GPU training jobs in the simulator, Volcano's conf against volcano-py's policies (docs/simulator.md).
bench-day: venv
	$(BIN)/python bench/bench_gpu_day.py

# One hour of that day under Volcano's real scheduler on the test control plane (kwok), time-compressed, against the
# same hour in the simulator (docs/simulator.md). Volcano's binaries from `differential-build`; the script takes the
# heavy lock for its control plane. SLICE_ARGS='--hour 4 --factor 10' (the defaults), or '--sim-only'.
SLICE_ARGS ?=
bench-day-slice: venv helm-bin differential-build
	$(BIN)/python bench/bench_day_slice.py $(SLICE_ARGS)

lint: venv
	$(BIN)/ruff check scheduler tests bench tools
	$(BIN)/lint-imports
	$(BIN)/mypy --strict  # the whole package (pyproject.toml: files = scheduler)

clean:
	rm -rf $(VENV) .bin

# The test control plane (kube-apiserver, etcd, kwok): targets cluster-bins and dev-cluster.
include tools/cluster.mk

# Container image: `make image` (docker or podman), `make image-test` (podman, the image on the test control plane), `make lock`.
-include tools/image.mk

# Chaos and fuzz suites (reliability issue): `make chaos`, `make fuzz`.
-include tools/reliability.mk
-include tools/conformance.mk
-include tools/differential.mk
# volcano-py against Volcano's scheduler and kube-scheduler on one control plane (issue 20): `make bench-peers`.
-include tools/bench-peers.mk
# N scheduler replicas against a simulated apiserver, in virtual time: `make bench-shards`.
-include tools/bench-shards.mk
# Seeded chaos runs of 3 active replicas on the simulated apiserver (kill, lease expiry, shard move): `make bench-shards-chaos`.
-include tools/bench-shards-chaos.mk
# Two active replicas (`--active-shards 2`) against one plain replica on the test control plane: `make bench-live-shards`.
-include tools/bench-live-shards.mk
