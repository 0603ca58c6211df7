# Container image and Helm (included from the Makefile).
#   make image           build $(IMAGE) with docker (or podman) where an engine runs
#   make image-check     build the wheel and install it into a fresh venv, as the Dockerfile does (no engine needed)
#   make helm-bin        build helm from the Go module proxy into the control-plane bin cache, link .bin/helm
IMAGE ?= ghcr.io/volcano-py/volcano-py:$(shell sed -n 's/^version = "\(.*\)"/\1/p' pyproject.toml)
CONTAINER_ENGINE ?= $(shell command -v docker || command -v podman)
HELM_VERSION ?= v3.22.0

.PHONY: image image-check helm-bin

image:
	@test -n "$(CONTAINER_ENGINE)" || { echo "make image: no docker or podman on this machine; try 'make image-check'"; exit 1; }
	@$(CONTAINER_ENGINE) info >/dev/null 2>&1 || { echo "make image: $(CONTAINER_ENGINE) cannot reach a running engine; try 'make image-check'"; exit 1; }
	$(CONTAINER_ENGINE) build -t $(IMAGE) .

image-check: venv
	$(BIN)/pytest -q tests/e2e/test_manifests.py -k wheel

helm-bin:
	@dir="$$(tools/build-bins.sh --print-dir)/helm-$(HELM_VERSION)"; mkdir -p "$$dir" .bin; \
	test -x "$$dir/helm" || GOTOOLCHAIN=local CGO_ENABLED=0 GOBIN="$$dir" go install -trimpath -ldflags "-s -w" helm.sh/helm/v3/cmd/helm@$(HELM_VERSION); \
	ln -sfn "$$dir/helm" .bin/helm; .bin/helm version --short
