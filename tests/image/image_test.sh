#!/usr/bin/env bash
# The container images as a container runtime would use them: each OCI archive unpacked into a root
# filesystem, checked (no shell, no compiler, a non-root user, PATH finding every daemon, the production
# image without acquirer-sim), then every daemon run from its image's root filesystem with chroot as user
# 65532 against the test's PostgreSQL and Kafka: charge-migrate migrates a fresh database, acquirer-sim
# (from the test double's image) and charge-api answer a charge, outbox-relay publishes its events (read
# back from Kafka), and a reconciler sweep exits 0. The images hold a release build: FAILPOINTS makes a
# daemon refuse to start.
#
#   CHARGE_OUTBOX_IMAGE=ARCHIVE image_test.sh   (deploy/image/build writes BUILD_DIR/image/charge-outbox.oci.tar)
#
# The test double's image is CHARGE_OUTBOX_ACQUIRER_SIM_IMAGE, by default charge-outbox-acquirer-sim.oci.tar
# beside the production one.
#
# Needs root (chroot), CHARGE_OUTBOX_IMAGE, TEST_DATABASE_URL and KAFKA_BOOTSTRAP_SERVERS (tests/run
# exports all three), and Kafka's jars (tests/run fetches them) for the console consumer.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
source "$root/deploy/local/lib/common.sh"
source "$root/deploy/local/lib/kafka.sh"

fail() { printf 'FAIL: %s\n' "$*" >&2; exit 1; }
step() { printf '== %s (%ss)\n' "$*" "$SECONDS" >&2; }

[[ -n ${CHARGE_OUTBOX_IMAGE:-} ]] || fail "CHARGE_OUTBOX_IMAGE is not set: run through tests/run, which builds the image"
archive=$CHARGE_OUTBOX_IMAGE
[[ -f $archive ]] || fail "no image archive at $archive: build it with deploy/image/build (tests/run does)"
test_double_archive=${CHARGE_OUTBOX_ACQUIRER_SIM_IMAGE:-$(dirname "$archive")/charge-outbox-acquirer-sim.oci.tar}
[[ -f $test_double_archive ]] ||
  fail "no acquirer-sim image at $test_double_archive: deploy/image/build writes it beside the production image"
[[ -n ${TEST_DATABASE_URL:-} ]] || fail "TEST_DATABASE_URL is not set: run through tests/run, which starts PostgreSQL"
[[ -n ${KAFKA_BOOTSTRAP_SERVERS:-} ]] || fail "KAFKA_BOOTSTRAP_SERVERS is not set: run through tests/run, which starts Kafka"
[[ $(id -u) -eq 0 ]] || fail "the image test needs root to chroot into the image's root filesystem"
command -v jq >/dev/null || fail "jq is missing: run deploy/local/install-deps"

daemons=(charge-api outbox-relay reconciler charge-migrate settlement-projection charge-admin)
run_id=$(od -An -tx1 -N6 /dev/urandom | tr -d ' \n')
database=image_test_$run_id
topic=image-test-$run_id
# In /tmp, not the build tree: the unpacked root filesystem is traversed by uid 65532.
work=$(mktemp -d /tmp/charge-outbox-image-test.XXXXXX)
chmod 755 "$work"
rootfs=$work/rootfs
test_double_rootfs=$work/acquirer-sim-rootfs
logs=$work/logs
mkdir -p "$logs"

admin_psql() { psql -X -q -v ON_ERROR_STOP=1 "$TEST_DATABASE_URL" "$@"; }
# The URL's path names the database: replace it, keeping the rest (host, user, query string).
database_url=$(sed -E "s#^(postgres(ql)?://[^/?]+)(/[^?]*)?#\1/$database#" <<<"$TEST_DATABASE_URL")
sql() { psql -X -q -A -t -v ON_ERROR_STOP=1 "$database_url" -c "$1"; }

