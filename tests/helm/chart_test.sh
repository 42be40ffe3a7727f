#!/usr/bin/env bash
# The Helm chart rendered by the real helm (tests/run builds it; HELM_BIN): lint, what each workload runs
# and how, where every CronJob knob lands, the security context, the config checksum, the optional objects
# of values-everything.yaml, the alerts against the code and docs/operations.md, and the values the chart
# refuses. Nothing is installed anywhere (tests/kube does that).
set -euo pipefail
helm=${HELM_BIN:?HELM_BIN is not set: tests/run builds helm and exports it}
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/../.." && pwd)
chart=$root/helm/charge-outbox
everything=$here/values-everything.yaml
failures=0
fail() { printf 'FAIL: %s\n' "$*" >&2; failures=$((failures + 1)); }

# flat: helm's block-style YAML as "Kind/name:path=value" lines, list items as [] (a key with no value
# may have its list items at its own indent, as toYaml writes them). Exact paths make a knob rendered
# under the wrong key fail, which a grep for its line would not.
flat() {
  awk '
    function flush(  i) { for (i = 1; i <= n; i++) print kind "/" name ":" out[i]; n = 0; kind = ""; name = "" }
    /^---/ { flush(); depth = 0; next }
    /^[[:space:]]*(#|$)/ { next }
    {
      match($0, /^ */); ind = RLENGTH; rest = substr($0, ind + 1)
      while (depth > 0 && (ind_[depth] > ind || (ind_[depth] == ind && !(rest ~ /^- / && open_[depth])))) depth--
      while (rest ~ /^- /) { depth++; ind_[depth] = ind; key_[depth] = "[]"; open_[depth] = 0; ind += 2; rest = substr(rest, 3) }
      path = ""; for (i = 1; i <= depth; i++) path = path (path == "" ? "" : ".") key_[i]
      if (match(rest, /^"?[A-Za-z0-9_.\/-]+"?:( |$)/)) {
        k = substr(rest, 1, RLENGTH); v = substr(rest, RLENGTH + 1); sub(/: ?$/, "", k); gsub(/"/, "", k)
        depth++; ind_[depth] = ind; key_[depth] = k; open_[depth] = (v == ""); path = path (path == "" ? "" : ".") k
        if (v != "") out[++n] = path "=" v
        if (path == "kind") kind = v
        if (path == "metadata.name") name = v
      } else out[++n] = path "=" rest
    }
    END { flush() }'
}
# has FLAT LINE WHAT: FLAT has exactly LINE.
has() { grep -qxF -- "$2" <<<"$1" || fail "$3: no '$2'"; }
hasnt() { if grep -qF -- "$2" <<<"$1"; then fail "$3: '$2' is there"; fi; }
render() { "$helm" template rel "$chart" "$@" 2>&1; }
# rules FLAT POLICY ingress|egress: one line per rule of NetworkPolicy/rel-charge-outbox-POLICY, "PORTS <- PEERS"
# or "PORTS -> PEERS" (ports as port/protocol, peers as their selector or ipBlock leaves), in order.
rules() {
  awk -v prefix="NetworkPolicy/rel-charge-outbox-$2:spec.$3.[]." -v dir="$3" '
    function emit() { if (ports != "" || peers != "") print ports (dir == "ingress" ? " <- " : " -> ") peers; ports = ""; peers = "" }
    index($0, prefix) == 1 {
      rest = substr($0, length(prefix) + 1)
      if (rest ~ /^ports\.\[\]\./) {
        if (dir == "ingress" && last == "peers") emit()
        sub(/^ports\.\[\]\./, "", rest); last = "ports"
        if (rest ~ /^port=/) ports = ports (ports == "" ? "" : ",") substr(rest, 6)
        else if (rest ~ /^protocol=/) ports = ports "/" substr(rest, 10)
      } else {
        if (dir == "egress" && last == "ports") emit()
        sub(/^(from|to)\.\[\]\./, "", rest); last = "peers"
        peers = peers (peers == "" ? "" : " ") rest
      }
    }
    END { emit() }' <<<"$1"
}
# policy FLAT POLICY DIR WHAT EXPECTED...: exactly these rules, in this order.
policy() {
  local flat_=$1 name=$2 dir=$3 what=$4 got want; shift 4
  got=$(rules "$flat_" "$name" "$dir")
  want=$(printf '%s\n' "$@")
  [[ $got == "$want" ]] || fail "$what: the $name NetworkPolicy's $dir rules are"$'\n'"$got"$'\n'"not"$'\n'"$want"
}
required=(--set 'outboxRelay.kafka.bootstrapServers=kafka-0:9092\,kafka-1:9092' --set outboxRelay.kafka.securityProtocol=SASL_SSL
  --set global.acquirer.url=https://acquirer.example)
# settlement-projection on, with the one value it requires (a token's hash: sha256 of "token-a").
sp_on=(--set settlementProjection.enabled=true --set 'settlementProjection.apiTokenHashes={a70bf50e531ce1a817561f2f5d5b6645d4e806becf58ccc5e8cf6b8045a090a8}')

"$helm" lint "$chart" "${required[@]}" >/dev/null || fail "helm lint with the required values"
"$helm" lint "$chart" -f "$everything" >/dev/null || fail "helm lint with values-everything.yaml"
out=$(render "${required[@]}") || fail "rendering the defaults: $out"
D=$(flat <<<"$out")
out=$(render -f "$everything") || fail "rendering values-everything.yaml: $out"
E=$(flat <<<"$out")

api=Deployment/rel-charge-outbox-charge-api
relay=Deployment/rel-charge-outbox-outbox-relay
rec=CronJob/rel-charge-outbox-reconciler
win=CronJob/rel-charge-outbox-reconciler-window
mig=Job/rel-charge-outbox-migrate
sp=Deployment/rel-charge-outbox-settlement-projection
pod=spec.template.spec          # a Deployment's or Job's pod spec
cpod=spec.jobTemplate.spec.template.spec

# What the defaults create, and nothing optional.
for object in "$api" "$relay" "$rec" "$mig" Service/rel-charge-outbox-charge-api ServiceAccount/rel-charge-outbox \
  ConfigMap/rel-charge-outbox-charge-api ConfigMap/rel-charge-outbox-outbox-relay ConfigMap/rel-charge-outbox-reconciler; do
  has "$D" "$object:metadata.name=${object#*/}" "defaults"
done
for kind in HorizontalPodAutoscaler PodDisruptionBudget NetworkPolicy Ingress PodMonitor PrometheusRule Secret; do
  hasnt "$D" "$kind/" "defaults: optional $kind"
done
hasnt "$D" "$win:" "defaults: the window report"
hasnt "$D" "ConfigMap/rel-charge-outbox-dashboard:" "defaults: the dashboard"
# settlement-projection is off by default: no Deployment, Service, ConfigMap, nor its place in the monitoring.
hasnt "$D" "settlement-projection" "defaults: settlement-projection"
# values-everything.yaml: every optional object.
for object in HorizontalPodAutoscaler/rel-charge-outbox-charge-api PodDisruptionBudget/rel-charge-outbox-charge-api \
  PodDisruptionBudget/rel-charge-outbox-outbox-relay NetworkPolicy/rel-charge-outbox-charge-api \
  NetworkPolicy/rel-charge-outbox-outbox-relay NetworkPolicy/rel-charge-outbox-migrate NetworkPolicy/rel-charge-outbox-reconciler \
  NetworkPolicy/rel-charge-outbox-audit-prune Ingress/rel-charge-outbox-charge-api \
  PodMonitor/rel-charge-outbox PrometheusRule/rel-charge-outbox ConfigMap/rel-charge-outbox-dashboard "$win" \
  "$sp" Service/rel-charge-outbox-settlement-projection ConfigMap/rel-charge-outbox-settlement-projection \
  PodDisruptionBudget/rel-charge-outbox-settlement-projection NetworkPolicy/rel-charge-outbox-settlement-projection; do
  has "$E" "$object:metadata.name=${object#*/}" "values-everything"
done

# Every pod and container, defaults and everything: non-root 65532, seccomp, no token, read-only, no escalation, no capabilities.
for flat_ in "$D" "$E"; do
  for w in "$api:$pod" "$relay:$pod" "$mig:$pod" "$rec:$cpod"; do
    has "$flat_" "$w.securityContext.runAsNonRoot=true" "pod security"
    has "$flat_" "$w.securityContext.runAsUser=65532" "pod security"
    has "$flat_" "$w.securityContext.seccompProfile.type=RuntimeDefault" "pod security"
    has "$flat_" "$w.automountServiceAccountToken=false" "no service account token"
    c="$w.containers.[].securityContext"
    has "$flat_" "$c.runAsNonRoot=true" "container security"
    has "$flat_" "$c.runAsUser=65532" "container security"
    has "$flat_" "$c.readOnlyRootFilesystem=true" "container security"
    has "$flat_" "$c.allowPrivilegeEscalation=false" "container security"
    has "$flat_" "$c.capabilities.drop.[]=ALL" "container security"
    has "$flat_" "$c.seccompProfile.type=RuntimeDefault" "container security"
  done
done
has "$E" "$win:$cpod.containers.[].securityContext.readOnlyRootFilesystem=true" "the window report's security"
for c in containers initContainers; do
  has "$E" "$sp:$pod.$c.[].securityContext.readOnlyRootFilesystem=true" "settlement-projection's $c security"
  has "$E" "$sp:$pod.$c.[].securityContext.runAsUser=65532" "settlement-projection's $c security"
  has "$E" "$sp:$pod.$c.[].securityContext.capabilities.drop.[]=ALL" "settlement-projection's $c security"
done
has "$E" "$sp:$pod.securityContext.runAsNonRoot=true" "settlement-projection's pod security"
has "$E" "$sp:$pod.automountServiceAccountToken=false" "settlement-projection's token"
has "$D" "$api:$pod.serviceAccountName=rel-charge-outbox" "the release's ServiceAccount"
# The migration hook runs before the release's ServiceAccount exists: it has one of its own (below).
has "$D" "$mig:$pod.serviceAccountName=rel-charge-outbox-hooks" "the migration hook, not the release's ServiceAccount"

# What each runs: the binary on the image's PATH (no shell, no entrypoint) with its ConfigMap.
has "$D" "$api:$pod.containers.[].args=[\"charge-api\", \"--config\", \"/etc/charge-outbox/config.yaml\"]" "charge-api"
has "$D" "$relay:$pod.containers.[].args=[\"outbox-relay\", \"--config\", \"/etc/charge-outbox/config.yaml\"]" "relay"
has "$D" "$rec:$cpod.containers.[].args=[\"reconciler\",\"--config\",\"/etc/charge-outbox/config.yaml\",\"sweep\"]" "reconciler"
has "$D" "$mig:$pod.containers.[].args=[\"charge-migrate\", \"up\"]" "migrate"
# settlement-projection: its own database migrated by an init container (charge-migrate's hook migrates
# only the charges database), then the daemon, both from the same image and ConfigMap.
has "$E" "$sp:$pod.initContainers.[].args=[\"settlement-projection\", \"--config\", \"/etc/charge-outbox/config.yaml\", \"migrate\"]" "settlement-projection's migrate init container"
has "$E" "$sp:$pod.containers.[].args=[\"settlement-projection\", \"--config\", \"/etc/charge-outbox/config.yaml\"]" "settlement-projection"
has "$E" "$sp:$pod.initContainers.[].image=charge-outbox:0.1.0" "settlement-projection's init container image"
has "$E" "$sp:$pod.containers.[].image=charge-outbox:0.1.0" "settlement-projection's image"
has "$E" "$sp:spec.replicas=3" "settlementProjection.replicas"
# Its DATABASE_URLs (its database's owner for the init container, its role for the daemon): below, with
# the other components' database Secrets.
for c in containers initContainers; do
  has "$E" "$sp:$pod.$c.[].volumeMounts.[].mountPath=/etc/charge-outbox" "settlement-projection's $c config"
done
hasnt "$E" "$sp:$pod.containers.[].env.[].valueFrom.secretKeyRef.name=charge-outbox-database" "settlement-projection reading the charges database"
has "$E" "$sp:$pod.containers.[].env.[].valueFrom.secretKeyRef.name=settlement-kafka" "settlement-projection's KAFKA_SASL_PASSWORD"
has "$E" "$sp:$pod.volumes.[].configMap.name=rel-charge-outbox-settlement-projection" "settlement-projection's ConfigMap"
has "$E" "$sp:$pod.containers.[].ports.[].containerPort=8090" "settlement-projection's API port"
has "$E" "$sp:$pod.containers.[].ports.[].containerPort=9090" "settlement-projection's admin port"
has "$E" "$sp:$pod.containers.[].readinessProbe.httpGet={path: /readyz, port: admin}" "settlement-projection readiness"
has "$E" "$sp:$pod.containers.[].livenessProbe.httpGet={path: /healthz, port: admin}" "settlement-projection liveness"
has "$E" "Service/rel-charge-outbox-settlement-projection:spec.ports.[].targetPort=http" "settlement-projection's Service is its API"
has "$E" "Service/rel-charge-outbox-settlement-projection:spec.type=ClusterIP" "settlement-projection's API stays in the cluster"
spc=ConfigMap/rel-charge-outbox-settlement-projection:data.config.yaml
for key in http.port=8090 admin.port=9090 'kafka.bootstrap_servers="kafka-0.kafka:9092,kafka-1.kafka:9092"' \
  'kafka.topic="charge-events"' 'kafka.group_id="settlement-eu"' 'kafka.sasl_username="settlement"' inbox.gaps.policy=hold \
  'inbox.gaps.wait="2m"' inbox.batch_size=500 inbox.retention_days=21 inbox.progress_retention_days=365 log.level=debug; do
  has "$E" "$spc.$key" "settlement-projection setting"
done
has "$E" "PodDisruptionBudget/rel-charge-outbox-settlement-projection:spec.maxUnavailable=1" "settlement-projection PDB"
has "$E" 'PodMonitor/rel-charge-outbox:spec.selector.matchExpressions.[]={key: app.kubernetes.io/component, operator: In, values: ["charge-api","outbox-relay","settlement-projection"]}' "the PodMonitor scrapes settlement-projection"
has "$E" "$win:$cpod.containers.[].args=[\"reconciler\",\"--config\",\"/etc/charge-outbox/config.yaml\",\"window\",\"--last\",\"24h\"]" "window report"
out=$(render -f "$everything" --set reconciler.window.from=2026-11-30T00:00:00Z --set reconciler.window.to=2026-12-01T00:00:00Z) ||
  fail "rendering a fixed window report: $out"
fixed_window=$(flat <<<"$out")
has "$fixed_window" "$win:$cpod.containers.[].args=[\"reconciler\",\"--config\",\"/etc/charge-outbox/config.yaml\",\"window\",\"--from\",\"2026-11-30T00:00:00Z\",\"--to\",\"2026-12-01T00:00:00Z\"]" "a fixed window report"
has "$D" "$api:$pod.volumes.[].configMap.name=rel-charge-outbox-charge-api" "charge-api's ConfigMap"
has "$D" "$rec:$cpod.volumes.[].configMap.name=rel-charge-outbox-reconciler" "the reconciler's ConfigMap"
has "$E" "$win:$cpod.volumes.[].configMap.name=rel-charge-outbox-reconciler" "the window report's ConfigMap"
has "$D" "ConfigMap/rel-charge-outbox-outbox-relay:data.config.yaml.kafka.bootstrap_servers=\"kafka-0:9092,kafka-1:9092\"" "bootstrap servers"
has "$D" 'ConfigMap/rel-charge-outbox-charge-api:data.config.yaml.acquirer.url="https://acquirer.example"' "acquirer URL"
# Probes and the scrape on each daemon's admin port (9090, admin.port); charge-api's API alone on http (8080),
# the Service's only port.
for workload in "$api" "$relay"; do
  has "$D" "$workload:$pod.containers.[].readinessProbe.httpGet={path: /readyz, port: admin}" "$workload readiness"
  has "$D" "$workload:$pod.containers.[].livenessProbe.httpGet={path: /healthz, port: admin}" "$workload liveness"
  has "$D" "$workload:$pod.containers.[].ports.[].name=admin" "$workload admin port"
  has "$D" "$workload:$pod.containers.[].ports.[].containerPort=9090" "$workload admin port"
  has "$D" "$workload:spec.template.metadata.annotations.prometheus.io/port=\"9090\"" "$workload scrape port"
done
has "$D" "$api:$pod.containers.[].ports.[].containerPort=8080" "charge-api API port"
# A deleted charge-api keeps serving for the preStop sleep (the kubelet's own sleep: no shell in the image)
# while kube-proxy and the Ingress drop it, then drains within the grace.
has "$D" "$api:$pod.containers.[].lifecycle.preStop.sleep.seconds=5" "charge-api's preStop sleep"
has "$D" "$api:$pod.terminationGracePeriodSeconds=30" "charge-api's grace"
hasnt "$D" "$relay:$pod.containers.[].lifecycle" "a preStop hook on the relay (no Service sends it traffic)"
hasnt "$D" "$relay:$pod.containers.[].ports.[].containerPort=8080" "a relay port besides its admin port"
has "$D" "Service/rel-charge-outbox-charge-api:spec.ports.[].targetPort=http" "the Service is the API"
hasnt "$D" "Service/rel-charge-outbox-charge-api:spec.ports.[].targetPort=admin" "the admin port behind the Service"
has "$D" "ConfigMap/rel-charge-outbox-charge-api:data.config.yaml.admin.port=9090" "charge-api admin.port"
has "$D" "ConfigMap/rel-charge-outbox-outbox-relay:data.config.yaml.admin.port=9090" "outbox-relay admin.port"
hasnt "$D" "ConfigMap/rel-charge-outbox-outbox-relay:data.config.yaml.http." "outbox-relay http.* keys"
has "$E" "PodMonitor/rel-charge-outbox:spec.podMetricsEndpoints.[].port=admin" "the PodMonitor scrapes the admin port"

# NetworkPolicies: one per component, each selecting only its pods, denying both ways by default, and opening
# only its ports to its peers and only its destinations (values-everything.yaml sets every peer list, each
# to something told apart here: a rule under the wrong component or to the wrong peers fails).
ingress_nginx='namespaceSelector.matchLabels.kubernetes.io/metadata.name=ingress-nginx podSelector.matchLabels.app.kubernetes.io/name=ingress-nginx'
prometheus='namespaceSelector.matchLabels.kubernetes.io/metadata.name=monitoring podSelector.matchLabels.app.kubernetes.io/name=prometheus'
dns='53/UDP,53/TCP -> namespaceSelector.matchLabels.kubernetes.io/metadata.name=kube-system podSelector.matchLabels.k8s-app=kube-dns'
database='5432/TCP -> ipBlock.cidr=10.20.0.0/24'
kafka='9093/TCP -> ipBlock.cidr=10.30.0.0/24'
acquirer='443/TCP -> ipBlock.cidr=203.0.113.0/28'
for p in charge-api:charge-api outbox-relay:outbox-relay migrate:migrate 'reconciler:reconciler","reconciler-window' \
  audit-prune:audit-prune settlement-projection:settlement-projection; do
  np="NetworkPolicy/rel-charge-outbox-${p%%:*}"
  has "$E" "$np:spec.podSelector.matchExpressions.[]={key: app.kubernetes.io/component, operator: In, values: [\"${p#*:}\"]}" "${p%%:*}'s policy selects its pods"
  has "$E" "$np:spec.podSelector.matchLabels.app.kubernetes.io/instance=rel" "${p%%:*}'s policy selects this release"
  has "$E" "$np:spec.policyTypes.[]=Ingress" "${p%%:*}'s policy denies what comes in"
  has "$E" "$np:spec.policyTypes.[]=Egress" "${p%%:*}'s policy denies what goes out"
done
policy "$E" charge-api ingress "values-everything" "8080/TCP <- $ingress_nginx" "9090/TCP <- $prometheus"
policy "$E" charge-api egress "values-everything" "$dns" "$database" "$acquirer"
policy "$E" outbox-relay ingress "values-everything" "9090/TCP <- $prometheus"
policy "$E" outbox-relay egress "values-everything" "$dns" "$database" "$kafka"
for job in migrate reconciler audit-prune; do
  has "$E" "NetworkPolicy/rel-charge-outbox-$job:spec.ingress=[]" "the $job job accepts nothing"
done
policy "$E" migrate egress "values-everything" "$dns" "$database"
policy "$E" reconciler egress "values-everything" "$dns" "$database" "$acquirer" \
  "9091/TCP -> namespaceSelector.matchLabels.kubernetes.io/metadata.name=monitoring podSelector.matchLabels.app.kubernetes.io/name=prometheus-pushgateway"
policy "$E" audit-prune egress "values-everything" "$dns" "$database" "$acquirer"
policy "$E" settlement-projection ingress "values-everything" \
  "8090/TCP <- namespaceSelector.matchLabels.kubernetes.io/metadata.name=finance" "9090/TCP <- $prometheus"
policy "$E" settlement-projection egress "values-everything" \
  "$dns" "5433/TCP -> namespaceSelector.matchLabels.kubernetes.io/metadata.name=finance-db" "$kafka"
# Every peer list empty (the defaults): no rule admits anyone, since a rule with no peers would admit
# everyone; only DNS goes out.
out=$(render "${required[@]}" --set networkPolicy.enabled=true "${sp_on[@]}") ||
  fail "rendering the NetworkPolicies with empty peer lists: $out"
closed=$(flat <<<"$out")
for p in charge-api outbox-relay migrate reconciler audit-prune settlement-projection; do
  has "$closed" "NetworkPolicy/rel-charge-outbox-$p:spec.ingress=[]" "$p with no peers: nothing comes in"
  policy "$closed" "$p" egress "$p with no peers" "$dns"
done
hasnt "$closed" ":spec.ingress.[].from" "empty peer lists: a rule admitting everyone"
out=$(render "${required[@]}" --set networkPolicy.enabled=true --set-json 'networkPolicy.egress.dns.to=[]') ||
  fail "rendering the NetworkPolicies without DNS: $out"
has "$(flat <<<"$out")" "NetworkPolicy/rel-charge-outbox-charge-api:spec.egress=[]" "no DNS peers: nothing goes out"

# Secrets from Secrets only, never in a ConfigMap.
has "$D" "$api:$pod.containers.[].env.[].valueFrom.secretKeyRef.name=charge-outbox-database" "DATABASE_URL from its Secret"
has "$D" "$rec:$cpod.containers.[].env.[].valueFrom.secretKeyRef.name=charge-outbox-acquirer" "ACQUIRER_API_KEY from its Secret"
has "$E" "$relay:$pod.containers.[].env.[].valueFrom.secretKeyRef.name=charge-outbox-kafka" "KAFKA_SASL_PASSWORD from its Secret"
hasnt "$D" "KAFKA_SASL_PASSWORD" "a SASL password with no Secret configured"
if grep -E '^ConfigMap/rel-charge-outbox-(charge-api|outbox-relay|reconciler|settlement-projection):' <<<"$E" | grep -qiE 'password|api_key|database\.url|secret'; then
  fail "a secret in a daemon's ConfigMap"
fi

# One deadline for both daemons; the component's value beats the global one.
has "$D" 'ConfigMap/rel-charge-outbox-charge-api:data.config.yaml.charge.deadline="1h"' "charge-api's deadline"
has "$D" 'ConfigMap/rel-charge-outbox-reconciler:data.config.yaml.reconciler.deadline="1h"' "the reconciler's deadline"
has "$E" "$rec:$cpod.containers.[].resources.requests.cpu=50m" "global.resources"
# Every workload's requests and limits by default (values.yaml says where each figure comes from): a CPU
# request and no CPU limit, a memory request and limit.
prune=CronJob/rel-charge-outbox-audit-prune
resources_are() {  # FLAT CONTAINER_PATH CPU_REQUEST MEMORY_REQUEST MEMORY_LIMIT WHAT
  has "$1" "$2.resources.requests.cpu=$3" "$6's CPU request"
  has "$1" "$2.resources.requests.memory=$4" "$6's memory request"
  has "$1" "$2.resources.limits.memory=$5" "$6's memory limit"
  hasnt "$1" "$2.resources.limits.cpu=" "$6's CPU limit"
}
resources_are "$D" "$api:$pod.containers.[]" 250m 64Mi 256Mi "charge-api"
resources_are "$D" "$relay:$pod.containers.[]" 100m 64Mi 256Mi "outbox-relay"
resources_are "$D" "$rec:$cpod.containers.[]" 100m 32Mi 128Mi "the reconciler"
resources_are "$D" "$mig:$pod.containers.[]" 50m 32Mi 128Mi "the migration hook"
resources_are "$D" "$prune:$cpod.containers.[]" 50m 32Mi 128Mi "audit-prune"
out=$(render "${required[@]}" "${sp_on[@]}" --set reconciler.window.enabled=true) ||
  fail "rendering settlement-projection and the window report with their defaults: $out"
optional_defaults=$(flat <<<"$out")
resources_are "$optional_defaults" "$sp:$pod.containers.[]" 200m 256Mi 512Mi "settlement-projection"
resources_are "$optional_defaults" "$sp:$pod.initContainers.[]" 200m 256Mi 512Mi "settlement-projection's migrate"
resources_are "$optional_defaults" "$win:$cpod.containers.[]" 100m 256Mi 1Gi "the window report"
# values-everything.yaml: the reconciler's own set to null, so global.resources applies; a component's own
# partly overridden (its limits stay the chart's).
resources_are "$E" "$rec:$cpod.containers.[]" 50m 64Mi 256Mi "the reconciler under global.resources"
resources_are "$E" "$sp:$pod.containers.[]" 100m 128Mi 512Mi "settlement-projection's requests overridden"
# The database Secrets (sql/roles.sql's least-privileged roles): each workload's DATABASE_URL from its own
# component's Secret when it names one, else from global.databaseSecret (name and key together).
# database_secret FLAT OBJECT CONTAINERS_PATH: "name/key" of DATABASE_URL's secretKeyRef in each container there.
database_secret() {
  awk -v p="$2:$3.[].env.[]." 'index($0, p) == 1 {
      rest = substr($0, length(p) + 1)
      if (rest ~ /^name=/) { want = (rest == "name=DATABASE_URL"); next }
      if (want && sub(/^valueFrom\.secretKeyRef\.name=/, "", rest)) secret = rest
      else if (want && sub(/^valueFrom\.secretKeyRef\.key=/, "", rest)) { print secret "/" rest; want = 0 }
    }' <<<"$1" | paste -sd' ' -
}
database_is() {  # database_is FLAT OBJECT CONTAINERS_PATH NAME/KEY WHAT
  local got
  got=$(database_secret "$1" "$2" "$3")
  [[ $got == "$4" ]] || fail "$5: DATABASE_URL from '${got:-nothing}', expected $4"
}
operator_annotation=metadata.annotations.charge-outbox/operator-database-secret
global_db=charge-outbox-database/database-url
# Only the global Secret (the defaults): every component reads it, and it is the operator's.
for w in "$api:$pod.containers" "$relay:$pod.containers" "$mig:$pod.containers" "$rec:$cpod.containers" "$prune:$cpod.containers"; do
  database_is "$D" "${w%%:*}" "${w#*:}" "$global_db" "defaults: ${w%%:*}"
done
database_is "$optional_defaults" "$win" "$cpod.containers" "$global_db" "defaults: the window report"
# settlement-projection keeps one Secret of its own for its init container and its daemon by default.
database_is "$optional_defaults" "$sp" "$pod.initContainers" charge-outbox-settlement-database/database-url "defaults: settlement-projection's migrate"
database_is "$optional_defaults" "$sp" "$pod.containers" charge-outbox-settlement-database/database-url "defaults: settlement-projection"
# The annotation kubectl charge-outbox reads, on the objects whose pod templates it copies, never on a pod
# template (a change would roll the relays).
has "$D" "$rec:$operator_annotation=\"$global_db\"" "defaults: the operator's Secret on the reconciler CronJob"
has "$D" "$relay:$operator_annotation=\"$global_db\"" "defaults: the operator's Secret on the relay Deployment"
# values-everything.yaml: one Secret per component, each workload's DATABASE_URL its own (name and key).
database_is "$E" "$mig" "$pod.containers" charge-outbox-db-owner/owner-url "migrate.databaseSecret"
database_is "$E" "$api" "$pod.containers" charge-outbox-db-charge-api/api-url "chargeApi.databaseSecret"
database_is "$E" "$relay" "$pod.containers" charge-outbox-db-relay/relay-url "outboxRelay.databaseSecret"
database_is "$E" "$rec" "$cpod.containers" charge-outbox-db-reconciler/reconciler-url "reconciler.databaseSecret"
database_is "$E" "$win" "$cpod.containers" charge-outbox-db-reconciler/reconciler-url "reconciler.databaseSecret (the window report)"
database_is "$E" "$prune" "$cpod.containers" charge-outbox-db-operator/operator-url "operator.databaseSecret (audit prune)"
database_is "$E" "$sp" "$pod.initContainers" settlement-database-owner/owner-url "settlementProjection.migrate.databaseSecret"
database_is "$E" "$sp" "$pod.containers" settlement-database/url "settlementProjection.databaseSecret"
hasnt "$E" "secretKeyRef.name=charge-outbox-database" "values-everything: global.databaseSecret read beside every component's own"
has "$E" "$rec:$operator_annotation=\"charge-outbox-db-operator/operator-url\"" "the operator's Secret on the reconciler CronJob"
has "$E" "$relay:$operator_annotation=\"charge-outbox-db-operator/operator-url\"" "the operator's Secret on the relay Deployment"
annotated=$(grep -F "operator-database-secret=" <<<"$E" | cut -d: -f1 | sort | paste -sd' ' -)
[[ $annotated == "$rec $relay" ]] || fail "the operator's Secret annotates '$annotated', expected the reconciler CronJob and the relay Deployment only"
# One component's own beats the global one, the others keep it; a key alone does not move a component off
# the global Secret (its key belongs to its own name); the global key follows the global name.
out=$(render "${required[@]}" --set chargeApi.databaseSecret.name=api-only --set reconciler.databaseSecret.key=ignored \
  --set global.databaseSecret.key=url --set operator.databaseSecret.name=ops) || fail "rendering one component's Secret: $out"
M=$(flat <<<"$out")
database_is "$M" "$api" "$pod.containers" api-only/database-url "chargeApi.databaseSecret beside the global one"
for w in "$relay:$pod.containers" "$mig:$pod.containers" "$rec:$cpod.containers"; do
  database_is "$M" "${w%%:*}" "${w#*:}" charge-outbox-database/url "${w%%:*} with only other components' Secrets named"
done
database_is "$M" "$prune" "$cpod.containers" ops/database-url "operator.databaseSecret (audit prune)"
has "$M" "$relay:$operator_annotation=\"ops/database-url\"" "operator.databaseSecret in the relay's annotation"

out=$(render "${required[@]}" --set global.image.tag=g --set reconciler.image.tag=own --set reconciler.resources.requests.cpu=9m \
  --set reconciler.cronjob.successfulJobsHistoryLimit=0 --set global.chargeDeadline=90m) || fail "rendering overrides: $out"
O=$(flat <<<"$out")
has "$O" "$rec:$cpod.containers.[].image=charge-outbox:own" "reconciler.image beats global.image"
has "$O" "$api:$pod.containers.[].image=charge-outbox:g" "global.image"
# A pinned digest: every workload runs exactly that image, whatever the tag names now.
digest=sha256:$(printf '%064d' 7)
out=$(render "${required[@]}" --set global.image.digest="$digest") || fail "rendering a digest: $out"
D=$(flat <<<"$out")
has "$D" "$api:$pod.containers.[].image=charge-outbox:0.1.0@$digest" "global.image.digest on charge-api"
has "$D" "$rec:$cpod.containers.[].image=charge-outbox:0.1.0@$digest" "global.image.digest on the reconciler"
[[ $(grep -c 'image=charge-outbox:' <<<"$D") == $(grep -c "image=charge-outbox:0.1.0@$digest" <<<"$D") ]] ||
  fail "a workload without the pinned digest: $(grep 'image=charge-outbox:' <<<"$D" | grep -v "@$digest")"
out=$(render "${required[@]}" --set global.image.digest=md5:0) && fail "a digest that is not sha256 rendered: $out"
has "$O" "$rec:$cpod.containers.[].resources.requests.cpu=9m" "reconciler.resources"
has "$O" "$rec:spec.successfulJobsHistoryLimit=0" "a zero history limit is rendered, not defaulted"
has "$O" 'ConfigMap/rel-charge-outbox-reconciler:data.config.yaml.reconciler.deadline="90m"' "global.chargeDeadline"
has "$O" 'ConfigMap/rel-charge-outbox-charge-api:data.config.yaml.charge.deadline="90m"' "global.chargeDeadline"

# A config change rolls the Deployment whose config changed, and only that one.
checksum() { grep -F "$1:spec.template.metadata.annotations.checksum/config=" <<<"$2" || true; }
out=$(render "${required[@]}" --set chargeApi.httpThreads=3) || fail "rendering a config change: $out"
C=$(flat <<<"$out")
[[ -n $(checksum "$api" "$D") ]] || fail "charge-api has no checksum/config annotation"
[[ $(checksum "$api" "$C") != "$(checksum "$api" "$D")" ]] || fail "charge-api's checksum did not change with its config"
[[ $(checksum "$relay" "$C") == "$(checksum "$relay" "$D")" ]] || fail "the relay's checksum changed with charge-api's config"
has "$C" "ConfigMap/rel-charge-outbox-charge-api:data.config.yaml.http.threads=3" "chargeApi.httpThreads"

# Every reconciler knob at its place: the CronJob's fields by their Kubernetes names, its own in its ConfigMap.
out=$(render "${required[@]}" --set 'reconciler.cronjob.schedule=*/7 * * * *' --set reconciler.cronjob.timeZone=Europe/Lisbon \
  --set reconciler.cronjob.suspend=true --set reconciler.cronjob.concurrencyPolicy=Replace \
  --set reconciler.cronjob.startingDeadlineSeconds=41 --set reconciler.cronjob.successfulJobsHistoryLimit=2 \
  --set reconciler.cronjob.failedJobsHistoryLimit=6 --set reconciler.job.backoffLimit=1 \
  --set reconciler.job.activeDeadlineSeconds=333 --set reconciler.job.ttlSecondsAfterFinished=444 \
  --set reconciler.terminationGracePeriodSeconds=55 --set reconciler.gracePeriod=3m --set reconciler.batchSize=77 \
  --set reconciler.concurrency=5 --set reconciler.timeBudget=45s --set reconciler.claimLease=100s \
  --set reconciler.visibilityWindow=4m --set reconciler.notFoundPolicy=review --set global.chargeDeadline=2h \
  --set reconciler.pushgateway.url=http://pgw:9091) || fail "rendering the knobs: $out"
K=$(flat <<<"$out")
for knob in 'spec.schedule="*/7 * * * *"' 'spec.timeZone="Europe/Lisbon"' spec.suspend=true spec.concurrencyPolicy=Replace \
  spec.startingDeadlineSeconds=41 spec.successfulJobsHistoryLimit=2 spec.failedJobsHistoryLimit=6 \
  spec.jobTemplate.spec.backoffLimit=1 spec.jobTemplate.spec.activeDeadlineSeconds=333 \
  spec.jobTemplate.spec.ttlSecondsAfterFinished=444 "$cpod.terminationGracePeriodSeconds=55"; do
  has "$K" "$rec:$knob" "CronJob knob"
done
for knob in 'grace_period="3m"' batch_size=77 concurrency=5 'time_budget="45s"' 'claim_lease="100s"' 'deadline="2h"' \
  'visibility_window="4m"' not_found_policy=review; do
  has "$K" "ConfigMap/rel-charge-outbox-reconciler:data.config.yaml.reconciler.$knob" "reconciler setting"
done
has "$K" 'ConfigMap/rel-charge-outbox-reconciler:data.config.yaml.metrics.pushgateway.url="http://pgw:9091"' "pushgateway"
has "$K" 'ConfigMap/rel-charge-outbox-reconciler:data.config.yaml.metrics.pushgateway.job="rel-charge-outbox-reconciler"' "pushgateway job per release"
has "$D" "$rec:spec.concurrencyPolicy=Forbid" "Forbid by default"
has "$D" "$rec:spec.jobTemplate.spec.backoffLimit=0" "no Job retry by default"
hasnt "$D" "$rec:spec.jobTemplate.spec.ttlSecondsAfterFinished" "ttlSecondsAfterFinished unset by default"
hasnt "$D" "$rec:spec.timeZone" "timeZone unset by default"
# The window report's own knobs, from values-everything.yaml.
for knob in 'spec.schedule="30 2 * * *"' 'spec.timeZone="Etc/UTC"' spec.startingDeadlineSeconds=600 \
  spec.jobTemplate.spec.activeDeadlineSeconds=1800 spec.jobTemplate.spec.ttlSecondsAfterFinished=86400; do
  has "$E" "$win:$knob" "window CronJob knob"
done

# Optional objects, from values-everything.yaml.
hasnt "$E" "$api:spec.replicas=" "replicas with the autoscaler on"
has "$E" "HorizontalPodAutoscaler/rel-charge-outbox-charge-api:spec.metrics.[].resource.target.averageUtilization=80" "HPA memory"
has "$E" "PodDisruptionBudget/rel-charge-outbox-outbox-relay:spec.maxUnavailable=1" "relay PDB"
has "$E" "Ingress/rel-charge-outbox-charge-api:spec.rules.[].http.paths.[].backend.service.name=rel-charge-outbox-charge-api" "Ingress"
has "$E" "$relay:spec.strategy.type=Recreate" "outboxRelay.updateStrategy"

# The alerts: every metric they read is one the code registers, every runbook a heading of docs/operations.md.
rules=$(grep '^PrometheusRule/' <<<"$E")
for alert in ChargeOutboxOutboxLag ChargeOutboxRelayAbsent ChargeOutboxEventsParked ChargeOutboxPendingChargesOverdue \
  ChargeOutboxChargesNeedReview ChargeOutboxReconcilerRunFailed ChargeOutboxReconcilerNotSucceeding; do
  has "$rules" "PrometheusRule/rel-charge-outbox:spec.groups.[].rules.[].alert=$alert" "alert"
done
for metric in $(grep -oE '[a-z_]+\{' <<<"$(grep '\.expr=' <<<"$rules")" | tr -d '{' | sort -u); do
  grep -rqF "\"$metric\"" "$root/services" || fail "alert metric $metric is registered nowhere in services/"
done
for anchor in $(grep -oE 'runbook_url=.*#[a-z]+' <<<"$rules" | sed 's/.*#//'); do
  grep -qiE "^#+ +$anchor\$" "$root/docs/operations.md" 2>/dev/null || fail "runbook #$anchor: no such heading in docs/operations.md"
done
for metric in $(grep -oE '[a-z_]+\{' "$chart/dashboards/charge-outbox.json" | tr -d '{' | sed -E 's/_bucket$//' | sort -u); do
  grep -rqF "\"$metric\"" "$root/services" || fail "dashboard metric $metric is registered nowhere in services/"
done

# Refused, each with the reason named.
refused() {  # refused NEEDLE WHAT ARGS...: rendering fails and says NEEDLE
  local needle=$1 what=$2 out; shift 2
  if out=$(render --show-only templates/outbox-relay-deployment.yaml "$@"); then fail "$what: rendered"
  elif ! grep -qF -- "$needle" <<<"$out"; then fail "$what: the error does not say '$needle': $out"; fi
}
refused "outboxRelay.kafka.bootstrapServers is required" "no bootstrap servers" --set global.acquirer.url=https://a.example
refused "global.acquirer.url is required" "no acquirer URL" --set outboxRelay.kafka.bootstrapServers=k:9092 \
  --set outboxRelay.kafka.securityProtocol=SASL_SSL
refused "additional properties 'bogus' not allowed" "an unknown key" "${required[@]}" --set reconciler.cronjob.bogus=1
refused "additional properties 'schedule' not allowed" "a knob under the wrong key" "${required[@]}" --set 'reconciler.job.schedule=* * * * *'
refused "got string, want integer" "a wrong type" "${required[@]}" --set-string reconciler.cronjob.startingDeadlineSeconds=30
refused "value must be one of" "a concurrency policy that does not exist" "${required[@]}" --set reconciler.cronjob.concurrencyPolicy=Never
refused "value must be one of" "a not-found policy that does not exist" "${required[@]}" --set reconciler.notFoundPolicy=guess
refused "value must be one of" "a gap policy that does not exist" "${required[@]}" --set settlementProjection.inbox.gapsPolicy=skip
refused "settlementProjection.kafka.bootstrapServers (or outboxRelay.kafka.bootstrapServers) is required" \
  "settlement-projection with no Kafka" --set global.acquirer.url=https://a.example --set outboxRelay.enabled=false \
  "${sp_on[@]}"
for component in chargeApi outboxRelay reconciler settlementProjection; do
  refused "invalid propertyName 'DATABASE_URL'" "a secret in $component.extraEnv" "${required[@]}" --set "$component.extraEnv.DATABASE_URL=postgres://x"
  refused "invalid propertyName 'FAILPOINTS'" "FAILPOINTS in $component.extraEnv" "${required[@]}" --set "$component.extraEnv.FAILPOINTS=x"
done
refused "invalid propertyName 'ACQUIRER_API_KEY'" "the acquirer key in extraEnv" "${required[@]}" --set chargeApi.extraEnv.ACQUIRER_API_KEY=k
refused "invalid propertyName 'KAFKA_SASL_PASSWORD'" "the SASL password in extraEnv" "${required[@]}" --set outboxRelay.extraEnv.KAFKA_SASL_PASSWORD=p
refused "at '/operator/databaseSecret/key': minLength" "a database Secret with an empty key" "${required[@]}" \
  --set operator.databaseSecret.key=
refused "additional properties 'url' not allowed" "a database URL as a value" "${required[@]}" --set 'chargeApi.databaseSecret.url=postgres://x'
# Where the acquirer key and card tokens go is global.acquirer's alone: no extraEnv redirects them, with or
# without the schema, and plain http:// to another host needs the loud test-only switch.
for name in ACQUIRER_URL ACQUIRER_ALLOW_PLAIN_HTTP ACQUIRER_TLS_VERIFY; do
  for component in chargeApi reconciler; do
    refused "invalid propertyName '$name'" "$name in $component.extraEnv" "${required[@]}" --set-string "$component.extraEnv.$name=x"
  done
  refused "reconciler.extraEnv.$name is refused" "$name without the schema" "${required[@]}" --skip-schema-validation \
    --set-string "reconciler.extraEnv.$name=false"
done
plain=(--set outboxRelay.kafka.bootstrapServers=k:9092 --set outboxRelay.kafka.securityProtocol=SASL_SSL
  --set global.acquirer.url=http://10.0.0.5:8081)
refused "is plain http:// to another host" "a plain http acquirer" "${plain[@]}"
refused "chargeApi.terminationGracePeriodSeconds 25 does not exceed the preStop sleep (5 s) plus the daemon's shutdown.deadline (20 s)" \
  "a grace that cuts charge-api's drain" "${required[@]}" --set chargeApi.terminationGracePeriodSeconds=25
refused "outboxRelay.terminationGracePeriodSeconds 30 does not exceed the daemon's shutdown.deadline (60 s)" \
  "a relay's shutdown.deadline past its grace" "${required[@]}" --set-string outboxRelay.extraEnv.SHUTDOWN_DEADLINE=1m
refused "chargeApi.extraEnv.SHUTDOWN_DEADLINE 1500ms: give it in whole seconds (30s) or minutes (1m)" \
  "a shutdown.deadline the chart cannot check" "${required[@]}" --set-string chargeApi.extraEnv.SHUTDOWN_DEADLINE=1500ms
out=$(render "${required[@]}" --set chargeApi.preStopSleepSeconds=0 --set chargeApi.terminationGracePeriodSeconds=21) ||
  fail "rendering without a preStop sleep: $out"
hasnt "$(flat <<<"$out")" "$api:$pod.containers.[].lifecycle" "a preStop hook with preStopSleepSeconds 0"
refused "insecurePlainHttp is set but global.acquirer.url is not http://" "insecurePlainHttp with https" "${required[@]}" \
  --set global.acquirer.insecurePlainHttp=true
out=$(render "${plain[@]}" --set global.acquirer.insecurePlainHttp=true) || fail "rendering insecurePlainHttp: $out"
insecure=$(flat <<<"$out")
for file in charge-api:config.yaml reconciler:config.yaml reconciler:charge-admin.yaml; do
  has "$insecure" "ConfigMap/rel-charge-outbox-${file%%:*}:data.${file#*:}.acquirer.allow_plain_http=true" "insecurePlainHttp: $file"
done
has "$insecure" "CronJob/rel-charge-outbox-audit-prune:$cpod.containers.[].env.[].name=ACQUIRER_ALLOW_PLAIN_HTTP" "insecurePlainHttp: charge-admin's prune"
hasnt "$D" "allow_plain_http" "the defaults: plain http"
hasnt "$D" "ACQUIRER_ALLOW_PLAIN_HTTP" "the defaults: plain http"
out=$(render "${required[@]}" --set global.acquirer.url=http://127.0.0.1:8081) || fail "a loopback acquirer refused: $out"
hasnt "$out" "allow_plain_http" "a loopback acquirer"

# global.acquirer.kind: one protocol for charge-api, the reconciler, charge-admin's config and the audit prune's
# environment (ACQUIRER_<KEY>, as ConfigReader::EnvName names acquirer.<key>); Stripe's knobs only with stripe.
acquirer_files=(charge-api:config.yaml reconciler:config.yaml reconciler:charge-admin.yaml)
prune_env="CronJob/rel-charge-outbox-audit-prune:$cpod.containers.[].env.[]"
# env_of FLAT ENV_PATH: the NAME=VALUE pairs of a container's plain env entries (valueFrom ones have no value).
env_of() { awk -v p="$2." 'index($0, p) == 1 { rest = substr($0, length(p) + 1)
  if (rest ~ /^name=/) name = substr(rest, 6); else if (rest ~ /^value=/) print name "=" substr(rest, 7) }' <<<"$1"; }
for file in "${acquirer_files[@]}"; do
  has "$D" "ConfigMap/rel-charge-outbox-${file%%:*}:data.${file#*:}.acquirer.kind=\"native\"" "the default kind: $file"
done
grep -qxF 'ACQUIRER_KIND="native"' <<<"$(env_of "$D" "$prune_env")" || fail "the default kind: the audit prune's ACQUIRER_KIND"
hasnt "$D" "acquirer.stripe" "the defaults: Stripe's knobs"
hasnt "$D" "ACQUIRER_STRIPE_" "the defaults: Stripe's knobs"
stripe=("${required[@]}" --set global.acquirer.url=https://api.stripe.com --set global.acquirer.kind=stripe)
# A fractional rate from --set-json: helm's --set reads 7.5 as a string, which the schema refuses.
out=$(render "${stripe[@]}" --set global.acquirer.stripe.keyRetention=20h --set global.acquirer.stripe.searchLag=2m \
  --set-json global.acquirer.stripe.searchRateLimit=7.5 --set global.acquirer.stripe.eventsPages=3) ||
  fail "rendering kind stripe: $out"
S=$(flat <<<"$out")
for file in "${acquirer_files[@]}"; do
  at="ConfigMap/rel-charge-outbox-${file%%:*}:data.${file#*:}.acquirer"
  for line in 'kind="stripe"' 'url="https://api.stripe.com"' 'stripe.key_retention="20h"' 'stripe.search_lag="2m"' \
    'stripe.search_rate_limit="7.5"' 'stripe.events_pages="3"'; do
    has "$S" "$at.$line" "kind stripe: $file"
  done
done
prune_stripe=$(env_of "$S" "$prune_env")
for pair in 'ACQUIRER_KIND="stripe"' 'ACQUIRER_URL="https://api.stripe.com"' 'ACQUIRER_STRIPE_KEY_RETENTION="20h"' \
  'ACQUIRER_STRIPE_SEARCH_LAG="2m"' 'ACQUIRER_STRIPE_SEARCH_RATE_LIMIT="7.5"' 'ACQUIRER_STRIPE_EVENTS_PAGES="3"'; do
  grep -qxF -- "$pair" <<<"$prune_stripe" || fail "kind stripe: the audit prune's environment has no $pair: $prune_stripe"
done
# With stripe, what charge-api and the reconciler refuse at start (exit 2) is refused at render time, naming the
# values: a deadline past keyRetention less a twenty-fourth less acquirer.request_timeout (24h: 23h less 10s =
# 82790s), a visibility window shorter than the search lag. Each as the daemon will read it, extraEnv included.
accepted() {  # accepted WHAT ARGS...: rendering succeeds
  local what=$1 out; shift
  out=$(render --show-only templates/outbox-relay-deployment.yaml "$@") || fail "$what: refused: $out"
}
accepted "kind stripe, the longest deadline" "${stripe[@]}" --set global.chargeDeadline=82790s
refused "global.chargeDeadline 82791s is too long for global.acquirer.kind stripe" "kind stripe, a deadline 1 s too long" \
  "${stripe[@]}" --set global.chargeDeadline=82791s
refused "global.chargeDeadline 23h is too long for global.acquirer.kind stripe" "kind stripe, a 23h deadline" \
  "${stripe[@]}" --set global.chargeDeadline=23h
out=$(render "${stripe[@]}" --set global.chargeDeadline=23h) || true
for needle in "global.acquirer.stripe.keyRetention 24h" "acquirer.request_timeout (its default) 10s" ": 82790s." \
  "Shorten global.chargeDeadline"; do
  grep -qF -- "$needle" <<<"$out" || fail "kind stripe, a 23h deadline: the refusal does not say '$needle': $out"
done
refused "global.chargeDeadline 23h is too long" "kind stripe, charge-api alone" "${stripe[@]}" \
  --set global.chargeDeadline=23h --set reconciler.enabled=false
refused "global.chargeDeadline 23h is too long" "kind stripe, the reconciler alone" "${stripe[@]}" \
  --set global.chargeDeadline=23h --set chargeApi.enabled=false
refused "chargeApi.extraEnv.CHARGE_DEADLINE 24h is too long" "kind stripe, charge-api's deadline in extraEnv" \
  "${stripe[@]}" --set chargeApi.extraEnv.CHARGE_DEADLINE=24h
refused "reconciler.extraEnv.RECONCILER_DEADLINE 24h is too long" "kind stripe, the reconciler's deadline in extraEnv" \
  "${stripe[@]}" --set reconciler.extraEnv.RECONCILER_DEADLINE=24h
refused "less reconciler.extraEnv.ACQUIRER_REQUEST_TIMEOUT 10m: 1370m" "kind stripe, a longer request timeout" \
  "${stripe[@]}" --set global.chargeDeadline=82201s --set reconciler.extraEnv.ACQUIRER_REQUEST_TIMEOUT=10m
refused "global.chargeDeadline 12h is too long for global.acquirer.kind stripe" "kind stripe, a shorter key retention" \
  "${stripe[@]}" --set global.chargeDeadline=12h --set global.acquirer.stripe.keyRetention=12h
refused "reconciler.visibilityWindow 30s is shorter than global.acquirer.stripe.searchLag 1m" \
  "kind stripe, a visibility window under the search lag" "${stripe[@]}" --set reconciler.visibilityWindow=30s
refused "reconciler.visibilityWindow 5m is shorter than global.acquirer.stripe.searchLag 10m" \
  "kind stripe, a search lag raised past the visibility window" "${stripe[@]}" --set global.acquirer.stripe.searchLag=10m
refused "reconciler.extraEnv.RECONCILER_VISIBILITY_WINDOW 59s is shorter" "kind stripe, the visibility window in extraEnv" \
  "${stripe[@]}" --set reconciler.extraEnv.RECONCILER_VISIBILITY_WINDOW=59s
accepted "kind stripe, a visibility window equal to the search lag" "${stripe[@]}" --set reconciler.visibilityWindow=1m
accepted "kind stripe, no reconciler: no visibility window to check" "${stripe[@]}" --set reconciler.enabled=false \
  --set reconciler.visibilityWindow=30s
accepted "kind native: no Stripe bound" "${required[@]}" --set global.chargeDeadline=48h --set reconciler.visibilityWindow=0s
refused "global.acquirer.stripe.keyRetention 721h is not between 1s and 720h" "a key retention past the daemons' bound" \
  "${stripe[@]}" --set global.acquirer.stripe.keyRetention=721h
refused "global.acquirer.stripe.searchLag 121m is above 2h" "a search lag past the daemons' bound" \
  "${stripe[@]}" --set global.acquirer.stripe.searchLag=121m --set reconciler.visibilityWindow=3h
refused "reconciler.extraEnv.RECONCILER_VISIBILITY_WINDOW \"5 minutes\" is not a duration" "an extraEnv duration the daemons cannot read" \
  "${stripe[@]}" --set-string "reconciler.extraEnv.RECONCILER_VISIBILITY_WINDOW=5 minutes"
# The kind and Stripe's knobs in the schema, and without it.
refused "at '/global/acquirer/kind': value must be one of 'native', 'stripe'" "an acquirer kind that does not exist" \
  "${required[@]}" --set global.acquirer.kind=paypal
refused "global.acquirer.kind paypal is not an acquirer protocol the daemons speak" "kind paypal without the schema" \
  "${required[@]}" --skip-schema-validation --set global.acquirer.kind=paypal
refused "at '/global/acquirer/stripe/searchRateLimit': minimum" "a search rate of 0" "${stripe[@]}" \
  --set global.acquirer.stripe.searchRateLimit=0
refused "at '/global/acquirer/stripe/eventsPages': maximum" "101 pages of events" "${stripe[@]}" \
  --set global.acquirer.stripe.eventsPages=101
refused "at '/global/acquirer/stripe/keyRetention': '1d' does not match pattern" "a key retention in days" "${stripe[@]}" \
  --set global.acquirer.stripe.keyRetention=1d
# One kind for every component: no extraEnv makes one of them speak another protocol.
for component in chargeApi reconciler auditPrune; do
  refused "invalid propertyName 'ACQUIRER_KIND'" "ACQUIRER_KIND in $component.extraEnv" "${required[@]}" \
    --set "$component.extraEnv.ACQUIRER_KIND=stripe"
done
refused "chargeApi.extraEnv.ACQUIRER_KIND is refused" "ACQUIRER_KIND without the schema" "${required[@]}" \
  --skip-schema-validation --set chargeApi.extraEnv.ACQUIRER_KIND=stripe
# NOTES (which helm template leaves out: rendered here as a plain template) warns while the switch is on.
notes() {
  local copy; copy=$(mktemp -d)
  cp -r "$chart" "$copy/" && mv "$copy/charge-outbox/templates/NOTES.txt" "$copy/charge-outbox/templates/notes.txt"
  "$helm" template rel "$copy/charge-outbox" --debug --show-only templates/notes.txt "$@" 2>&1 || true
  rm -rf "$copy"
}
grep -qF "WARNING: global.acquirer.insecurePlainHttp is set" <<<"$(notes "${plain[@]}" --set global.acquirer.insecurePlainHttp=true)" ||
  fail "NOTES does not warn about insecurePlainHttp"
if grep -qF "insecurePlainHttp" <<<"$(notes "${required[@]}")"; then fail "NOTES warns about insecurePlainHttp by default"; fi
# An Ingress carries merchants' keys: without tls only by an explicit choice.
refused "chargeApi.ingress.tls is empty" "an Ingress without TLS" "${required[@]}" --set chargeApi.ingress.enabled=true
out=$(render "${required[@]}" --set chargeApi.ingress.enabled=true --set chargeApi.ingress.allowWithoutTls=true \
  --set chargeApi.ingress.allowWithoutTrustedProxies=true) || fail "an Ingress without TLS, allowed: $out"
# Behind the Ingress every client is the controller's pod unless charge-api believes its X-Forwarded-For
# (issue 44): the Ingress needs chargeApi.trustedProxies, rendered into charge-api's http.trusted_proxies.
refused "chargeApi.trustedProxies is empty" "an Ingress without trusted proxies" "${required[@]}" \
  --set chargeApi.ingress.enabled=true --set chargeApi.ingress.allowWithoutTls=true
has "$E" 'ConfigMap/rel-charge-outbox-charge-api:data.config.yaml.http.trusted_proxies="10.244.0.0/16, fd00:10:244::/56"' \
  "trusted proxies in charge-api's config"
hasnt "$D" "trusted_proxies" "the defaults: no proxy trusted"
refused "trustedProxies/0" "a trusted proxy that is not a CIDR" "${required[@]}" --set 'chargeApi.trustedProxies={ingress-nginx}'
has "$(flat <<<"$out")" "Ingress/rel-charge-outbox-charge-api:spec.rules.[].host=\"charges.example.com\"" "an Ingress without TLS, allowed"
has "$E" "Ingress/rel-charge-outbox-charge-api:spec.tls.[].secretName=charges-tls" "the Ingress's TLS"
refused "minItems" "a NetworkPolicy egress rule with no ports (every port)" "${required[@]}" \
  --set networkPolicy.enabled=true --set-json 'networkPolicy.egress.kafka.ports=[]'
# Without the schema, the templates still refuse.
refused "reconciler.extraEnv.FAILPOINTS is refused" "FAILPOINTS without the schema" "${required[@]}" --skip-schema-validation \
  --set reconciler.extraEnv.FAILPOINTS=x
refused "operator.databaseSecret.key is required with operator.databaseSecret.name" "a database Secret without its key, without the schema" \
  "${required[@]}" --skip-schema-validation --set operator.databaseSecret.name=ops --set operator.databaseSecret.key=
refused "reconciler.window.to is required" "a fixed window report without its end" "${required[@]}" \
  --set reconciler.window.enabled=true --set reconciler.window.from=2026-11-30T00:00:00Z
refused "at '/reconciler/window/last'" "a rolling window that is not a duration" "${required[@]}" \
  --set reconciler.window.enabled=true --set reconciler.window.last=1d
refused "needs reconciler.pushgateway.url" "reconciler alerts with nothing pushed" "${required[@]}" --set monitoring.prometheusRule.enabled=true
refused "reconcilerScheduleSeconds" "an interval the chart cannot derive" -f "$everything" --set 'reconciler.cronjob.schedule=5 4 * * *'

# Kafka: a client that does not authenticate is refused (anyone could write charge events the consumers
# apply), unless a test cluster says so.
kafka_open=(--set outboxRelay.kafka.bootstrapServers=k:9092 --set global.acquirer.url=https://a.example)
refused "outboxRelay.kafka.securityProtocol \"\" does not authenticate the client" "an unauthenticated relay" "${kafka_open[@]}"
refused "outboxRelay.kafka.securityProtocol \"PLAINTEXT\" does not authenticate" "a PLAINTEXT relay" "${kafka_open[@]}" \
  --set outboxRelay.kafka.securityProtocol=PLAINTEXT
refused "settlementProjection.kafka.securityProtocol \"PLAINTEXT\" does not authenticate" "an unauthenticated projection" \
  "${required[@]}" "${sp_on[@]}" --set settlementProjection.kafka.securityProtocol=PLAINTEXT
out=$(render "${kafka_open[@]}" --set outboxRelay.kafka.allowUnauthenticated=true) || fail "allowUnauthenticated refused: $out"
for protocol in SASL_SSL SASL_PLAINTEXT SSL; do
  out=$(render "${kafka_open[@]}" --set outboxRelay.kafka.securityProtocol=$protocol) || fail "$protocol refused: $out"
done

# TLS in the cluster: global.caBundle mounted in every pod, and used where values say (values-everything.yaml:
# PostgreSQL verify-full, the relay's brokers, the acquirer); client certificates through extraVolumes.
count() { grep -c -- "$2" <<<"$1" || true; }
[[ $(count "$E" 'env.\[\].name=DATABASE_URL$') == "$(count "$E" 'env.\[\].name=PGSSLMODE$')" ]] ||
  fail "a container that reaches the database has no PGSSLMODE"
[[ $(count "$E" 'env.\[\].name=PGSSLMODE$') -ge 8 ]] || fail "PGSSLMODE in fewer than the 8 database clients"
[[ $(count "$E" 'env.\[\].value="verify-full"$') == "$(count "$E" 'env.\[\].name=PGSSLROOTCERT$')" ]] ||
  fail "PGSSLMODE verify-full without PGSSLROOTCERT"
has "$E" "$api:$pod.containers.[].env.[].value=\"/etc/charge-outbox-ca/ca.crt\"" "charge-api's PGSSLROOTCERT"
[[ $(count "$E" 'securityContext.fsGroup=') == "$(count "$E" 'volumes.\[\].name=ca-bundle$')" ]] ||
  fail "a pod without the CA bundle's volume"
has "$E" "$api:$pod.volumes.[].secret.secretName=charge-outbox-ca" "the CA bundle's Secret"
has "$E" "$api:$pod.containers.[].volumeMounts.[].mountPath=/etc/charge-outbox-ca" "the CA bundle's mount"
has "$E" 'ConfigMap/rel-charge-outbox-outbox-relay:data.config.yaml.kafka.ssl_ca_location="/etc/charge-outbox-ca/ca.crt"' \
  "the relay's brokers checked against the CA bundle"
for file in charge-api:config.yaml reconciler:config.yaml reconciler:charge-admin.yaml; do
  has "$E" "ConfigMap/rel-charge-outbox-${file%%:*}:data.${file#*:}.acquirer.tls.ca_file=\"/etc/charge-outbox-ca/ca.crt\"" \
    "the acquirer checked against the CA bundle: $file"
done
has "$E" "CronJob/rel-charge-outbox-audit-prune:$cpod.containers.[].env.[].name=ACQUIRER_TLS_CA_FILE" "the prune's acquirer CA"
has "$E" "$api:$pod.volumes.[].secret.secretName=charge-outbox-db-charge-api-cert" "charge-api's extra volume"
has "$E" "$api:$pod.containers.[].volumeMounts.[].mountPath=/etc/charge-outbox-client" "charge-api's extra mount"
hasnt "$D" "PGSSL" "the defaults: libpq's own TLS settings"
hasnt "$D" "ca-bundle" "the defaults: no CA bundle"
refused "global.database.sslMode verify-full checks the server's certificate against a CA" "verify-full without a CA" \
  "${required[@]}" --set global.database.sslMode=verify-full
refused "value must be one of" "an sslmode libpq does not know" "${required[@]}" --set global.database.sslMode=verify
refused "is not a libpq sslmode" "an sslmode libpq does not know, without the schema" "${required[@]}" \
  --skip-schema-validation --set global.database.sslMode=verify
refused "outboxRelay.kafka.trustCaBundle needs global.caBundle.secretName" "Kafka's CA without a bundle" "${required[@]}" \
  --set outboxRelay.kafka.trustCaBundle=true
refused "uses no TLS" "Kafka's CA over SASL_PLAINTEXT" "${required[@]}" --set global.caBundle.secretName=ca \
  --set outboxRelay.kafka.securityProtocol=SASL_PLAINTEXT --set outboxRelay.kafka.trustCaBundle=true
refused "global.acquirer.trustCaBundle needs global.caBundle.secretName" "the acquirer's CA without a bundle" \
  "${required[@]}" --set global.acquirer.trustCaBundle=true
refused "at '/outboxRelay/extraVolumes/0': 'not' failed" "a hostPath extra volume" "${required[@]}" --set-json 'outboxRelay.extraVolumes=[{"name":"h","hostPath":{"path":"/"}}]'
refused "outboxRelay.extraVolumes h is refused: a hostPath" "a hostPath extra volume, without the schema" "${required[@]}" \
  --skip-schema-validation --set-json 'outboxRelay.extraVolumes=[{"name":"h","hostPath":{"path":"/"}}]'
out=$(render "${required[@]}" --set-json 'outboxRelay.extraVolumes=[{"name":"c","secret":{"secretName":"c"}}]' \
  --set-json 'outboxRelay.extraVolumeMounts=[{"name":"c","mountPath":"/c","readOnly":false}]') || fail "an extra volume: $out"
has "$(flat <<<"$out")" "$relay:$pod.containers.[].volumeMounts.[].readOnly=true" "an extra mount asked writable"
hasnt "$(flat <<<"$out")" "readOnly=false" "an extra mount asked writable"

# Pod Security "restricted" whatever the values say, with the schema and without it.
for bad in privileged=true allowPrivilegeEscalation=true 'capabilities.add={SYS_ADMIN}'; do
  refused "containerSecurityContext" "containerSecurityContext.$bad" "${required[@]}" --set "global.containerSecurityContext.$bad"
  refused "Pod Security \"restricted\"" "containerSecurityContext.$bad, without the schema" "${required[@]}" \
    --skip-schema-validation --set "global.containerSecurityContext.$bad"
done
for bad in global.containerSecurityContext.runAsUser=0 global.podSecurityContext.runAsUser=0 \
  global.containerSecurityContext.runAsNonRoot=false global.podSecurityContext.seccompProfile.type=Unconfined \
  'global.containerSecurityContext.capabilities.drop={NET_RAW}'; do
  refused "Pod Security \"restricted\"" "$bad" "${required[@]}" --skip-schema-validation --set "$bad"
done
out=$(render "${required[@]}" --set 'global.containerSecurityContext.capabilities.add={NET_BIND_SERVICE}') ||
  fail "NET_BIND_SERVICE, which restricted allows, refused: $out"

# settlement-projection's API wants a bearer token: the hashes of the accepted ones in its ConfigMap (two
# during a rotation), required, and never anything but a hash.
has "$E" 'ConfigMap/rel-charge-outbox-settlement-projection:data.config.yaml.http.token_hashes="a70bf50e531ce1a817561f2f5d5b6645d4e806becf58ccc5e8cf6b8045a090a8,49e2bb7eab54cf09b409ffafd3fa8a8a955a60eb972faacaefbed3dbd3207132"' \
  "settlement-projection's token hashes"
refused "settlementProjection.apiTokenHashes is required" "settlement-projection without a token" "${required[@]}" \
  --set settlementProjection.enabled=true
refused "apiTokenHashes/0" "a token instead of its hash" "${required[@]}" --set settlementProjection.enabled=true \
  --set 'settlementProjection.apiTokenHashes={token-a}'
refused "is not a SHA-256 hex digest" "a token instead of its hash, without the schema" "${required[@]}" \
  --skip-schema-validation --set settlementProjection.enabled=true --set 'settlementProjection.apiTokenHashes={token-a}'

# The migration hook runs as a ServiceAccount of its own, made just before it, never the namespace's default.
has "$D" "Job/rel-charge-outbox-migrate:$pod.serviceAccountName=rel-charge-outbox-hooks" "the migration hook's ServiceAccount"
has "$D" 'ServiceAccount/rel-charge-outbox-hooks:metadata.annotations.helm.sh/hook=pre-install,pre-upgrade' \
  "the hooks' ServiceAccount is a hook"
has "$D" 'ServiceAccount/rel-charge-outbox-hooks:metadata.annotations.helm.sh/hook-weight="-10"' \
  "the hooks' ServiceAccount comes before the migration"
has "$D" 'ServiceAccount/rel-charge-outbox-hooks:automountServiceAccountToken=false' "the hooks' ServiceAccount's token"
out=$(render "${required[@]}" --set serviceAccount.create=false --set serviceAccount.name=payments) || fail "an existing ServiceAccount: $out"
has "$(flat <<<"$out")" "Job/rel-charge-outbox-migrate:$pod.serviceAccountName=payments" "the hook with an existing ServiceAccount"

# The audit trail's retention: charge-admin from the image, once a day, never under a year.
prune=$(render "${required[@]}" --show-only templates/audit-prune-cronjob.yaml) || fail "rendering the audit prune CronJob: $prune"
grep -qF 'args: ["charge-admin","audit","prune","--older-than","61320h"]' <<<"$prune" ||
  fail "the audit prune CronJob does not run charge-admin audit prune --older-than 61320h"
grep -qF 'concurrencyPolicy: Forbid' <<<"$prune" || fail "the audit prune CronJob may run twice at once"
short=$(render "${required[@]}" --set auditPrune.olderThan=720h) && fail "auditPrune.olderThan=720h was accepted"
grep -qF 'at least a year (8760h)' <<<"$short" || fail "auditPrune.olderThan=720h: the refusal does not say why: $short"

# Every object the runbooks name (`<fullname>-NAME` in docs/operations.md: deploy/..., cronjob/..., the
# pods' name prefixes) is one the chart renders, under the name the docs give it: a renamed object fails here.
all_names=$("$helm" template rel "$chart" -f "$everything" 2>&1 | awk '/^kind:/ {kind = $2} /^  name:/ && kind != "" {print $2; kind = ""}')
while read -r named; do
  grep -qx "rel-charge-outbox-$named" <<<"$all_names" ||
    fail "docs/operations.md names <fullname>-$named, which the chart does not render (rel-charge-outbox-$named)"
done < <(grep -oE '<fullname>-[a-z][a-z-]*[a-z]' "$root/docs/operations.md" | sed 's/^<fullname>-//' | sort -u |
  grep -vx 'reconciler-manual')

# Everything but the migration disabled: nothing else rendered, and nothing else required.
only_migrate=$(render --set outboxRelay.enabled=false --set chargeApi.enabled=false --set reconciler.enabled=false \
  --set auditPrune.enabled=false) ||
  fail "rendering the migration alone: $only_migrate"
grep -qE 'outbox-relay|charge-api|reconciler' <<<"$only_migrate" && fail "disabled components were rendered"
grep -qx 'kind: Job' <<<"$only_migrate" || fail "the migration alone: no Job"

((failures == 0)) || { echo "$failures check(s) failed" >&2; exit 1; }
echo "chart checks passed"
