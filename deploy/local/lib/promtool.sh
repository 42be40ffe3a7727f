# promtool, Prometheus's own rule checker, built from the Go module proxy into the project's cache: the
# chart's alerts are evaluated by it (tests/helm/alert_rules_test.sh). Sourced; needs common.sh.
#
#   promtool_fetch   promtool into the cache (idempotent, locked); sets PROMTOOL_BIN

# Prometheus's Go module versions are v0.<major><minor>.<patch>: v0.316.0 is Prometheus 3.16.0.
PROMTOOL_VERSION=${PROMTOOL_VERSION:-v0.316.0}

promtool_fetch() {
  local dir=$CHARGE_OUTBOX_CACHE/promtool-$PROMTOOL_VERSION go
  PROMTOOL_BIN=$dir/bin/promtool
  [[ -x $PROMTOOL_BIN ]] && return 0
  go=$(command -v go || true)
  [[ -n $go ]] || go=/usr/local/go/bin/go
  [[ -x $go ]] || die "promtool_fetch: Go is needed to build promtool $PROMTOOL_VERSION"
  mkdir -p "$CHARGE_OUTBOX_CACHE"
  # Locked and built beside, then moved, as helm is: a killed build never leaves a binary that looks usable.
  (
    flock 9
    [[ -x $PROMTOOL_BIN ]] && exit 0
    say "building promtool $PROMTOOL_VERSION from the Go module proxy (once: about 5 minutes, 3.6 GB of caches deleted after)"
    local work
    work=$(mktemp -d "$CHARGE_OUTBOX_CACHE/promtool-build.XXXXXX")
    trap 'chmod -R u+w "$work" 2>/dev/null; rm -rf "$work"' EXIT
    GOTOOLCHAIN=local GOFLAGS=-modcacherw GOBIN=$work/bin GOPATH=$work/gopath GOCACHE=$work/gocache CGO_ENABLED=0 \
      "$go" install "github.com/prometheus/prometheus/cmd/promtool@$PROMTOOL_VERSION" >"$work/build.log" 2>&1 ||
      { tail -n 20 "$work/build.log" >&2; die "promtool_fetch: building promtool $PROMTOOL_VERSION failed"; }
    mkdir -p "$dir/bin"
    mv "$work/bin/promtool" "$PROMTOOL_BIN"
  ) 9>"$CHARGE_OUTBOX_CACHE/promtool.lock"
}
