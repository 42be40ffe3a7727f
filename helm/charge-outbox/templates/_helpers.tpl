{{- define "charge-outbox.fullname" -}}
{{- if contains .Chart.Name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name .Chart.Name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{/* Selector labels: stable across upgrades, so never the chart version. */}}
{{- define "charge-outbox.selectorLabels" -}}
app.kubernetes.io/name: {{ .Chart.Name }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{- define "charge-outbox.labels" -}}
{{ include "charge-outbox.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
{{- end -}}

{{/* The image of a component: its own fields beat global.image. Call with (list $ .Values.<component>). */}}
{{- define "charge-outbox.image" -}}
{{- $root := index . 0 -}}
{{- $own := (index . 1).image | default dict -}}
{{- $global := $root.Values.global.image -}}
{{- $repository := $own.repository | default $global.repository -}}
{{- $tag := $own.tag | default $global.tag | default $root.Chart.AppVersion -}}
{{- $digest := $own.digest | default $global.digest -}}
{{- if $digest -}}
{{- printf "%s:%s@%s" $repository $tag $digest -}}
{{- else -}}
{{- printf "%s:%s" $repository $tag -}}
{{- end -}}
{{- end -}}

{{- define "charge-outbox.pullPolicy" -}}
{{- $own := (index . 1).image | default dict -}}
{{- $own.pullPolicy | default (index . 0).Values.global.image.pullPolicy -}}
{{- end -}}

{{/*
The Secret a component reads its DATABASE_URL from: its own `<component>.databaseSecret` when its name is
set, else the fallback (global.databaseSecret, or for settlement-projection's init container its daemon's),
key and all: a component's key means something only beside its own name. Renders JSON {name, key, values},
values being the value that names it (for the install-time check and NOTES). Call with
(list OWN_REF "OWN_VALUES_PATH" FALLBACK_REF "FALLBACK_VALUES_PATH").
*/}}
{{- define "charge-outbox.secretRefOr" -}}
{{- $own := index . 0 | default dict -}}
{{- if $own.name -}}
{{- toJson (dict "name" $own.name "key" (required (printf "%s.key is required with %s.name" (index . 1) (index . 1)) $own.key) "values" (index . 1)) -}}
{{- else -}}
{{- $fallback := index . 2 -}}
{{- toJson (dict "name" $fallback.name "key" $fallback.key "values" (index . 3)) -}}
{{- end -}}
{{- end -}}

{{/* A component's charges database Secret (see secretRefOr): (list $ "<values key>"), the values key being
migrate, chargeApi, outboxRelay, reconciler or operator. */}}
{{- define "charge-outbox.databaseSecret" -}}
{{- $root := index . 0 -}}
{{- $component := index . 1 -}}
{{- include "charge-outbox.secretRefOr" (list (index $root.Values $component).databaseSecret (printf "%s.databaseSecret" $component) $root.Values.global.databaseSecret "global.databaseSecret") -}}
{{- end -}}

{{/* DATABASE_URL, from the component's database Secret only, and the database's TLS (databaseTlsEnv):
(list $ "<values key>"). */}}
{{- define "charge-outbox.databaseEnv" -}}
{{- include "charge-outbox.secretEnv" (list "DATABASE_URL" (include "charge-outbox.databaseSecret" . | fromJson)) }}
{{- with include "charge-outbox.databaseTlsEnv" (index . 0) | trim }}
{{ . }}
{{- end }}
{{- end -}}

{{/*
The private CA of global.caBundle, mounted in every pod that names it: its directory, and the file.
*/}}
{{- define "charge-outbox.caBundleDir" -}}/etc/charge-outbox-ca{{- end -}}
{{- define "charge-outbox.caBundleFile" -}}
{{- printf "%s/%s" (include "charge-outbox.caBundleDir" .) (required "global.caBundle.key is required with global.caBundle.secretName" .Values.global.caBundle.key) -}}
{{- end -}}

{{/*
libpq's TLS for every database connection, through its own environment (PGSSLMODE, PGSSLROOTCERT), which a
URL's own sslmode or sslrootcert overrides: the Secrets' URLs need no change. verify-ca and verify-full
check the server against global.caBundle, which they therefore require (libpq 15 has no system store).
Takes $.
*/}}
{{- define "charge-outbox.databaseTlsEnv" -}}
{{- $mode := .Values.global.database.sslMode -}}
{{- if $mode }}
{{- if not (has $mode (list "disable" "allow" "prefer" "require" "verify-ca" "verify-full")) }}
{{- fail (printf "global.database.sslMode %s is not a libpq sslmode: disable, allow, prefer, require, verify-ca or verify-full" $mode) }}
{{- end }}
{{- if and (hasPrefix "verify-" $mode) (not .Values.global.caBundle.secretName) }}
{{- fail (printf "global.database.sslMode %s checks the server's certificate against a CA: set global.caBundle.secretName to a Secret holding it" $mode) }}
{{- end }}
- name: PGSSLMODE
  value: {{ $mode | quote }}
{{- end }}
{{- if .Values.global.caBundle.secretName }}
- name: PGSSLROOTCERT
  value: {{ include "charge-outbox.caBundleFile" . | quote }}
{{- end }}
{{- end -}}

{{/*
The volumes every pod adds to its config: global.caBundle's, and the component's extraVolumes (client
certificates, say). A hostPath is refused: it reaches the node's files, which Pod Security "restricted"
forbids. (list $ .Values.<component> "<values key>")
*/}}
{{- define "charge-outbox.extraVolumes" -}}
{{- $root := index . 0 -}}
{{- $own := index . 1 -}}
{{- with $root.Values.global.caBundle.secretName }}
- name: ca-bundle
  secret:
    secretName: {{ . }}
    items:
      - key: {{ $root.Values.global.caBundle.key }}
        path: {{ $root.Values.global.caBundle.key }}
{{- end }}
{{- range $own.extraVolumes }}
{{- if or .hostPath (eq .name "ca-bundle") (eq .name "config") }}
{{- fail (printf "%s.extraVolumes %s is refused: a hostPath reaches the node's files (Pod Security \"restricted\" forbids it), and config and ca-bundle are the chart's own volumes" (index $ 2) .name) }}
{{- end }}
- {{ toYaml . | nindent 2 | trim }}
{{- end }}
{{- end -}}

{{/* Their mounts, read-only: (list $ .Values.<component>). */}}
{{- define "charge-outbox.extraVolumeMounts" -}}
{{- $root := index . 0 -}}
{{- $own := index . 1 -}}
{{- if $root.Values.global.caBundle.secretName }}
- name: ca-bundle
  mountPath: {{ include "charge-outbox.caBundleDir" $root }}
  readOnly: true
{{- end }}
{{- range $own.extraVolumeMounts }}
- {{ toYaml (merge (dict "readOnly" true) .) | nindent 2 | trim }}
{{- end }}
{{- end -}}

{{/* "<name>/<key>" of the operator's database Secret, in the annotation charge-outbox/operator-database-secret
of the objects whose pod template `kubectl charge-outbox` copies (deploy/kubectl): a person's charge-admin or
`outbox-relay parked` writes the audit trail, so its pod swaps the daemon's DATABASE_URL for this one. */}}
{{- define "charge-outbox.operatorDatabaseSecretAnnotation" -}}
{{- $ref := include "charge-outbox.databaseSecret" (list . "operator") | fromJson -}}
charge-outbox/operator-database-secret: {{ printf "%s/%s" $ref.name $ref.key | quote }}
{{- end -}}

{{/*
The Secrets the release reads and never creates, for the enabled components: JSON {secrets: [{name, key,
values, what, literal}]}, one entry per Secret and key, values and what listing every value that points at
it and what for (the quick start's one database Secret is one entry, global.databaseSecret), literal the
value of the `kubectl create secret` command that makes it. required-secrets.yaml checks them at install;
NOTES.txt lists them.
*/}}
{{- define "charge-outbox.requiredSecrets" -}}
{{- $root := . -}}
{{- $v := .Values -}}
{{- $sp := $v.settlementProjection -}}
{{- /* Each database Secret as the components resolve it (their own, else the global one), with what it
is for: the role of sql/roles.sql it should hold when a component names its own. */ -}}
{{- $database := list -}}
{{- if $v.migrate.enabled -}}
{{- $database = append $database (dict "component" "migrate" "what" "the schema owner's URL, which the migration hook runs as" "literal" "\"$CHARGE_OWNER_DATABASE_URL\"") -}}
{{- end -}}
{{- if $v.chargeApi.enabled -}}
{{- $database = append $database (dict "component" "chargeApi" "what" "charge-api's URL, role charge_api" "literal" "\"$CHARGE_API_DATABASE_URL\"") -}}
{{- end -}}
{{- if $v.outboxRelay.enabled -}}
{{- $database = append $database (dict "component" "outboxRelay" "what" "the relay's URL, role outbox_relay" "literal" "\"$OUTBOX_RELAY_DATABASE_URL\"") -}}
{{- end -}}
{{- if $v.reconciler.enabled -}}
{{- $database = append $database (dict "component" "reconciler" "what" "the reconciler's URL, role charge_reconciler" "literal" "\"$CHARGE_RECONCILER_DATABASE_URL\"") -}}
{{- end -}}
{{- /* The operator's: the audit prune's, and the one kubectl charge-outbox gives a person's pod (named by the
reconciler CronJob's and the relay Deployment's annotation). */ -}}
{{- if or $v.auditPrune.enabled $v.reconciler.enabled $v.outboxRelay.enabled -}}
{{- $database = append $database (dict "component" "operator" "what" "the operator's URL, role charge_operator" "literal" "\"$CHARGE_OPERATOR_DATABASE_URL\"") -}}
{{- end -}}
{{- $needed := list -}}
{{- range $database -}}
{{- $ref := include "charge-outbox.databaseSecret" (list $root .component) | fromJson -}}
{{- if eq $ref.values "global.databaseSecret" -}}
{{- $needed = append $needed (dict "ref" $ref "values" $ref.values "what" "the charges database's URL, DATABASE_URL" "literal" "\"$DATABASE_URL\"") -}}
{{- else -}}
{{- $needed = append $needed (dict "ref" $ref "values" $ref.values "what" .what "literal" .literal) -}}
{{- end -}}
{{- end -}}
{{- if or $v.chargeApi.enabled $v.reconciler.enabled $v.auditPrune.enabled -}}
{{- $needed = append $needed (dict "ref" $v.global.acquirer.apiKeySecret "values" "global.acquirer.apiKeySecret" "what" "the acquirer's API key, ACQUIRER_API_KEY" "literal" "\"$ACQUIRER_API_KEY\"") -}}
{{- end -}}
{{- with $v.global.caBundle.secretName -}}
{{- $needed = append $needed (dict "ref" (dict "name" . "key" $v.global.caBundle.key) "values" "global.caBundle" "what" "the private CA's PEM certificates, mounted in every pod" "literal" "\"$(cat ca.crt)\"") -}}
{{- end -}}
{{- if and $v.outboxRelay.enabled $v.outboxRelay.kafka.saslPasswordSecret.name -}}
{{- $needed = append $needed (dict "ref" $v.outboxRelay.kafka.saslPasswordSecret "values" "outboxRelay.kafka.saslPasswordSecret" "what" "the relay's Kafka SASL password, KAFKA_SASL_PASSWORD" "literal" "\"$KAFKA_SASL_PASSWORD\"") -}}
{{- end -}}
{{- if $sp.enabled -}}
{{- $needed = append $needed (dict "ref" $sp.databaseSecret "values" "settlementProjection.databaseSecret" "what" "settlement-projection's own database URL, its DATABASE_URL" "literal" "\"$SETTLEMENT_DATABASE_URL\"") -}}
{{- if $sp.migrate.databaseSecret.name -}}
{{- $needed = append $needed (dict "ref" $sp.migrate.databaseSecret "values" "settlementProjection.migrate.databaseSecret" "what" "the URL of settlement-projection's database's owner, which its init container migrates as" "literal" "\"$SETTLEMENT_OWNER_DATABASE_URL\"") -}}
{{- end -}}
{{- if $sp.kafka.saslPasswordSecret.name -}}
{{- $needed = append $needed (dict "ref" $sp.kafka.saslPasswordSecret "values" "settlementProjection.kafka.saslPasswordSecret" "what" "settlement-projection's Kafka SASL password" "literal" "\"$SETTLEMENT_KAFKA_SASL_PASSWORD\"") -}}
{{- end -}}
{{- end -}}
{{- /* One check per Secret and key, naming every value that points at it (the quick start's one Secret is
named once, as global.databaseSecret). */ -}}
{{- $byRef := dict -}}
{{- $order := list -}}
{{- range $needed -}}
{{- $id := printf "%s/%s" .ref.name .ref.key -}}
{{- if hasKey $byRef $id -}}
{{- $seen := get $byRef $id -}}
{{- if not (has .values $seen.values) -}}
{{- $_ := set $seen "values" (append $seen.values .values) -}}
{{- $_ := set $seen "what" (append $seen.what .what) -}}
{{- end -}}
{{- else -}}
{{- $_ := set $byRef $id (dict "name" .ref.name "key" .ref.key "values" (list .values) "what" (list .what) "literal" .literal) -}}
{{- $order = append $order $id -}}
{{- end -}}
{{- end -}}
{{- $secrets := list -}}
{{- range $order -}}
{{- $secrets = append $secrets (get $byRef .) -}}
{{- end -}}
{{- toJson (dict "secrets" $secrets) -}}
{{- end -}}

{{/* The acquirer's API key, from a Secret only (its URL is in the daemon's ConfigMap). */}}
{{- define "charge-outbox.acquirerKeyEnv" -}}
{{- include "charge-outbox.secretEnv" (list "ACQUIRER_API_KEY" .Values.global.acquirer.apiKeySecret) -}}
{{- end -}}

{{/* The ServiceAccount every pod runs as. */}}
{{- define "charge-outbox.serviceAccountName" -}}
{{- if .Values.serviceAccount.create -}}
{{- .Values.serviceAccount.name | default (include "charge-outbox.fullname" .) -}}
{{- else -}}
{{- .Values.serviceAccount.name | default "default" -}}
{{- end -}}
{{- end -}}

{{/* The ServiceAccount of the migration hook, which runs before the release's own exists. */}}
{{- define "charge-outbox.hookServiceAccountName" -}}
{{- printf "%s-hooks" (include "charge-outbox.serviceAccountName" .) | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/* An env entry read from a Secret. Call with (list ENV_NAME SECRET_REF), SECRET_REF a {name, key}. */}}
{{- define "charge-outbox.secretEnv" -}}
- name: {{ index . 0 }}
  valueFrom:
    secretKeyRef:
      name: {{ (index . 1).name }}
      key: {{ (index . 1).key }}
{{- end -}}

{{/*
A daemon's pod, deleted, gets its preStop sleep, then SIGTERM, then shutdown.deadline to drain (20 s, or its
extraEnv.SHUTDOWN_DEADLINE in whole seconds or minutes), and the kubelet kills it at
terminationGracePeriodSeconds: a grace that does not cover both cuts the drain, and its in-flight requests
lose their answers. Renders nothing. Call with (list "<values key>" .Values.<component>).
*/}}
{{- define "charge-outbox.checkShutdownGrace" -}}
{{- $where := index . 0 -}}
{{- $component := index . 1 -}}
{{- $deadline := 20 -}}
{{- with (index ($component.extraEnv | default dict) "SHUTDOWN_DEADLINE") -}}
{{- $given := toString . -}}
{{- if regexMatch "^[0-9]+s$" $given -}}
{{- $deadline = trimSuffix "s" $given | int -}}
{{- else if regexMatch "^[0-9]+m$" $given -}}
{{- $deadline = mul (trimSuffix "m" $given | int) 60 -}}
{{- else -}}
{{- fail (printf "%s.extraEnv.SHUTDOWN_DEADLINE %s: give it in whole seconds (30s) or minutes (1m), so that the chart can check terminationGracePeriodSeconds against it" $where $given) -}}
{{- end -}}
{{- end -}}
{{- $sleep := int ($component.preStopSleepSeconds | default 0) -}}
{{- if le (int $component.terminationGracePeriodSeconds) (add $sleep $deadline) -}}
{{- $needs := printf "the daemon's shutdown.deadline (%d s)" $deadline -}}
{{- if gt $sleep 0 }}{{ $needs = printf "the preStop sleep (%d s) plus %s" $sleep $needs }}{{ end -}}
{{- fail (printf "%s.terminationGracePeriodSeconds %d does not exceed %s: the kubelet would kill it mid-drain" $where (int $component.terminationGracePeriodSeconds) $needs) -}}
{{- end -}}
{{- end }}

{{/*
extraEnv of a component, refused here as well as in the schema (which --skip-schema-validation turns off):
a secret belongs in a Secret, FAILPOINTS only in test builds (docs/operations.md, docs/failpoints.md), and where
the acquirer key and card tokens go (ACQUIRER_URL, ACQUIRER_ALLOW_PLAIN_HTTP, ACQUIRER_TLS_VERIFY) and which
protocol they speak (ACQUIRER_KIND, one for every component) only from global.acquirer, never silently from
one component's extraEnv. Call with (list "<values key>" .Values.<component>.extraEnv).
*/}}
{{- define "charge-outbox.extraEnv" -}}
{{- $where := index . 0 -}}
{{- range $name, $value := index . 1 }}
{{- if or (has $name (list "DATABASE_URL" "FAILPOINTS")) (regexMatch "PASSWORD|SECRET|TOKEN|API_KEY" $name) }}
{{- fail (printf "%s.extraEnv.%s is refused: secrets come from a Secret (see values.yaml) and FAILPOINTS exist only in test builds" $where $name) }}
{{- end }}
{{- if has $name (list "ACQUIRER_URL" "ACQUIRER_ALLOW_PLAIN_HTTP" "ACQUIRER_TLS_VERIFY") }}
{{- fail (printf "%s.extraEnv.%s is refused: where the acquirer key and card tokens go is global.acquirer.url (https), or global.acquirer.insecurePlainHttp for a test acquirer" $where $name) }}
{{- end }}
{{- if eq $name "ACQUIRER_KIND" }}
{{- fail (printf "%s.extraEnv.%s is refused: every component speaks one protocol to the acquirer, global.acquirer.kind" $where $name) }}
{{- end }}
- name: {{ $name }}
  value: {{ $value | quote }}
{{- end }}
{{- end -}}

{{/*
Pod Security "restricted", held whatever the values say: the security contexts are values (a platform may
add SELinux or AppArmor options), but none may make a container privileged, root, able to escalate or to
add a capability beyond NET_BIND_SERVICE, or unconfined by seccomp. The schema refuses these too; this
holds with --skip-schema-validation. Renders nothing. Takes $.
*/}}
{{- define "charge-outbox.checkRestricted" -}}
{{- $pod := .Values.global.podSecurityContext | default dict -}}
{{- $ctr := .Values.global.containerSecurityContext | default dict -}}
{{- $why := "" -}}
{{- if $ctr.privileged }}{{ $why = "containerSecurityContext.privileged is true" }}{{ end -}}
{{- if not (eq (toString $ctr.allowPrivilegeEscalation) "false") }}{{ $why = "containerSecurityContext.allowPrivilegeEscalation must be false" }}{{ end -}}
{{- if not (or (eq (toString $ctr.runAsNonRoot) "true") (eq (toString $pod.runAsNonRoot) "true")) }}{{ $why = "runAsNonRoot must be true (podSecurityContext or containerSecurityContext)" }}{{ end -}}
{{- if or (eq (toString $ctr.runAsNonRoot) "false") (eq (toString $pod.runAsNonRoot) "false") }}{{ $why = "runAsNonRoot is false" }}{{ end -}}
{{- if or (eq (toString $ctr.runAsUser) "0") (eq (toString $pod.runAsUser) "0") }}{{ $why = "runAsUser is 0 (root)" }}{{ end -}}
{{- $caps := $ctr.capabilities | default dict -}}
{{- range $caps.add }}{{ if ne . "NET_BIND_SERVICE" }}{{ $why = printf "containerSecurityContext.capabilities.add has %s" . }}{{ end }}{{ end -}}
{{- if not (has "ALL" ($caps.drop | default list)) }}{{ $why = "containerSecurityContext.capabilities.drop must hold ALL" }}{{ end -}}
{{- $seccomp := list (toString ($pod.seccompProfile | default dict).type) (toString ($ctr.seccompProfile | default dict).type) -}}
{{- if has "Unconfined" $seccomp }}{{ $why = "seccompProfile is Unconfined" }}{{ end -}}
{{- if not (or (has "RuntimeDefault" $seccomp) (has "Localhost" $seccomp)) }}{{ $why = "seccompProfile.type must be RuntimeDefault or Localhost" }}{{ end -}}
{{- if $why -}}
{{- fail (printf "global.%s: every pod of this chart meets Pod Security \"restricted\" (docs/operations.md, \"Security\")" $why) -}}
{{- end -}}
{{- end -}}

{{/*
Pod-level fields every workload shares. Call with (list $ .Values.<component>).
*/}}
{{- define "charge-outbox.podSpec" -}}
{{- $root := index . 0 -}}
{{- $own := index . 1 -}}
{{- include "charge-outbox.checkRestricted" $root | trim -}}
{{- /* A hook runs before the release's ServiceAccount exists: the chart's own ServiceAccount for hooks
(serviceaccount.yaml), made just before it, never the namespace's default one. */}}
{{- if and $own.hook $root.Values.serviceAccount.create }}
serviceAccountName: {{ include "charge-outbox.hookServiceAccountName" $root }}
{{- else }}
serviceAccountName: {{ include "charge-outbox.serviceAccountName" $root }}
{{- end }}
automountServiceAccountToken: {{ $root.Values.serviceAccount.automountServiceAccountToken }}
securityContext:
  {{- toYaml $root.Values.global.podSecurityContext | nindent 2 }}
{{- with $root.Values.global.imagePullSecrets }}
imagePullSecrets:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with $own.nodeSelector }}
nodeSelector:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with $own.tolerations }}
tolerations:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with $own.affinity }}
affinity:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- end -}}

