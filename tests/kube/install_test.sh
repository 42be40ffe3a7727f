#!/usr/bin/env bash
# The chart installed into a real Kubernetes control plane (tests/run builds it: KUBE_BIN_DIR; and helm:
# HELM_BIN), started here on loopback with a kwok fake node: no container runs, so this proves what the
# API server and the controllers do with the chart's objects, not what the image does.
#   - install with the defaults and with every optional object on: every object validated by the server,
#     the migration hook Job completes, the Deployments reach their replicas;
#   - the reconciler CronJob: a Job on schedule, and no second one while it runs (Forbid);
#   - an upgrade with a changed config rolls the Deployments;
#   - a knob rendered under the wrong key fails the install;
#   - a missing Secret, or one without its key, fails the install within seconds, naming each and the
#     command that makes it, and creates nothing; helm template and a client dry run still render;
#   - uninstall leaves nothing behind.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
source "$root/deploy/local/lib/common.sh"
source "$root/deploy/local/lib/kube.sh"
helm=${HELM_BIN:?HELM_BIN is not set: tests/run builds helm and exports it}
: "${KUBE_BIN_DIR:?KUBE_BIN_DIR is not set: tests/run builds the control plane (kube_fetch) and exports it}"
[[ -x $KUBE_BIN_DIR/kube-apiserver ]] || die "no kube-apiserver in KUBE_BIN_DIR=$KUBE_BIN_DIR: run kube_fetch"
chart=$root/helm/charge-outbox
everything_values=$root/tests/helm/values-everything.yaml
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
started=$SECONDS

fail() { printf 'FAIL: %s\n' "$*" >&2; exit 1; }
step() { printf '== %s (%ss)\n' "$*" "$((SECONDS - started))" >&2; }

state=$(mktemp -d /tmp/charge-outbox-kube.XXXXXX)
on_exit() {
  local status=$?
  ((status == 0)) || kube_print_logs "$state"
  kube_stop "$state" || true
  rm -rf "$state"
}
trap on_exit EXIT
kube_use "$state"
kubectl() { "$KUBE_BIN_DIR/kubectl" "$@"; }

# Job pods complete at once, except the reconciler's: its Job stays active, as a slow run would, so that
# the CronJob's next schedule meets a running Job.
pod_complete_stage=$KUBE_BIN_DIR/../kwok-stages/pod/fast/pod-complete.yaml
cat >"$state/reconciler-never-completes.yaml" <<'EXPRESSION'
    - key: '.metadata.labels["app.kubernetes.io/component"]'
      operator: 'NotIn'
      values:
      - 'reconciler'
EXPRESSION
sed "/^    matchExpressions:\$/r $state/reconciler-never-completes.yaml" "$pod_complete_stage" \
  >"$state/pod-complete-except-reconciler.yaml"
grep -qF "'reconciler'" "$state/pod-complete-except-reconciler.yaml" ||
  fail "the kwok pod-complete stage changed shape: no matchExpressions to extend in $pod_complete_stage"
mapfile -t stages < <(kube_default_stages | grep -v '/pod-complete.yaml$')
step "starting the control plane"
kube_start "$state" "${stages[@]}" "$state/pod-complete-except-reconciler.yaml"
step "control plane ready"

step "the prometheus-operator CRDs"
# Only the kinds the chart can create: each CRD costs the API server an OpenAPI rebuild, and the other
# seven (Prometheus, Alertmanager...) are most of a minute on a loaded machine. Server-side apply: these
# are larger than the last-applied annotation may be.
crds=$KUBE_BIN_DIR/../prometheus-operator-crds
for kind in podmonitors servicemonitors prometheusrules; do
  kubectl apply --server-side -f "$crds/monitoring.coreos.com_$kind.yaml" >/dev/null
done
kubectl wait --for=condition=Established crd --all --timeout=60s >/dev/null

