#!/usr/bin/env bash
# docs/operations.md, run as a person would run it: every ```sh block of the page, pasted in order into one
# shell, against a real Kubernetes node (kubelet + containerd) whose pods pull the image from a registry.
#
# The page's blocks carry a name after the language (```sh install); this test runs each named block once,
# checks what it did (the database, the topic, the cluster, the answers), and fails if the page has a block
# it did not run, a block without a name, or a command written inline outside a block. What the person
# brings is brought here as a platform team would: PostgreSQL (TLS with a private CA, passwords), Kafka (SASL,
# an authorizer enforcing the page's ACLs), the acquirer and a registry run on the host, at the node's address.
#
# Two things stand in for a person's machine, and nothing else: the Kafka command-line tools are the jars'
# classes under their usual script names, and helm's install, upgrade and template get one more values
# file, this test's (one replica of each daemon, the test acquirer's certificate checked against the page's
# CA, global.acquirer.trustCaBundle, and a 5 s acquirer visibility window, so that a window report can cover
# captures just made).
# And where production would use SASL_SSL with SCRAM, the test's broker speaks SASL_PLAINTEXT with PLAIN
# (the page takes both from variables); PostgreSQL's TLS is real, checked with verify-full.
#
# Arguments: the acquirer-sim binary. Needs root, KUBE_BIN_DIR and HELM_BIN (tests/run), the image
# (CHARGE_OUTBOX_IMAGE, an OCI archive in BUILD/image/, as tests/run builds it), skopeo and
# docker-registry (deploy/local/install-deps).
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
source "$root/deploy/local/lib/common.sh"
source "$root/deploy/local/lib/kube.sh"
source "$root/deploy/local/lib/kube_node.sh"
source "$root/deploy/local/lib/postgres.sh"
source "$root/deploy/local/lib/kafka.sh"
source "$root/deploy/local/lib/tls.sh"
acquirer_sim=${1:?usage: operations_docs_test.sh ACQUIRER_SIM_BIN}
helm_bin=${HELM_BIN:?HELM_BIN is not set: tests/run builds helm and exports it}
: "${KUBE_BIN_DIR:?KUBE_BIN_DIR is not set: tests/run builds the control plane and node (kube_fetch)}"
image_archive=${CHARGE_OUTBOX_IMAGE:?CHARGE_OUTBOX_IMAGE is not set: tests/run builds the image}
doc=$root/docs/operations.md
started=$SECONDS

fail() { printf 'FAIL: %s\n' "$*" >&2; exit 1; }
step() { printf '== %s (%ss)\n' "$*" "$((SECONDS - started))" >&2; }

# ---- The page's blocks ------------------------------------------------------------------------------------
state=$(mktemp -d /tmp/charge-outbox-docs.XXXXXX)
chmod 755 "$state"
trap 'rm -rf "$state"' EXIT   # until the cluster's teardown below takes over
blocks=$state/blocks
mkdir -p "$blocks"
# Every fenced block of the page that is shell must have a name, unique; other languages (yaml, text) are
# examples, not commands.
awk -v dir="$blocks" '
  /^```/ && !inside { inside = 1; split(substr($0, 4), w, " "); lang = w[1]; name = w[2]
                      if (lang == "sh" || lang == "bash" || lang == "shell") {
                        if (name == "") { printf "line %d: a shell block without a name\n", NR > "/dev/stderr"; bad = 1 }
                        else if (name in seen) { printf "line %d: a second block named %s\n", NR, name > "/dev/stderr"; bad = 1 }
                        else { seen[name] = 1; out = dir "/" name ".sh"; print name > (dir "/ORDER") }
                      } else out = ""
                      next }
  /^```/ && inside { inside = 0; out = ""; next }
  inside && out != "" { print > out }
  END { exit bad }' "$doc" || fail "docs/operations.md: every shell block needs a unique name (\`\`\`sh NAME)"