{{/* Container-level fields every container shares: image, pull policy, security, resources. (list $ .Values.<component>) */}}
{{- define "charge-outbox.container" -}}
{{- $root := index . 0 -}}
{{- $own := index . 1 -}}
image: {{ include "charge-outbox.image" . }}
imagePullPolicy: {{ include "charge-outbox.pullPolicy" . }}
securityContext:
  {{- toYaml $root.Values.global.containerSecurityContext | nindent 2 }}
resources:
  {{- toYaml ($own.resources | default $root.Values.global.resources) | nindent 2 }}
{{- end -}}

{{/* Where every daemon's ConfigMap is mounted; the file is passed with --config. */}}
{{- define "charge-outbox.configDir" -}}/etc/charge-outbox{{- end -}}

{{/* The config volume and its mount. (list $ "<component>") */}}
{{- define "charge-outbox.configVolume" -}}
- name: config
  configMap:
    name: {{ include "charge-outbox.fullname" (index . 0) }}-{{ index . 1 }}
{{- end -}}
{{- define "charge-outbox.configMount" -}}
- name: config
  mountPath: {{ include "charge-outbox.configDir" . }}
  readOnly: true
{{- end -}}

{{/* A checksum of the pod's config file, so that a change of it rolls the pods. (list $ "<config helper>") */}}
{{- define "charge-outbox.checksums" -}}
{{- $root := index . 0 -}}
checksum/config: {{ include (index . 1) $root | sha256sum }}
{{- end -}}

