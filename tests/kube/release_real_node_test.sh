#!/usr/bin/env bash
# The chart's daemons on a real node (kubelet + containerd), through deploy/local/cluster, the operator's
# command: PostgreSQL, Kafka and acquirer-sim run on the host at the node's address; the release is
# installed with the chart's defaults and `--wait`, so its pods are Ready through their real probes.
#   - a charge through the charge-api Service answers 201, and its events come back from Kafka;
#   - the reconciler CronJob's own Jobs run the reconciler to completion, a run summary in their logs;
#   - a rollout under load: `helm upgrade` with a changed setting rolls charge-api and the relay while a
#     client sends charges at a steady rate through the Service, retrying each with its key until it is
#     definitive; none is lost or doubled (database, acquirer's ledger, Kafka), the relay's lag recovers;
#   - SIGTERM drain: a charge-api pod deleted mid-load (the acquirer answering in 7 s, so requests are in
#     flight at its SIGTERM) answers them and stops within terminationGracePeriodSeconds; none loses its answer;
#   - Forbid with real Jobs: a reconciler run against a black-holed acquirer outlasts the next schedule, and
#     no second Job starts meanwhile;
#   - `helm uninstall` leaves the namespace as the operator made it;
#   - tests/helm/values-everything.yaml installed where its objects can work here: settlement-projection
#     Ready and counting a charge, the window report's Job complete, the database checked with verify-full;
#   - `cluster down` leaves nothing on the host (processes, mounts, the bridge, iptables chains, cgroups).
# The figures (retried charges, the longest wait, the relay's lag, the drain) are printed as FIGURES lines.
#
# Arguments: the acquirer-sim binary. Needs root, KUBE_BIN_DIR and HELM_BIN (tests/run) and the image
# (CHARGE_OUTBOX_IMAGE). RELEASE_TEST_CHART: another chart directory (a deliberately broken copy, to see this
# test fail where the kwok test passes: tests/kube/broken_charts.sh), RELEASE_TEST_INSTALL_TIMEOUT: helm's wait
# for the install (300s). RELEASE_TEST_KEEP=1: on failure, keep the cluster for a look.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
source "$root/deploy/local/lib/common.sh"
source "$root/deploy/local/lib/kube.sh"
source "$root/deploy/local/lib/kube_node.sh"
source "$root/deploy/local/lib/kafka.sh"
export ACQUIRER_SIM_BIN=${1:?usage: release_real_node_test.sh ACQUIRER_SIM_BIN}
: "${HELM_BIN:?HELM_BIN is not set: tests/run builds helm and exports it}"
: "${KUBE_BIN_DIR:?KUBE_BIN_DIR is not set: tests/run builds the control plane and node (kube_fetch)}"
: "${CHARGE_OUTBOX_IMAGE:?CHARGE_OUTBOX_IMAGE is not set: tests/run builds the image}"
export HELM_BIN KUBE_BIN_DIR CHARGE_OUTBOX_IMAGE
chart=${RELEASE_TEST_CHART:-$root/helm/charge-outbox}
cluster=$root/deploy/local/cluster
started=$SECONDS

fail() { printf 'FAIL: %s\n' "$*" >&2; exit 1; }
step() { printf '== %s (%ss)\n' "$*" "$((SECONDS - started))" >&2; }
figure() { printf 'FIGURES %s\n' "$*" | tee -a "$work/figures" >&2; }

work=$(mktemp -d /tmp/charge-outbox-release-test.XXXXXX)
chmod 755 "$work"   # the postgres user reaches its data directory under it
export CHARGE_OUTBOX_CLUSTER_DIR=$work/cluster
read -r CLUSTER_PG_PORT CLUSTER_KAFKA_PORT CLUSTER_KAFKA_CONTROLLER_PORT CLUSTER_ACQUIRER_PORT \
  CLUSTER_ACQUIRER_TLS_PORT < <(free_port_pairs 3 | tr ':' ' ' | cut -d' ' -f1-5)