# A command is a block, never inline text a test cannot run: no `kubectl logs deploy/...` or
# `charge-admin review list --reason ...` in a sentence. A command's name alone, or with a word
# (`helm upgrade`, `review show`), names it; with a flag, a variable, a placeholder or a path it is one.
inline=$(awk '/^```/ { inside = !inside; next } !inside' "$doc" |
  grep -oE '`(kubectl|helm|charge-admin|outbox-relay|reconciler|curl|psql|kafka-[a-z-]+\.sh|skopeo) [^`]*( -|[$<=/])[^`]*`' || true)
[[ -z $inline ]] || fail "docs/operations.md has commands inline, outside a block the test runs: $inline"

ran=() current_block=""
# run_block NAME: runs the page's block in this shell, as pasted (its variables stay for the next blocks;
# set -e stops at its first failing command), its output kept in $state/out/NAME and shown on failure.
run_block() {
  local name=$1
  [[ -f $blocks/$name.sh ]] || fail "docs/operations.md has no block named $name"
  step "docs/operations.md: $name"
  current_block=$name
  source "$blocks/$name.sh" >"$state/out/$name" 2>&1
  current_block=""
  ran+=("$name")
}

# ---- What a person brings, and teardown ------------------------------------------------------------------
mkdir -p "$state/out" "$state/bin" "$state/home" "$state/checkout/build" "$state/registry"
# A block that fails exits this shell inside its output's redirection: the report goes to the test's own.
exec {test_stdout}>&1 {test_stderr}>&2
on_exit() {
  local status=$?
  exec 1>&"$test_stdout" 2>&"$test_stderr"
  if ((status != 0)); then
    [[ -z $current_block ]] || { printf -- '-- the output of the block %s:\n' "$current_block" >&2; cat "$state/out/$current_block" >&2 || true; }
    [[ -z $current_block ]] || printf 'FAIL: the block %s of docs/operations.md failed (status %s)\n' "$current_block" "$status" >&2
    kube_print_logs "$state"
    if [[ -n ${OPERATIONS_DOCS_TEST_KEEP:-} ]]; then
      say "kept for a look: KUBECONFIG=$state/admin.kubeconfig; touch $state/done to tear down"
      until [[ -f $state/done ]]; do sleep 1; done
    fi
  fi
  kill $(jobs -p) 2>/dev/null || true
  kube_node_stop "$state" || true
  kube_stop "$state" || true
  stop_pid_file "$state/pids/acquirer-tls.pid" 5 || true
  stop_pid_file "$state/pids/acquirer-sim.pid" 5 || true
  stop_pid_file "$state/pids/registry.pid" 5 || true
  kafka_stop "$state" || true
  pg_stop "$state" || true
  rm -rf "$state"
}
trap on_exit EXIT
kube_use "$state"
kubectl() { "$KUBE_BIN_DIR/kubectl" "$@"; }

step "the control plane and a real node"
KUBE_FAKE_NODE=0 kube_start "$state"
# No image of ours is imported: the page's image step pushes it to the registry, and the node pulls it.
kube_node_start "$state"
node_ip=$(kube_node_ip)

step "a registry, PostgreSQL, Kafka and acquirer-sim on the host, at $node_ip"
registry_port=$(free_port)
cat >"$state/registry/config.yml" <<YAML
version: 0.1
log: {level: warn}
storage: {filesystem: {rootdirectory: $state/registry/data}}
http: {addr: 127.0.0.1:$registry_port}
YAML
start_daemon "$state/pids/registry.pid" "$state/logs/registry.log" docker-registry serve "$state/registry/config.yml"
wait_http "http://127.0.0.1:$registry_port/v2/"
pg_port=$(free_port)
# A private CA, as a platform team's: it signs the certificate of PostgreSQL and of the acquirer, for the
# node's address, and the page's install mounts it in every pod (global.caBundle) with sslmode verify-full.
tls_ca_make "$state/tls" "$node_ip"
chown postgres "$state/tls/server.key" && chmod 600 "$state/tls/server.key"
# Loopback is the administrator's (trusted); the pods and anything at the node's address give passwords,
# so each daemon's role and the page's passwords are what let it in.
PG_LISTEN_ADDRESSES="127.0.0.1,$node_ip" PG_PASSWORD_CIDRS="$KUBE_NODE_POD_CIDR $node_ip/32" \
  PG_EXTRA_SETTINGS="ssl = on"$'\n'"ssl_cert_file = '$state/tls/server.crt'"$'\n'"ssl_key_file = '$state/tls/server.key'" \
  pg_start "$state" "$pg_port" fast
