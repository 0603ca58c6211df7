#!/usr/bin/env bash
# The container image without a registry: build the Dockerfile's base from Debian's packages, build the image
# with podman, and the podman flags that run a container on this kind of machine. Used by tools/image.mk.
#
#   tools/image.sh engine             print the engine `make image` uses: docker where its daemon answers, else podman
#   tools/image.sh tools              apt-get install podman, runc and mmdebstrap where missing
#   tools/image.sh base               build the python:3.11-slim stand-in from Debian's packages (cached, keyed by
#                                     this script's base recipe), import it into podman; print its tag
#   tools/image.sh build IMAGE BASE [PULL]  build the Dockerfile into IMAGE on BASE with podman, the layer cache
#                                     kept; PULL is podman's --pull policy (never: the base is local)
#   tools/image.sh run-flags          print the `podman run` flags this machine needs (one per line)
#   tools/image.sh preflight BASE     run `true` in BASE with those flags; one line naming the error if it fails
#
# Why the run flags (measured on the 2-core Debian 12 machine this was written on, podman 4.3.1):
# - `--runtime runc`: crun 1.8.1, podman's default, refuses the machine's cgroups: "crun: cgroups in hybrid mode
#   not supported, drop all controllers from cgroupv2" (cgroup v1 with hugetlb on the v2 hierarchy); runc runs.
# - `--ulimit nofile=N:N --ulimit nproc=M:M`: rootful podman asks for 1048576 open files and processes, and the
#   process lacks CAP_SYS_RESOURCE, so the runtime cannot raise its limits: "crun: setrlimit `RLIMIT_NOFILE`:
#   Operation not permitted", "runc: ... error setting rlimit type 7: operation not permitted". N and M are the
#   limits podman itself holds (it lowers its own nproc to 32768), which the container keeps.
# Where crun and the limits work, these flags change nothing the container sees.
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
REPO="$(cd "$HERE/.." && pwd)"
CACHE="${VOLCANO_PY_IMAGE_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/volcano-py/image}"
SUDO=$([[ $(id -u) == 0 ]] && echo "" || echo sudo)

# ---- the base recipe: what goes into the key ---------------------------------------------------------------
# python:3.11-slim is Debian bookworm with Python 3.11 and ca-certificates, netbase and tzdata; bookworm's own
# python3 is 3.11, with venv from python3-venv. Docs, man pages and locales are left out, as in the slim images.
SUITE=bookworm
PACKAGES=python3,python3-venv,ca-certificates,netbase,tzdata
MIRRORS=(
  "deb http://deb.debian.org/debian bookworm main"
  "deb http://deb.debian.org/debian bookworm-updates main"
  "deb http://deb.debian.org/debian-security bookworm-security main"
)
DPKG_OPTS=(
  "path-exclude=/usr/share/man/*"
  "path-exclude=/usr/share/doc/*"
  "path-include=/usr/share/doc/*/copyright"
  "path-exclude=/usr/share/locale/*"
  "path-exclude=/usr/share/info/*"
)
IMPORT_CHANGES=(
  "ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
  "ENV LANG=C.UTF-8"
  'CMD ["python3"]'
)
ARCH=$(dpkg --print-architecture 2>/dev/null || uname -m)

base_key() {
  { echo "$SUITE $PACKAGES $ARCH"; printf '%s\n' "${MIRRORS[@]}" "${DPKG_OPTS[@]}" "${IMPORT_CHANGES[@]}"; } \
    | sha256sum | cut -c1-12
}
BASE_TAG="localhost/volcano-py/python-debian:3.11-$SUITE-$(base_key)"

log() { echo "[image] $*" >&2; }
die() { echo "$*" >&2; exit 1; }

engine() {
  if command -v docker >/dev/null && docker info >/dev/null 2>&1; then echo docker; return; fi
  if command -v podman >/dev/null; then echo podman; return; fi
  die "make image: no docker engine answers and podman is missing; 'make image-tools' installs podman"
}