export CLUSTER_PG_PORT CLUSTER_KAFKA_PORT CLUSTER_KAFKA_CONTROLLER_PORT CLUSTER_ACQUIRER_PORT CLUSTER_ACQUIRER_TLS_PORT
# The chart under test, wherever it is: the cluster command installs the one beside it.
export CLUSTER_CHART=$chart
on_exit() {
  local status=$?
  kill $(jobs -p) 2>/dev/null || true
  stop_pid_file "$work/pushgateway.pid" 2 || true
  if ((status != 0)) && [[ -f $CHARGE_OUTBOX_CLUSTER_DIR/admin.kubeconfig ]]; then
    kubectl -n "$NAMESPACE" get pods,jobs -o wide >&2 2>&1 || true
    kubectl -n "$NAMESPACE" get events --sort-by=.lastTimestamp 2>&1 | tail -n 30 >&2 || true
    kube_print_logs "$CHARGE_OUTBOX_CLUSTER_DIR"
    if [[ -n ${RELEASE_TEST_KEEP:-} ]]; then
      say "kept for a look: eval \"\$(CHARGE_OUTBOX_CLUSTER_DIR=$CHARGE_OUTBOX_CLUSTER_DIR $cluster env)\"; touch $work/done to tear down"
      until [[ -f $work/done ]]; do sleep 1; done
    fi
  fi
  "$cluster" down || true
  rm -rf "$work"
}
trap on_exit EXIT
NAMESPACE=payments

step "deploy/local/cluster up: the control plane, a real node, the host's services, helm install --wait"
"$cluster" up --timeout "${RELEASE_TEST_INSTALL_TIMEOUT:-300s}" >"$work/up.log" 2>&1 || fail "deploy/local/cluster up: $(tail -n 80 "$work/up.log")"
eval "$("$cluster" env)"
kubectl() { "$KUBE_BIN_DIR/kubectl" "$@"; }
helm() { "$HELM_BIN" "$@"; }
fullname=$RELEASE-charge-outbox
psql_charge() { psql -X -q -A -t -v ON_ERROR_STOP=1 "$DATABASE_URL" -c "$1"; }
ledger() { curl -sSf "$ACQUIRER_ADMIN_URL/admin/ledger"; }
faults() { curl -sSf -X PUT -H 'Content-Type: application/json' -d "$1" "$ACQUIRER_ADMIN_URL/admin/faults" >/dev/null; }

step "the release's pods, Ready through their probes on the real node"
for component in charge-api outbox-relay; do
  ready=$(kubectl -n "$NAMESPACE" get pods -l "app.kubernetes.io/component=$component" \
    -o jsonpath='{range .items[*]}{.spec.nodeName}/{.status.conditions[?(@.type=="Ready")].status}{"\n"}{end}')
  [[ -n $ready && $(grep -vc "^$KUBE_REAL_NODE_NAME/True$" <<<"$ready") == 0 ]] ||
    fail "$component's pods are not all Ready on $KUBE_REAL_NODE_NAME: $ready"
done
[[ $(psql_charge "SELECT count(*) FROM pg_tables WHERE tablename IN ('charges', 'outbox')") == 2 ]] ||
  fail "the migration hook did not create the tables"

# post_charge KEY: the status of one POST through the Service; curl's own failure as 000.
post_charge() {
  curl -sS -o /dev/null -w '%{http_code}' --connect-timeout 3 --max-time 30 -X POST "$CHARGE_API_URL/v1/charges" \
    -H "Authorization: Bearer $CHARGE_API_KEY" -H "Idempotency-Key: $1" -H 'Content-Type: application/json' \
    -d '{"amount": 2500, "currency": "BRL", "order_id": "ORDER-'"$1"'", "payment_method": "pm_tok_visa"}'
}

step "a charge through the Service, its events from Kafka"
code=$(post_charge first-1 2>&1) || true
[[ $code == 201 ]] || fail "the first charge through $CHARGE_API_URL answered $code"
first=$(psql_charge "SELECT charge_public_id(id) FROM charges WHERE idempotency_key = 'first-1' AND status = 'captured'")
[[ $first == ch_* ]] || fail "the first charge is not captured on record"

# events_from_kafka FILE: every event on the topic, a line each: ce_type, the key (the charge id).
events_from_kafka() {
  kafka_run_class org.apache.kafka.tools.consumer.ConsoleConsumer --bootstrap-server "$KAFKA_BOOTSTRAP_SERVERS" \
    --topic "$CHARGE_EVENTS_TOPIC" --from-beginning --timeout-ms 15000 --property print.key=true \
    --property print.headers=true --property print.value=false 2>/dev/null |
    sed -n 's/.*ce_type:\([a-z._0-9]*\).*\t\(ch_[0-9a-f]*\).*/\1 \2/p' >"$1" || true
}
deadline=$((SECONDS + 60))
until events_from_kafka "$work/events" && grep -q "^payments.charge.captured.v1 $first$" "$work/events"; do
  ((SECONDS < deadline)) || fail "no captured event for $first on Kafka within 60 s: $(cat "$work/events")"