{{/*
Where the acquirer key and card tokens go, from global.acquirer only: the URL, checked here as the daemons
check it (plain http:// only to the pod itself, or with global.acquirer.insecurePlainHttp, a test acquirer's
switch that NOTES warns about). acquirerUrl prints the URL; acquirerConfig the config files' acquirer block.
*/}}
{{- define "charge-outbox.acquirerUrl" -}}
{{- $acq := .Values.global.acquirer -}}
{{- $url := required "global.acquirer.url is required (the card acquirer's base URL)" $acq.url -}}
{{- $plain := hasPrefix "http://" (lower $url) -}}
{{- $host := regexReplaceAll "^[a-zA-Z]+://(\\[[^]]*\\]|[^:/?#]*).*$" $url "${1}" -}}
{{- $loopback := or (eq $host "localhost") (eq $host "[::1]") (hasPrefix "127." $host) -}}
{{- if and $plain (not $loopback) (not $acq.insecurePlainHttp) -}}
{{- fail (printf "global.acquirer.url %s is plain http:// to another host, so the acquirer key and card tokens would travel in clear: use https://, or global.acquirer.insecurePlainHttp: true for a test acquirer only" $url) -}}
{{- end -}}
{{- if and $acq.insecurePlainHttp (not $plain) -}}
{{- fail "global.acquirer.insecurePlainHttp is set but global.acquirer.url is not http://: drop it" -}}
{{- end -}}
{{- $url -}}
{{- end -}}

