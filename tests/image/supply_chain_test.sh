#!/usr/bin/env bash
# The image's supply chain as a platform team checks it, with nothing but loopback: Debian's
# docker-registry on a free port, a throwaway cosign key pair, deploy/image/publish pushing the production
# image (both tags), signing its digest and attaching its provenance and SBOM; then, with the public key
# alone:
#   - cosign verify passes, for the pushed digest;
#   - cosign verify-attestation passes for the SLSA provenance (its subject is the pushed digest, its
#     source the image's revision) and for the SPDX SBOM;
#   - the SBOM lists, for every shared library in the image, its Debian package at exactly the version
#     dpkg has installed here (libssl3, libpq5 and zlib1g among them);
#   - another key pair's public key verifies neither the signature nor an attestation, and the unsigned
#     acquirer-sim image (pushed to the same registry by skopeo alone) fails verification.
# sigstore's public servers (Rekor, Fulcio, TUF) are unreachable, as they are from here: every client runs
# behind a proxy that does not exist. Signing with the key and no transparency log asks none of them;
# cosign v2's verify still tries to refresh sigstore's TUF trusted root, warns that it could not, and goes
# on, because a key-based signature needs none of it: that it then passes is what this test shows.
#
#   CHARGE_OUTBOX_IMAGE=ARCHIVE KUBE_BIN_DIR=DIR supply_chain_test.sh
#
# Needs the archives of deploy/image/build (the acquirer-sim one beside CHARGE_OUTBOX_IMAGE, or
# CHARGE_OUTBOX_ACQUIRER_SIM_IMAGE), cosign in KUBE_BIN_DIR (kube_fetch builds it; tests/run exports
# both), and Debian's skopeo, docker-registry and jq (deploy/local/install-deps).
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
source "$root/deploy/local/lib/common.sh"

fail() { printf 'FAIL: %s\n' "$*" >&2; exit 1; }
step() { printf '== %s (%ss)\n' "$*" "$SECONDS" >&2; }

archive=${CHARGE_OUTBOX_IMAGE:?CHARGE_OUTBOX_IMAGE is not set: run through tests/run, which builds the image}
test_double_archive=${CHARGE_OUTBOX_ACQUIRER_SIM_IMAGE:-$(dirname "$archive")/charge-outbox-acquirer-sim.oci.tar}
base=${archive%.oci.tar}
for file in "$archive" "$base.tags" "$base.spdx.json" "$base.provenance.json" "$test_double_archive"; do
  [[ -s $file ]] || fail "no $file: deploy/image/build writes it (tests/run runs it)"
done
cosign_bin=${KUBE_BIN_DIR:?KUBE_BIN_DIR is not set: run through tests/run, whose kube_fetch builds cosign}/cosign
[[ -x $cosign_bin ]] || fail "no cosign in $KUBE_BIN_DIR: run kube_fetch (tests/run does)"
for tool in skopeo docker-registry jq; do
  command -v "$tool" >/dev/null || fail "$tool is missing: run deploy/local/install-deps"
done

work=$(mktemp -d /tmp/charge-outbox-supply-chain.XXXXXX)
finished=false
cleanup() {
  local status=$?
  stop_pid_file "$work/registry.pid" 5
  if [[ $finished != true && -s $work/registry.log ]]; then
    printf -- '--- last lines of registry.log ---\n' >&2
    tail -n 20 "$work/registry.log" >&2
  fi
  [[ -n ${KEEP_WORK:-} ]] || rm -rf "$work"
  exit "$status"
}
trap cleanup EXIT

# A private HOME (no one's registry logins or cosign state), TUF's cache in it, and a proxy that does not
# exist for everything but loopback (Go's clients never proxy loopback): no request leaves the machine.
# KEEP_WORK=1 keeps the work directory (keys, logs, the verified statements) for a look after a failure.
export HOME=$work/home TUF_ROOT=$work/home/.sigstore/root
mkdir -p "$HOME"
export HTTPS_PROXY=http://127.0.0.1:9 HTTP_PROXY=http://127.0.0.1:9 NO_PROXY=127.0.0.1,localhost
export https_proxy=$HTTPS_PROXY http_proxy=$HTTP_PROXY no_proxy=$NO_PROXY