# Every object an API server lists, as kind/name, for the before/after comparison. Events come and go on
# their own and are left out; so are v1 Endpoints (deprecated, a warning at each listing), whose
# EndpointSlices are listed.
list_objects() {
  local scope=$1 resources
  resources=$(kubectl api-resources --verbs=list --namespaced="$([[ $scope == cluster ]] && echo false || echo true)" \
    -o name | grep -vx 'events\|events.events.k8s.io\|componentstatuses\|endpoints' | paste -sd, -)
  if [[ $scope == cluster ]]; then
    kubectl get "$resources" -o name | sort
  else
    kubectl get "$resources" -n "$scope" -o name | sort
  fi
}
# kind/name of each object in a manifest stream (helm get manifest / hooks).
manifest_objects() {
  awk '/^---/ {kind = ""; in_metadata = 0}
       /^kind:/ {kind = $2}
       /^[^ -]/ && !/^metadata:/ {in_metadata = 0}
       /^metadata:/ {in_metadata = 1; next}
       in_metadata && /^  name:/ {print kind "/" $2; in_metadata = 0}'
}

# The Secrets the chart reads and never creates, made beforehand as an operator would.
create_secrets() {
  local namespace=$1
  kubectl create namespace "$namespace" >/dev/null
  # The controllers add a namespace's default ServiceAccount and kube-root-ca.crt a moment later; the
  # snapshot taken before the install must hold them, or the uninstall check would count them as left over.
  local deadline=$((SECONDS + 30))
  until kubectl -n "$namespace" get serviceaccount/default configmap/kube-root-ca.crt >/dev/null 2>&1; do
    ((SECONDS < deadline)) || fail "namespace $namespace: no default ServiceAccount or kube-root-ca.crt within 30 s"
    sleep 0.2
  done
  kubectl -n "$namespace" create secret generic charge-outbox-database \
    --from-literal=database-url=postgresql://charge:secret@postgres.example:5432/charge >/dev/null
  kubectl -n "$namespace" create secret generic charge-outbox-acquirer --from-literal=api-key=test-key >/dev/null
}
required_values=(--set global.acquirer.url=https://acquirer.example
  --set 'outboxRelay.kafka.bootstrapServers=kafka-0:9092\,kafka-1:9092' --set outboxRelay.kafka.securityProtocol=SASL_SSL)

# expect_installed NAMESPACE RELEASE: the hook Job completed and every Deployment has its replicas ready.
expect_installed() {
  local namespace=$1 release=$2
  # The hook Job is deleted once it succeeded; the Job controller's event stays. Never a pipe into grep -q:
  # with pipefail, a writer it cuts short counts as a failure.
  local completed_jobs
  completed_jobs=$(kubectl -n "$namespace" get events --field-selector reason=Completed,involvedObject.kind=Job \
    -o jsonpath='{range .items[*]}{.involvedObject.name}{"\n"}{end}')
  grep -qx "$release-charge-outbox-migrate" <<<"$completed_jobs" ||
    fail "$release: no Completed event for the migration Job $release-charge-outbox-migrate"
  # Polled: an autoscaler raises replicas to its minimum after helm's wait has returned.
  local deployments not_ready deadline=$((SECONDS + 60))
  while :; do
    deployments=$(kubectl -n "$namespace" get deployments \
      -o jsonpath='{range .items[*]}{.metadata.name} {.spec.replicas} {.status.readyReplicas}{"\n"}{end}')
    [[ -n $deployments ]] || fail "$release: no Deployment in namespace $namespace"
    not_ready=$(awk '$2 != $3 {printf "%s has %d ready of %d replicas; ", $1, $3, $2}' <<<"$deployments")
    [[ -z $not_ready ]] && break
    ((SECONDS < deadline)) || fail "$release: Deployments not ready within 60 s: $not_ready"
    sleep 0.5
  done
  say "$release: migration Job completed; Deployments ready: $(awk '{printf "%s %s/%s  ", $1, $3, $2}' <<<"$deployments")"
}

# print_created NAMESPACE RELEASE BASELINE: what helm created, and everything the namespace gained
# (helm's objects and what the controllers made from them).
print_created() {
  local namespace=$1 release=$2 baseline=$3
  say "$release: objects of the release (helm get manifest, then hooks):"
  "$helm" get manifest "$release" -n "$namespace" | manifest_objects | sed 's/^/    /' >&2
  "$helm" get hooks "$release" -n "$namespace" | manifest_objects | sed 's/^/    hook /' >&2
  say "$release: objects the namespace gained:"
  comm -13 "$baseline" <(list_objects "$namespace") | sed 's/^/    /' >&2
}

