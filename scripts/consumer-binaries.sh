#!/usr/bin/env bash
# Builds the consumers the integration tests read Referables with, kro and provider-kubernetes,
# from the Go module proxy into a cache folder outside the repository, once, as
# control-plane-binaries.sh builds the control plane. Their code is never part of this
# repository: only the binaries and the CRDs copied from their published modules land in the
# cache. Prints the folder holding them on its last line of stdout; progress goes to stderr,
# Go's own output to a log file beside the build.
#
# The folder holds:
#   kro                              the kro controller (github.com/kubernetes-sigs/kro/cmd/controller)
#   kro-crds/*.yaml                  kro's CRDs, from its module's helm/crds
#   provider-kubernetes              provider-kubernetes (cmd/provider)
#   provider-kubernetes-crds/*.yaml  its CRDs (Object, ProviderConfig, ...), from package/crds
#
# REFERABLE_CONSUMERS_DIR=/path uses a folder laid out as above as it is and builds nothing.
set -euo pipefail
# shellcheck source=lib/go-build.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib/go-build.sh"

# The pinned versions: the one place they are written (README.md and docs/consuming.md name
# them; test/unit/consumer-versions.test.ts checks that they agree).
KRO_VERSION="${REFERABLE_KRO_VERSION:-v0.9.4}"
PK_VERSION="${REFERABLE_PROVIDER_KUBERNETES_VERSION:-v1.2.1}"
KRO_MODULE=github.com/kubernetes-sigs/kro
PK_MODULE=github.com/crossplane-contrib/provider-kubernetes
OUT="$CACHE_ROOT/consumers/kro-$KRO_VERSION-provider-kubernetes-$PK_VERSION"

log() { printf '[consumers] %s\n' "$*" >&2; }

use_given REFERABLE_CONSUMERS_DIR

# The binaries carry no version flag worth trusting (kro's comes from ldflags), so a stamp
# written after a complete build names what the folder holds.
STAMP="$KRO_MODULE@$KRO_VERSION $PK_MODULE@$PK_VERSION"
have_pinned() {
  [[ -x "$OUT/kro" && -x "$OUT/provider-kubernetes" && -f "$OUT/built" ]] || return 1
  [[ "$(cat "$OUT/built")" == "$STAMP" ]] || return 1
  compgen -G "$OUT/kro-crds/*.yaml" >/dev/null && compgen -G "$OUT/provider-kubernetes-crds/*.yaml" >/dev/null
}

WORK="$CACHE_ROOT/consumers/build-kro-$KRO_VERSION-provider-kubernetes-$PK_VERSION"
reuse_or_lock "$WORK" "$OUT" "cached: kro $KRO_VERSION and provider-kubernetes $PK_VERSION in $OUT"
rm -f "$OUT/built"

# build NAME MODULE VERSION PACKAGE LDFLAGS: a throwaway module per tool that requires only that
# tool, so `go build` resolves exactly the tool's own go.mod (kro and provider-kubernetes pin
# different controller-runtime and client-go versions; one module for both would mix them).
build() {
  local name=$1 module=$2 version=$3 pkg=$4 ldflags=$5 started=$SECONDS
  local dir="$WORK/$name"
  mkdir -p "$dir"
  printf 'module referable.dev/%s-build\n\ngo 1.26\n\nrequire %s %s\n' "$name" "$module" "$version" >"$dir/go.mod"
  rm -f "$dir/go.sum"
  log "building $name $version from $pkg (minutes on the first run; Go's output: $GO_LOG)"
  (cd "$dir" && quietly "$GO_LOG" "downloading $name's modules" go mod download "$module")
  (cd "$dir" && quietly "$GO_LOG" "building $name" go build -trimpath -ldflags "$ldflags" -o "$OUT/$name.tmp" "$pkg")
  mv "$OUT/$name.tmp" "$OUT/$name"
  log "built $name in $((SECONDS - started))s"
}

# copy_crds NAME MODULE VERSION SUBDIR: the CRDs as the module publishes them.
copy_crds() {
  local name=$1 module=$2 version=$3 sub=$4 src
  src=$(cd "$WORK/$name" && go list -m -f '{{.Dir}}' "$module")
  [[ -d "$src/$sub" ]] || { log "$module@$version has no $sub"; exit 1; }
  rm -rf "$OUT/$name-crds" && mkdir -p "$OUT/$name-crds"
  cp "$src/$sub"/*.yaml "$OUT/$name-crds/"
  chmod u+w "$OUT/$name-crds"/*.yaml
  log "copied $(ls "$OUT/$name-crds" | wc -l) CRDs of $name from $sub"
}

build kro "$KRO_MODULE" "$KRO_VERSION" "$KRO_MODULE/cmd/controller" \
  "-s -w -X sigs.k8s.io/release-utils/version.gitVersion=$KRO_VERSION"
copy_crds kro "$KRO_MODULE" "$KRO_VERSION" helm/crds
build provider-kubernetes "$PK_MODULE" "$PK_VERSION" "$PK_MODULE/cmd/provider" \
  "-s -w -X $PK_MODULE/internal/version.Version=$PK_VERSION"
copy_crds provider-kubernetes "$PK_MODULE" "$PK_VERSION" package/crds

echo "$STAMP" >"$OUT/built"
have_pinned || { log "the build did not leave every file in $OUT"; exit 1; }
log "ready: $OUT"
echo "$OUT"
