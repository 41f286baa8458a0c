#!/usr/bin/env bash
# Builds `helm` from the Go module proxy into a cache folder outside the repository, once, as
# control-plane-binaries.sh builds the control plane (the tests render and install the Helm
# chart in deploy/helm/referable with it). Prints the binary's path on its last line of stdout;
# progress goes to stderr, Go's own output to a log file beside the build.
#
# REFERABLE_HELM_BIN=/path/to/helm uses that binary as it is and builds nothing.
set -euo pipefail
# shellcheck source=lib/go-build.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib/go-build.sh"

HELM_VERSION="${REFERABLE_HELM_VERSION:-v4.3.1}"
OUT="$CACHE_ROOT/helm/$HELM_VERSION"

log() { printf '[helm] %s\n' "$*" >&2; }

use_given REFERABLE_HELM_BIN

# The version is read into a variable before it is matched (see control-plane-binaries.sh).
have_pinned() {
  [[ -x "$OUT/helm" ]] || return 1
  local v
  v=$("$OUT/helm" version --template '{{.Version}}' 2>/dev/null) || return 1
  [[ "$v" == "$HELM_VERSION" ]]
}

WORK="$CACHE_ROOT/helm/build-$HELM_VERSION"
reuse_or_lock "$WORK" "$OUT/helm" "cached helm reports $HELM_VERSION: $OUT/helm"
cd "$WORK"

# A throwaway module that requires helm, so `go build` resolves exactly helm's own go.mod.
MAJOR="${HELM_VERSION%%.*}"
MODULE="helm.sh/helm/$MAJOR"
[[ "$MAJOR" == "v3" || "$MAJOR" == "v4" ]] || { log "unsupported REFERABLE_HELM_VERSION $HELM_VERSION"; exit 1; }
printf 'module referable.dev/helm-build\n\ngo 1.26\n\nrequire %s %s\n' "$MODULE" "$HELM_VERSION" >go.mod
rm -f go.sum

log "building helm $HELM_VERSION from $MODULE/cmd/helm (a few minutes on the first run; Go's output: $GO_LOG)"
started=$SECONDS
quietly "$GO_LOG" "downloading helm's modules" go mod download "$MODULE"
quietly "$GO_LOG" "building helm" go build -trimpath \
  -ldflags "-s -w -X $MODULE/internal/version.version=$HELM_VERSION" \
  -o "$OUT/helm.tmp" "$MODULE/cmd/helm"
mv "$OUT/helm.tmp" "$OUT/helm"
have_pinned || { log "the built helm does not report $HELM_VERSION: $("$OUT/helm" version 2>&1 || true)"; exit 1; }
log "built helm $HELM_VERSION in $((SECONDS - started))s: $OUT/helm"
echo "$OUT/helm"
