#!/usr/bin/env bash
# Build the e2e control-plane binaries into a per-version cache outside the checkout and
# symlink them into <repo>/.bin. Idempotent: a binary that already exists in the cache is not rebuilt.
#
#   tools/build-bins.sh            # build what is missing, refresh the .bin symlinks
#   tools/build-bins.sh --print-dir  # print the cache directory and exit
#
# Versions are pinned here and in tools/k8s/go.mod and tools/kwok/go.mod (keep them in sync).
set -euo pipefail

K8S_VERSION=v1.37.2
ETCD_VERSION=v3.7.0   # the etcd server/v3 version already in the k8s.io/kubernetes v1.37.2 module graph
KWOK_VERSION=v0.8.0

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
REPO="$(cd "$HERE/.." && pwd)"
CACHE_ROOT="${VOLCANO_PY_BIN_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/volcano-py/bins}"
DIR="$CACHE_ROOT/${K8S_VERSION}-etcd${ETCD_VERSION}-kwok${KWOK_VERSION}"

if [[ "${1:-}" == "--print-dir" ]]; then
  echo "$DIR"
  exit 0
fi

export GOTOOLCHAIN=local
export CGO_ENABLED=0
mkdir -p "$DIR" "$REPO/.bin"

log() { echo "[cluster-bins] $*" >&2; }
timed() { # timed <label> <cmd...>: run with /usr/bin/time, append the measurement to $DIR/build-times.log
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

# --- k8s: kube-apiserver, kube-controller-manager, kubectl ------------------------------------
K8S_MINOR=${K8S_VERSION#v1.}; K8S_MINOR=${K8S_MINOR%%.*}
BUILD_DATE=2026-01-01T00:00:00Z   # fixed: reproducible, and the cache key is the version anyway
K8S_LDFLAGS="-s -w"
for pkg in k8s.io/client-go/pkg/version k8s.io/component-base/version; do
  K8S_LDFLAGS+=" -X $pkg.gitVersion=$K8S_VERSION -X $pkg.gitMajor=1 -X $pkg.gitMinor=$K8S_MINOR"
  K8S_LDFLAGS+=" -X $pkg.gitTreeState=clean -X $pkg.buildDate=$BUILD_DATE"
done

missing_k8s=()
for b in kube-apiserver kube-controller-manager kube-scheduler kubectl; do
  [[ -x "$DIR/$b" ]] || missing_k8s+=("k8s.io/kubernetes/cmd/$b")
done
if ((${#missing_k8s[@]})); then
  log "building ${missing_k8s[*]} @ $K8S_VERSION into $DIR (cold build: ~tens of minutes on 2 cores)"
  tmp="$DIR/.tmp-k8s.$$"; mkdir -p "$tmp"
  (cd "$HERE/k8s" && timed "k8s ${missing_k8s[*]##*/}" go build -trimpath -ldflags "$K8S_LDFLAGS" -o "$tmp/" "${missing_k8s[@]}")
  for f in "$tmp"/*; do mv -f "$f" "$DIR/"; done
  rmdir "$tmp"
fi

# --- etcd --------------------------------------------------------------------------------------
if [[ ! -x "$DIR/etcd" ]]; then
  log "building etcd $ETCD_VERSION"
  ETCD_LDFLAGS="-s -w -X go.etcd.io/etcd/api/v3/version.GitSHA=${ETCD_VERSION}"
  (cd "$HERE/k8s" && timed "etcd" go build -trimpath -ldflags "$ETCD_LDFLAGS" -o "$DIR/etcd.tmp" go.etcd.io/etcd/server/v3)
  mv -f "$DIR/etcd.tmp" "$DIR/etcd"
fi

# --- kwok (own module: it wants k8s libs v0.36.x) ------------------------------------------------
if [[ ! -x "$DIR/kwok" ]]; then
  log "building kwok $KWOK_VERSION"
  KWOK_LDFLAGS="-s -w -X sigs.k8s.io/kwok/pkg/consts.Version=${KWOK_VERSION#v}"
  (cd "$HERE/kwok" && timed "kwok" go build -trimpath -ldflags "$KWOK_LDFLAGS" -o "$DIR/kwok.tmp" sigs.k8s.io/kwok/cmd/kwok)
  mv -f "$DIR/kwok.tmp" "$DIR/kwok"
fi

for b in etcd kube-apiserver kube-controller-manager kube-scheduler kubectl kwok; do
  ln -sfn "$DIR/$b" "$REPO/.bin/$b"
done
log "binaries ready in $DIR (linked into $REPO/.bin)"
