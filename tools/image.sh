#!/usr/bin/env bash
# The container image without a registry: build the Dockerfile's base from Debian's packages, build the image
# with podman, and the podman flags that run a container on this kind of machine. Used by tools/image.mk.
#
#   tools/image.sh engine             print the engine `make image` uses: docker where its daemon answers, else podman
#   tools/image.sh tools              apt-get install podman, runc and mmdebstrap where missing
#   tools/image.sh base               build the python:3.11-slim stand-in from Debian's packages at the versions of
#                                     tools/image-base.lock (cached, keyed by the recipe and the lock), check the
#                                     rootfs against the lock, import it into podman; print its tag
#   tools/image.sh lock               rebuild the rootfs from what the mirror serves now and rewrite the lock
#   tools/image.sh recipe             print the base recipe (suite, snapshot, SOURCE_DATE_EPOCH, pins), one key=value
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
# python:3.11-slim-bookworm is Debian bookworm with Python 3.11 and ca-certificates, netbase and tzdata; bookworm's
# own python3 is 3.11, with venv from python3-venv. Docs, man pages and locales are left out, as in the slim images.
#
# Reproducible (docs/image.md): the packages named here are pinned; every other package of the rootfs is held at the
# version in tools/image-base.lock (apt preferences written from it), and the build fails when the rootfs's installed
# set differs from the lock. SNAPSHOT is the archive state the lock was taken from: the first midnight (UTC) after
# the newest Release file deb.debian.org served then. Where snapshot.debian.org answers, the build reads that
# snapshot; where it does not (the development machine reaches deb.debian.org only), it reads deb.debian.org, and
# the lock check is what holds the versions. SOURCE_DATE_EPOCH is the snapshot's time: mmdebstrap then clamps
# every timestamp to it, so two builds from the same packages give the same rootfs.tar, byte for byte.
SUITE=bookworm
SNAPSHOT=20261203T000000Z
PACKAGES=(
  python3=3.11.2-1+b1
  python3-venv=3.11.2-1+b1
  ca-certificates=20250419~deb12u2
  netbase=6.4
  tzdata=2026f-0+deb12u1
)
LOCK="${VOLCANO_PY_IMAGE_BASE_LOCK:-$REPO/tools/image-base.lock}"  # another lock: for trying the check
SNAPSHOT_HOST=http://snapshot.debian.org/archive
CURRENT_HOST=http://deb.debian.org
# The three archives, as "<archive path> <suite>"; the URL in front is the snapshot's or the current mirror's.
ARCHIVES=(
  "debian $SUITE"
  "debian $SUITE-updates"
  "debian-security $SUITE-security"
)
DPKG_OPTS=(
  "path-exclude=/usr/share/man/*"
  "path-exclude=/usr/share/doc/*"
  "path-include=/usr/share/doc/*/copyright"
  "path-exclude=/usr/share/locale/*"
  "path-exclude=/usr/share/info/*"
)
# mmdebstrap copies the host's resolv.conf and hostname into the rootfs; fixed contents keep it the same on every
# machine (the container runtime mounts its own over both).
HOOKS=(
  'rm -f "$1/etc/apt/preferences.d/volcano-py-lock"'
  ': > "$1/etc/resolv.conf" && chmod 0644 "$1/etc/resolv.conf"'
  'echo localhost > "$1/etc/hostname" && chmod 0644 "$1/etc/hostname"'
)
IMPORT_CHANGES=(
  "ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
  "ENV LANG=C.UTF-8"
  'CMD ["python3"]'
)
ARCH=$(dpkg --print-architecture 2>/dev/null || uname -m)
SOURCE_DATE_EPOCH=$(date -u -d "${SNAPSHOT:0:4}-${SNAPSHOT:4:2}-${SNAPSHOT:6:2}T${SNAPSHOT:9:2}:${SNAPSHOT:11:2}:${SNAPSHOT:13:2}Z" +%s)