tools() {
  local missing=()
  command -v podman >/dev/null || missing+=(podman)
  command -v runc >/dev/null || missing+=(runc)
  command -v mmdebstrap >/dev/null || missing+=(mmdebstrap)
  ((${#missing[@]})) || return 0
  log "installing ${missing[*]} with apt-get"
  $SUDO apt-get update -q >/dev/null
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -q "${missing[@]}" >/dev/null
  for t in podman runc mmdebstrap; do
    command -v "$t" >/dev/null || die "make image-tools: $t is still missing after apt-get install"
  done
}

base() {
  local dir="$CACHE/base-$(base_key)" t0=$SECONDS
  if podman image exists "$BASE_TAG"; then echo "$BASE_TAG"; return; fi
  mkdir -p "$dir"
  if [[ ! -s "$dir/rootfs.tar" ]]; then
    log "building the base rootfs from Debian's packages ($SUITE: $PACKAGES) into $dir"
    local opts=()
    for o in "${DPKG_OPTS[@]}"; do opts+=(--dpkgopt="$o"); done
    # The hook lists the installed versions beside the tarball (dpkg-query reads the new rootfs' database).
    nice -n 19 mmdebstrap --quiet --variant=minbase --include="$PACKAGES" "${opts[@]}" \
      --customize-hook="dpkg-query --admindir=\"\$1/var/lib/dpkg\" -W > '$dir/packages.txt'" \
      "$SUITE" "$dir/.rootfs.tmp.tar" "${MIRRORS[@]}" \
      || die "make image-base: mmdebstrap failed (see above)"
    mv -f "$dir/.rootfs.tmp.tar" "$dir/rootfs.tar"
    log "rootfs built in $((SECONDS - t0)) s ($(du -m "$dir/rootfs.tar" | cut -f1) MB; versions in $dir/packages.txt)"
  fi
  local changes=()
  for c in "${IMPORT_CHANGES[@]}"; do changes+=(--change "$c"); done
  podman import --quiet "${changes[@]}" "$dir/rootfs.tar" "$BASE_TAG" >/dev/null \
    || die "make image-base: podman import of $dir/rootfs.tar failed (see above)"
  log "imported as $BASE_TAG"
  echo "$BASE_TAG"
}

run_flags() {
  local nproc
  nproc=$(ulimit -Hu)
  [[ $nproc == unlimited || $nproc -gt 32768 ]] && nproc=32768
  if command -v runc >/dev/null; then echo --runtime=runc; fi
  printf '%s\n' "--ulimit=nofile=$(ulimit -Hn):$(ulimit -Hn)" "--ulimit=nproc=$nproc:$nproc"
}

preflight() {
  local out
  mapfile -t flags < <(run_flags)
  if ! out=$(podman run --rm --network=host "${flags[@]}" "$1" true 2>&1); then
    die "podman cannot run containers here: $(echo "$out" | tail -1)"
  fi
}

build() {
  local image=$1 base_image=$2 pull=${3:-never} flags ca
  mapfile -t flags < <(run_flags)
  # The RUN steps trust what this machine trusts: where PyPI is reached through a TLS proxy with its own CA
  # (PIP_CERT), Debian's CA bundle in the base would refuse it. The bundle is mounted for the build only
  # (Debian's pip reads /etc/ssl/certs/ca-certificates.crt); the image keeps Debian's.
  ca=${PIP_CERT:-${SSL_CERT_FILE:-/etc/ssl/certs/ca-certificates.crt}}
  [[ -r $ca ]] && flags+=("--volume=$(readlink -f "$ca"):/etc/ssl/certs/ca-certificates.crt:ro")
  # --network=host: the RUN steps reach PyPI without a bridge network.
  nice -n 19 podman build --network=host --pull="$pull" "${flags[@]}" --build-arg "PYTHON_IMAGE=$base_image" \
    -t "$image" -f "$REPO/Dockerfile" "$REPO"
}

case "${1:-}" in
  engine) engine ;;
  tools) tools ;;
  base) base ;;
  build) build "$2" "$3" "${4:-}" ;;
  run-flags) run_flags ;;
  preflight) preflight "$2" ;;
  *) die "usage: tools/image.sh engine|tools|base|build IMAGE BASE [PULL]|run-flags|preflight BASE" ;;
esac
