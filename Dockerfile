# volcano-py: `make image` (tools/image.mk). Stage 1 builds the wheel; stage 2 installs the locked dependencies
# (requirements.lock, every file by its sha256) and the wheel into a venv, and runs as a non-root user (uid 65532),
# so the manifests' runAsNonRoot and read-only root hold.
#
# PYTHON_IMAGE is the public python:3.11-slim-bookworm by default (bookworm named: the bare 3.11-slim tag follows
# Debian's newest release, trixie now). Where registries cannot be reached, `make image-test` builds a stand-in from
# Debian's packages (tools/image.sh base: bookworm at a pinned snapshot, every package at the version of
# tools/image-base.lock) and passes it here; both have python3 with venv.
#
# The public base is pinned by digest only where the digest was verified against the registry. The line below says
# which: `verified YYYY-MM-DD` (then the ARG default is that digest), or `UNVERIFIED` (then the default stays the
# tag). Verify and pin as docs/image.md says.
# base-digest: python:3.11-slim-bookworm@sha256:0bee7276f83efd4a1ee05bbbf4281d95ed28e079220a9457f25a93e3f1e3c31b UNVERIFIED
#   (the multi-platform index recorded for this tag by docker-library/repo-info, build of 2026-08-25; no container
#   registry answers on the machine this was written on, so it was not checked against Docker Hub)
ARG PYTHON_IMAGE=python:3.11-slim-bookworm

FROM ${PYTHON_IMAGE} AS build
WORKDIR /src
RUN python3 -m venv /opt/build && /opt/build/bin/pip install --no-cache-dir build==1.2.2
COPY pyproject.toml README.md ./
COPY scheduler ./scheduler
# scheduler/crds is a link to ../crds: the wheel carries the CRD schemas the simulator checks against.
COPY crds ./crds
RUN /opt/build/bin/python -m build --wheel --outdir /dist

FROM ${PYTHON_IMAGE}
ENV PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1 PATH=/opt/volcano-py/bin:$PATH
# The lock pins every runtime dependency by version and sha256 (--require-hashes, wheels only), so two builds
# install the same files. It goes in before the wheel: a code change rebuilds only the last layers.
COPY requirements.lock /tmp/requirements.lock
RUN python3 -m venv /opt/volcano-py \
 && pip install --no-cache-dir --require-hashes --only-binary=:all: --no-deps -r /tmp/requirements.lock \
 && rm -f /tmp/requirements.lock \
 && groupadd --gid 65532 volcano && useradd --uid 65532 --gid 65532 --no-create-home --shell /sbin/nologin volcano
# The wheel resolves nothing (--no-deps); pip check proves the locked set is whole for it.
COPY --from=build /dist/*.whl /tmp/
RUN pip install --no-cache-dir --no-deps /tmp/*.whl && pip check && rm -f /tmp/*.whl
USER 65532:65532
EXPOSE 8080
ENTRYPOINT ["volcano-py"]
CMD ["scheduler", "--help"]