# expect_uninstalled NAMESPACE RELEASE BASELINE: after uninstall the namespace holds what it held before
# (garbage collection of pods and Jobs takes a moment: polled).
expect_uninstalled() {
  local namespace=$1 release=$2 baseline=$3 deadline=$((SECONDS + 60)) remaining
  "$helm" uninstall "$release" -n "$namespace" --wait --timeout 60s >/dev/null ||
    fail "$release: helm uninstall failed"
  while :; do
    remaining=$(comm -13 "$baseline" <(list_objects "$namespace"))
    [[ -z $remaining ]] && break
    ((SECONDS < deadline)) || fail "$release: left behind after uninstall: $(paste -sd' ' <<<"$remaining")"
    sleep 0.5
  done
  say "$release: uninstall left nothing behind"
}

# install_release NAMESPACE RELEASE HELM_ARGS...: what an operator should run. First every rendered object,
# hooks included, through the API server's strict decoding (a dry run); then helm install. helm alone
# leaves field validation to the server's default, which drops an unknown field with a warning: a knob
# rendered under the wrong key would install and silently do nothing (shown below).
install_release() {
  local namespace=$1 release=$2; shift 2
  "$helm" template "$release" "$chart" -n "$namespace" --validate "$@" >"$state/$release.yaml" &&
    kubectl apply -n "$namespace" --dry-run=server --validate=strict -f "$state/$release.yaml" >/dev/null &&
    "$helm" install "$release" "$chart" -n "$namespace" "$@" --wait --timeout 120s
}

create_secrets defaults
create_secrets everything
kubectl -n everything create secret generic charge-outbox-kafka --from-literal=sasl-password=test-password >/dev/null
# One database Secret per component, each with its role's URL (values-everything.yaml names them).
for secret in charge-outbox-db-owner:owner-url:charge_owner charge-outbox-db-charge-api:api-url:charge_api \
  charge-outbox-db-relay:relay-url:outbox_relay charge-outbox-db-reconciler:reconciler-url:charge_reconciler \
  charge-outbox-db-operator:operator-url:charge_operator; do
  IFS=: read -r name key role <<<"$secret"
  kubectl -n everything create secret generic "$name" \
    --from-literal="$key=postgresql://$role:secret@postgres.example:5432/charge" >/dev/null
done
# settlement-projection's own database (its owner for the init container) and Kafka password
# (values-everything.yaml enables it).
kubectl -n everything create secret generic settlement-database \
  --from-literal=url=postgresql://settlement_projection:secret@postgres.example:5432/settlement >/dev/null
kubectl -n everything create secret generic settlement-database-owner \
  --from-literal=owner-url=postgresql://settlement_owner:secret@postgres.example:5432/settlement >/dev/null
kubectl -n everything create secret generic settlement-kafka --from-literal=sasl-password=test-password >/dev/null
# The private CA every pod mounts (values-everything.yaml's global.caBundle), and charge-api's client certificate.
kubectl -n everything create secret generic charge-outbox-ca --from-literal=ca.crt=test-ca >/dev/null
kubectl -n everything create secret generic charge-outbox-db-charge-api-cert --from-literal=tls.crt=test \
  --from-literal=tls.key=test >/dev/null
create_secrets misplaced
# A namespace without the acquirer's Secret, whose database Secret holds the URL under another key.
kubectl create namespace nosecrets >/dev/null
kubectl -n nosecrets create secret generic charge-outbox-database \
  --from-literal=url=postgresql://charge:secret@postgres.example:5432/charge >/dev/null
list_objects cluster >"$state/cluster-before"
list_objects defaults >"$state/defaults-before"
list_objects everything >"$state/everything-before"
list_objects misplaced >"$state/misplaced-before"

step "install with the defaults"
# Every minute, so that the CronJob test below waits at most two minute boundaries.
install_release defaults defaults "${required_values[@]}" --set 'reconciler.cronjob.schedule=* * * * *' \
  >"$state/install-defaults.out" 2>&1 ||
  fail "helm install with the defaults: $(cat "$state/install-defaults.out")"
expect_installed defaults defaults
print_created defaults defaults "$state/defaults-before"

step "install with every optional object"
if [[ -f $everything_values ]]; then
  install_release everything everything "${required_values[@]}" -f "$everything_values" \
    >"$state/install-everything.out" 2>&1 ||
    fail "helm install with $everything_values: $(cat "$state/install-everything.out")"
  expect_installed everything everything
  print_created everything everything "$state/everything-before"