done
grep -q "^payments.charge.initiated.v1 $first$" "$work/events" || fail "no initiated event for $first on Kafka"

# ---- The load client ------------------------------------------------------------------------------------
# A client that retries as docs/charge-api.md asks: anything but 201 (or 402) is retried with the same key,
# 200 ms later, for up to two minutes. One line per charge: KEY SCHEDULED_US DONE_US ATTEMPTS FINAL FAILURES
# (each failed attempt as STATUS/CURL_EXIT, - if none).
now_us() { echo "${EPOCHREALTIME/./}"; }
charge_until_definitive() {
  local key=$1 scheduled=$2 attempts=0 code rc failures=""
  while :; do
    attempts=$((attempts + 1)) rc=0
    code=$(post_charge "$key" 2>/dev/null) || rc=$?
    [[ $code == 201 || $code == 402 ]] && break
    failures+="${failures:+,}$code/$rc"
    (($(now_us) - scheduled < 120000000)) || { code=gave_up; break; }
    sleep 0.2
  done
  printf '%s %s %s %s %s %s\n' "$key" "$scheduled" "$(now_us)" "$attempts" "$code" "${failures:--}"
}
# load TAG RATE SECONDS: charges at a fixed arrival rate, each from its scheduled time (latency counts from
# it, so a stall is not hidden); returns when every one of them is definitive or given up.
load() {
  local tag=$1 rate=$2 seconds=$3 start i at pids=() delay
  start=$(now_us)
  : >"$work/load-$tag"
  for ((i = 0; i < rate * seconds; i++)); do
    at=$((start + i * 1000000 / rate))
    delay=$((at - $(now_us)))
    ((delay <= 0)) || sleep "$(printf '%d.%06d' $((delay / 1000000)) $((delay % 1000000)))"
    charge_until_definitive "$tag-$i" "$at" >>"$work/load-$tag" &
    pids+=($!)
  done
  wait "${pids[@]}"
}
# lag_sampler FILE: the relay's lag, sampled every second: unpublished outbox rows, and the age of the oldest.
lag_sampler() {
  while :; do
    psql_charge "SELECT count(*) || ' ' || COALESCE(round(extract(epoch FROM now() - min(created_at)) * 1000), 0)
                 FROM outbox WHERE published_at IS NULL" >>"$1" 2>/dev/null || true
    sleep 1
  done
}
# report TAG: checks one load's charges against the database, the acquirer's ledger and Kafka, and prints its
# figures.
report() {
  local tag=$1 file=$work/load-$1 sent
  sent=$(wc -l <"$file")
  awk -v tag="$tag" '
    { n++; if ($5 != 201) bad++; if ($4 > 1) retried++; wait_ms = ($3 - $2) / 1000; if (wait_ms > max) max = wait_ms
      if ($6 != "-") { k = split($6, f, ","); for (j = 1; j <= k; j++) kinds[f[j]]++ } }
    END { printf "%s: charges=%d not_201=%d failed_then_retried=%d longest_wait_ms=%d failed_attempts_by_status/curl_exit:", tag, n, bad, retried, max
          for (x in kinds) printf " %s=%d", x, kinds[x]; printf "\n" }' "$file" >"$work/report-$tag"
  figure "$(cat "$work/report-$tag")"
  [[ $(awk '$5 != 201' "$file" | wc -l) == 0 ]] || fail "$tag: charges without a 201: $(awk '$5 != 201' "$file" | head)"
  # The database: one charge per key, captured.
  [[ $(psql_charge "SELECT count(*) FROM charges WHERE idempotency_key LIKE '$tag-%' AND status = 'captured'") == "$sent" ]] ||
    fail "$tag: $sent keys, but $(psql_charge "SELECT status || ' ' || count(*) FROM charges WHERE idempotency_key LIKE '$tag-%' GROUP BY 1") on record"
  # The acquirer: exactly one capture for each of them, none voided.
  psql_charge "SELECT charge_public_id(id) FROM charges WHERE idempotency_key LIKE '$tag-%'" | sort >"$work/ids-$tag"
  ledger | jq -r '.entries[] | select(.type == "capture") | .reference' | sort | uniq -c |
    awk '{ print $2, $1 }' | join - "$work/ids-$tag" >"$work/ledger-$tag"
  [[ $(wc -l <"$work/ledger-$tag") == "$sent" && $(awk '$2 != 1' "$work/ledger-$tag" | wc -l) == 0 ]] ||
    fail "$tag: the acquirer's captures per charge are not one each: $(awk '$2 != 1' "$work/ledger-$tag" | head) ($(wc -l <"$work/ledger-$tag") of $sent charges captured)"
  [[ $(ledger | jq '[.entries[] | select(.type == "void")] | length') == 0 ]] || fail "$tag: the acquirer holds voids"
  # Kafka: each charge's captured event, at least once.
  local deadline=$((SECONDS + 90)) missing
  while :; do
    events_from_kafka "$work/events"
    missing=$(awk '$1 == "payments.charge.captured.v1" { print $2 }' "$work/events" | sort -u | comm -13 - "$work/ids-$tag" | wc -l)
    ((missing == 0)) && break
    ((SECONDS < deadline)) || fail "$tag: $missing charges have no captured event on Kafka after 90 s"
  done
}

