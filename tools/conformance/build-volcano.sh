#!/usr/bin/env bash
# Build Volcano itself (the oracle of `make conformance`) from the source snapshot, into a cache outside the
# checkout: vc-scheduler, vc-controller-manager, vc-webhook-manager, vcctl and the compiled ginkgo e2e suites
# (`go test -c` of test/e2e/<suite>). Idempotent: what already exists in the cache is not rebuilt.
#
#   tools/conformance/build-volcano.sh               # build what is missing
#   tools/conformance/build-volcano.sh --print-dir   # print the cache directory and exit
#   tools/conformance/build-volcano.sh --download-only   # copy the snapshot and fetch its modules, no build
#   SUITES="schedulingbase jobp" tools/conformance/build-volcano.sh   # only these suite binaries
#   tools/conformance/build-volcano.sh --no-suites   # only the components (make bench-peers needs vc-scheduler)
#
# Environment:
#   VOLCANO_SRC      the snapshot (default /work/shared/peers/volcano, read-only is fine: we build from a copy)
#   VOLCANO_PY_VOLCANO_CACHE  cache root (default ${XDG_CACHE_HOME:-$HOME/.cache}/volcano-py/volcano)
#
# The cache key is a hash of the snapshot's whole tree (paths and contents) and of the Go toolchain version,
# so a different snapshot or toolchain gets its own directory and an unchanged one is never rebuilt.
# Layout of <cache>/<key>/: bin/{vc-scheduler,vc-controller-manager,vc-webhook-manager,vcctl},
# e2e/<suite>.test, src/ (the writable copy), build-times.log, snapshot.txt.
set -euo pipefail

SRC="${VOLCANO_SRC:-/work/shared/peers/volcano}"
ALL_SUITES="schedulingbase jobp jobseq schedulingaction vcctl"
SUITES="${SUITES:-$ALL_SUITES}"
CACHE_ROOT="${VOLCANO_PY_VOLCANO_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/volcano-py/volcano}"

export GOTOOLCHAIN=local

[[ -f "$SRC/go.mod" ]] || { echo "build-volcano: no Volcano snapshot at $SRC (set VOLCANO_SRC)" >&2; exit 2; }

snapshot_key() { # tree hash: every file's path and sha256, plus the toolchain, first 16 hex digits
  {
    (cd "$SRC" && find . -type f ! -path './.git/*' -print0 | LC_ALL=C sort -z | xargs -0 sha256sum)
    go version
  } | sha256sum | cut -c1-16
}

KEY="$(snapshot_key)"
DIR="$CACHE_ROOT/$KEY"

if [[ "${1:-}" == "--no-suites" ]]; then
  SUITES=""
fi
if [[ "${1:-}" == "--print-dir" ]]; then
  echo "$DIR"
  exit 0
fi

mkdir -p "$DIR/bin" "$DIR/e2e"
log() { echo "[build-volcano] $*" >&2; }
timed() { # timed <label> <cmd...>: run it, append wall/user/sys/RSS to $DIR/build-times.log
  local label=$1; shift
  local t0=$SECONDS
  if [[ -x /usr/bin/time ]]; then
    /usr/bin/time -f "$label: %e s wall, %U s user, %S s sys, max RSS %M KB" -a -o "$DIR/build-times.log" "$@"
  else
    "$@"
    echo "$label: $((SECONDS - t0)) s wall" >>"$DIR/build-times.log"
  fi
  log "$label done in $((SECONDS - t0)) s"
}

# A writable copy: the snapshot may be read-only, and -mod=mod may need to complete go.sum.
if [[ ! -f "$DIR/src/.copied" ]]; then
  log "copying $SRC to $DIR/src"
  rm -rf "$DIR/src"
  mkdir -p "$DIR/src"
  (cd "$SRC" && tar --exclude=./.git -cf - .) | (cd "$DIR/src" && tar -xf -)
  chmod -R u+w "$DIR/src"
  touch "$DIR/src/.copied"
  {
    echo "source: $SRC"
    echo "key: $KEY"
    echo "release-version: $(cat "$SRC/.release-version" 2>/dev/null || echo unknown)"
    echo "go: $(go version)"
    grep -E '^\s*k8s.io/kubernetes ' "$SRC/go.mod" | head -1 | sed 's/^\s*/k8s module: /'
  } >"$DIR/snapshot.txt"
fi
cd "$DIR/src"
if [[ ! -d vendor ]]; then
  export GOFLAGS="${GOFLAGS:+$GOFLAGS }-mod=mod"
fi

VERSION="$(cat .release-version 2>/dev/null || echo latest)"
LDFLAGS="-s -w -X volcano.sh/volcano/pkg/version.Version=$VERSION -X volcano.sh/volcano/pkg/version.GitSHA=snapshot-$KEY"
LDFLAGS+=" -X volcano.sh/volcano/pkg/version.Built=2026-01-01T00:00:00Z"

if [[ ! -f .modules-downloaded ]]; then
  timed "go mod download" go mod download
  touch .modules-downloaded
fi
if [[ "${1:-}" == "--download-only" ]]; then
  log "modules downloaded; --download-only: not building"
  exit 0
fi

# --- components -----------------------------------------------------------------------------------
declare -A COMPONENTS=(
  [vc-scheduler]=./cmd/scheduler
  [vc-controller-manager]=./cmd/controller-manager
  [vc-webhook-manager]=./cmd/webhook-manager
  [vcctl]=./cmd/cli
)
missing=()
for b in vc-scheduler vc-controller-manager vc-webhook-manager vcctl; do
  [[ -x "$DIR/bin/$b" ]] || missing+=("$b")
done
for b in "${missing[@]}"; do
  log "building $b (${COMPONENTS[$b]})"
  CGO_ENABLED=0 timed "$b" go build -trimpath -ldflags "$LDFLAGS" -o "$DIR/bin/$b.tmp" "${COMPONENTS[$b]}"
  mv -f "$DIR/bin/$b.tmp" "$DIR/bin/$b"
done

# --- e2e suites (ginkgo v2, compiled test binaries) ----------------------------------------------------
for s in $SUITES; do
  [[ " $ALL_SUITES " == *" $s "* ]] || { log "unknown suite $s (known: $ALL_SUITES)"; exit 2; }
  [[ -x "$DIR/e2e/$s.test" ]] && continue
  log "compiling e2e suite $s"
  CGO_ENABLED=0 timed "e2e/$s.test" go test -c -trimpath -o "$DIR/e2e/$s.test.tmp" "./test/e2e/$s"
  mv -f "$DIR/e2e/$s.test.tmp" "$DIR/e2e/$s.test"
done

log "Volcano ready in $DIR (bin/: ${!COMPONENTS[*]}; e2e/: $SUITES)"