else
  fail "no $everything_values: the install with every optional object on cannot run"
fi

step "a missing Secret fails the install at once, naming it"
# Without the check, the migration hook's pod waits in CreateContainerConfigError until helm's timeout.
# Here (made with the other namespaces above) the database Secret holds its URL under another key and
# the acquirer's does not exist.
refused_within=20
install_started=$SECONDS
if "$helm" install nosecrets "$chart" -n nosecrets "${required_values[@]}" \
  --set operator.databaseSecret.name=charge-outbox-db-operator --wait --timeout 120s \
  >"$state/install-nosecrets.out" 2>&1; then
  fail "helm install without the acquirer's Secret and the database URL's key succeeded"
fi
install_seconds=$((SECONDS - install_started))
((install_seconds <= refused_within)) ||
  fail "helm install without its Secrets took ${install_seconds}s to fail (at most ${refused_within}s): $(cat "$state/install-nosecrets.out")"
for expected in 'namespace nosecrets lacks what the release reads' \
  'Secret charge-outbox-database has no key database-url (global.databaseSecret.key' 'its keys: url)' \
  'kubectl -n nosecrets create secret generic charge-outbox-database --from-literal=database-url="$DATABASE_URL"' \
  'Secret charge-outbox-acquirer does not exist (global.acquirer.apiKeySecret.name' \
  'kubectl -n nosecrets create secret generic charge-outbox-acquirer --from-literal=api-key="$ACQUIRER_API_KEY"' \
  "Secret charge-outbox-db-operator does not exist (operator.databaseSecret.name: the operator's URL, role charge_operator)" \
  'kubectl -n nosecrets create secret generic charge-outbox-db-operator --from-literal=database-url="$CHARGE_OPERATOR_DATABASE_URL"'; do
  grep -qF -- "$expected" "$state/install-nosecrets.out" ||
    fail "the refused install does not say '$expected': $(cat "$state/install-nosecrets.out")"
done
[[ -z $("$helm" list -n nosecrets -a -q) ]] || fail "the refused install left a release behind"
[[ -z $(kubectl -n nosecrets get jobs,pods,deployments,cronjobs -o name) ]] ||
  fail "the refused install created objects: $(kubectl -n nosecrets get jobs,pods,deployments,cronjobs -o name | paste -sd' ' -)"
say "nosecrets: refused after ${install_seconds}s: $(grep -c 'make it: kubectl' "$state/install-nosecrets.out") Secrets to make, each with its command"
# A server dry run asks the cluster too; helm template and a client dry run reach none and still render.
"$helm" install nosecrets "$chart" -n nosecrets "${required_values[@]}" --dry-run=server >"$state/dry-run-server.out" 2>&1 &&
  fail "a server dry run without the Secrets succeeded"
grep -qF 'Secret charge-outbox-acquirer does not exist' "$state/dry-run-server.out" ||
  fail "the server dry run failed for another reason: $(cat "$state/dry-run-server.out")"
"$helm" template nosecrets "$chart" -n nosecrets "${required_values[@]}" >"$state/template-nosecrets.out" 2>&1 ||
  fail "helm template (no cluster) refused the missing Secrets: $(cat "$state/template-nosecrets.out")"
"$helm" install nosecrets "$chart" -n nosecrets "${required_values[@]}" --dry-run >"$state/dry-run-client.out" 2>&1 ||
  fail "a client dry run refused the missing Secrets: $(cat "$state/dry-run-client.out")"

step "a knob under the wrong key fails the install"
# The post-renderer moves the CronJob's concurrencyPolicy into its jobTemplate's spec, where a Job has
# no such field.
misplace=(--post-renderer "$here/move-concurrency-policy.sh")
if install_release misplaced misplaced "${required_values[@]}" "${misplace[@]}" >"$state/install-misplaced.out" 2>&1; then
  fail "the install with concurrencyPolicy under the jobTemplate's spec succeeded"
fi
grep -qF 'unknown field "spec.jobTemplate.spec.concurrencyPolicy"' "$state/install-misplaced.out" ||
  fail "the install with a misplaced concurrencyPolicy failed for another reason: $(cat "$state/install-misplaced.out")"
