#!/usr/bin/env bash
# Build tools/k8s/bindloop (the Go bind ceiling of `make bench-peers`) from the tools/k8s module, with the same
# toolchain settings as tools/build-bins.sh, into the control-plane binary cache (never the checkout). The
# binary's name carries a hash of its source, so an edit rebuilds it and an unchanged one is never rebuilt.
#
#   tools/build-bindloop.sh              # build if missing; print the binary's path
#   tools/build-bindloop.sh --print-path # print the path it would have, build nothing
set -euo pipefail
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
DIR="$("$HERE/build-bins.sh" --print-dir)"
KEY="$(cat "$HERE/k8s/bindloop/main.go" "$HERE/k8s/go.mod" "$HERE/k8s/go.sum" | sha256sum | cut -c1-12)"
OUT="$DIR/bindloop-$KEY"
if [[ "${1:-}" == "--print-path" ]]; then
  echo "$OUT"
  exit 0
fi
if [[ ! -x "$OUT" ]]; then
  mkdir -p "$DIR"
  echo "[bindloop] building $OUT" >&2
  (cd "$HERE/k8s" && GOTOOLCHAIN=local CGO_ENABLED=0 go build -trimpath -ldflags "-s -w" -o "$OUT.tmp" ./bindloop)
  mv -f "$OUT.tmp" "$OUT"
fi
echo "$OUT"