{{- define "charge-outbox.acquirerConfig" -}}
acquirer:
  kind: {{ include "charge-outbox.acquirerKind" . | quote }}
  url: {{ include "charge-outbox.acquirerUrl" . | quote }}
  {{- if .Values.global.acquirer.insecurePlainHttp }}
  allow_plain_http: true
  {{- end }}
  {{- with include "charge-outbox.acquirerCaFile" . }}
  tls:
    ca_file: {{ . | quote }}
  {{- end }}
  {{- with (include "charge-outbox.stripeSettings" . | fromJson).settings }}
  stripe:
    {{- range . }}
    {{ .key }}: {{ .value | quote }}
    {{- end }}
  {{- end }}
{{- end -}}

{{/* The protocol every component speaks to the acquirer, global.acquirer.kind, checked here as well as in
the schema (which --skip-schema-validation turns off). Takes $. */}}
{{- define "charge-outbox.acquirerKind" -}}
{{- $kind := .Values.global.acquirer.kind | default "native" -}}
{{- if not (has $kind (list "native" "stripe")) -}}
{{- fail (printf "global.acquirer.kind %s is not an acquirer protocol the daemons speak: native or stripe" $kind) -}}
{{- end -}}
{{- $kind -}}
{{- end -}}

{{/*
Stripe's knobs (acquirer.stripe.<key>, ACQUIRER_STRIPE_<KEY>) from global.acquirer.stripe, with kind stripe
only: JSON {settings: [{key, value}]}, empty with kind native. The durations' bounds, which the schema
cannot express, are the daemons'. Takes $.
*/}}
{{- define "charge-outbox.stripeSettings" -}}
{{- $settings := list -}}
{{- if eq (include "charge-outbox.acquirerKind" .) "stripe" -}}
{{- $stripe := .Values.global.acquirer.stripe -}}
{{- $retention := include "charge-outbox.durationMs" (list "global.acquirer.stripe.keyRetention" $stripe.keyRetention) | int64 -}}
{{- if or (lt $retention 1000) (gt $retention (mul 720 3600000)) -}}
{{- fail (printf "global.acquirer.stripe.keyRetention %s is not between 1s and 720h (acquirer.stripe.key_retention): Stripe keeps idempotency keys 24h" $stripe.keyRetention) -}}
{{- end -}}
{{- if gt (include "charge-outbox.durationMs" (list "global.acquirer.stripe.searchLag" $stripe.searchLag) | int64) (mul 2 3600000) -}}
{{- fail (printf "global.acquirer.stripe.searchLag %s is above 2h, the most acquirer.stripe.search_lag takes" $stripe.searchLag) -}}
{{- end -}}
{{- $settings = list (dict "key" "key_retention" "value" $stripe.keyRetention) (dict "key" "search_lag" "value" $stripe.searchLag) (dict "key" "search_rate_limit" "value" (toString $stripe.searchRateLimit)) (dict "key" "events_pages" "value" (toString $stripe.eventsPages)) -}}
{{- end -}}
{{- toJson (dict "settings" $settings) -}}
{{- end -}}