step "a registry on loopback"
registry_port=$(free_port)
cat >"$work/registry.yml" <<YAML
version: 0.1
log: {level: warn, accesslog: {disabled: true}}
storage: {filesystem: {rootdirectory: $work/registry}}
http: {addr: 127.0.0.1:$registry_port}
YAML
start_daemon "$work/registry.pid" "$work/registry.log" docker-registry serve "$work/registry.yml"
wait_http "http://127.0.0.1:$registry_port/v2/" 30
registry=127.0.0.1:$registry_port
repository=$registry/charge-outbox
# Plain http, which skopeo refuses unless the user's configuration names the registry insecure
# (containers-registries.conf(5)); publish reads the same entry and lets cosign use http too.
mkdir -p "$HOME/.config/containers"
printf '[[registry]]\nlocation = "%s"\ninsecure = true\n' "$registry" >"$HOME/.config/containers/registries.conf"

step "two throwaway key pairs"
export COSIGN_PASSWORD
COSIGN_PASSWORD=$(random_hex)
(cd "$work" && "$cosign_bin" generate-key-pair --output-key-prefix release >/dev/null 2>&1) ||
  fail "cosign generate-key-pair failed"
(cd "$work" && COSIGN_PASSWORD=$(random_hex) "$cosign_bin" generate-key-pair --output-key-prefix other >/dev/null 2>&1) ||
  fail "cosign generate-key-pair failed for the second pair"
[[ -s $work/release.key && -s $work/release.pub && -s $work/other.pub ]] || fail "cosign wrote no key pair"

step "deploy/image/publish $repository"
published=$(COSIGN_BIN=$cosign_bin "$root/deploy/image/publish" --key "$work/release.key" --archive "$archive" \
  --digestfile "$work/digest" "$repository" 2>"$work/publish.log") ||
  fail "deploy/image/publish failed: $(cat "$work/publish.log")"
digest=$(cat "$work/digest")
[[ $published == "$digest" && $digest =~ ^sha256:[0-9a-f]{64}$ ]] ||
  fail "publish printed '$published' and wrote '$digest' to its digest file, expected one sha256 digest"
