# Shared by the scripts that build tools from the Go module proxy (control-plane-binaries.sh,
# consumer-binaries.sh, helm-binary.sh): reuse a cached build or take the build lock, find or
# fetch a Go toolchain, and run long Go commands quietly, with their output (hundreds of
# "go: downloading" lines) in a log file and a progress line every ~15 s,
# so a first build of several minutes is never silent and the useful lines stay readable.
#
# Sourced first: it sets CACHE_ROOT. The caller then defines log() (its prefixed progress line
# on stderr), have_pinned() (true when OUT holds the pinned build) and OUT.

CACHE_ROOT="${REFERABLE_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/referable}"

# use_given NAME: when the environment variable NAME is set, the build is given: logs it, prints
# its value and exits 0.
use_given() {
  local name=$1
  [[ -n "${!name:-}" ]] || return 0
  log "using $name=${!name}"
  echo "${!name}"
  exit 0
}

# reuse_or_lock WORK RESULT CACHED: when have_pinned, logs CACHED, prints RESULT and exits 0.
# Otherwise readies a build in WORK: Go (ensure_go), GOTOOLCHAIN=local, WORK and OUT made, and
# WORK.lock held, one build at a time (parallel test runs on a cold cache would otherwise write
# the same files); a build that was running meanwhile and left the pinned files ends this script
# as the cached case does. Sets GO_LOG, emptied, for Go's own output.
reuse_or_lock() {
  local work=$1 result=$2 cached=$3
  if have_pinned; then
    log "$cached"
    echo "$result"
    exit 0
  fi
  ensure_go
  export GOTOOLCHAIN=local GOFLAGS=-mod=mod
  mkdir -p "$work" "$OUT"
  exec 9>"$work.lock"
  if ! flock -n 9; then
    log "another build is running; waiting for it"
    flock 9
    if have_pinned; then echo "$result"; exit 0; fi
  fi
  GO_LOG="$work/go.log"
  : >"$GO_LOG"
}

# Makes `go` (>= 1.26) available: the one on the PATH, else the toolchain published on the
# module proxy as golang.org/toolchain, fetched once into $CACHE_ROOT/go-toolchain.
ensure_go() {
  local toolchain="${REFERABLE_GO_TOOLCHAIN:-go1.26.8}"
  go_ok() { command -v go >/dev/null && [[ "$(go env GOVERSION 2>/dev/null)" =~ ^go1\.(2[6-9]|[3-9][0-9]) ]]; }
  if ! go_ok; then
    local dir="$CACHE_ROOT/go-toolchain/$toolchain"
    if [[ ! -x "$dir/bin/go" ]]; then
      local proxy="${GOPROXY:-https://proxy.golang.org}"; proxy="${proxy%%,*}"
      log "no Go >= 1.26 on the PATH: fetching $toolchain from the module proxy"
      mkdir -p "$dir.tmp"
      curl -fsSL "$proxy/golang.org/toolchain/@v/v0.0.1-$toolchain.linux-amd64.zip" -o "$dir.zip"
      unzip -q "$dir.zip" -d "$dir.tmp"
      rm -rf "$dir" && mv "$dir.tmp/golang.org/toolchain@v0.0.1-$toolchain.linux-amd64" "$dir"
      rm -rf "$dir.tmp" "$dir.zip"
      chmod +x "$dir"/bin/* "$dir"/pkg/tool/*/* 2>/dev/null || true
    fi
    export PATH="$dir/bin:$PATH"
  fi
  log "using $(go version)"
}

# quietly LOGFILE WHAT COMMAND...: runs COMMAND with its output appended to LOGFILE, printing
# "WHAT: still running" with the elapsed time (and the modules downloaded so far) every
# REFERABLE_PROGRESS_SECONDS (15). On failure prints the log's last lines and returns its status.
quietly() {
  local logfile=$1 what=$2; shift 2
  local every="${REFERABLE_PROGRESS_SECONDS:-15}" started=$SECONDS next
  next=$((SECONDS + every))
  "$@" >>"$logfile" 2>&1 &
  local pid=$!
  while kill -0 "$pid" 2>/dev/null; do
    sleep 1
    if ((SECONDS >= next)) && kill -0 "$pid" 2>/dev/null; then
      local modules detail=""
      modules=$(grep -c '^go: downloading' "$logfile" || true)
      ((modules > 0)) && detail="$modules modules downloaded so far; "
      log "$what: still running after $((SECONDS - started))s (${detail}Go's output: $logfile)"
      next=$((SECONDS + every))
    fi
  done
  local status=0
  wait "$pid" || status=$?
  if ((status != 0)); then
    log "$what failed (exit $status); the last lines of $logfile:"
    tail -n 25 "$logfile" | sed 's/^/  /' >&2
  fi
  return "$status"
}