# ---- A rollout under load -------------------------------------------------------------------------------
step "a rollout under load: helm upgrade (global.logLevel debug) while charges arrive at 10/s"
pods_of() { kubectl -n "$NAMESPACE" get pods -l "app.kubernetes.io/component=$1" -o jsonpath='{.items[*].metadata.name}'; }
api_before=$(pods_of charge-api) relay_before=$(pods_of outbox-relay)
lag_sampler "$work/lag-rollout" &
lag_pid=$!
load rollout 10 60 &
load_pid=$!
sleep 10
upgrade_started=$SECONDS
helm upgrade "$RELEASE" "$chart" -n "$NAMESPACE" --reuse-values --set global.logLevel=debug --wait --timeout 300s \
  >"$work/upgrade.log" 2>&1 || fail "helm upgrade: $(cat "$work/upgrade.log")"
figure "rollout: helm upgrade --wait took $((SECONDS - upgrade_started)) s"
wait "$load_pid" || fail "the rollout's load client failed"
api_after=$(pods_of charge-api) relay_after=$(pods_of outbox-relay)
for old in $api_before $relay_before; do
  [[ " $api_after $relay_after " != *" $old "* ]] || fail "pod $old was not replaced by the upgrade"
done
# The relay's lag after the load: every event published.
lag_deadline=$((SECONDS + 60))
until [[ $(psql_charge "SELECT count(*) FROM outbox WHERE published_at IS NULL") == 0 ]]; do
  ((SECONDS < lag_deadline)) || fail "the relay's lag did not recover within 60 s of the load"
  sleep 1
done
kill "$lag_pid" 2>/dev/null || true
figure "rollout: relay lag during the load: at most $(sort -n "$work/lag-rollout" | tail -n 1 | cut -d' ' -f1) unpublished events, the oldest at most $(sort -k2 -n "$work/lag-rollout" | tail -n 1 | cut -d' ' -f2) ms old; none left after the load"
report rollout

# ---- SIGTERM drain --------------------------------------------------------------------------------------
step "SIGTERM drain: a charge-api pod deleted while requests are in flight"
grace=$(kubectl -n "$NAMESPACE" get deploy "$fullname-charge-api" -o jsonpath='{.spec.template.spec.terminationGracePeriodSeconds}')
# Captures take 7 s at the acquirer: longer than the preStop sleep, so the pod still holds requests when its
# SIGTERM comes, and shorter than shutdown.deadline, so it can finish them.
faults '{"latency": {"distribution": "fixed", "ms": 7000}, "apply_to": ["capture"]}'
victim=$(pods_of charge-api | cut -d' ' -f1)
kubectl -n "$NAMESPACE" logs -f "$victim" >"$work/victim.log" 2>&1 &
load drain 4 25 &
load_pid=$!
sleep 10
delete_started=$(now_us)
kubectl -n "$NAMESPACE" delete pod "$victim" --wait=true --timeout=120s >/dev/null
gone_ms=$((($(now_us) - delete_started) / 1000))
wait "$load_pid" || fail "the drain's load client failed"
faults '{}'
# The victim's own account: SIGTERM received, then stopped, not killed, and how long it drained.
log_us() {
  local ts
  ts=$(jq -rR --arg m "$1" 'fromjson? | select(.msg | startswith($m)) | .ts' "$work/victim.log" | head -n 1) || true
  [[ -z $ts ]] || date -d "$ts" +%s%6N
}
sigterm_us=$(log_us "received SIGTERM") stopped_us=$(log_us "stopped")
[[ -n $sigterm_us && -n $stopped_us ]] ||
  fail "$victim did not log its SIGTERM and a clean stop: $(tail -n 20 "$work/victim.log")"