kafka_port=$(free_port) kafka_controller_port=$(free_port) kafka_sasl_port=$(free_port)
# Two client listeners: loopback PLAINTEXT, the broker's own (its readiness probe, its heartbeats to its
# controller), whose User:ANONYMOUS is therefore a super user; and SASL at the node's address, the only one
# the pods and the page reach, where every client is a user the authorizer checks against the page's ACLs.
kafka_users=(admin:admin-secret outbox-relay:relay-secret settlement:settlement-secret)
jaas="org.apache.kafka.common.security.plain.PlainLoginModule required username=\"admin\" password=\"admin-secret\""
for user in "${kafka_users[@]}"; do jaas+=" user_${user%%:*}=\"${user#*:}\""; done
KAFKA_EXTRA_PROPERTIES="listeners=PLAINTEXT://127.0.0.1:$kafka_port,CONTROLLER://127.0.0.1:$kafka_controller_port,SASL_PLAINTEXT://$node_ip:$kafka_sasl_port
advertised.listeners=PLAINTEXT://127.0.0.1:$kafka_port,CONTROLLER://127.0.0.1:$kafka_controller_port,SASL_PLAINTEXT://$node_ip:$kafka_sasl_port
listener.security.protocol.map=PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT,SASL_PLAINTEXT:SASL_PLAINTEXT
sasl.enabled.mechanisms=PLAIN
listener.name.sasl_plaintext.plain.sasl.jaas.config=$jaas;
authorizer.class.name=org.apache.kafka.metadata.authorizer.StandardAuthorizer
super.users=User:ANONYMOUS;User:admin" \
  kafka_start "$state" "$kafka_port" "$kafka_controller_port"
kafka_wait "$kafka_port" 120 "$state"
# A client's properties for the SASL listener: the administrator's (the page's KAFKA_ADMIN_CONFIG), a
# consumer's (which must not be able to write).
kafka_client_config() {
  printf 'security.protocol=SASL_PLAINTEXT\nsasl.mechanism=PLAIN\nsasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required username="%s" password="%s";\n' "$1" "$2"
}
kafka_client_config admin admin-secret >"$state/kafka-admin.properties"
kafka_client_config settlement settlement-secret >"$state/kafka-consumer.properties"
acquirer_port=$(free_port) acquirer_tls_port=$(free_port)
mkdir -p "$state/acquirer-sim"
start_daemon "$state/pids/acquirer-sim.pid" "$state/logs/acquirer-sim.log" \
  env HTTP_ADDRESS=127.0.0.1 HTTP_PORT="$acquirer_port" DATA_DIR="$state/acquirer-sim" \
  AUTH_API_KEYS=ak_docs_test "$acquirer_sim"
wait_http "http://127.0.0.1:$acquirer_port/healthz"
# The pods reach it over TLS only, with a certificate from the page's CA: the release image refuses plain
# http to another host.
tls_front_start "$state/pids/acquirer-tls.pid" "$state/logs/acquirer-tls.log" "$node_ip" "$acquirer_tls_port" \
  "$acquirer_port" "$state/tls"

