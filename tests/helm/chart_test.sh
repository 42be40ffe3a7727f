#!/usr/bin/env bash
# The Helm chart rendered by the real helm (tests/run builds it; HELM_BIN): lint, what the outbox-relay
# and charge-api Deployments and the reconciler CronJob run and how, and the values the chart refuses.
# Nothing is installed anywhere.
set -euo pipefail
helm=${HELM_BIN:?HELM_BIN is not set: tests/run builds helm and exports it}
chart=$(cd "$(dirname "${BASH_SOURCE[0]}")/../../helm/charge-outbox" && pwd)
failures=0
fail() { printf 'FAIL: %s\n' "$*" >&2; failures=$((failures + 1)); }
# expect_line TEXT NEEDLE WHAT: TEXT has a line equal to NEEDLE once leading spaces are dropped.
expect_line() { grep -qxF -- "$2" <<<"$(sed 's/^ *//' <<<"$1")" || fail "$3: no line '$2'"; }
# env_has TEXT NAME NEEDLE [LINES]: the env entry named exactly NAME has NEEDLE within its first LINES (5)
# lines. No pipes into grep -q: with pipefail, a writer cut short by it would count as a failure.
env_has() {
  local entry
  entry=$(grep -A"$(("${4:-5}" - 1))" -E -- "^ *- name: $2\$" <<<"$1" || true)
  grep -qF -- "$3" <<<"$entry"
}
# render TEMPLATE ARGS...: that template's manifests (every template is rendered, so required values
# anywhere still count).
render() { local t=$1; shift; "$helm" template rel "$chart" --show-only "templates/$t.yaml" "$@" 2>&1; }
kafka=(--set 'outboxRelay.kafka.bootstrapServers=kafka-0:9092\,kafka-1:9092')  # \, : one value with a comma
acquirer=(--set global.acquirer.url=https://acquirer.example)

"$helm" lint "$chart" "${kafka[@]}" "${acquirer[@]}" >/dev/null || fail "helm lint with the required values"

# outbox-relay
relay=$(render outbox-relay-deployment "${kafka[@]}" "${acquirer[@]}") || fail "rendering the defaults: $relay"
expect_line "$relay" "kind: Deployment" "defaults"
expect_line "$relay" "name: rel-charge-outbox-outbox-relay" "defaults"
expect_line "$relay" "replicas: 2" "defaults"
expect_line "$relay" 'args: ["outbox-relay"]' "defaults"
expect_line "$relay" 'value: "kafka-0:9092,kafka-1:9092"' "the bootstrap servers"
expect_line "$relay" "httpGet: {path: /readyz, port: http}" "readiness"
expect_line "$relay" "httpGet: {path: /healthz, port: http}" "liveness"
expect_line "$relay" "terminationGracePeriodSeconds: 30" "grace above shutdown.deadline"
expect_line "$relay" "readOnlyRootFilesystem: true" "container security"
# The database URL only ever comes from the Secret.
env_has "$relay" DATABASE_URL 'name: charge-outbox-database' ||
  fail "DATABASE_URL is not read from the database Secret"
grep -q 'KAFKA_SASL_PASSWORD' <<<"$relay" && fail "a SASL password with no Secret configured"

sasl=$(render outbox-relay-deployment "${kafka[@]}" "${acquirer[@]}" --set outboxRelay.kafka.securityProtocol=SASL_SSL \
  --set outboxRelay.kafka.saslMechanism=SCRAM-SHA-512 --set outboxRelay.kafka.saslUsername=relay \
  --set outboxRelay.kafka.saslPasswordSecret.name=kafka-relay --set outboxRelay.workers=4 \
  --set outboxRelay.extraEnv.RELAY_POLL_INTERVAL=2s) || fail "rendering with SASL: $sasl"
expect_line "$sasl" 'value: "SASL_SSL"' "security protocol"
env_has "$sasl" KAFKA_SASL_PASSWORD 'name: kafka-relay' ||
  fail "KAFKA_SASL_PASSWORD is not read from its Secret"
env_has "$sasl" RELAY_WORKERS 'value: "4"' 2 || fail "outboxRelay.workers"
env_has "$sasl" RELAY_POLL_INTERVAL 'value: "2s"' 2 || fail "outboxRelay.extraEnv"

# charge-api
api=$(render charge-api-deployment "${kafka[@]}" "${acquirer[@]}") || fail "rendering charge-api: $api"
expect_line "$api" 'args: ["charge-api"]' "charge-api"
expect_line "$api" "kind: Service" "charge-api's Service"
expect_line "$api" "targetPort: http" "charge-api's Service"
expect_line "$api" "httpGet: {path: /readyz, port: http}" "charge-api readiness"
expect_line "$api" 'value: "https://acquirer.example"' "the acquirer URL"
env_has "$api" ACQUIRER_API_KEY 'name: charge-outbox-acquirer' || fail "ACQUIRER_API_KEY is not read from its Secret"
env_has "$api" DATABASE_URL 'name: charge-outbox-database' || fail "charge-api's DATABASE_URL is not read from the Secret"

# reconciler
rec=$(render reconciler-cronjob "${kafka[@]}" "${acquirer[@]}" --set 'reconciler.schedule=*/2 * * * *') ||
  fail "rendering the reconciler: $rec"
expect_line "$rec" "kind: CronJob" "reconciler"
expect_line "$rec" "concurrencyPolicy: Forbid" "reconciler"
expect_line "$rec" 'schedule: "*/2 * * * *"' "reconciler schedule"
expect_line "$rec" 'args: ["reconciler", "sweep"]' "reconciler"
expect_line "$rec" "backoffLimit: 0" "reconciler: the next run, not a retry"
expect_line "$rec" "restartPolicy: Never" "reconciler"
env_has "$rec" ACQUIRER_API_KEY 'name: charge-outbox-acquirer' || fail "the reconciler's ACQUIRER_API_KEY is not from its Secret"
env_has "$rec" RECONCILER_NOT_FOUND_POLICY 'value: "resubmit"' 2 || fail "reconciler.notFoundPolicy"
# One deadline for both daemons, so a takeover and the reconciler apply one policy.
dl=(--set global.chargeDeadline=90m)
env_has "$(render reconciler-cronjob "${kafka[@]}" "${acquirer[@]}" "${dl[@]}")" RECONCILER_DEADLINE 'value: "90m"' 2 ||
  fail "the reconciler's deadline is not global.chargeDeadline"
env_has "$(render charge-api-deployment "${kafka[@]}" "${acquirer[@]}" "${dl[@]}")" CHARGE_DEADLINE 'value: "90m"' ||
  fail "charge-api's deadline is not global.chargeDeadline"

# Refused, each with the reason named.
refused() {  # refused NEEDLE WHAT ARGS...: rendering fails and says NEEDLE
  local needle=$1 what=$2 out; shift 2
  if out=$(render outbox-relay-deployment "$@"); then fail "$what: rendered"; elif ! grep -qF -- "$needle" <<<"$out"; then
    fail "$what: the error does not say '$needle': $out"; fi
}
refused "outboxRelay.kafka.bootstrapServers is required" "no bootstrap servers" "${acquirer[@]}"
refused "global.acquirer.url is required" "no acquirer URL" "${kafka[@]}"
refused "invalid propertyName 'DATABASE_URL'" "a secret through extraEnv" "${kafka[@]}" "${acquirer[@]}" \
  --set outboxRelay.extraEnv.DATABASE_URL=postgres://x
refused "invalid propertyName 'ACQUIRER_API_KEY'" "the acquirer key through extraEnv" "${kafka[@]}" "${acquirer[@]}" \
  --set chargeApi.extraEnv.ACQUIRER_API_KEY=ak_live
refused "bogus" "an unknown key" "${kafka[@]}" "${acquirer[@]}" --set outboxRelay.bogus=1
refused "workers" "zero workers" "${kafka[@]}" "${acquirer[@]}" --set outboxRelay.workers=0
refused "notFoundPolicy" "a not-found policy that does not exist" "${kafka[@]}" "${acquirer[@]}" \
  --set reconciler.notFoundPolicy=guess

# Everything but the migration disabled: nothing else rendered, and nothing else required.
only_migrate=$("$helm" template rel "$chart" --set outboxRelay.enabled=false --set chargeApi.enabled=false \
  --set reconciler.enabled=false) || fail "rendering the migration alone: $only_migrate"
grep -qE 'outbox-relay|charge-api|reconciler' <<<"$only_migrate" && fail "disabled components were rendered"
expect_line "$only_migrate" "kind: Job" "the migration alone"

((failures == 0)) || { echo "$failures check(s) failed" >&2; exit 1; }
echo "chart checks passed"