! grep -q 'shutdown did not finish' "$work/victim.log" || fail "$victim overran its shutdown deadline"
((gone_ms < grace * 1000)) || fail "$victim took $gone_ms ms to go, past terminationGracePeriodSeconds ($grace s)"
# The requests in flight through the Service when the victim got its SIGTERM (on either pod: the client does
# not know which one answers), each answered.
in_flight=$(awk -v t="$sigterm_us" '$2 < t && $3 > t' "$work/load-drain" | wc -l)
figure "drain: $victim gone $gone_ms ms after its deletion (preStop sleep, then SIGTERM); drained for $(((stopped_us - sigterm_us) / 1000)) ms after SIGTERM, with $in_flight charges in flight through the Service at that moment; terminationGracePeriodSeconds $grace s"
((in_flight > 0)) || fail "drain: no charge was in flight when $victim got its SIGTERM: nothing was drained"
# An answer lost in flight: the server closed a connection it had taken without answering (curl 52, 56) or
# never answered (28).
lost=$(awk '{ print $6 }' "$work/load-drain" | tr ',' '\n' | grep -cE '/(52|56|28)$' || true)
[[ $lost == 0 ]] || fail "drain: $lost requests lost their answer: $(grep -E '/(52|56|28)' "$work/load-drain" | head)"
report drain

# ---- Forbid, with real Jobs -----------------------------------------------------------------------------
step "reconciler: the CronJob's own Jobs ran to completion, a run summary in their logs"
cronjob=$fullname-reconciler
deadline=$((SECONDS + 150))
until done_job=$(kubectl -n "$NAMESPACE" get jobs -o json | jq -r --arg cj "$cronjob" '[.items[]
        | select(.metadata.ownerReferences[0].name == $cj and .status.succeeded == 1)][0].metadata.name // empty') &&
      [[ -n $done_job ]]; do
  ((SECONDS < deadline)) || fail "no Job of $cronjob completed within 150 s"
  sleep 2
done
kubectl -n "$NAMESPACE" logs "job/$done_job" | grep -q '"msg":"run summary","mode":"sweep"' ||
  fail "$done_job's log holds no run summary: $(kubectl -n "$NAMESPACE" logs "job/$done_job" | tail -n 5)"

step "Forbid: a run against a black-holed acquirer outlasts the next schedule; no second Job meanwhile"
# Every acquirer call hangs for two minutes (past the reconciler's request timeout); the run goes on for
# its time budget, 75 s, then finishes the charges it started.
helm upgrade "$RELEASE" "$chart" -n "$NAMESPACE" --reuse-values --set reconciler.timeBudget=75s >"$work/upgrade.log" 2>&1 ||
  fail "helm upgrade: $(cat "$work/upgrade.log")"
faults '{"timeout_rate": 1, "timeout_delay_ms": 120000, "apply_to": ["capture", "replay", "void", "lookup", "list"]}'
merchant=$(psql_charge "SELECT merchant_id FROM charges WHERE idempotency_key = 'first-1'")
# Charges charge-api left pending ten minutes ago (attempt 1 unknown): what the reconciler must look up.
psql_charge "
  WITH ins AS (
    INSERT INTO charges (id, merchant_id, idempotency_key, request_fingerprint, order_id, amount, currency,
                         payment_method, last_sequence, attempt_count, created_at, updated_at)
    SELECT gen_random_uuid(), '$merchant', 'stuck-' || n, sha256(('stuck-' || n)::bytea), 'ORDER-stuck-' || n,
           4200, 'BRL', 'pm_tok_visa', 1, 1, now() - interval '10 minutes', now() - interval '10 minutes'
    FROM generate_series(1, 40) n RETURNING *
  ), ev AS (
    INSERT INTO outbox (id, aggregateid, type, payload, sequence, shard)
    SELECT gen_random_uuid(), charge_public_id(ins.id), 'payments.charge.initiated.v1',
           charge_event_payload(ROW(ins.*)::charges), 1, outbox_shard(ins.id) FROM ins
  )
  INSERT INTO acquirer_attempts (charge_id, attempt_no, request_id, operation, actor, started_at, finished_at,
                                 outcome, evidence)
  SELECT ins.id, 1, gen_random_uuid(), 'capture', 'charge-api', ins.created_at, ins.created_at + interval '1 second',
         'timed_out', 'unknown' FROM ins" >/dev/null