# The person's shell: their variables, their tools on PATH, a checkout of this repository as the working
# directory (the release build the image comes from is tests/run's).
export REGISTRY=127.0.0.1:$registry_port
export DATABASE_ADMIN_URL=$(pg_url "$pg_port" postgres) DATABASE_HOST=$node_ip:$pg_port
export CA_FILE=$state/tls/ca.crt
export ACQUIRER_URL=https://$node_ip:$acquirer_tls_port ACQUIRER_API_KEY=ak_docs_test
export KAFKA_BOOTSTRAP_SERVERS=$node_ip:$kafka_sasl_port KAFKA_REPLICATION=1 KAFKA_MIN_ISR=1
export KAFKA_SECURITY_PROTOCOL=SASL_PLAINTEXT KAFKA_SASL_MECHANISM=PLAIN KAFKA_ADMIN_CONFIG=$state/kafka-admin.properties
export KAFKA_RELAY_PRINCIPAL=outbox-relay KAFKA_RELAY_PASSWORD=relay-secret KAFKA_CONSUMER_PRINCIPAL=settlement
# The project's caches (the Kafka jars) stay where tests/run put them; the person's HOME is new.
export CHARGE_OUTBOX_CACHE
export HOME=$state/home
# The test's registry speaks plain http, which skopeo, like a person's, refuses unless the user's
# configuration names the registry insecure (containers-registries.conf(5)). The node's containerd pulls
# from a registry on loopback over http by itself.
mkdir -p "$HOME/.config/containers"
printf '[[registry]]\nlocation = "%s"\ninsecure = true\n' "127.0.0.1:$registry_port" >"$HOME/.config/containers/registries.conf"
export PATH=$HOME/.local/bin:$state/bin:$PATH
mkdir -p "$HOME/.local/bin"
ln -s "$KUBE_BIN_DIR/kubectl" "$state/bin/kubectl"
# The person's cosign (the one tests/run builds), and the release key's password, a secret of theirs.
ln -s "$KUBE_BIN_DIR/cosign" "$state/bin/cosign"
export COSIGN_PASSWORD=docs-test-$RANDOM
for tool in kafka-topics.sh:org.apache.kafka.tools.TopicCommand kafka-acls.sh:org.apache.kafka.tools.AclCommand \
            kafka-console-consumer.sh:org.apache.kafka.tools.consumer.ConsoleConsumer \
            kafka-configs.sh:kafka.admin.ConfigCommand \
            kafka-console-producer.sh:org.apache.kafka.tools.ConsoleProducer; do
  printf '#!/usr/bin/env bash\nsource %q\nsource %q\nkafka_run_class %s "$@"\n' "$root/deploy/local/lib/common.sh" \
    "$root/deploy/local/lib/kafka.sh" "${tool#*:}" >"$state/bin/${tool%%:*}"
  chmod +x "$state/bin/${tool%%:*}"
done
cat >"$state/test-values.yaml" <<YAML
global:
  acquirer: {trustCaBundle: true}
chargeApi:
  replicas: 1
outboxRelay:
  replicas: 1
reconciler:
  visibilityWindow: 5s
