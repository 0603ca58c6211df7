# Container image, its lock, and Helm (included from the Makefile).
#   make image           build $(IMAGE) from the Dockerfile: docker where its daemon answers, else podman; on
#                        $(IMAGE_BASE) (python:3.11-slim-bookworm), or IMAGE_BASE=debian: a base built from Debian's packages
#   make image-test      build $(IMAGE_TEST) on the Debian-built base with podman (layers cached), then run it as the
#                        scheduler and as the controllers against the test control plane (tests/image)
#   make image-tools     apt-get install podman, runc and mmdebstrap where missing
#   make image-base      build the Debian base (cached outside the checkout, keyed by its recipe and lock) at the
#                        versions of tools/image-base.lock, fail if its rootfs differs from the lock, import it
#   make image-base-lock rewrite tools/image-base.lock from what Debian's mirror serves now (a full base build)
#   make image-check     build the wheel and install it into a fresh venv, as the Dockerfile does (no engine needed)
#   make lock            write requirements.lock (pip-compile, every file hashed) from pyproject.toml's dependencies;
#                        keeps the current pins unless pyproject needs others (UPGRADE=1: the newest of everything)
#   make helm-bin        build helm from the Go module proxy into the control-plane bin cache, link .bin/helm
VERSION := $(shell sed -n 's/^version = "\(.*\)"/\1/p' pyproject.toml)
IMAGE ?= ghcr.io/volcano-py/volcano-py:$(VERSION)
IMAGE_TEST ?= localhost/volcano-py:$(VERSION)-debian
IMAGE_BASE ?= python:3.11-slim-bookworm
HELM_VERSION ?= v3.22.0

.PHONY: image image-test image-tools image-base image-base-lock image-check lock helm-bin

image:
ifeq ($(IMAGE_BASE),debian)
	@$(MAKE) --no-print-directory image-tools
	@base=$$(tools/image.sh base) && tools/image.sh build $(IMAGE) "$$base"
else
	@engine=$$(tools/image.sh engine) || exit 1; \
	if [ "$$engine" = docker ]; then docker build --build-arg PYTHON_IMAGE=$(IMAGE_BASE) -t $(IMAGE) .; \
	else tools/image.sh build $(IMAGE) $(IMAGE_BASE) missing || { \
	  echo "make image: podman could not build on $(IMAGE_BASE) (above); where no registry can be reached," \
	       "'make image IMAGE_BASE=debian' builds on a base made from Debian's packages" >&2; exit 1; }; fi
endif

image-tools:
	@tools/image.sh tools

image-base: image-tools
	@tools/image.sh base

image-base-lock: image-tools
	@tools/image.sh lock

image-test: venv cluster-bins image-tools
	@base=$$(tools/image.sh base) && tools/image.sh preflight "$$base" && tools/image.sh build $(IMAGE_TEST) "$$base"
	VOLCANO_PY_IMAGE=$(IMAGE_TEST) VOLCANO_PY_E2E_REQUIRE=1 $(BIN)/pytest -q -m image tests/image

image-check: venv
	$(BIN)/pytest -q tests/e2e/test_manifests.py -k wheel

lock: venv
	CUSTOM_COMPILE_COMMAND="make lock" $(BIN)/pip-compile --quiet --generate-hashes --strip-extras --allow-unsafe \
	  --no-emit-index-url --no-emit-find-links $(if $(UPGRADE),--upgrade) --output-file requirements.lock pyproject.toml

helm-bin:
	@dir="$$(tools/build-bins.sh --print-dir)/helm-$(HELM_VERSION)"; mkdir -p "$$dir" .bin; \
	test -x "$$dir/helm" || GOTOOLCHAIN=local CGO_ENABLED=0 GOBIN="$$dir" go install -trimpath -ldflags "-s -w" helm.sh/helm/v3/cmd/helm@$(HELM_VERSION); \
	ln -sfn "$$dir/helm" .bin/helm; .bin/helm version --short