finished=false
cleanup() {
  local status=$?
  for pid_file in "$work"/*.pid; do [[ -e $pid_file ]] && stop_pid_file "$pid_file" 10; done
  if [[ $finished != true ]]; then
    for log in "$logs"/*.log; do
      [[ -s $log ]] || continue
      printf -- '--- last lines of %s ---\n' "$(basename "$log")" >&2
      tail -n 20 "$log" >&2
    done
  fi
  admin_psql -v db="$database" <<<'DROP DATABASE IF EXISTS :"db" WITH (FORCE)' >/dev/null 2>&1 || true
  rm -rf "$work"
  exit "$status"
}
trap cleanup EXIT

# --- unpack: OCI layout → manifest → config and layers, each blob checked against its digest
# unpack ARCHIVE ROOTFS: the image's layers extracted into ROOTFS; sets `config` to its config blob.
unpack() {
  local archive=$1 rootfs=$2 layout manifest_digest manifest layers layer media_type path decompress whiteouts
  step "unpacking $archive"
  layout=$work/oci-$(basename "$rootfs")
  mkdir -p "$layout" "$rootfs"
  tar -xf "$archive" -C "$layout"
  [[ -f $layout/oci-layout && -f $layout/index.json ]] || fail "$archive is not an OCI layout (no oci-layout or index.json)"
  blob() {
    local digest=$1 path
    path=$layout/blobs/${digest/://}
    [[ -f $path ]] || fail "blob $digest is missing from the archive"
    [[ $(sha256sum "$path" | cut -d' ' -f1) == "${digest#sha256:}" ]] || fail "blob $digest does not match its digest"
    echo "$path"
  }
  manifest_digest=$(jq -r '[.manifests[] | select(.mediaType == "application/vnd.oci.image.manifest.v1+json")]
    | if length == 1 then .[0].digest else error("expected one image manifest, found \(length)") end' \
    "$layout/index.json") || fail "index.json: $manifest_digest"
  manifest=$(blob "$manifest_digest")
  config=$(blob "$(jq -r .config.digest "$manifest")")
  mapfile -t layers < <(jq -r '.layers[] | .mediaType + " " + .digest' "$manifest")
  ((${#layers[@]} > 0)) || fail "the manifest lists no layer"
  for layer in "${layers[@]}"; do
    media_type=${layer% *}
    path=$(blob "${layer#* }")
    case $media_type in
      application/vnd.oci.image.layer.v1.tar) decompress=() ;;
      application/vnd.oci.image.layer.v1.tar+gzip) decompress=(--gzip) ;;
      application/vnd.oci.image.layer.v1.tar+zstd) decompress=(--zstd) ;;
      *) fail "layer media type $media_type is not one this test reads" ;;
    esac
    # Whiteouts delete files of lower layers; a one-layer image has none, and this test does not apply them.
    # No grep -q: with pipefail, tar cut short by it would hide a match.
    whiteouts=$(tar -t "${decompress[@]}" -f "$path" | grep '\.wh\.' || true)
    [[ -z $whiteouts ]] || fail "layer ${layer#* } holds whiteout files, which this test does not apply: $whiteouts"
    tar -x "${decompress[@]}" --numeric-owner -p -f "$path" -C "$rootfs"
  done
}
unpack "$test_double_archive" "$test_double_rootfs"
test_double_config=$config
unpack "$archive" "$rootfs"

# --- what each image is, and is not
# check_image ROOTFS CONFIG TITLE DAEMON...: sets `uid` and `image_path` from the image's configuration.
check_image() {
  local rootfs=$1 config=$2 title=$3 user d found dir lib owner package status shells compilers writable
  shift 3
  step "checking the configuration and contents of $title"
  user=$(jq -r '.config.User // ""' "$config")
  uid=${user%%:*}
  [[ $uid =~ ^[0-9]+$ && $uid -ne 0 ]] || fail "$title's User is '$user', not a numeric non-root uid"
  [[ $(jq -r '.config.Entrypoint // [] | length' "$config") == 0 ]] ||
    fail "$title has an ENTRYPOINT ($(jq -c .config.Entrypoint "$config")): the chart's args would be passed to it"
  image_path=$(jq -r '.config.Env // [] | map(select(startswith("PATH="))) | .[0] // "" | ltrimstr("PATH=")' "$config")
  [[ -n $image_path ]] || fail "$title sets no PATH: args: [\"charge-api\"] would not find the binary"
  for d in "$@"; do
    found=false
    IFS=: read -r -a path_dirs <<<"$image_path"
    for dir in "${path_dirs[@]}"; do [[ -x $rootfs$dir/$d ]] && found=true; done
    [[ $found == true ]] || fail "$d is not in $title's PATH ($image_path)"
  done
  for label in title description version revision created; do
    [[ -n $(jq -r --arg l "org.opencontainers.image.$label" '.config.Labels[$l] // ""' "$config") ]] ||
      fail "$title: label org.opencontainers.image.$label is missing"
  done
  [[ $(jq -r '.config.Labels["org.opencontainers.image.title"]' "$config") == "$title" ]] ||
    fail "the image titled $(jq -r '.config.Labels["org.opencontainers.image.title"]' "$config") is not $title"
  # What scanners read (Trivy, Grype, syft): the distribution and, for every library the image carries, the
  # Debian package it came from at the version installed on this machine, which the build refreshed.
  grep -q '^ID=debian$' "$rootfs/etc/os-release" || fail "$title has no Debian /etc/os-release: scanners cannot tell its distribution"
  for lib in "$rootfs"/usr/lib/x86_64-linux-gnu/*.so*; do
    owner=$(dpkg -S "/usr/lib/x86_64-linux-gnu/$(basename "$lib")" 2>/dev/null ||
            dpkg -S "/lib/x86_64-linux-gnu/$(basename "$lib")" 2>/dev/null) || fail "$(basename "$lib") belongs to no Debian package here"
    package=${owner%%:*}
    status=$rootfs/var/lib/dpkg/status.d/$package
    [[ -f $status ]] || fail "$(basename "$lib") is in $title without a dpkg status entry for $package"
    [[ $(sed -n 's/^Version: //p' "$status") == "$(dpkg-query -W -f='${Version}' "$package")" ]] ||
      fail "$title lists $package at $(sed -n 's/^Version: //p' "$status"), this machine has $(dpkg-query -W -f='${Version}' "$package")"
  done
  for package in libssl3 ca-certificates tzdata; do
    grep -q '^Status: install ok installed$' "$rootfs/var/lib/dpkg/status.d/$package" 2>/dev/null ||
      fail "no dpkg status entry for $package in $title"
  done
  shells=$(find "$rootfs" \( -name sh -o -name bash -o -name dash -o -name busybox -o -name ash -o -name zsh \) -printf '/%P\n')
  [[ -z $shells ]] || fail "$title holds a shell: $shells"
  compilers=$(find "$rootfs" \( -name 'gcc*' -o -name 'g++*' -o -name cc -o -name c++ -o -name 'clang*' \
    -o -name cc1 -o -name cc1plus -o -name ld -o -name 'ld.bfd' -o -name 'ld.gold' -o -name as \) -printf '/%P\n')
  [[ -z $compilers ]] || fail "$title holds a compiler or linker: $compilers"
  # What a read-only root filesystem would refuse: anything the image's user could write outside /tmp.
  writable=$(find "$rootfs" -path "$rootfs/tmp" -prune -o ! -type l \( -perm -o+w -o -uid "$uid" \) -printf '/%P\n' |
    grep -v '^/tmp$' | grep -v '^/home/' || true)
  [[ -z $writable ]] || fail "$title's user could write outside /tmp and its home: $writable"
  [[ -d $rootfs/tmp && $(stat -c %a "$rootfs/tmp") == 1777 ]] || fail "/tmp is missing or not mode 1777 in $title"
}
check_image "$test_double_rootfs" "$test_double_config" charge-outbox-acquirer-sim acquirer-sim
[[ $(jq -r '.config.Labels["org.opencontainers.image.description"]' "$test_double_config") == "Test double, never for production"* ]] ||
  fail "the acquirer-sim image's description does not say it is a test double"
test_double_uid=$uid
test_double_path=$image_path
check_image "$rootfs" "$config" charge-outbox "${daemons[@]}"
for package in libpq5 zlib1g; do
  [[ -f $rootfs/var/lib/dpkg/status.d/$package ]] || fail "no dpkg status entry for $package in charge-outbox"
done
# The test double has an unauthenticated admin API: the production image must not carry it, under any name.
test_double_files=$(find "$rootfs" -name '*acquirer*' -printf '/%P\n')
[[ -z $test_double_files ]] || fail "the production image holds acquirer-sim: $test_double_files"

# A command run as a container would run it: from the image's root filesystem, as its user, with only the
# image's PATH and the variables of an env file (a file, so that the test's credentials never show in a
# process list), the command found through that PATH. Every step execs, so a pid file names the daemon.
# shellcheck disable=SC2016 # expanded by the inner bash, on purpose
enter='set -a; source "$0"; set +a; exec /usr/sbin/chroot --userspec="$1" "$2" "${@:3}"'
container=(env -i PATH="$image_path" /bin/bash -c "$enter")
test_double_container=(env -i PATH="$test_double_path" /bin/bash -c "$enter")
# in_image ENV_FILE COMMAND [ARGS...]
in_image() { local env_file=$1; shift; "${container[@]}" "$env_file" "$uid:$uid" "$rootfs" "$@"; }
# start_in_image NAME ENV_FILE COMMAND [ARGS...]: in the background, logging to logs/NAME.log.
start_in_image() {
  local name=$1 env_file=$2; shift 2
  start_daemon "$work/$name.pid" "$logs/$name.log" "${container[@]}" "$env_file" "$uid:$uid" "$rootfs" "$@"
}
# The same two for the test double's image.
in_test_double_image() {
  local env_file=$1; shift
  "${test_double_container[@]}" "$env_file" "$test_double_uid:$test_double_uid" "$test_double_rootfs" "$@"
}
start_in_test_double_image() {
  local name=$1 env_file=$2; shift 2
  start_daemon "$work/$name.pid" "$logs/$name.log" "${test_double_container[@]}" "$env_file" \
    "$test_double_uid:$test_double_uid" "$test_double_rootfs" "$@"
}

# --help: every binary of the image says how to run it, with nothing configured, and exits 0.
step "--help of every binary"
: >"$work/empty.env"
for d in "${daemons[@]}"; do
  help=$(in_image "$work/empty.env" "$d" --help 2>&1) || fail "$d --help exited non-zero: $help"
  grep -q "^usage: $d" <<<"$help" || fail "$d --help does not start with its usage: $help"
  grep -q "docs/configuration.md" <<<"$help" || fail "$d --help does not point at docs/configuration.md: $help"
done
help=$(in_test_double_image "$work/empty.env" acquirer-sim --help 2>&1) || fail "acquirer-sim --help exited non-zero: $help"
grep -q "^usage: acquirer-sim" <<<"$help" || fail "acquirer-sim --help does not start with its usage: $help"

acquirer_port=$(free_port)
api_port=$(free_port)
api_admin_port=$(free_port)
relay_port=$(free_port)
acquirer_key=ak_test_$(random_hex)
charge_api_key=sk_test_$(random_hex)
merchant_id=$(cat /proc/sys/kernel/random/uuid)

# Secrets in the environment, everything else in a config file passed with --config, as the chart does
# (its ConfigMap is mounted read-only at /etc/charge-outbox). The env files are sourced by the test's root
# shell before chroot drops to the image's user, so they stay private to root.
umask 077
cat >"$work/database.env" <<EOF
DATABASE_URL=$database_url
EOF
cat >"$work/acquirer-sim.env" <<EOF
AUTH_API_KEYS=$acquirer_key
HTTP_ADDRESS=127.0.0.1
HTTP_PORT=$acquirer_port
DATA_DIR=/tmp/acquirer-sim
EOF
cat "$work/database.env" - >"$work/acquirer-client.env" <<EOF
ACQUIRER_API_KEY=$acquirer_key
EOF
umask 022
config_dir=/etc/charge-outbox
mkdir -p "$rootfs$config_dir"
cat >"$rootfs$config_dir/charge-api.yaml" <<EOF
http: {address: 127.0.0.1, port: $api_port}
admin: {address: 127.0.0.1, port: $api_admin_port}
acquirer: {url: "http://127.0.0.1:$acquirer_port"}
EOF
cat >"$rootfs$config_dir/outbox-relay.yaml" <<EOF
admin: {address: 127.0.0.1, port: $relay_port}
kafka: {bootstrap_servers: "$KAFKA_BOOTSTRAP_SERVERS", topic: $topic, topic_partitions: 1, topic_replication_factor: 1}
EOF
cat >"$rootfs$config_dir/reconciler.yaml" <<EOF
acquirer: {url: "http://127.0.0.1:$acquirer_port"}
EOF

# --- charge-migrate: a fresh database, every migration applied
step "charge-migrate up on a fresh database"
admin_psql -v db="$database" <<<'CREATE DATABASE :"db"'
in_image "$work/database.env" charge-migrate up >"$logs/charge-migrate.log" 2>&1 ||
  fail "charge-migrate up exited $? from the image (log above)"
applied=$(sql "SELECT count(*) FROM schema_migrations")
((applied > 0)) || fail "charge-migrate up applied no migration"
sql "INSERT INTO merchants (id, name) VALUES ('$merchant_id', 'image test')" >/dev/null
psql -X -q -v ON_ERROR_STOP=1 "$database_url" -v m="$merchant_id" -v k="$charge_api_key" <<'SQL'
INSERT INTO api_keys (key_hash, merchant_id, key_prefix) VALUES (sha256(convert_to(:'k', 'UTF8')), :'m', left(:'k', 8));
SQL

# --- a release build: no failpoints, and a FAILPOINTS that would be ignored is refused instead
step "FAILPOINTS refused by the image's charge-api"
(umask 077 && { cat "$work/acquirer-client.env"; echo "FAILPOINTS=charge.after_acquirer_response=crash"; } >"$work/failpoints.env")
set +e
in_image "$work/failpoints.env" charge-api --config "$config_dir/charge-api.yaml" >"$logs/failpoints.log" 2>&1
failpoints_status=$?
set -e
[[ $failpoints_status == 2 ]] && grep -q 'FAILPOINTS.*release build without failpoints' "$logs/failpoints.log" ||
  fail "charge-api from the image with FAILPOINTS set exited $failpoints_status, expected 2 naming FAILPOINTS: $(cat "$logs/failpoints.log")"

# --- acquirer-sim (from its own image) and charge-api: one charge, captured
step "acquirer-sim and charge-api from their images"
start_in_test_double_image acquirer-sim "$work/acquirer-sim.env" acquirer-sim
wait_http "http://127.0.0.1:$acquirer_port/healthz" 60
start_in_image charge-api "$work/acquirer-client.env" charge-api --config "$config_dir/charge-api.yaml"
wait_http "http://127.0.0.1:$api_admin_port/readyz" 60

response=$work/charge.json
status=$(curl -sS -o "$response" -w '%{http_code}' --max-time 30 -X POST "http://127.0.0.1:$api_port/v1/charges" \
  -H "Authorization: Bearer $charge_api_key" -H 'Content-Type: application/json' \
  -H "Idempotency-Key: image-test-$run_id" \
  -d '{"amount": 25000, "currency": "BRL", "order_id": "IMG-1", "payment_method": "pm_tok_visa", "description": "image test"}') ||
  fail "POST /v1/charges: no answer from charge-api"
[[ $status == 201 ]] || fail "POST /v1/charges answered $status, expected 201: $(cat "$response")"
[[ $(jq -r .status "$response") == captured ]] || fail "the charge is not captured: $(cat "$response")"
charge_id=$(jq -r .id "$response")

# --- outbox-relay: the charge's events published, marked in the outbox and readable from Kafka
step "outbox-relay from the image publishes charge $charge_id"
start_in_image outbox-relay "$work/database.env" outbox-relay --config "$config_dir/outbox-relay.yaml"
wait_http "http://127.0.0.1:$relay_port/healthz" 60
events=$(sql "SELECT count(*) FROM outbox WHERE aggregateid = '$charge_id'")
((events >= 2)) || fail "expected the initiated and captured events of $charge_id in the outbox, found $events"
deadline=$((SECONDS + 60))
until [[ $(sql "SELECT count(*) FROM outbox WHERE aggregateid = '$charge_id' AND published_at IS NOT NULL") == "$events" ]]; do
  ((SECONDS < deadline)) || fail "outbox-relay did not mark the $events events of $charge_id published within 60 s"
  sleep 0.2
done
consumed=$(KAFKA_TOOLS_JAVA_OPTS="-Xmx128m -XX:TieredStopAtLevel=1 -XX:+UseSerialGC" \
  kafka_run_class org.apache.kafka.tools.consumer.ConsoleConsumer --bootstrap-server "$KAFKA_BOOTSTRAP_SERVERS" \
  --topic "$topic" --from-beginning --max-messages "$events" --timeout-ms 60000 \
  --property print.key=true --property print.headers=true 2>"$logs/console-consumer.log") ||
  fail "reading $topic from Kafka failed (log above): $consumed"
for type in payments.charge.initiated.v1 payments.charge.captured.v1; do
  grep -F "$charge_id" <<<"$consumed" | grep -qF "$type" || fail "no $type event of $charge_id on $topic: $consumed"
done

# --- reconciler: one sweep, as the CronJob runs it
step "reconciler sweep from the image"
in_image "$work/acquirer-client.env" reconciler --config "$config_dir/reconciler.yaml" sweep >"$logs/reconciler.log" 2>&1 ||
  fail "reconciler sweep exited $? from the image (log above)"
grep -q '"msg":"run summary"' "$logs/reconciler.log" || fail "the reconciler run printed no summary line"

# What the daemons wrote in the image's only writable place, for whoever mounts volumes for them
# (acquirer-sim writes its data directory in its own image's /tmp).
written=$(find "$rootfs/tmp" -mindepth 1 -printf '/tmp/%P\n')
[[ -z $written ]] || fail "a daemon wrote to /tmp (a readOnlyRootFilesystem pod needs a volume there): $written"
[[ -d $test_double_rootfs/tmp/acquirer-sim ]] || fail "acquirer-sim wrote no data directory in its image's /tmp"

finished=true
step "the images work: every daemon ran from its image as uid $uid, acquirer-sim from its own as uid $test_double_uid"
