# What deploy/image/build, publish and verify share. Sourced; needs deploy/local/lib/common.sh.

# public_source_url URL: the repository's URL as anyone may read it in the image's label and provenance,
# without the credentials a clone's URL can carry (https://user:token@host/..., ?access_token=...).
public_source_url() {
  sed -E 's#^([A-Za-z][A-Za-z0-9+.-]*://)[^/@]*@#\1#; s#[?].*$##' <<<"$1"
}

# registry_marked_insecure HOST[:PORT]: a [[registry]] whose location (or prefix) is HOST[:PORT] says
# insecure = true in the user's or the machine's containers-registries.conf(5), the files skopeo reads: a
# registry of your own on plain http, which cosign then reaches over http too.
registry_marked_insecure() {
  local file files=()
  for file in "${XDG_CONFIG_HOME:-$HOME/.config}/containers/registries.conf" /etc/containers/registries.conf; do
    [[ -r $file ]] && files+=("$file")
  done
  ((${#files[@]} > 0)) || return 1
  awk -v host="$1" '
    function done_block() { if (matched && insecure) found = 1; matched = 0; insecure = 0 }
    /^[[:space:]]*\[\[registry\]\]/ { done_block(); next }
    /^[[:space:]]*\[/ { done_block(); next }
    /^[[:space:]]*(location|prefix)[[:space:]]*=/ { v = $0; sub(/^[^=]*=[[:space:]]*"/, "", v); sub(/".*/, "", v); if (v == host) matched = 1 }
    /^[[:space:]]*insecure[[:space:]]*=[[:space:]]*true/ { insecure = 1 }
    END { done_block(); exit found ? 0 : 1 }' "${files[@]}"
}

# image_cosign_bin: sets COSIGN_BIN: the caller's, else the one kube_fetch builds with the control plane
# (KUBE_BIN_DIR's when set, as tests/run exports it).
image_cosign_bin() {
  if [[ -z ${COSIGN_BIN:-} && -n ${KUBE_BIN_DIR:-} && -x $KUBE_BIN_DIR/cosign ]]; then
    COSIGN_BIN=$KUBE_BIN_DIR/cosign
  elif [[ -z ${COSIGN_BIN:-} ]]; then
    source "$CHARGE_OUTBOX_ROOT/deploy/local/lib/kube.sh"
    kube_fetch
    COSIGN_BIN=$KUBE_BIN_DIR/cosign
  fi
  [[ -x $COSIGN_BIN ]] || die "no cosign at $COSIGN_BIN"
}