{{/*
A duration as the daemons read it (digits and one unit: ms, s, m or h) in milliseconds, for the checks that
compare two; anything else fails naming where it came from (the schema checks the values' form, but not
extraEnv's, and --skip-schema-validation turns it off). (list "<where>" VALUE)
*/}}
{{- define "charge-outbox.durationMs" -}}
{{- $text := toString (index . 1) -}}
{{- if not (regexMatch "^[0-9]+(ms|s|m|h)$" $text) -}}
{{- fail (printf "%s %q is not a duration such as 500ms, 30s, 5m or 23h" (index . 0) $text) -}}
{{- end -}}
{{- $unit := regexReplaceAll "^[0-9]+" $text "" -}}
{{- /* Leading zeros stripped: int64 would read them as octal. */ -}}
{{- $amount := regexReplaceAll "^0+([0-9])" (trimSuffix $unit $text) "${1}" | int64 -}}
{{- mul $amount (get (dict "ms" 1 "s" 1000 "m" 60000 "h" 3600000) $unit) -}}
{{- end -}}

{{/* Milliseconds as a duration the daemons read, in the largest unit that divides them. Takes the number. */}}
{{- define "charge-outbox.formatMs" -}}
{{- $ms := int64 . -}}
{{- if and (ne $ms 0) (eq (mod $ms 3600000) 0) -}}{{ div $ms 3600000 }}h
{{- else if and (ne $ms 0) (eq (mod $ms 60000) 0) -}}{{ div $ms 60000 }}m
{{- else if eq (mod $ms 1000) 0 -}}{{ div $ms 1000 }}s
{{- else -}}{{ $ms }}ms
{{- end -}}
{{- end -}}

