#!/usr/bin/env bash
# The chart on a real node (kubelet + containerd, deploy/local/lib/kube_node.sh): its pods run the
# project's image for real. PostgreSQL and acquirer-sim run on the host, at the node's address, as a
# platform team's database and acquirer live outside the cluster.
#   - the migration hook Job runs the image on the node and migrates the release's database;
#   - an operator runs charge-admin from the image, with the release's Secrets, exactly as
#     a hand-made pod (kubectl run, Pod Security "restricted", no shell in the image): lists the
#     charge that needs a person and resolves it, and the decision lands with its event and audit row.
# Arguments: the acquirer-sim binary. Needs root, KUBE_BIN_DIR and HELM_BIN (tests/run), and the image
# (CHARGE_OUTBOX_IMAGE, an OCI archive: tests/run builds it).
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
source "$root/deploy/local/lib/common.sh"
source "$root/deploy/local/lib/kube.sh"
source "$root/deploy/local/lib/kube_node.sh"
source "$root/deploy/local/lib/postgres.sh"
source "$root/deploy/local/lib/tls.sh"
acquirer_sim=${1:?usage: real_node_test.sh ACQUIRER_SIM_BIN}
helm=${HELM_BIN:?HELM_BIN is not set: tests/run builds helm and exports it}
: "${KUBE_BIN_DIR:?KUBE_BIN_DIR is not set: tests/run builds the control plane and node (kube_fetch)}"
image_archive=${CHARGE_OUTBOX_IMAGE:?CHARGE_OUTBOX_IMAGE is not set: tests/run builds the image}
chart=$root/helm/charge-outbox
started=$SECONDS

fail() { printf 'FAIL: %s\n' "$*" >&2; exit 1; }
step() { printf '== %s (%ss)\n' "$*" "$((SECONDS - started))" >&2; }

state=$(mktemp -d /tmp/charge-outbox-node.XXXXXX)
chmod 755 "$state"
on_exit() {
  local status=$?
  ((status == 0)) || kube_print_logs "$state"
  if ((status != 0)) && [[ -n ${REAL_NODE_TEST_KEEP:-} ]]; then
    say "kept for a look: KUBECONFIG=$state/admin.kubeconfig; touch $state/done to tear down"
    until [[ -f $state/done ]]; do sleep 1; done
  fi
  kube_node_stop "$state" || true
  kube_stop "$state" || true
  stop_pid_file "$state/pids/acquirer-tls.pid" 5 || true
  stop_pid_file "$state/pids/acquirer-sim.pid" 5 || true
  pg_stop "$state" || true
  rm -rf "$state"
}
trap on_exit EXIT
kube_use "$state"
kubectl() { "$KUBE_BIN_DIR/kubectl" "$@"; }

step "the control plane and a real node"
KUBE_FAKE_NODE=0 kube_start "$state"
kube_node_start "$state" "$image_archive"
node_ip=$(kube_node_ip)

step "PostgreSQL and acquirer-sim on the host, at $node_ip"
pg_port=$(free_port)
PG_LISTEN_ADDRESSES="127.0.0.1,$node_ip" PG_TRUST_CIDR=$KUBE_NODE_POD_CIDR pg_start "$state" "$pg_port" fast
pg_ensure_database "$pg_port" charge
acquirer_port=$(free_port) acquirer_tls_port=$(free_port)
acquirer_key=ak_real_node_$(random_hex | head -c 16)
mkdir -p "$state/acquirer-sim"
start_daemon "$state/pids/acquirer-sim.pid" "$state/logs/acquirer-sim.log" \
  env HTTP_ADDRESS=127.0.0.1 HTTP_PORT="$acquirer_port" DATA_DIR="$state/acquirer-sim" \
  AUTH_API_KEYS="$acquirer_key" "$acquirer_sim"
wait_http "http://127.0.0.1:$acquirer_port/healthz"
# The pods reach it over TLS, its certificate from a private CA the release mounts (global.caBundle): the
# release image refuses plain http to another host.
tls_ca_make "$state/tls" "$node_ip"
tls_front_start "$state/pids/acquirer-tls.pid" "$state/logs/acquirer-tls.log" "$node_ip" "$acquirer_tls_port" \
  "$acquirer_port" "$state/tls"

