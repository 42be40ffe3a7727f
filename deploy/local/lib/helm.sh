# helm, built from the Go module proxy into the project's cache: the chart's test renders the chart with
# the real helm. Sourced; needs common.sh.
#
#   helm_fetch      helm into the cache (idempotent, locked); sets HELM_BIN

HELM_VERSION=${HELM_VERSION:-v3.22.0}

helm_fetch() {
  local dir=$CHARGE_OUTBOX_CACHE/helm-$HELM_VERSION go
  HELM_BIN=$dir/bin/helm
  [[ -x $HELM_BIN ]] && return 0
  go=$(command -v go || true)
  [[ -n $go ]] || go=/usr/local/go/bin/go
  [[ -x $go ]] || die "helm_fetch: Go is needed to build helm $HELM_VERSION (go install helm.sh/helm/v3/cmd/helm)"
  mkdir -p "$CHARGE_OUTBOX_CACHE"
  # Locked: two test runs at once would build it twice into one place. Built beside, then moved, so that a
  # killed build never leaves a binary that looks usable.
  (
    flock 9
    [[ -x $HELM_BIN ]] && exit 0
    say "building helm $HELM_VERSION from the Go module proxy (about a minute and a half)"
    local work
    work=$(mktemp -d "$CHARGE_OUTBOX_CACHE/helm-build.XXXXXX")
    trap 'rm -rf "$work"' EXIT
    GOTOOLCHAIN=local GOFLAGS=-modcacherw GOBIN=$work/bin GOPATH=$work/gopath GOCACHE=$work/gocache \
      "$go" install "helm.sh/helm/v3/cmd/helm@$HELM_VERSION" >"$work/build.log" 2>&1 ||
      { tail -n 20 "$work/build.log" >&2; die "helm_fetch: building helm $HELM_VERSION failed"; }
    mkdir -p "$dir/bin"
    mv "$work/bin/helm" "$HELM_BIN"
  ) 9>"$CHARGE_OUTBOX_CACHE/helm.lock"
}