{{/*
A setting as a component's daemon will read it: its extraEnv's when that names it, else the chart's value.
JSON {where, value}, where naming the value to change. (list "<values key>" EXTRA_ENV "ENV_NAME" "<where>" VALUE)
*/}}
{{- define "charge-outbox.effectiveSetting" -}}
{{- $env := index . 1 | default dict -}}
{{- $name := index . 2 -}}
{{- if hasKey $env $name -}}
{{- toJson (dict "where" (printf "%s.extraEnv.%s" (index . 0) $name) "value" (toString (get $env $name))) -}}
{{- else -}}
{{- toJson (dict "where" (index . 3) "value" (toString (index . 4))) -}}
{{- end -}}
{{- end -}}

{{/*
With global.acquirer.kind stripe, what charge-api and the reconciler refuse at start (exit 2), refused at
render time with the values to change. A capture may be sent until the charge's deadline and must reach
Stripe while it still remembers the idempotency key (past keyRetention the same key makes a new payment):
the deadline is at most keyRetention less a twenty-fourth (clocks) less one acquirer.request_timeout
(ACQUIRER_REQUEST_TIMEOUT in extraEnv, 10s by default). For the reconciler (visibility true) a search that
finds nothing proves nothing before searchLag has passed: visibilityWindow covers it. Each side is what the
daemon will read, the chart's value or the component's extraEnv. Renders nothing.
(list $ "<values key>" "<deadline's env name>" visibility)
*/}}
{{- define "charge-outbox.checkStripeBounds" -}}
{{- $root := index . 0 -}}
{{- $component := index . 1 -}}
{{- if eq (include "charge-outbox.acquirerKind" $root) "stripe" -}}
{{- $env := (index $root.Values $component).extraEnv | default dict -}}
{{- $stripe := $root.Values.global.acquirer.stripe -}}
{{- $retention := include "charge-outbox.effectiveSetting" (list $component $env "ACQUIRER_STRIPE_KEY_RETENTION" "global.acquirer.stripe.keyRetention" $stripe.keyRetention) | fromJson -}}
{{- $timeout := include "charge-outbox.effectiveSetting" (list $component $env "ACQUIRER_REQUEST_TIMEOUT" "acquirer.request_timeout (its default)" "10s") | fromJson -}}
{{- $deadline := include "charge-outbox.effectiveSetting" (list $component $env (index . 2) "global.chargeDeadline" $root.Values.global.chargeDeadline) | fromJson -}}
{{- $retentionMs := include "charge-outbox.durationMs" (list $retention.where $retention.value) | int64 -}}
{{- $maxMs := sub (sub $retentionMs (div $retentionMs 24)) (include "charge-outbox.durationMs" (list $timeout.where $timeout.value) | int64) -}}
{{- if gt (include "charge-outbox.durationMs" (list $deadline.where $deadline.value) | int64) $maxMs -}}
{{- fail (printf "%s %s is too long for global.acquirer.kind stripe: a capture may be sent until the deadline and must reach Stripe while it still remembers the charge's idempotency key (%s %s; past it the same key makes a new payment), so the deadline is at most that less a twenty-fourth less %s %s: %s. Shorten %s (helm/README.md, \"A real acquirer: Stripe\")" $deadline.where $deadline.value $retention.where $retention.value $timeout.where $timeout.value (include "charge-outbox.formatMs" (max $maxMs 0)) $deadline.where) -}}
{{- end -}}
{{- if index . 3 -}}
{{- $window := include "charge-outbox.effectiveSetting" (list $component $env "RECONCILER_VISIBILITY_WINDOW" "reconciler.visibilityWindow" $root.Values.reconciler.visibilityWindow) | fromJson -}}
{{- $lag := include "charge-outbox.effectiveSetting" (list $component $env "ACQUIRER_STRIPE_SEARCH_LAG" "global.acquirer.stripe.searchLag" $stripe.searchLag) | fromJson -}}
{{- if lt (include "charge-outbox.durationMs" (list $window.where $window.value) | int64) (include "charge-outbox.durationMs" (list $lag.where $lag.value) | int64) -}}
{{- fail (printf "%s %s is shorter than %s %s: with global.acquirer.kind stripe a search that finds nothing proves nothing until Stripe's search lag has passed, so the reconciler would act on a capture Stripe has not indexed yet. Set %s to at least %s" $window.where $window.value $lag.where $lag.value $window.where $lag.value) -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{/* The CA the acquirer's certificate is checked against when global.acquirer.trustCaBundle (empty: the
image's public CAs). Takes $. */}}
{{- define "charge-outbox.acquirerCaFile" -}}
{{- if .Values.global.acquirer.trustCaBundle -}}
{{- if not .Values.global.caBundle.secretName -}}
{{- fail "global.acquirer.trustCaBundle needs global.caBundle.secretName: the Secret holding the CA the acquirer's certificate is checked against" -}}
{{- end -}}
{{- if hasPrefix "http://" (lower .Values.global.acquirer.url) -}}
{{- fail "global.acquirer.trustCaBundle is set but global.acquirer.url is http://: there is no certificate to check" -}}
{{- end -}}
{{- include "charge-outbox.caBundleFile" . -}}
{{- end -}}
{{- end -}}

{{/*
A Kafka client's security settings in its config file, the same for the relay and settlement-projection:
security.protocol, SASL's mechanism and user, and the CA of global.caBundle when trustCaBundle. A client
that does not authenticate (no SASL, no TLS client certificate) is refused unless allowUnauthenticated: on
such a cluster anyone can write charge events the consumers would apply. SSL counts as authenticated: with
the broker's ssl.client.auth=required the client certificate (extraVolumes, KAFKA_SSL_CERTIFICATE_LOCATION
and KAFKA_SSL_KEY_LOCATION in extraEnv) is the identity. (list $ <kafka values> "<values key>")
*/}}
{{- define "charge-outbox.kafkaSecurityConfig" -}}
{{- $root := index . 0 -}}
{{- $kafka := index . 1 -}}
{{- $where := index . 2 -}}
{{- $protocol := upper ($kafka.securityProtocol | default "") -}}
{{- if not (or (has $protocol (list "SASL_SSL" "SASL_PLAINTEXT" "SSL")) $kafka.allowUnauthenticated) -}}
{{- fail (printf "%s.securityProtocol %q does not authenticate the client to Kafka, so anyone who reaches the brokers could write charge events: use SASL_SSL (or SSL with client certificates), or set %s.allowUnauthenticated: true for a test cluster only" $where ($kafka.securityProtocol | default "") $where) -}}
{{- end -}}
{{- with $kafka.securityProtocol }}
security_protocol: {{ . | quote }}
{{- end }}
{{- with $kafka.saslMechanism }}
sasl_mechanism: {{ . | quote }}
{{- end }}
{{- with $kafka.saslUsername }}
sasl_username: {{ . | quote }}
{{- end }}
{{- if $kafka.trustCaBundle }}
{{- if not (contains "SSL" $protocol) }}
{{- fail (printf "%s.trustCaBundle is set but %s.securityProtocol %q uses no TLS" $where $where ($kafka.securityProtocol | default "")) }}
{{- end }}
{{- if not $root.Values.global.caBundle.secretName }}
{{- fail (printf "%s.trustCaBundle needs global.caBundle.secretName: the Secret holding the CA the brokers' certificates are checked against" $where) }}
{{- end }}
ssl_ca_location: {{ include "charge-outbox.caBundleFile" $root | quote }}
{{- end }}
{{- end -}}

{{/* charge-api's config file (services/charge-api/README.md); secrets are never in it. */}}
{{- define "charge-outbox.chargeApiConfig" -}}
{{- $api := .Values.chargeApi -}}
http:
  port: 8080
  threads: {{ $api.httpThreads }}
  {{- with $api.trustedProxies }}
  trusted_proxies: {{ join ", " . | quote }}
  {{- end }}
admin:
  port: 9090
database:
  pool_size: {{ $api.databasePoolSize }}
{{ include "charge-outbox.acquirerConfig" . }}
{{- include "charge-outbox.checkStripeBounds" (list . "chargeApi" "CHARGE_DEADLINE" false) }}
charge:
  lease: {{ $api.chargeLease | quote }}
  deadline: {{ .Values.global.chargeDeadline | quote }}
  pending_overdue_after: {{ $api.pendingOverdueAfter | quote }}
log:
  level: {{ .Values.global.logLevel }}
{{- end -}}

{{/* outbox-relay's config file (services/outbox-relay/README.md); the SASL password is never in it. */}}
{{- define "charge-outbox.outboxRelayConfig" -}}
{{- $relay := .Values.outboxRelay -}}
kafka:
  bootstrap_servers: {{ required "outboxRelay.kafka.bootstrapServers is required (host:port,...)" $relay.kafka.bootstrapServers | quote }}
  topic: {{ $relay.kafka.topic | quote }}
  topic_partitions: {{ $relay.kafka.topicPartitions }}
  topic_replication_factor: {{ $relay.kafka.topicReplicationFactor }}
  {{- include "charge-outbox.kafkaSecurityConfig" (list . $relay.kafka "outboxRelay.kafka") | trim | nindent 2 }}
relay:
  workers: {{ $relay.workers }}
  batch_size: {{ $relay.batchSize }}
retention:
  days: {{ $relay.retentionDays }}
admin:
  port: 9090
log:
  level: {{ .Values.global.logLevel }}
{{- end -}}

{{/* The reconciler's config file (services/reconciler/README.md), shared by the sweep and the window report. */}}
{{- define "charge-outbox.reconcilerConfig" -}}
{{- $rec := .Values.reconciler -}}
{{- include "charge-outbox.checkStripeBounds" (list . "reconciler" "RECONCILER_DEADLINE" true) -}}
{{ include "charge-outbox.acquirerConfig" . }}
reconciler:
  grace_period: {{ $rec.gracePeriod | quote }}
  batch_size: {{ $rec.batchSize }}
  concurrency: {{ $rec.concurrency }}
  time_budget: {{ $rec.timeBudget | quote }}
  claim_lease: {{ $rec.claimLease | quote }}
  deadline: {{ .Values.global.chargeDeadline | quote }}
  visibility_window: {{ $rec.visibilityWindow | quote }}
  not_found_policy: {{ $rec.notFoundPolicy }}
  window:
    max_captures: {{ $rec.window.maxCaptures | int }}
metrics:
  pushgateway:
    url: {{ $rec.pushgateway.url | quote }}
    job: {{ include "charge-outbox.pushgatewayJob" . | quote }}
log:
  level: {{ .Values.global.logLevel }}
{{- end -}}

{{/* charge-admin's config file: the reconciler's acquirer (its database URL and acquirer key come from the
same Secrets, in the environment). */}}
{{- define "charge-outbox.chargeAdminConfig" -}}
{{ include "charge-outbox.acquirerConfig" . }}
log:
  level: {{ .Values.global.logLevel }}
{{- end -}}

{{/* The hashes of the tokens settlement-projection's API accepts, comma-separated: at least one, each a
SHA-256 hex digest (the daemon refuses to start without). Takes $. */}}
{{- define "charge-outbox.settlementTokenHashes" -}}
{{- $hashes := .Values.settlementProjection.apiTokenHashes | default list -}}
{{- if not $hashes -}}
{{- fail "settlementProjection.apiTokenHashes is required: its API answers any merchant's totals, so only to bearers of a token; make one with `openssl rand -hex 32` and list the sha256sum of it (printf %s TOKEN | sha256sum)" -}}
{{- end -}}
{{- range $hashes -}}
{{- if not (regexMatch "^[0-9a-fA-F]{64}$" .) -}}
{{- fail "settlementProjection.apiTokenHashes holds a value that is not a SHA-256 hex digest (64 hex digits): list the token's hash, never the token" -}}
{{- end -}}
{{- end -}}
{{- join "," $hashes -}}
{{- end -}}

{{/* settlement-projection's config file (services/settlement-projection/README.md); its database URL and
SASL password are never in it. Kafka's servers and topic default to the relay's. */}}
{{- define "charge-outbox.settlementProjectionConfig" -}}
{{- $sp := .Values.settlementProjection -}}
{{- $relay := .Values.outboxRelay -}}
http:
  port: 8090
  token_hashes: {{ include "charge-outbox.settlementTokenHashes" . | quote }}
admin:
  port: 9090
database:
  pool_size: {{ $sp.databasePoolSize }}
kafka:
  bootstrap_servers: {{ required "settlementProjection.kafka.bootstrapServers (or outboxRelay.kafka.bootstrapServers) is required (host:port,...)" ($sp.kafka.bootstrapServers | default $relay.kafka.bootstrapServers) | quote }}
  topic: {{ $sp.kafka.topic | default $relay.kafka.topic | quote }}
  group_id: {{ $sp.kafka.groupId | quote }}
  {{- /* Same cluster as the relay's unless told: its security protocol, mechanism and CA too; its SASL user
  and password are its own. */}}
  {{- $kafka := dict "securityProtocol" ($sp.kafka.securityProtocol | default $relay.kafka.securityProtocol) "saslMechanism" ($sp.kafka.saslMechanism | default $relay.kafka.saslMechanism) "saslUsername" $sp.kafka.saslUsername "trustCaBundle" (or $sp.kafka.trustCaBundle $relay.kafka.trustCaBundle) "allowUnauthenticated" (or $sp.kafka.allowUnauthenticated $relay.kafka.allowUnauthenticated) }}
  {{- include "charge-outbox.kafkaSecurityConfig" (list . $kafka "settlementProjection.kafka") | trim | nindent 2 }}
inbox:
  gaps:
    policy: {{ $sp.inbox.gapsPolicy }}
    wait: {{ $sp.inbox.gapsWait | quote }}
  batch_size: {{ $sp.inbox.batchSize }}
  retention_days: {{ $sp.inbox.retentionDays }}
  progress_retention_days: {{ $sp.inbox.progressRetentionDays }}
log:
  level: {{ .Values.global.logLevel }}
{{- end -}}

{{/* The Pushgateway job the reconciler pushes under, one per release so that two releases never overwrite each other. */}}
{{- define "charge-outbox.pushgatewayJob" -}}
{{- .Values.reconciler.pushgateway.job | default (printf "%s-reconciler" (include "charge-outbox.fullname" .)) -}}
{{- end -}}

{{/*
The CronJob spec fields an SRE tunes, from reconciler.cronjob / reconciler.job (or the window's), each
under the exact Kubernetes name. Optional integers use hasKey: `default` would take 0 for unset.
Call with (list $ <cronjob values> <job values>); renders spec fields down to jobTemplate.spec.
*/}}
{{- define "charge-outbox.cronJobSpec" -}}
{{- $cron := index . 1 -}}
{{- $job := index . 2 -}}
schedule: {{ $cron.schedule | quote }}
{{- with $cron.timeZone }}
timeZone: {{ . | quote }}
{{- end }}
suspend: {{ $cron.suspend | default false }}
concurrencyPolicy: {{ $cron.concurrencyPolicy | default "Forbid" }}
{{- range $field := list "startingDeadlineSeconds" "successfulJobsHistoryLimit" "failedJobsHistoryLimit" }}
{{- if hasKey $cron $field }}
{{ $field }}: {{ index $cron $field }}
{{- end }}
{{- end }}
jobTemplate:
  spec:
    {{- range $field := list "backoffLimit" "activeDeadlineSeconds" "ttlSecondsAfterFinished" }}
    {{- if hasKey $job $field }}
    {{ $field }}: {{ index $job $field }}
    {{- end }}
    {{- end }}
{{- end -}}

{{/*
A reconciler CronJob: the sweep and the window report differ only in name, arguments and knobs, and the
sweep's object annotations (the operator's database Secret, for kubectl charge-outbox).
Call with (dict "root" $ "component" "reconciler" "args" (list ...) "cronjob" ... "job" ... "resources" ...
"annotations" "<YAML or empty>").
*/}}
{{- define "charge-outbox.reconcilerCronJob" -}}
{{- $root := .root -}}
{{- $rec := $root.Values.reconciler -}}
{{- $own := merge (dict "resources" .resources) $rec -}}
apiVersion: batch/v1
kind: CronJob
metadata:
  name: {{ include "charge-outbox.fullname" $root }}-{{ .component }}
  labels:
    {{- include "charge-outbox.labels" $root | nindent 4 }}
    app.kubernetes.io/component: {{ .component }}
  {{- with .annotations }}
  annotations:
    {{- . | nindent 4 }}
  {{- end }}
spec:
  {{- include "charge-outbox.cronJobSpec" (list $root .cronjob .job) | nindent 2 }}
      template:
        metadata:
          labels:
            {{- include "charge-outbox.selectorLabels" $root | nindent 12 }}
            app.kubernetes.io/component: {{ .component }}
          {{- with $rec.podAnnotations }}
          annotations:
            {{- toYaml . | nindent 12 }}
          {{- end }}
        spec:
          restartPolicy: Never
          # SIGTERM (activeDeadlineSeconds, a drained node) stops new charges; this lets the ones in
          # progress finish their acquirer operation.
          terminationGracePeriodSeconds: {{ $rec.terminationGracePeriodSeconds }}
          {{- include "charge-outbox.podSpec" (list $root $rec) | nindent 10 }}
          containers:
            - name: {{ .component }}
              {{- include "charge-outbox.container" (list $root $own) | nindent 14 }}
              args: {{ toJson .args }}
              env:
                {{- include "charge-outbox.databaseEnv" (list $root "reconciler") | nindent 16 }}
                {{- include "charge-outbox.acquirerKeyEnv" $root | nindent 16 }}
                {{- with include "charge-outbox.extraEnv" (list "reconciler" $rec.extraEnv) | trim }}{{ . | nindent 16 }}{{ end }}
              volumeMounts:
                {{- include "charge-outbox.configMount" $root | nindent 16 }}
                {{- include "charge-outbox.extraVolumeMounts" (list $root $rec) | trim | nindent 16 }}
          volumes:
            {{- include "charge-outbox.configVolume" (list $root "reconciler") | nindent 12 }}
            {{- include "charge-outbox.extraVolumes" (list $root $rec "reconciler") | trim | nindent 12 }}
{{- end -}}