# The password went through the environment only: neither publish's log nor its output holds it.
! grep -qF "$COSIGN_PASSWORD" "$work/publish.log" || fail "publish's log holds the key's password"
mapfile -t tags <"$base.tags"
[[ ${#tags[@]} == 2 && ${tags[1]} =~ ^${tags[0]//./\\.}-[0-9a-f]{12}(-dirty)?$ ]] ||
  fail "the build's tags are '${tags[*]}', expected the version and the version-<12 hex of the commit>[-dirty]"
# The commit the image was built from (HEAD may have moved since, in a shared checkout): one this
# repository has, the one its revision tag names.
revision=$(jq -r .predicate.buildDefinition.externalParameters.source.revision "$base.provenance.json")
git -C "$root" cat-file -e "$revision^{commit}" 2>/dev/null ||
  fail "the build's provenance names revision '$revision', which is no commit of this repository"
[[ ${tags[1]} == "${tags[0]}-${revision:0:12}"* ]] || fail "the revision tag ${tags[1]} does not name the built commit $revision"
for tag in "${tags[@]}"; do
  served=$(skopeo inspect --format '{{.Digest}}' "docker://$repository:$tag") ||
    fail "the registry does not serve $repository:$tag"
  [[ $served == "$digest" ]] || fail "$repository:$tag is $served, publish pushed $digest"
done
reference=$repository@$digest

# cosign_check KEY COMMAND [ARGS...]: cosign with only a public key, offline, against the test registry.
cosign_check() {
  local key=$1; shift
  "$cosign_bin" "$@" --key "$key" --insecure-ignore-tlog=true --allow-http-registry --allow-insecure-registry
}

step "cosign verify with the public key"
cosign_check "$work/release.pub" verify "$reference" >"$work/verify.json" 2>"$work/verify.log" ||
  fail "cosign verify failed for $reference: $(cat "$work/verify.log")"
signed=$(jq -rs '[.[][].critical.image["docker-manifest-digest"]] | unique | join(" ")' "$work/verify.json")
[[ $signed == "$digest" ]] || fail "the verified signature covers '$signed', not $digest"

step "cosign verify-attestation: the provenance"
cosign_check "$work/release.pub" verify-attestation --type slsaprovenance1 "$reference" \
  >"$work/provenance.att" 2>"$work/provenance.log" ||
  fail "cosign verify-attestation --type slsaprovenance1 failed for $reference: $(cat "$work/provenance.log")"
# statement ENVELOPES PREDICATE_TYPE: the in-toto statement of that type among cosign's verified DSSE
# envelopes (one a line, the statement base64 in .payload).
statement() {
  local payload
  while read -r payload; do
    base64 -d <<<"$payload" | jq -c --arg t "$2" 'select(.predicateType == $t)'
  done < <(jq -r .payload "$1") | head -n 1
}
statement "$work/provenance.att" https://slsa.dev/provenance/v1 >"$work/provenance.json"
[[ -s $work/provenance.json ]] ||
  fail "no SLSA provenance v1 statement among the verified attestations: $(head -c 300 "$work/provenance.att")"
subjects=$(jq -r '[.subject[].digest.sha256] | join(" ")' "$work/provenance.json")
[[ $subjects == "${digest#sha256:}" ]] || fail "the attested provenance's subject is '$subjects', the pushed digest $digest"
# The build's own statement names the same manifest: the registry serves exactly what was built.
built=$(jq -r '[.subject[].digest.sha256] | join(" ")' "$base.provenance.json")
[[ $built == "${digest#sha256:}" ]] || fail "the build's provenance names $built, the registry serves $digest"
predicate=$work/provenance.json
[[ $(jq -r .predicate.buildDefinition.externalParameters.source.revision "$predicate") == "$revision" ]] ||
  fail "the attested provenance's source revision is not the built commit $revision"
[[ $(jq -r .predicate.buildDefinition.externalParameters.version "$predicate") == "${tags[0]}" ]] ||
  fail "the provenance's version is not ${tags[0]}"
[[ -n $(jq -r '.predicate.runDetails.builder.id // ""' "$predicate") &&
   $(jq -r '.predicate.runDetails.metadata.finishedOn // ""' "$predicate") =~ ^20[0-9-]+T ]] ||
  fail "the provenance names no builder or no finish time"

step "cosign verify-attestation: the SBOM"
cosign_check "$work/release.pub" verify-attestation --type spdxjson "$reference" >"$work/sbom.att" 2>"$work/sbom.log" ||
  fail "cosign verify-attestation --type spdxjson failed for $reference: $(cat "$work/sbom.log")"
statement "$work/sbom.att" https://spdx.dev/Document >"$work/sbom.statement.json"
[[ -s $work/sbom.statement.json ]] || fail "no SPDX statement among the verified attestations: $(head -c 300 "$work/sbom.att")"
jq .predicate "$work/sbom.statement.json" >"$work/sbom.json"
[[ $(jq -r .spdxVersion "$work/sbom.json") == SPDX-2.* ]] || fail "the attested SBOM is not SPDX: $(head -c 300 "$work/sbom.json")"
[[ $(jq -r '[.subject[].digest.sha256] | join(" ")' "$work/sbom.statement.json") == "${digest#sha256:}" ]] ||
  fail "the SBOM attestation's subject is not the pushed digest"

# Every shared library in the pushed image, read from its layer, and the Debian package that owns it here.
step "the SBOM against the image's libraries and this machine's dpkg"
skopeo copy --quiet "docker://$reference" "oci:$work/pulled:image" >/dev/null ||
  fail "pulling $reference back failed"
manifest=$work/pulled/blobs/sha256/${digest#sha256:}
[[ -f $manifest ]] || fail "the pulled layout has no manifest $digest"
mapfile -t libraries < <(jq -r '.layers[].digest' "$manifest" | while read -r layer; do
  tar -tzf "$work/pulled/blobs/sha256/${layer#sha256:}"
done | sed -n 's|^\./||; s|^usr/lib/x86_64-linux-gnu/\([^/]*\.so[^/]*\)$|\1|p' | sort -u)
((${#libraries[@]} >= 10)) || fail "found only ${#libraries[@]} shared libraries in the image: ${libraries[*]}"
jq -r '.packages[] | [.name, (.versionInfo // ""),
  ([.externalRefs[]? | select(.referenceType == "purl") | .referenceLocator] | join(" "))] | @tsv' \
  "$work/sbom.json" >"$work/sbom.tsv"
owners=()
for library in "${libraries[@]}"; do
  owner=$(dpkg -S "/usr/lib/x86_64-linux-gnu/$library" 2>/dev/null || dpkg -S "/lib/x86_64-linux-gnu/$library" 2>/dev/null) ||
    fail "$library in the image belongs to no Debian package here"
  package=${owner%%:*}
  installed=$(dpkg-query -W -f='${Version}' "$package")
  listed=$(awk -F'\t' -v p="$package" '$1 == p { print $2 }' "$work/sbom.tsv" | sort -u | paste -sd' ')
  [[ $listed == "$installed" ]] ||
    fail "$library: the SBOM lists $package at '$listed', dpkg has $installed installed"
  # A purl percent-encodes the name (libstdc%2B%2B6).
  awk -F'\t' -v p="$package" '$1 == p { print $3 }' "$work/sbom.tsv" |
    grep -qF "pkg:deb/debian/$(jq -rn --arg p "$package" '$p | @uri')@" ||
    fail "$library: the SBOM's $package has no Debian purl"
  owners+=("$package")
done
mapfile -t owners < <(printf '%s\n' "${owners[@]}" | sort -u)
for package in libssl3 libpq5 zlib1g; do
  printf '%s\n' "${owners[@]}" | grep -qx "$package" || fail "no library of $package among the image's: ${owners[*]}"
done
deb_packages=$(grep -c $'\tpkg:deb/debian/' "$work/sbom.tsv" || true)
say "the SBOM lists $(wc -l <"$work/sbom.tsv") packages, $deb_packages of them Debian's; the image's ${#libraries[@]} libraries come from ${#owners[@]}, each at its installed version"

step "deploy/image/verify, as a platform team runs it"
"$root/deploy/image/verify" --key "$work/release.pub" "$reference" >"$work/verify.out" 2>"$work/verify.err" ||
  fail "deploy/image/verify failed for $reference: $(cat "$work/verify.err")"
grep -qx "provenance: built from .* at $revision.*" "$work/verify.out" ||
  fail "deploy/image/verify did not print the provenance's source: $(head -n 3 "$work/verify.out")"
grep -qx "  libssl3 $(dpkg-query -W -f '${Version}' libssl3)" "$work/verify.out" ||
  fail "deploy/image/verify did not list libssl3 at its installed version: $(cat "$work/verify.out")"

# --- what must fail
step "another key pair's public key verifies nothing"
if "$root/deploy/image/verify" --key "$work/other.pub" "$reference" >/dev/null 2>"$work/verify-other.err"; then
  fail "deploy/image/verify passed with another key pair's public key"
fi
grep -q "does not verify with $work/other.pub" "$work/verify-other.err" ||
  fail "deploy/image/verify with another key failed, but not on the signature: $(cat "$work/verify-other.err")"
if cosign_check "$work/other.pub" verify "$reference" >/dev/null 2>"$work/other.log"; then
  fail "cosign verify passed with another key pair's public key"
fi
grep -q 'no matching signatures' "$work/other.log" ||
  fail "cosign verify with another key failed, but not for want of a matching signature: $(cat "$work/other.log")"
for type in slsaprovenance1 spdxjson; do
  if cosign_check "$work/other.pub" verify-attestation --type "$type" "$reference" >/dev/null 2>"$work/other.log"; then
    fail "cosign verify-attestation --type $type passed with another key pair's public key"
  fi
  grep -q 'no matching attestations' "$work/other.log" ||
    fail "verify-attestation --type $type with another key failed, but not for want of a matching attestation: $(cat "$work/other.log")"
done

step "an unsigned image fails verification"
skopeo copy --quiet --digestfile "$work/test-double.digest" "oci-archive:$test_double_archive" \
  "docker://$registry/charge-outbox-acquirer-sim:${tags[0]}" >/dev/null || fail "pushing the acquirer-sim image failed"
unsigned=$registry/charge-outbox-acquirer-sim@$(cat "$work/test-double.digest")
if cosign_check "$work/release.pub" verify "$unsigned" >/dev/null 2>"$work/unsigned.log"; then
  fail "cosign verify passed for the unsigned $unsigned"
fi
grep -q 'no signatures found' "$work/unsigned.log" ||
  fail "cosign verify of the unsigned image failed, but not for want of a signature: $(cat "$work/unsigned.log")"

# The image's source label and provenance carry the repository's URL, never credentials a clone's URL holds.
source "$root/deploy/image/lib.sh"
for case in 'https://ci:ghp_secret@github.com/acme/charges.git|https://github.com/acme/charges.git' \
  'https://github.com/acme/charges.git?access_token=ghp_secret|https://github.com/acme/charges.git' \
  'git@github.com:acme/charges.git|git@github.com:acme/charges.git' '/work/main|/work/main'; do
  [[ $(public_source_url "${case%%|*}") == "${case#*|}" ]] ||
    fail "public_source_url ${case%%|*} gave $(public_source_url "${case%%|*}"), not ${case#*|}"
done
source_uri=$(jq -r .predicate.buildDefinition.externalParameters.source.uri "$predicate")
[[ ! $source_uri =~ ://[^/]*@ && $source_uri != *\?* ]] || fail "the provenance's source carries credentials: $source_uri"

finished=true
step "signed, attested and verified offline: $reference"