# Watch the CronJob's Jobs every second: the active ones, and each Job's start and end.
jobs_of_cronjob() {
  kubectl -n "$NAMESPACE" get jobs -o json | jq -r --arg cj "$cronjob" '.items[]
    | select(.metadata.ownerReferences[0].name == $cj)
    | "\(.metadata.name) \(.status.startTime // "-") \(.status.completionTime // .status.conditions[0].lastTransitionTime // "-") \(.status.active // 0)"'
}
known_jobs=$(jobs_of_cronjob | cut -d' ' -f1 | sort)
long_run="" most_active=0 deadline=$((SECONDS + 330))
while ((SECONDS < deadline)); do
  snapshot=$(jobs_of_cronjob)
  active=$(awk '$4 > 0' <<<"$snapshot" | wc -l)
  ((active <= most_active)) || most_active=$active
  ((active <= 1)) || fail "two of $cronjob's Jobs active at once: $snapshot"
  if [[ -z $long_run ]]; then
    long_run=$(awk '$4 > 0 { print $1 }' <<<"$snapshot" | grep -vxF "$known_jobs" | head -n 1 || true)
  elif [[ $(awk -v j="$long_run" '$1 == j { print $4 }' <<<"$snapshot") == 0 ]]; then
    break
  fi
  sleep 1
done
[[ -n $long_run ]] || fail "no run of $cronjob started within the watch"
read -r _ long_start long_end _ < <(awk -v j="$long_run" '$1 == j' <<<"$(jobs_of_cronjob)")
[[ $long_end != - ]] || fail "$long_run did not finish within the watch"
start_s=$(date -d "$long_start" +%s) end_s=$(date -d "$long_end" +%s)
# A schedule boundary (a whole minute) strictly inside the run, with room for the controller to act on it.
next_minute=$(((start_s / 60 + 1) * 60))
((next_minute + 10 <= end_s)) ||
  fail "$long_run ran $long_start..$long_end: it did not outlast the next schedule by 10 s (the black hole did not hold it)"
started_meanwhile=$(jobs_of_cronjob | awk -v s="$start_s" -v e="$end_s" -v j="$long_run" '$1 != j && $2 != "-" {
  cmd = "date -d " $2 " +%s"; cmd | getline t; close(cmd); if (t > s && t < e) print $1 }')
[[ -z $started_meanwhile ]] || fail "Jobs started while $long_run ran: $started_meanwhile"
figure "forbid: $long_run ran $((end_s - start_s)) s ($long_start..$long_end) over the $(date -u -d "@$next_minute" +%H:%M) schedule; at most $most_active Job active; none started meanwhile"
faults '{}'

