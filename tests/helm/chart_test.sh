#!/usr/bin/env bash
# The Helm chart rendered by the real helm (tests/run builds it; HELM_BIN): lint, what the outbox-relay
# Deployment runs and how, and the values the chart refuses. Nothing is installed anywhere.
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
render() { "$helm" template rel "$chart" --show-only templates/outbox-relay-deployment.yaml "$@" 2>&1; }
kafka=(--set 'outboxRelay.kafka.bootstrapServers=kafka-0:9092\,kafka-1:9092')  # \, : one value with a comma

"$helm" lint "$chart" "${kafka[@]}" >/dev/null || fail "helm lint with the required values"

relay=$(render "${kafka[@]}") || fail "rendering the defaults: $relay"
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

sasl=$(render "${kafka[@]}" --set outboxRelay.kafka.securityProtocol=SASL_SSL \
  --set outboxRelay.kafka.saslMechanism=SCRAM-SHA-512 --set outboxRelay.kafka.saslUsername=relay \
  --set outboxRelay.kafka.saslPasswordSecret.name=kafka-relay --set outboxRelay.workers=4 \
  --set outboxRelay.extraEnv.RELAY_POLL_INTERVAL=2s) || fail "rendering with SASL: $sasl"
expect_line "$sasl" 'value: "SASL_SSL"' "security protocol"
env_has "$sasl" KAFKA_SASL_PASSWORD 'name: kafka-relay' ||
  fail "KAFKA_SASL_PASSWORD is not read from its Secret"
env_has "$sasl" RELAY_WORKERS 'value: "4"' 2 || fail "outboxRelay.workers"
env_has "$sasl" RELAY_POLL_INTERVAL 'value: "2s"' 2 || fail "outboxRelay.extraEnv"

# Refused, each with the reason named.
refused() {  # refused NEEDLE WHAT ARGS...: rendering fails and says NEEDLE
  local needle=$1 what=$2 out; shift 2
  if out=$(render "$@"); then fail "$what: rendered"; elif ! grep -qF -- "$needle" <<<"$out"; then
    fail "$what: the error does not say '$needle': $out"; fi
}
refused "outboxRelay.kafka.bootstrapServers is required" "no bootstrap servers"
refused "invalid propertyName 'DATABASE_URL'" "a secret through extraEnv" "${kafka[@]}" --set outboxRelay.extraEnv.DATABASE_URL=postgres://x
refused "bogus" "an unknown key" "${kafka[@]}" --set outboxRelay.bogus=1
refused "workers" "zero workers" "${kafka[@]}" --set outboxRelay.workers=0

# Disabled: no Deployment at all (and no bootstrap servers needed).
disabled=$("$helm" template rel "$chart" --set outboxRelay.enabled=false) || fail "rendering with the relay disabled"
grep -q 'outbox-relay' <<<"$disabled" && fail "the relay is disabled but rendered"

((failures == 0)) || { echo "$failures check(s) failed" >&2; exit 1; }
echo "chart checks passed"
