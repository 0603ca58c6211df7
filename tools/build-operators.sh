#!/usr/bin/env bash
# Build the training operators that the e2e operator tests run, from their own Go modules at pinned versions,
# into a cache outside the checkout keyed by name and version:
#   ${VOLCANO_PY_OPERATOR_CACHE:-~/.cache/volcano-py/operators}/<name>-<version>/{bin/<binary>,crds/*.yaml,build-times.log}
# Idempotent: an operator whose binary is already in the cache is not rebuilt.
#
#   tools/build-operators.sh                     # build every pinned operator that is missing
#   tools/build-operators.sh training-operator   # only this one
#   tools/build-operators.sh --print-dir training-operator   # print its cache directory and exit
#
# Builds run at the lowest CPU priority with one package at a time (nice -n 19, GOFLAGS=-p=1) so that the
# tests other people run on this 2-core machine keep the CPU. Each is built inside its downloaded module, with
# its own go.mod and go.sum, so the binary is the operator as released, not a re-resolved dependency graph.
# The CRDs are copied from the same module.
set -euo pipefail

# name -> "module version main-package crd-dir-in-module"
declare -A OPERATORS=(
  # Kubeflow training operator v1: PyTorchJob, MPIJob (kubeflow.org/v1), TFJob, ...; Volcano gang via
  # --gang-scheduler-name=volcano. v1.8.1 is the last v1 release known to resolve on the module proxy here.
  [training-operator]="github.com/kubeflow/training-operator v1.8.1 cmd/training-operator.v1 manifests/base/crds"
  # JobSet: makes no PodGroup of its own (volcano-py's automatic gangs give it one). Its main package is the
  # module root ("."), so the binary is named after the last path element.
  [jobset]="sigs.k8s.io/jobset v0.8.0 . config/components/crd/bases"
  # LeaderWorkerSet: makes no PodGroup either (automatic gangs, one per group). Its main package is ./cmd.
  [lws]="sigs.k8s.io/lws v0.6.1 cmd config/crd/bases"
  # KubeRay's ray-operator: RayCluster, RayJob (ray.io/v1); with --enable-batch-scheduler (or
  # --batch-scheduler=volcano) it writes a Volcano PodGroup per RayCluster. v1.4.0 is pinned (v1.5.0 also resolves).
  [kuberay]="github.com/ray-project/kuberay/ray-operator v1.4.0 . config/crd/bases"
)
ALL="training-operator jobset lws kuberay"

CACHE_ROOT="${VOLCANO_PY_OPERATOR_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/volcano-py/operators}"
GO="${GO:-$(command -v go || echo /usr/local/go/bin/go)}"
export GOTOOLCHAIN=local
export CGO_ENABLED=0
export GOFLAGS="${GOFLAGS:+$GOFLAGS }-p=1"

log() { echo "[build-operators] $*" >&2; }

dir_of() { # dir_of <name>
  local spec=${OPERATORS[$1]:?unknown operator $1 (known: $ALL)}
  read -r _mod ver _main _crds <<<"$spec"
  echo "$CACHE_ROOT/$1-$ver"
}

if [[ "${1:-}" == "--print-dir" ]]; then
  dir_of "${2:?--print-dir needs an operator name}"
  exit 0
fi

module_dir() { # module_dir <module> <version>: download it (the exact version, no listing) and print its directory
  "$GO" mod download -json "$1@$2" | sed -n 's/^\s*"Dir": "\(.*\)",$/\1/p'
}

build_one() { # build_one <name>
  local name=$1 mod ver main crds dir bin src t0
  read -r mod ver main crds <<<"${OPERATORS[$name]:?unknown operator $name (known: $ALL)}"
  dir="$(dir_of "$name")"
  bin="$dir/bin/$name"
  mkdir -p "$dir/bin" "$dir/crds"
  src="$(module_dir "$mod" "$ver")"
  [[ -d "$src" ]] || { log "$mod@$ver did not download"; exit 1; }
  if [[ ! -x "$bin" ]]; then
    log "building $name $ver ($mod, package ./$main) into $dir (cold: minutes at nice 19, -p=1)"
    t0=$SECONDS
    # Built inside the downloaded module (read-only, -mod=readonly): its own go.mod and go.sum decide every
    # dependency. Not `go install $mod@$ver`: that asks the proxy for the module's version list (to report a
    # deprecation), which the proxy here refuses for some modules (jobset: 403 on @v/list).
    if [[ -x /usr/bin/time ]]; then
      (cd "$src" && /usr/bin/time -f "$name $ver: %e s wall, %U s user, %S s sys, max RSS %M KB" \
        -a -o "$dir/build-times.log" nice -n 19 "$GO" build -mod=readonly -trimpath -ldflags "-s -w" \
        -o "$bin.tmp" "./$main")
    else
      (cd "$src" && nice -n 19 "$GO" build -mod=readonly -trimpath -ldflags "-s -w" -o "$bin.tmp" "./$main")
      echo "$name $ver: $((SECONDS - t0)) s wall" >>"$dir/build-times.log"
    fi
    mv -f "$bin.tmp" "$bin"
    log "$name built in $((SECONDS - t0)) s"
  fi
  [[ -d "$src/$crds" ]] || { log "no CRD directory $crds in $mod@$ver"; exit 1; }
  find "$src/$crds" -maxdepth 1 -name '*.yaml' ! -name 'kustomization.yaml' -exec cp -f {} "$dir/crds/" \;
  chmod -R u+w "$dir/crds"
  echo "$mod $ver" >"$dir/version.txt"
  log "$name $ver ready: $bin, $(find "$dir/crds" -name '*.yaml' | wc -l) CRDs"
}

names=("$@")
((${#names[@]})) || read -r -a names <<<"$ALL"
for n in "${names[@]}"; do build_one "$n"; done