step "the release, its Secrets made beforehand as an operator makes them"
namespace=payments release=pay
kubectl create namespace "$namespace" >/dev/null
# The namespace a security team would give it: every pod, the operator's one-off included, is restricted.
kubectl label namespace "$namespace" pod-security.kubernetes.io/enforce=restricted >/dev/null
deadline=$((SECONDS + 30))
until kubectl -n "$namespace" get serviceaccount/default >/dev/null 2>&1; do
  ((SECONDS < deadline)) || fail "no default ServiceAccount in $namespace within 30 s"
  sleep 0.2
done
database_url=postgresql://postgres@$node_ip:$pg_port/charge
kubectl -n "$namespace" create secret generic charge-outbox-database --from-literal=database-url="$database_url" >/dev/null
kubectl -n "$namespace" create secret generic charge-outbox-acquirer --from-literal=api-key="$acquirer_key" >/dev/null
kubectl -n "$namespace" create secret generic charge-outbox-ca --from-file=ca.crt="$state/tls/ca.crt" >/dev/null
acquirer_url=https://$node_ip:$acquirer_tls_port
# The daemons' Deployments stay at zero replicas and the reconciler's schedule suspended: this test is the
# hook and the operator's command; the daemons' own pods have theirs.
"$helm" install "$release" "$chart" -n "$namespace" --set global.acquirer.url="$acquirer_url" \
  --set global.caBundle.secretName=charge-outbox-ca --set global.acquirer.trustCaBundle=true \
  --set outboxRelay.kafka.bootstrapServers="$node_ip:9" \
  --set outboxRelay.kafka.allowUnauthenticated=true --set chargeApi.replicas=0 --set outboxRelay.replicas=0 \
  --set reconciler.cronjob.suspend=true --timeout 300s >"$state/install.out" 2>&1 ||
  fail "helm install: $(cat "$state/install.out"; kubectl -n "$namespace" get pods -o wide 2>&1)"

step "the migration hook ran the image on the node"
psql_charge() { psql -X -q -A -t -v ON_ERROR_STOP=1 "$(pg_url "$pg_port" charge)" -c "$1"; }
[[ $(psql_charge "SELECT count(*) FROM pg_tables WHERE tablename IN ('charges', 'outbox', 'operator_actions')") == 3 ]] ||
  fail "the migration hook did not create the tables"
migrate_node=$(kubectl -n "$namespace" get events --field-selector reason=Scheduled \
  -o jsonpath='{range .items[*]}{.involvedObject.name} {.message}{"\n"}{end}' | grep "^$release-charge-outbox-migrate-" || true)
grep -q "$KUBE_REAL_NODE_NAME" <<<"$migrate_node" || fail "no migration pod was scheduled on $KUBE_REAL_NODE_NAME: $migrate_node"