YAML
helm() {
  case ${1:-} in
    install | upgrade | template) "$helm_bin" "$@" -f "$state/test-values.yaml" ;;
    *) "$helm_bin" "$@" ;;
  esac
}
# The repository as the person's checkout, but with this run's release build (and no file of theirs).
checkout=$state/checkout
for entry in "$root"/* "$root"/.git; do
  [[ $(basename "$entry") == build ]] || ln -s "$entry" "$checkout/$(basename "$entry")"
done
ln -s "$(dirname "$(dirname "$image_archive")")" "$checkout/build/release"
cd "$checkout"
psql_charge() { psql -X -q -A -t -v ON_ERROR_STOP=1 "$(pg_url "$pg_port" charges)" -c "$1"; }
# post_charge KEY IDEMPOTENCY_KEY: the status of a charge sent through the page's port-forward.
post_charge() {
  curl -sS -o "$state/body" -w '%{http_code}' -X POST http://127.0.0.1:18080/v1/charges \
    -H "Authorization: Bearer $1" -H "Idempotency-Key: $2" -H 'Content-Type: application/json' \
    -d '{"amount": 2500, "currency": "BRL", "order_id": "PED-'"$2"'", "payment_method": "pm_tok_visa"}'
}

# ---- Installing ------------------------------------------------------------------------------------------
run_block variables
[[ $NAMESPACE == payments && $RELEASE == charges && $FULLNAME == charges-charge-outbox ]] ||
  fail "the page's variables: $NAMESPACE $RELEASE $FULLNAME"
run_block image
skopeo inspect "docker://$REGISTRY/charge-outbox:$VERSION" >/dev/null ||
  fail "the image step did not push charge-outbox:$VERSION to the registry"
grep -q '^signature: verified with cosign.pub$' "$state/out/image" &&
  grep -q '^provenance: built from ' "$state/out/image" && grep -qE '^  libssl3 [0-9]' "$state/out/image" ||
  fail "the image step did not verify the signature, provenance and SBOM: $(cat "$state/out/image")"
run_block kafka-topic
run_block kafka-acls
kafka-acls.sh --bootstrap-server "$KAFKA_BOOTSTRAP_SERVERS" --command-config "$KAFKA_ADMIN_CONFIG" --list \
  --topic charge-events >"$state/acls" 2>&1
grep -q 'principal=User:outbox-relay.*operation=WRITE' "$state/acls" &&
  grep -q 'principal=User:settlement.*operation=READ' "$state/acls" ||
  fail "the page's ACLs are not on the topic: $(cat "$state/acls")"
grep -q 'principal=User:outbox-relay.*operation=DESCRIBE_CONFIGS' "$state/acls" ||
  fail "the relay may not read the topic's configuration (it names a stall's cause from it): $(cat "$state/acls")"
[[ $(grep 'operation=WRITE' "$state/acls" | grep -vc 'principal=User:outbox-relay') == 0 ]] ||
  fail "someone other than the relay may write the topic: $(cat "$state/acls")"
run_block database
[[ $(psql_charge "SELECT count(*) FROM pg_tables WHERE tablename IN ('charges', 'outbox', 'operator_actions')
                  AND tableowner = 'charge_owner'") == 3 ]] || fail "the owner did not migrate the schema"
[[ $(psql_charge "SELECT count(*) FROM pg_roles WHERE rolname IN ('charge_api', 'charge_reconciler', 'outbox_relay',
                  'charge_operator') AND rolcanlogin AND NOT rolsuper") == 4 ]] || fail "roles.sql did not make the four roles"
run_block install
[[ $(kubectl get namespace "$NAMESPACE" -o jsonpath='{.metadata.labels.pod-security\.kubernetes\.io/enforce}') == restricted ]] ||
  fail "the namespace does not enforce Pod Security restricted"
# Each daemon is connected as its own role, over TLS (verify-full, against the page's CA: a pod that could not
# check the server's certificate would not connect at all).
connected=$(psql_charge "SELECT string_agg(DISTINCT usename || ':' || ssl, ',') FROM pg_stat_activity
                         JOIN pg_stat_ssl USING (pid) WHERE datname = 'charges' AND usename <> 'postgres'")
grep -q 'charge_api:t' <<<"$connected" && grep -q 'outbox_relay:t' <<<"$connected" ||
  fail "the daemons are not connected as their roles: $connected"
grep -q ':f' <<<"$connected" && fail "a daemon is connected without TLS: $connected"
for component in charge-api outbox-relay; do
  ready=$(kubectl -n "$NAMESPACE" get pods -l "app.kubernetes.io/component=$component" \
    -o jsonpath='{range .items[*]}{.spec.containers[0].image} {.status.containerStatuses[0].ready}{"\n"}{end}')
  grep -q "^$REGISTRY/charge-outbox:$VERSION@$(cat charge-outbox.digest) true$" <<<"$ready" ||
    fail "no Ready $component pod running the registry's image, pinned by its digest: $ready"
done
run_block validate
run_block plugin
[[ -x $HOME/.local/bin/kubectl-charge_outbox ]] || fail "the plugin is not on the PATH"
grep -q 'review resolve' "$state/out/plugin" || fail "charge-admin --help through the plugin: $(cat "$state/out/plugin")"

# ---- The first merchant, a charge, its event, a rotation -------------------------------------------------
run_block first-merchant
[[ $MERCHANT =~ ^[0-9a-f-]{36}$ ]] || fail "merchant add did not give an id: $MERCHANT"
[[ $KEY =~ ^sk_[0-9A-Za-z]{43}$ ]] || fail "key issue did not give a key"
grep -q "Loja Um" "$state/out/first-merchant" || fail "merchant list did not show the merchant"
grep -q "${KEY:0:16}" "$state/out/first-merchant" || fail "key list did not show the key's prefix"
grep -q "$KEY" "$state/out/first-merchant" && fail "a key was printed by a list"
[[ $(psql_charge "SELECT string_agg(action || ':' || operator, ',' ORDER BY id) FROM operator_actions") == \
   "merchant.add:alice,key.issue:alice" ]] || fail "no audit rows for the merchant and its key"
run_block first-charge
charge=$(grep -o '"id":"ch_[^"]*"' "$state/out/first-charge" | head -n 1 | cut -d'"' -f4)
grep -q '"status":"captured"' "$state/out/first-charge" && grep -q '^HTTP 201$' "$state/out/first-charge" &&
  [[ -n $charge ]] || fail "the first charge was not captured: $(cat "$state/out/first-charge")"
[[ $(grep -c "^{\"id\":\"$charge\",\"merchant_id\"" "$state/out/first-charge") == 2 ]] ||
  fail "the topic did not show the charge's pending and captured events: $(cat "$state/out/first-charge")"
# The relay is the topic's only writer: a consumer's principal that tries to write a charge event is refused
# on the topic (not idempotent, so that the refusal is the topic's, not the cluster's IdempotentWrite).
echo '{"forged":true}' | kafka-console-producer.sh --bootstrap-server "$KAFKA_BOOTSTRAP_SERVERS" --topic charge-events \
  --producer.config "$state/kafka-consumer.properties" --producer-property enable.idempotence=false \
  --producer-property delivery.timeout.ms=10000 --producer-property request.timeout.ms=5000 --sync \
  >"$state/forged" 2>&1 || true
grep -q 'TopicAuthorizationException\|Not authorized to access topics' "$state/forged" ||
  fail "the consumer's principal was not refused writing the topic: $(cat "$state/forged")"
run_block rotate-revoke
[[ $NEW_KEY =~ ^sk_[0-9A-Za-z]{43}$ && $NEW_KEY != "$KEY" ]] || fail "key rotate did not give a new key"
[[ $(post_charge "$NEW_KEY" new-key-1) == 201 ]] || fail "the rotated key was refused: $(cat "$state/body")"
# Revoked: refused at the latest auth.cache_ttl (30 s) later.
deadline=$((SECONDS + 45))
until [[ $(post_charge "$KEY" old-key-$SECONDS) == 401 ]]; do
  ((SECONDS < deadline)) || fail "the revoked key still works 45 s after its revocation: $(cat "$state/body")"
  sleep 2
done
[[ $(psql_charge "SELECT string_agg(action, ',' ORDER BY id) FROM operator_actions") == \
   "merchant.add,key.issue,key.rotate,key.revoke" ]] || fail "no audit rows for the rotation and the revocation"
kill "$FORWARD" 2>/dev/null || true
run_block rollout-restart
run_block upgrade

# ---- Charges that need a person ----------------------------------------------------------------------------
CHARGE=$(psql_charge "
  WITH ins AS (
    INSERT INTO charges (id, merchant_id, idempotency_key, request_fingerprint, order_id, amount, currency,
                         payment_method, last_sequence, attempt_count, status, failure_reason, created_at, updated_at)
    VALUES (gen_random_uuid(), '$MERCHANT', 'docs-review-1', sha256('docs-review-1'::bytea), 'PED-7', 4200, 'BRL',
            'pm_tok_visa', 1, 1, 'needs_review', 'not_found_at_acquirer', now() - interval '2 hours', now())
    RETURNING *)
  SELECT charge_public_id(id) FROM ins")
REASON=not_found_at_acquirer
run_block review-by-reason
grep -q "$CHARGE" "$state/out/review-by-reason" || fail "review list --reason did not list $CHARGE"
run_block review
grep -q "needs_review (not_found_at_acquirer) -> failed by alice" "$state/out/review" ||
  fail "review resolve did not decide $CHARGE"
[[ $(psql_charge "SELECT status || ' ' || failure_reason FROM charges WHERE charge_public_id(id) = '$CHARGE'") == \
   "failed operator_decision" ]] || fail "the decision did not land"
run_block audit-prune
run_block window-by-hand
grep -q '"msg":"window report"' "$state/out/window-by-hand" || fail "the window report wrote no summary line: $(cat "$state/out/window-by-hand")"

# ---- Captures without a charge of ours, made at the acquirer for real ------------------------------------
# One nobody here made (another environment's), and one whose charge's record was "lost": charge-api's
# reference and key. The window report (this test's values: a 5 s visibility window) finds both.
capture_at_acquirer() {
  curl -sS --cacert "$CA_FILE" -X POST "$ACQUIRER_URL/v1/captures" -H "Authorization: Bearer $ACQUIRER_API_KEY" \
    -H "Idempotency-Key: $1" -H 'Content-Type: application/json' \
    -d '{"amount": '"$2"', "currency": "BRL", "reference": "'"$3"'", "payment_method": "pm_tok_visa"}' | jq -r .id
}
stray=$(capture_at_acquirer staging:order-1 700 staging-order-1)
lost_charge=ch_$(random_hex | head -c 32)
lost=$(capture_at_acquirer "$MERCHANT:docs-lost-1" 1500 "$lost_charge")
[[ $stray == cap_* && $lost == cap_* ]] || fail "acquirer-sim did not capture: $stray $lost"
window_from=$(date -u -d '10 minutes ago' +%Y-%m-%dT%H:%M:%SZ)
sleep 7
kubectl charge-outbox -n "$NAMESPACE" reconciler window --from "$window_from" \
  --to "$(date -u -d '6 seconds ago' +%Y-%m-%dT%H:%M:%SZ)" >"$state/window.out" 2>&1 || true
[[ $(psql_charge "SELECT count(*) FROM orphan_captures WHERE status = 'open'") == 2 ]] ||
  fail "the window report did not keep the two orphan captures: $(cat "$state/window.out")"
CAPTURE=$stray
run_block orphan-list
grep -q "$stray" "$state/out/orphan-list" && grep -q "$lost" "$state/out/orphan-list" ||
  fail "orphan list did not show both captures"
run_block orphan-void
[[ $(curl -sS --cacert "$CA_FILE" "$ACQUIRER_URL/v1/captures/$stray" -H "Authorization: Bearer $ACQUIRER_API_KEY" |
   jq -r .status) == voided ]] ||
  fail "the orphan void did not void the capture at the acquirer"
CAPTURE=$lost
run_block orphan-adopt
[[ $(psql_charge "SELECT status FROM charges WHERE charge_public_id(id) = '$lost_charge'") == captured ]] ||
  fail "the adoption did not write the lost charge back captured"
[[ $(psql_charge "SELECT string_agg(action, ',' ORDER BY id) FROM operator_actions WHERE action LIKE 'orphan.%'") == \
   "orphan.void,orphan.adopt" ]] || fail "no audit rows for the void and the adoption"

# ---- The relay's runbooks: its logs and pods, and parked events made for real ----------------------------
run_block relay-logs
[[ -s $state/out/relay-logs ]] || fail "the relay's log is empty"
run_block relay-pods
grep -q "$FULLNAME-outbox-relay" "$state/out/relay-pods" || fail "no relay Deployment listed"
# Kafka refuses events larger than the topic allows, permanently: the relay parks them.
kafka-configs.sh --bootstrap-server "$KAFKA_BOOTSTRAP_SERVERS" --command-config "$KAFKA_ADMIN_CONFIG" --alter \
  --entity-type topics --entity-name charge-events --add-config max.message.bytes=200 >/dev/null
kubectl -n "$NAMESPACE" port-forward "svc/$FULLNAME-charge-api" 18080:80 >/dev/null 2>&1 &
wait_http_status() { local deadline=$((SECONDS + 30)); until [[ $(post_charge "$NEW_KEY" "$1") == 201 ]]; do
  ((SECONDS < deadline)) || fail "no 201 through the port-forward: $(cat "$state/body")"; sleep 1; done; }
wait_http_status parked-a
wait_http_status parked-b
deadline=$((SECONDS + 60))
until [[ $(psql_charge "SELECT count(*) FROM outbox WHERE parked_at IS NOT NULL AND published_at IS NULL") == 2 ]]; do
  ((SECONDS < deadline)) || fail "the relay did not park the two oversized events: $(psql_charge "SELECT type, parked_at, park_error FROM outbox WHERE published_at IS NULL")"
  sleep 1
done
parked=($(psql_charge "SELECT id FROM outbox WHERE parked_at IS NOT NULL AND published_at IS NULL ORDER BY created_at"))
run_block parked-list
grep -q "${parked[0]}" "$state/out/parked-list" && grep -q "${parked[1]}" "$state/out/parked-list" ||
  fail "parked list did not show both events: $(cat "$state/out/parked-list")"
EVENT=${parked[0]}
run_block parked-fix
EVENT=${parked[1]}
run_block parked-skip
deadline=$((SECONDS + 60))
until [[ $(psql_charge "SELECT count(*) FROM outbox WHERE published_at IS NULL") == 0 ]]; do
  ((SECONDS < deadline)) || fail "events still unpublished after retry and skip: $(psql_charge "SELECT type, parked_at FROM outbox WHERE published_at IS NULL")"
  sleep 1
done
[[ $(psql_charge "SELECT count(*) FROM outbox WHERE id = '${parked[1]}' AND skipped_at IS NOT NULL") == 1 ]] ||
  fail "the skipped event is not marked skipped"
[[ $(psql_charge "SELECT string_agg(action, ',' ORDER BY id) FROM operator_actions WHERE action LIKE 'parked.%'") == \
   "parked.retry,parked.skip" ]] || fail "no audit rows for the parked events"

# ---- The reconciler's runbooks -----------------------------------------------------------------------------
run_block reconciler-state
grep -q "$FULLNAME-reconciler" "$state/out/reconciler-state" || fail "the CronJob was not shown"
run_block reconciler-resume
manual=$(kubectl -n "$NAMESPACE" get jobs -o name | grep -- "-reconciler-manual-") || fail "no manual run was created"
kubectl -n "$NAMESPACE" wait --for=condition=complete "$manual" --timeout=180s >/dev/null ||
  fail "the manual reconciler run did not complete: $(kubectl -n "$NAMESPACE" get jobs,pods)"
# The block reads the newest run's log: wait until the newest run (a scheduled one may have started since)
# has ended, so that its log holds the summary.
deadline=$((SECONDS + 120))
until kubectl -n "$NAMESPACE" get jobs -l app.kubernetes.io/component=reconciler --sort-by=.metadata.creationTimestamp \
        -o jsonpath='{range .items[*]}{.status.completionTime}{.status.failed}{"\n"}{end}' | tail -n 1 | grep -q .; do
  ((SECONDS < deadline)) || fail "the newest reconciler run did not end within 120 s"
  sleep 1
done
run_block run-failed
grep -q 'examined' "$state/out/run-failed" || fail "the run's log has no summary: $(cat "$state/out/run-failed")"

# ---- The security checks a reviewer runs ------------------------------------------------------------------
run_block security-check
grep -qx restricted "$state/out/security-check" || fail "the check did not show Pod Security restricted"
grep ' token=' "$state/out/security-check" | grep -v ' token=false root=true$' &&
  fail "a pod mounts a service-account token or may run as root: $(cat "$state/out/security-check")"
[[ $(grep -cE '^ (charge_api|charge_reconciler|outbox_relay|charge_operator) +\| f +\| f +\| f +\| f$' "$state/out/security-check") == 4 ]] ||
  fail "the roles' attributes are not all off: $(cat "$state/out/security-check")"
grep -qE '^ charge_api +\| t +\| TLSv1\.[23]' "$state/out/security-check" &&
  grep -qE '^ outbox_relay +\| t +\| TLSv1\.[23]' "$state/out/security-check" ||
  fail "the check did not show the daemons' database connections over TLS: $(cat "$state/out/security-check")"
grep -qE '^ [a-z_]+ +\| f +\|[^|]*$' "$state/out/security-check" &&
  fail "a daemon's database connection without TLS: $(cat "$state/out/security-check")"
grep -q 'principal=User:outbox-relay.*operation=WRITE' "$state/out/security-check" ||
  fail "the check did not list the relay's grant on the topic: $(cat "$state/out/security-check")"

# ---- Every block of the page ran -------------------------------------------------------------------------
not_run=$(comm -23 <(sort "$blocks/ORDER") <(printf '%s\n' "${ran[@]}" | sort))
[[ -z $not_run ]] || fail "blocks of docs/operations.md that no step of this test runs: $not_run"
step "passed: ${#ran[@]} blocks"
