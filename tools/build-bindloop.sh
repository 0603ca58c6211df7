#!/usr/bin/env bash
# Build the Go tools of `make bench-peers` from the tools/k8s module (the control plane's own client-go, no new
# downloads), with the same toolchain settings as tools/build-bins.sh, into the control-plane binary cache (never
# the checkout): bindloop (the apiserver's bind ceiling and the fast object loader) and churngen (the churn size's
# arrival and completion generator). A binary's name carries a hash of its source, so an edit rebuilds it and an
# unchanged one is never rebuilt.
#
#   tools/build-bindloop.sh                       # build bindloop if missing; print its path
#   tools/build-bindloop.sh churngen              # the same for churngen
#   tools/build-bindloop.sh --all                 # build both if missing; print both paths
#   tools/build-bindloop.sh --print-path [TOOL]   # print the path it would have, build nothing
set -euo pipefail
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
DIR="$("$HERE/build-bins.sh" --print-dir)"
PRINT=0
if [[ "${1:-}" == "--print-path" ]]; then
  PRINT=1
  shift
fi
TOOLS=("${1:-bindloop}")
if [[ "${TOOLS[0]}" == "--all" ]]; then
  TOOLS=(bindloop churngen)
fi
for TOOL in "${TOOLS[@]}"; do
  case "$TOOL" in bindloop | churngen) ;; *) echo "unknown tool $TOOL (bindloop or churngen)" >&2; exit 2 ;; esac
  KEY="$(cat "$HERE/k8s/$TOOL"/*.go "$HERE/k8s/go.mod" "$HERE/k8s/go.sum" | sha256sum | cut -c1-12)"
  OUT="$DIR/$TOOL-$KEY"
  if [[ $PRINT == 0 && ! -x "$OUT" ]]; then
    mkdir -p "$DIR"
    echo "[$TOOL] building $OUT" >&2
    (cd "$HERE/k8s" && GOTOOLCHAIN=local CGO_ENABLED=0 go build -trimpath -ldflags "-s -w" -o "$OUT.tmp" "./$TOOL")
    mv -f "$OUT.tmp" "$OUT"
  fi
  echo "$OUT"
done