base_key() {
  { echo "$SUITE $SNAPSHOT $SOURCE_DATE_EPOCH $ARCH ${PACKAGES[*]}"
    printf '%s\n' "${ARCHIVES[@]}" "${DPKG_OPTS[@]}" "${HOOKS[@]}" "${IMPORT_CHANGES[@]}"; cat "$LOCK"; } \
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

# The apt sources the build reads, one line each: the snapshot where snapshot.debian.org answers, else the current
# mirror. VOLCANO_PY_DEBIAN_MIRROR=snapshot|current chooses without asking the network.
sources() {
  local mode=${VOLCANO_PY_DEBIAN_MIRROR:-auto} archive suite
  if [[ $mode == auto ]]; then
    mode=current
    if command -v curl >/dev/null \
      && curl -fsS -m 10 -o /dev/null "$SNAPSHOT_HOST/debian/$SNAPSHOT/dists/$SUITE/InRelease" 2>/dev/null; then
      mode=snapshot
    fi
  fi
  for line in "${ARCHIVES[@]}"; do
    read -r archive suite <<<"$line"
    case $mode in
      snapshot) echo "deb [check-valid-until=no] $SNAPSHOT_HOST/$archive/$SNAPSHOT $suite main" ;;
      current) echo "deb $CURRENT_HOST/$archive $suite main" ;;
      *) die "VOLCANO_PY_DEBIAN_MIRROR=$mode: it is snapshot, current or auto" ;;
    esac
  done
}

# rootfs TAR LIST HOLD: mmdebstrap the recipe into TAR, the installed name=version lines into LIST, the newest Release
# dates of the sources into LIST.dates; HOLD=yes holds every package at the lock's version, HOLD=no takes the newest
# the mirror serves of everything (the recipe's packages by name only).
rootfs() {
  local tar=$1 list=$2 hold=$3 opts=() sources_list include o prefs
  mapfile -t sources_list < <(sources)
  log "apt sources: ${sources_list[0]} (and ${#sources_list[@]} in all)"
  for o in "${DPKG_OPTS[@]}"; do opts+=(--dpkgopt="$o"); done
  if [[ $hold == yes ]]; then
    include=$(IFS=,; echo "${PACKAGES[*]}")
    prefs="$(dirname "$list")/.preferences"
    python3 "$HERE/image_lock.py" preferences "$LOCK" >"$prefs" || return 1
    opts+=(--setup-hook="mkdir -p \"\$1/etc/apt/preferences.d\" && cp '$prefs' \"\$1/etc/apt/preferences.d/volcano-py-lock\"")
  else
    include=$(printf '%s\n' "${PACKAGES[@]}" | cut -d= -f1 | paste -sd,)
  fi
  opts+=(--customize-hook="grep -h '^Date:' \"\$1\"/var/lib/apt/lists/*_InRelease > '$list.dates'")
  for o in "${HOOKS[@]}"; do opts+=(--customize-hook="$o"); done
  # The hook lists the installed versions (dpkg-query reads the new rootfs' database).
  opts+=(--customize-hook="dpkg-query --admindir=\"\$1/var/lib/dpkg\" -W -f '\${Package}=\${Version}\\n' > '$list'")
  SOURCE_DATE_EPOCH=$SOURCE_DATE_EPOCH nice -n 19 mmdebstrap --quiet --variant=minbase --include="$include" \
    "${opts[@]}" "$SUITE" "$tar" "${sources_list[@]}"
}

