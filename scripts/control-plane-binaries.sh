#!/usr/bin/env bash
# Builds the test control plane (kube-apiserver, etcd, kubectl) from the Go module proxy into a
# cache folder outside the repository, once. Prints the folder holding the binaries on its last
# line of stdout; progress goes to stderr.
#
# Honours envtest's conventions first: KUBEBUILDER_ASSETS, or TEST_ASSET_KUBE_APISERVER and
# TEST_ASSET_ETCD, are used as they are and nothing is built.
#
# Why a throwaway module: k8s.io/kubernetes requires its staging modules (k8s.io/api, ...) at
# v0.0.0 and replaces them with ./staging paths that do not exist in the published module, so
# it cannot be `go install`ed. We require it from a module of our own that replaces each staging
# module, read from that release's own go.mod, with its published v0.x.y.
set -euo pipefail
# shellcheck source=lib/go-build.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib/go-build.sh"

K8S_VERSION="${REFERABLE_K8S_VERSION:-v1.36.3}"
# The etcd release that Kubernetes release pins (go.etcd.io/etcd/server/v3 in its go.mod).
ETCD_VERSION="${REFERABLE_ETCD_VERSION:-v3.6.8}"
OUT="$CACHE_ROOT/control-plane/$K8S_VERSION"

log() { printf '[control-plane] %s\n' "$*" >&2; }

use_given KUBEBUILDER_ASSETS
if [[ -n "${TEST_ASSET_KUBE_APISERVER:-}" && -n "${TEST_ASSET_ETCD:-}" ]]; then
  log "using TEST_ASSET_KUBE_APISERVER and TEST_ASSET_ETCD"
  echo "$(dirname "$TEST_ASSET_KUBE_APISERVER")"
  exit 0
fi

# Each version is read into a variable before it is matched: `cmd | grep -q` under pipefail
# fails at random when grep exits first and cmd dies of SIGPIPE while printing its other lines.
have_pinned() {
  [[ -x "$OUT/kube-apiserver" && -x "$OUT/etcd" && -x "$OUT/kubectl" ]] || return 1
  local v
  v=$("$OUT/kube-apiserver" --version 2>/dev/null) || return 1
  [[ "$v" == "Kubernetes $K8S_VERSION" ]] || return 1
  v=$("$OUT/etcd" --version 2>/dev/null) || return 1
  [[ "$v" == *"etcd Version: ${ETCD_VERSION#v}"* ]] || return 1
  v=$("$OUT/kubectl" version --client 2>/dev/null) || return 1
  [[ "$v" == *"Client Version: $K8S_VERSION"* ]] || return 1
}

WORK="$CACHE_ROOT/control-plane/build-$K8S_VERSION"
reuse_or_lock "$WORK" "$OUT" "cached binaries report $K8S_VERSION and etcd $ETCD_VERSION: $OUT"
cd "$WORK"

log "reading the go.mod of k8s.io/kubernetes@$K8S_VERSION from the module proxy"
K8S_MOD=$(go mod download -json "k8s.io/kubernetes@$K8S_VERSION" 2>>"$GO_LOG" | sed -n 's/^[[:space:]]*"GoMod": "\(.*\)",\{0,1\}$/\1/p')
[[ -f "$K8S_MOD" ]] || { log "could not download k8s.io/kubernetes@$K8S_VERSION"; exit 1; }
STAGING_VERSION="v0.${K8S_VERSION#v1.}"
mapfile -t STAGING < <(sed -n 's#^[[:space:]]*\(k8s\.io/[a-z0-9-]*\) => \./staging/.*#\1#p' "$K8S_MOD")
log "${#STAGING[@]} staging modules, each replaced with its published $STAGING_VERSION"

{
  echo "module referable.dev/control-plane-build"
  echo
  echo "go 1.26"
  echo
  echo "require ("
  echo "	k8s.io/kubernetes $K8S_VERSION"
  echo "	go.etcd.io/etcd/server/v3 $ETCD_VERSION"
  echo ")"
  echo
  echo "replace ("
  for m in "${STAGING[@]}"; do echo "	$m => $m $STAGING_VERSION"; done
  echo ")"
} > go.mod
rm -f go.sum

K8S_MINOR="${K8S_VERSION#v1.}"; K8S_MINOR="${K8S_MINOR%%.*}"
VERSION_PKG=k8s.io/component-base/version
LDFLAGS="-s -w -X $VERSION_PKG.gitVersion=$K8S_VERSION -X $VERSION_PKG.gitMajor=1 -X $VERSION_PKG.gitMinor=$K8S_MINOR"
LDFLAGS+=" -X $VERSION_PKG.gitTreeState=clean -X $VERSION_PKG.buildDate=1970-01-01T00:00:00Z"
LDFLAGS+=" -X k8s.io/client-go/pkg/version.gitVersion=$K8S_VERSION -X k8s.io/client-go/pkg/version.gitMajor=1 -X k8s.io/client-go/pkg/version.gitMinor=$K8S_MINOR"

build() {
  local name=$1 pkg=$2 flags=$3 started=$SECONDS
  log "building $name from $pkg (minutes on the first run; later runs reuse Go's build cache)"
  quietly "$GO_LOG" "building $name" go build -trimpath -ldflags "$flags" -o "$OUT/$name.tmp" "$pkg"
  mv "$OUT/$name.tmp" "$OUT/$name"
  log "built $name in $((SECONDS - started))s"
}

log "downloading modules (Go's output: $GO_LOG)"
quietly "$GO_LOG" "downloading modules" go mod download || true
build etcd go.etcd.io/etcd/server/v3 "-s -w"
build kube-apiserver k8s.io/kubernetes/cmd/kube-apiserver "$LDFLAGS"
build kubectl k8s.io/kubernetes/cmd/kubectl "$LDFLAGS"

if ! have_pinned; then
  # Go resolves etcd to the highest version the module graph requires, which can be above the
  # one asked for: say what was built, so REFERABLE_ETCD_VERSION can be set to it.
  log "built binaries do not report the pinned versions ($K8S_VERSION, etcd $ETCD_VERSION):"
  log "  $("$OUT/kube-apiserver" --version 2>&1 | head -1); $("$OUT/etcd" --version 2>&1 | head -1)"
  exit 1
fi
log "ready: $OUT"
echo "$OUT"
