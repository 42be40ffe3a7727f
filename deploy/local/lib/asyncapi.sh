# The AsyncAPI parser (@asyncapi/parser, from npm) in the project's cache: the events test
# (tests/events/asyncapi_test.sh) validates docs/events/asyncapi.yaml with it. Sourced; needs common.sh.
#
#   asyncapi_fetch    installs it (idempotent, locked); sets ASYNCAPI_PARSER_DIR
#
# The exact dependency tree is pinned by deploy/local/asyncapi/package-lock.json and installed with
# `npm ci --ignore-scripts` (no package's install script runs). Keyed on the lock file's hash: editing the
# pins makes a new directory, and a warm cache costs nothing.

asyncapi_fetch() {
  local pins=$CHARGE_OUTBOX_ROOT/deploy/local/asyncapi key dir
  key=$(cat "$pins/package.json" "$pins/package-lock.json" | sha256sum)
  dir=$CHARGE_OUTBOX_CACHE/asyncapi-parser-${key:0:16}
  ASYNCAPI_PARSER_DIR=$dir
  [[ -f $dir/installed ]] && return 0
  command -v npm >/dev/null || die "asyncapi_fetch: npm is needed (deploy/local/install-deps installs it)"
  mkdir -p "$CHARGE_OUTBOX_CACHE"
  # Installed beside, then moved, so that a killed install never leaves a directory that looks usable.
  (
    flock 9
    [[ -f $dir/installed ]] && exit 0
    say "installing the AsyncAPI parser from npm into $dir (about half a minute)"
    local work
    work=$(mktemp -d "$CHARGE_OUTBOX_CACHE/asyncapi-build.XXXXXX")
    trap 'rm -rf "$work"' EXIT
    cp "$pins/package.json" "$pins/package-lock.json" "$work/"
    (cd "$work" && npm ci --ignore-scripts --no-audit --no-fund --omit=dev) >"$work/install.log" 2>&1 ||
      { tail -n 20 "$work/install.log" >&2; die "asyncapi_fetch: npm ci failed"; }
    touch "$work/installed"
    rm -rf "$dir"
    mv "$work" "$dir"
    trap - EXIT
  ) 9>"$CHARGE_OUTBOX_CACHE/asyncapi.lock"
}