# Liveness held throughout: the rollout, the drain and two minutes of a black-holed acquirer restarted no
# daemon (a probe on the wrong port or path, or one that waits on the acquirer, would have).
step "no charge-api or relay container restarted"
restarted=$(kubectl -n "$NAMESPACE" get pods -l 'app.kubernetes.io/component in (charge-api,outbox-relay)' -o json |
  jq -r '.items[] | .metadata.name as $pod | .status.containerStatuses[]? | select(.restartCount > 0)
    | "\($pod)/\(.name): \(.restartCount) restarts, last \(.lastState.terminated.reason // "?") (exit \(.lastState.terminated.exitCode // "?"))"')
[[ -z $restarted ]] || fail "containers restarted: $restarted"

# ---- Uninstall ------------------------------------------------------------------------------------------
step "helm uninstall leaves the namespace as the operator made it"
helm uninstall "$RELEASE" -n "$NAMESPACE" --wait --timeout 120s >/dev/null
# helm waits for the objects it made; their pods (and a Job the CronJob made at the last minute) go by the
# garbage collector, each after its own SIGTERM drain.
deadline=$((SECONDS + 90))
until [[ -z $(kubectl -n "$NAMESPACE" get pods -o name 2>&1) ]]; do
  ((SECONDS < deadline)) || fail "pods still there 90 s after helm uninstall: $(kubectl -n "$NAMESPACE" get pods 2>&1)"
  sleep 1
done
left=$(kubectl -n "$NAMESPACE" get all,configmaps,secrets,serviceaccounts,roles,rolebindings,networkpolicies,poddisruptionbudgets,ingresses,horizontalpodautoscalers,cronjobs,jobs,persistentvolumeclaims \
  -o name 2>&1 | grep -vxE 'secret/charge-outbox-(database|acquirer|ca)|serviceaccount/default|configmap/kube-root-ca.crt' || true)
[[ -z $left ]] || fail "helm uninstall left: $left"
cluster_left=$(kubectl get clusterroles,clusterrolebindings,priorityclasses,namespaces -o name -l "app.kubernetes.io/instance=$RELEASE" 2>&1 || true)
[[ -z $cluster_left ]] || fail "helm uninstall left cluster-wide: $cluster_left"

# ---- Every optional object -------------------------------------------------------------------------------
step "tests/helm/values-everything.yaml on the real node, where its objects can work here"
# What the file names beyond this cluster is brought, as a platform team would: a Secret per component's
# database URL (all to this PostgreSQL, checked with verify-full against the cluster's CA), settlement-
# projection's database, a client certificate, a pull Secret, the monitoring kinds' CRDs. An overlay gives
# only this cluster's addresses and its Kafka, which does not authenticate (SASL_SSL needs a broker set up
# for it: operations_docs runs SASL). The NetworkPolicies are accepted and not enforced (the bridge plugin
# does not), the Ingress and the HPA have no controller or metrics here, the PodMonitor and rule no Prometheus.
crds=$KUBE_BIN_DIR/../prometheus-operator-crds
for kind in podmonitors prometheusrules; do
  kubectl apply --server-side -f "$crds/monitoring.coreos.com_$kind.yaml" >/dev/null
done
kubectl wait --for=condition=Established crd --all --timeout=60s >/dev/null
psql -X -q -v ON_ERROR_STOP=1 "${DATABASE_URL%/*}/postgres" -c "CREATE DATABASE settlement" >/dev/null
node_db=$(kubectl -n "$NAMESPACE" get secret charge-outbox-database -o jsonpath='{.data.database-url}' | base64 -d)
for secret in charge-outbox-db-owner:owner-url charge-outbox-db-operator:operator-url charge-outbox-db-relay:relay-url \
              charge-outbox-db-charge-api:api-url charge-outbox-db-reconciler:reconciler-url; do
  kubectl -n "$NAMESPACE" create secret generic "${secret%%:*}" --from-literal="${secret#*:}=$node_db" >/dev/null
done
kubectl -n "$NAMESPACE" create secret generic settlement-database --from-literal=url="${node_db%/*}/settlement" >/dev/null
kubectl -n "$NAMESPACE" create secret generic settlement-database-owner --from-literal=owner-url="${node_db%/*}/settlement" >/dev/null
kubectl -n "$NAMESPACE" create secret tls charge-outbox-db-charge-api-cert --cert="$CHARGE_OUTBOX_CLUSTER_DIR/tls/server.crt" \
  --key="$CHARGE_OUTBOX_CLUSTER_DIR/tls/server.key" >/dev/null
kubectl -n "$NAMESPACE" create secret docker-registry registry-credentials --docker-server=registry.example \
  --docker-username=u --docker-password=p >/dev/null
# A Pushgateway stand-in on the host (the reconciler's Job fails when its push does; the chart's alerts need
# the push): it takes every push and writes down its path.
pushgateway_port=$(free_port)
start_daemon "$work/pushgateway.pid" "$work/pushgateway.log" python3 -c '
import http.server, sys
class Gateway(http.server.BaseHTTPRequestHandler):
    def do_PUT(self):
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        print(self.command, self.path, flush=True)
        self.send_response(200); self.send_header("Content-Length", "0"); self.end_headers()
    do_POST = do_PUT
    def log_message(self, *args): pass
http.server.ThreadingHTTPServer((sys.argv[1], int(sys.argv[2])), Gateway).serve_forever()' \
  "$(cat "$CHARGE_OUTBOX_CLUSTER_DIR/node-ip")" "$pushgateway_port"
cat >"$work/everything-here.yaml" <<YAML
global:
  acquirer: {url: "https://$(cat "$CHARGE_OUTBOX_CLUSTER_DIR/node-ip"):$CLUSTER_ACQUIRER_TLS_PORT"}
outboxRelay:
  kafka: {bootstrapServers: "$KAFKA_BOOTSTRAP_SERVERS", securityProtocol: "", saslMechanism: "", saslUsername: "",
          trustCaBundle: false, saslPasswordSecret: {name: ""}, allowUnauthenticated: true, topicReplicationFactor: 1}
settlementProjection:
  replicas: 1
  kafka: {securityProtocol: "", saslMechanism: "", saslUsername: "", trustCaBundle: false, saslPasswordSecret: {name: ""},
          allowUnauthenticated: true}
reconciler:
  pushgateway: {url: "http://$(cat "$CHARGE_OUTBOX_CLUSTER_DIR/node-ip"):$pushgateway_port"}
YAML
helm install "$RELEASE" "$chart" -n "$NAMESPACE" -f "$root/tests/helm/values-everything.yaml" -f "$work/everything-here.yaml" \
  --wait --timeout 300s >"$work/everything.log" 2>&1 ||
  fail "helm install with values-everything: $(tail -n 20 "$work/everything.log"; kubectl -n "$NAMESPACE" get pods -o wide 2>&1)"
eval "$("$cluster" env)"   # the Service's new ClusterIP
for component in charge-api outbox-relay settlement-projection; do
  ready=$(kubectl -n "$NAMESPACE" get pods -l "app.kubernetes.io/component=$component" \
    -o jsonpath='{range .items[*]}{.status.conditions[?(@.type=="Ready")].status}{"\n"}{end}')
  [[ -n $ready && $(grep -vc '^True$' <<<"$ready") == 0 ]] || fail "values-everything: $component's pods are not all Ready: $ready"
done
code=$(post_charge everything-1 2>&1) || true
[[ $code == 201 ]] || fail "values-everything: a charge through the Service answered $code"
# The projection applies it: its API (a token whose hash the values hold) counts the merchant's capture.
merchant=$(psql_charge "SELECT merchant_id FROM charges WHERE idempotency_key = 'everything-1'")
projection=$(kubectl -n "$NAMESPACE" get service "$fullname-settlement-projection" -o jsonpath='{.spec.clusterIP}:{.spec.ports[0].port}')
today=$(date -u +%F)
deadline=$((SECONDS + 60))
until totals=$(curl -sSf -H "Authorization: Bearer token-a" \
                 "http://$projection/v1/merchants/$merchant/captured-totals?from=$today&to=$today" 2>&1) &&
      jq -e '[.. | numbers] | any(. > 0)' <<<"$totals" >/dev/null; do
  ((SECONDS < deadline)) || fail "values-everything: settlement-projection did not count the capture within 60 s: $totals"
  sleep 1
done
# The window report's CronJob, run now rather than at its 02:30: its Job completes with a report.
kubectl -n "$NAMESPACE" create job window-now --from="cronjob/$fullname-reconciler-window" >/dev/null
kubectl -n "$NAMESPACE" wait --for=condition=Complete job/window-now --timeout=180s >/dev/null ||
  fail "values-everything: the window report's Job did not complete: $(kubectl -n "$NAMESPACE" logs job/window-now --tail 5 2>&1)"
kubectl -n "$NAMESPACE" logs job/window-now | grep -q '"msg":"run summary","mode":"window"' ||
  fail "values-everything: the window report's log holds no run summary"
grep -qE '^(POST|PUT) .*/mode/window' "$work/pushgateway.log" ||
  fail "values-everything: the window report pushed no metrics: $(cat "$work/pushgateway.log")"
[[ $(kubectl -n "$NAMESPACE" get networkpolicies -o name | wc -l) -ge 1 ]] || fail "values-everything: no NetworkPolicy"
kubectl -n "$NAMESPACE" delete job window-now --wait=false >/dev/null
helm uninstall "$RELEASE" -n "$NAMESPACE" --wait --timeout 120s >/dev/null

step "deploy/local/cluster down leaves nothing on the host"
trap - EXIT
cluster_dir=$CHARGE_OUTBOX_CLUSTER_DIR
"$cluster" down
stop_pid_file "$work/pushgateway.pid" 2
leftovers=()
pgrep -f "$cluster_dir" >/dev/null && leftovers+=("processes: $(pgrep -af "$cluster_dir" | head -n 3)")
grep -q "$cluster_dir" /proc/mounts && leftovers+=("mounts: $(grep "$cluster_dir" /proc/mounts | head -n 3)")
ip link show "$KUBE_NODE_BRIDGE" >/dev/null 2>&1 && leftovers+=("the bridge $KUBE_NODE_BRIDGE")
iptables-save 2>/dev/null | grep -qE '^:(KUBE-|CNI-)' && leftovers+=("iptables chains: $(iptables-save | grep -E '^:(KUBE-|CNI-)' | head -n 3)")
compgen -G '/sys/fs/cgroup/*/kubepods*' >/dev/null && leftovers+=("cgroups: $(compgen -G '/sys/fs/cgroup/*/kubepods*' | head -n 3)")
[[ -d $cluster_dir ]] && leftovers+=("the state directory $cluster_dir")
rm -rf "$work"
((${#leftovers[@]} == 0)) || fail "left on the host: ${leftovers[*]}"
step "passed"