step "a charge that needs a person"
merchant=00000000-0000-4000-8000-0000000000aa
psql_charge "INSERT INTO merchants (id, name) VALUES ('$merchant', 'node test')" >/dev/null
charge=$(psql_charge "
  WITH ins AS (
    INSERT INTO charges (id, merchant_id, idempotency_key, request_fingerprint, order_id, amount, currency,
                         payment_method, last_sequence, attempt_count, status, failure_reason, created_at, updated_at)
    VALUES (gen_random_uuid(), '$merchant', 'node-1', sha256('node-1'::bytea), 'ORDER-node-1', 4200, 'BRL',
            'pm_tok_visa', 1, 1, 'needs_review', 'not_found_at_acquirer', now() - interval '2 hours', now())
    RETURNING *)
  SELECT charge_public_id(id) FROM ins")
[[ $charge == ch_* ]] || fail "could not insert the charge: $charge"

# docs/operations.md, "Charges that need a person": the one-off pod of the release's image and Secrets.
# What the release's pod template would carry besides (the docs' plugin copies it): the CA the test
# acquirer's certificate is checked against.
image=charge-outbox:$(sed -n 's/^appVersion: "\(.*\)"$/\1/p' "$chart/Chart.yaml")
admin_overrides() {
  local args
  # jq reads every word of its command line as an option it may know (--json would be one): the
  # command's words come in on stdin.
  args=$(printf '%s\n' charge-admin "$@" | jq -R . | jq -cs .)
  jq -cn --arg image "$image" --arg url "$acquirer_url" --argjson args "$args" '{"spec":{"containers":[{"name":"a","image":$image,
    "args":$args,
    "env":[{"name":"DATABASE_URL","valueFrom":{"secretKeyRef":{"name":"charge-outbox-database","key":"database-url"}}},
           {"name":"ACQUIRER_API_KEY","valueFrom":{"secretKeyRef":{"name":"charge-outbox-acquirer","key":"api-key"}}},
           {"name":"ACQUIRER_URL","value":$url},
           {"name":"ACQUIRER_TLS_CA_FILE","value":"/etc/charge-outbox-ca/ca.crt"}],
    "volumeMounts":[{"name":"ca-bundle","mountPath":"/etc/charge-outbox-ca","readOnly":true}],
    "securityContext":{"runAsNonRoot":true,"allowPrivilegeEscalation":false,"readOnlyRootFilesystem":true,
                       "capabilities":{"drop":["ALL"]},"seccompProfile":{"type":"RuntimeDefault"}}}],
    "volumes":[{"name":"ca-bundle","secret":{"secretName":"charge-outbox-ca"}}]}}'
}
# The docs' one-liner: attached, removed when done. kubectl may miss the output of a pod that ends before
# it attaches (the docs say so), so only a read is run this way, and read again if nothing came back.
charge_admin_attached() {
  kubectl -n "$namespace" run "charge-admin-$RANDOM" --rm -i --quiet --restart=Never --image="$image" \
    --overrides="$(admin_overrides "$@")" </dev/null
}
# The docs' form for a decision, whose answer must not be lost: the pod is kept until its log is read.
# Prints the log; returns the command's exit status.
charge_admin_kept() {
  local pod=charge-admin-$RANDOM exit_code
  kubectl -n "$namespace" run "$pod" --restart=Never --image="$image" --overrides="$(admin_overrides "$@")" >/dev/null
  kubectl -n "$namespace" wait --for=jsonpath='{.status.containerStatuses[0].state.terminated.exitCode}' \
    "pod/$pod" --timeout=120s >/dev/null || fail "pod $pod did not finish: $(kubectl -n "$namespace" describe pod "$pod")"
  kubectl -n "$namespace" logs "$pod"
  exit_code=$(kubectl -n "$namespace" get pod "$pod" -o jsonpath='{.status.containerStatuses[0].state.terminated.exitCode}')
  kubectl -n "$namespace" delete pod "$pod" --wait=false >/dev/null
  return "$exit_code"
}

step "charge-admin from the image: review list"
listed=""
for _ in 1 2 3; do
  # stdout only: kubectl's own warnings (it fell back to the pod's log) go to stderr.
  listed=$(charge_admin_attached review list --json 2>"$state/list.err") ||
    fail "charge-admin review list failed in the cluster: $listed $(cat "$state/list.err")"
  [[ -n $listed ]] && break
done
jq -e --arg id "$charge" 'select(.id == $id and .failure_reason == "not_found_at_acquirer")' <<<"$listed" >/dev/null ||
  fail "review list did not show $charge: $listed $(cat "$state/list.err")"

step "charge-admin from the image: review resolve (the acquirer asked first, from the pod)"
resolved=$(charge_admin_kept review resolve "$charge" --to failed --reason "not at the acquirer, ticket OPS-1" \
  --by alice 2>&1) || fail "charge-admin review resolve failed in the cluster: $resolved"
grep -q "needs_review (not_found_at_acquirer) -> failed by alice" <<<"$resolved" || fail "unexpected answer: $resolved"
[[ $(psql_charge "SELECT status || ' ' || failure_reason FROM charges") == "failed operator_decision" ]] ||
  fail "the charge is not failed by the operator's decision"
[[ $(psql_charge "SELECT operator || ' ' || after FROM operator_actions WHERE subject = '$charge'") == "alice failed" ]] ||
  fail "no audit row for the decision"
[[ $(psql_charge "SELECT payload->'resolution'->>'operator' FROM outbox WHERE type = 'payments.charge.failed.v1'") == alice ]] ||
  fail "no payments.charge.failed.v1 event with the operator's name"
[[ $(psql_charge "SELECT count(*) FROM acquirer_attempts WHERE actor = 'charge-admin' AND operation = 'lookup'") -ge 1 ]] ||
  fail "the decision did not ask the acquirer first"
refused_status=0
refused=$(charge_admin_kept review resolve "$charge" --to captured --reason r 2>&1) || refused_status=$?
[[ $refused_status == 2 ]] || fail "a decision without --by: exit status $refused_status, not 2: $refused"
grep -q -- "--by" <<<"$refused" || fail "the refusal does not name --by: $refused"

step "passed"