say "misplaced: refused: $(grep -o 'strict decoding error: .*' "$state/install-misplaced.out" | head -n 1)"
[[ -z $("$helm" list -n misplaced -a -q) ]] || fail "the refused install left a release behind"
# Why the strict check is part of the install: helm alone accepts the same manifests, and the CronJob
# silently runs with the API's default policy, Allow.
"$helm" install misplaced "$chart" -n misplaced "${required_values[@]}" "${misplace[@]}" --wait --timeout 120s \
  >"$state/install-misplaced-helm-only.out" 2>&1 ||
  fail "helm install alone refused the misplaced field (then the strict check may go): $(cat "$state/install-misplaced-helm-only.out")"
policy=$(kubectl -n misplaced get cronjob misplaced-charge-outbox-reconciler -o jsonpath='{.spec.concurrencyPolicy}')
[[ $policy == Allow ]] || fail "helm install alone with a misplaced concurrencyPolicy: expected the default Allow, got '$policy'"
say "misplaced: helm install alone accepted it; the CronJob runs with concurrencyPolicy $policy"
expect_uninstalled misplaced misplaced "$state/misplaced-before"

step "upgrade with a changed config"
# revision of each Deployment's ReplicaSets, to see a new one appear
replica_sets() {
  kubectl -n defaults get replicasets -o jsonpath='{range .items[*]}{.metadata.ownerReferences[0].name} {.metadata.name}{"\n"}{end}' | sort
}
replica_sets >"$state/replica-sets-before"
"$helm" upgrade defaults "$chart" -n defaults --reuse-values --set chargeApi.httpThreads=3 \
  --set outboxRelay.batchSize=500 --wait --timeout 120s >"$state/upgrade.out" 2>&1 ||
  fail "helm upgrade with a changed config: $(cat "$state/upgrade.out")"
replica_sets >"$state/replica-sets-after"
for deployment in $(kubectl -n defaults get deployments -o jsonpath='{.items[*].metadata.name}'); do
  new=$(comm -13 "$state/replica-sets-before" "$state/replica-sets-after" | awk -v d="$deployment" '$1 == d {print $2}')
  [[ -n $new ]] || fail "upgrade: Deployment $deployment has no new ReplicaSet (its pods did not roll)"
  say "upgrade: $deployment rolled to ReplicaSet $new"
done
expect_installed defaults defaults

step "the reconciler CronJob: one Job on schedule, none beside it while it runs"
cronjob=defaults-charge-outbox-reconciler
reconciler_jobs() {
  kubectl -n defaults get jobs -o jsonpath='{range .items[?(@.metadata.ownerReferences[0].name=="'"$cronjob"'")]}{.metadata.name} {.status.active}{"\n"}{end}'
}
# The controller says "Not starting job because prior execution is running and concurrency policy is
# Forbid" with this reason, at the first schedule that meets the running Job.
deadline=$((SECONDS + 150))
cronjob_events() {
  kubectl -n defaults get events --field-selector "reason=$1,involvedObject.name=$cronjob" -o name
}
until [[ -n $(cronjob_events JobAlreadyActive) ]]; do
  ((SECONDS < deadline)) || fail "CronJob $cronjob: no JobAlreadyActive event within 150 s; its Jobs: $(reconciler_jobs | paste -sd' ' -)"
  sleep 1
done
jobs=$(reconciler_jobs)
[[ $(wc -l <<<"$jobs") == 1 ]] || fail "CronJob $cronjob: more than one Job while one runs (Forbid): $jobs"
read -r job active <<<"$jobs"
[[ $active == 1 ]] || fail "CronJob $cronjob: its Job $job is not the running one (active: ${active:-0})"
[[ -n $(cronjob_events SuccessfulCreate) ]] ||
  fail "CronJob $cronjob: no SuccessfulCreate event for its Job"
say "CronJob $cronjob: created $job on schedule; at the next schedule, with $job running, started none (JobAlreadyActive)"

step "uninstall"
expect_uninstalled defaults defaults "$state/defaults-before"
expect_uninstalled everything everything "$state/everything-before"
[[ -z $("$helm" list -A -a -q) ]] || fail "helm still lists releases: $("$helm" list -A -a -q | paste -sd' ' -)"
cluster_left=$(comm -13 "$state/cluster-before" <(list_objects cluster))
[[ -z $cluster_left ]] || fail "cluster-scoped objects left behind: $(paste -sd' ' <<<"$cluster_left")"
step "passed"