base() {
  local dir="$CACHE/base-$(base_key)" t0=$SECONDS
  if podman image exists "$BASE_TAG"; then echo "$BASE_TAG"; return; fi
  python3 "$HERE/image_lock.py" check-recipe "$LOCK" "${PACKAGES[@]}" || exit 1
  mkdir -p "$dir"
  if [[ ! -s "$dir/rootfs.tar" ]]; then
    log "building the base rootfs from Debian's packages ($SUITE at $SNAPSHOT: ${PACKAGES[*]}) into $dir"
    rootfs "$dir/.rootfs.tmp.tar" "$dir/.packages.tmp.txt" yes || die "make image-base: mmdebstrap failed (see above)"
    if ! python3 "$HERE/image_lock.py" check "$LOCK" "$dir/.packages.tmp.txt" "$ARCH"; then
      rm -f "$dir/.rootfs.tmp.tar"
      exit 1
    fi
    mv -f "$dir/.packages.tmp.txt" "$dir/packages.txt"
    mv -f "$dir/.rootfs.tmp.tar" "$dir/rootfs.tar"
    (cd "$dir" && sha256sum rootfs.tar >rootfs.sha256)
    log "rootfs built in $((SECONDS - t0)) s ($(du -m "$dir/rootfs.tar" | cut -f1) MB, sha256 $(cut -c1-16 "$dir/rootfs.sha256")...; versions in $dir/packages.txt)"
  fi
  local changes=()
  for c in "${IMPORT_CHANGES[@]}"; do changes+=(--change "$c"); done
  podman import --quiet "${changes[@]}" "$dir/rootfs.tar" "$BASE_TAG" >/dev/null \
    || die "make image-base: podman import of $dir/rootfs.tar failed (see above)"
  log "imported as $BASE_TAG"
  echo "$BASE_TAG"
}

# Rewrite the lock from what the current mirror serves: the recipe's packages by name, nothing held. SNAPSHOT and
# PACKAGES are this script's own text: where the new lock needs others, it names them and exits 1.
lock() {
  local t0=$SECONDS newest snapshot tmp
  LOCK_TMP=$(mktemp -d "${TMPDIR:-/tmp}/volcano-py-base-lock.XXXXXX")
  trap 'rm -rf "$LOCK_TMP"' EXIT
  tmp=$LOCK_TMP
  log "building the base rootfs from what $CURRENT_HOST serves now, to rewrite $LOCK"
  VOLCANO_PY_DEBIAN_MIRROR=current rootfs "$tmp/rootfs.tar" "$tmp/packages.txt" no \
    || die "make image-base-lock: mmdebstrap failed (see above)"
  newest=$(sed 's/^Date: //' "$tmp/packages.txt.dates" | while read -r d; do date -u -d "$d" +%s; done | sort -n | tail -1)
  snapshot=$(date -u -d "@$(((newest / 86400 + 1) * 86400))" +%Y%m%dT%H%M%SZ)
  python3 "$HERE/image_lock.py" write "$LOCK" "$tmp/packages.txt" "$ARCH" "$SUITE" "$snapshot" || exit 1
  log "wrote $LOCK ($(grep -vc '^#' "$LOCK") packages, snapshot $snapshot) in $((SECONDS - t0)) s"
  local stale=0
  if [[ $snapshot != "$SNAPSHOT" ]]; then echo "set SNAPSHOT=$snapshot in tools/image.sh" >&2; stale=1; fi
  python3 "$HERE/image_lock.py" check-recipe "$LOCK" "${PACKAGES[@]}" || stale=1
  return $stale
}

recipe() {
  printf '%s=%s\n' suite "$SUITE" snapshot "$SNAPSHOT" source_date_epoch "$SOURCE_DATE_EPOCH" arch "$ARCH" \
    lock "${LOCK#"$REPO"/}" key "$(base_key)"
  printf 'package=%s\n' "${PACKAGES[@]}"
  VOLCANO_PY_DEBIAN_MIRROR=snapshot sources | sed 's/^/snapshot_source=/'
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
  lock) lock ;;
  recipe) recipe ;;
  build) build "$2" "$3" "${4:-}" ;;
  run-flags) run_flags ;;
  preflight) preflight "$2" ;;
  *) die "usage: tools/image.sh engine|tools|base|lock|recipe|build IMAGE BASE [PULL]|run-flags|preflight BASE" ;;
esac
