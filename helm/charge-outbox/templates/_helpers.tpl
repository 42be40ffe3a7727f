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
{{- printf "%s:%s" $repository $tag -}}
{{- end -}}

{{- define "charge-outbox.pullPolicy" -}}
{{- $own := (index . 1).image | default dict -}}
{{- $own.pullPolicy | default (index . 0).Values.global.image.pullPolicy -}}
{{- end -}}

{{/* DATABASE_URL, from a Secret only. */}}
{{- define "charge-outbox.databaseEnv" -}}
{{- include "charge-outbox.secretEnv" (list "DATABASE_URL" .Values.global.databaseSecret) -}}
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

{{/* An env entry read from a Secret. Call with (list ENV_NAME SECRET_REF), SECRET_REF a {name, key}. */}}
{{- define "charge-outbox.secretEnv" -}}
- name: {{ index . 0 }}
  valueFrom:
    secretKeyRef:
      name: {{ (index . 1).name }}
      key: {{ (index . 1).key }}
{{- end -}}

{{/*
extraEnv of a component, refused here as well as in the schema (which --skip-schema-validation turns off):
a secret belongs in a Secret, and FAILPOINTS only in test builds (docs/operations.md, docs/failpoints.md). Call with
(list "<values key>" .Values.<component>.extraEnv).
*/}}
{{- define "charge-outbox.extraEnv" -}}
{{- $where := index . 0 -}}
{{- range $name, $value := index . 1 }}
{{- if or (has $name (list "DATABASE_URL" "FAILPOINTS")) (regexMatch "PASSWORD|SECRET|TOKEN|API_KEY" $name) }}
{{- fail (printf "%s.extraEnv.%s is refused: secrets come from a Secret (see values.yaml) and FAILPOINTS exist only in test builds" $where $name) }}
{{- end }}
- name: {{ $name }}
  value: {{ $value | quote }}
{{- end }}
{{- end -}}

{{/*
Pod-level fields every workload shares. Call with (list $ .Values.<component>).
*/}}
{{- define "charge-outbox.podSpec" -}}
{{- $root := index . 0 -}}
{{- $own := index . 1 -}}
{{- /* A hook runs before the release's ServiceAccount exists: it gets the namespace's default one unless
the ServiceAccount is an existing one. */}}
{{- if or (not $own.hook) (not $root.Values.serviceAccount.create) }}
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

{{/* charge-api's config file (services/charge-api/README.md); secrets are never in it. */}}
{{- define "charge-outbox.chargeApiConfig" -}}
{{- $api := .Values.chargeApi -}}
http:
  port: 8080
  threads: {{ $api.httpThreads }}
admin:
  port: 9090
database:
  pool_size: {{ $api.databasePoolSize }}
acquirer:
  url: {{ required "global.acquirer.url is required (the card acquirer's base URL)" .Values.global.acquirer.url | quote }}
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
  {{- with $relay.kafka.securityProtocol }}
  security_protocol: {{ . | quote }}
  {{- end }}
  {{- with $relay.kafka.saslMechanism }}
  sasl_mechanism: {{ . | quote }}
  {{- end }}
  {{- with $relay.kafka.saslUsername }}
  sasl_username: {{ . | quote }}
  {{- end }}
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
acquirer:
  url: {{ required "global.acquirer.url is required (the card acquirer's base URL)" .Values.global.acquirer.url | quote }}
reconciler:
  grace_period: {{ $rec.gracePeriod | quote }}
  batch_size: {{ $rec.batchSize }}
  concurrency: {{ $rec.concurrency }}
  time_budget: {{ $rec.timeBudget | quote }}
  claim_lease: {{ $rec.claimLease | quote }}
  deadline: {{ .Values.global.chargeDeadline | quote }}
  visibility_window: {{ $rec.visibilityWindow | quote }}
  not_found_policy: {{ $rec.notFoundPolicy }}
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
acquirer:
  url: {{ required "global.acquirer.url is required (the card acquirer's base URL)" .Values.global.acquirer.url | quote }}
log:
  level: {{ .Values.global.logLevel }}
{{- end -}}

{{/* settlement-projection's config file (services/settlement-projection/README.md); its database URL and
SASL password are never in it. Kafka's servers and topic default to the relay's. */}}
{{- define "charge-outbox.settlementProjectionConfig" -}}
{{- $sp := .Values.settlementProjection -}}
{{- $relay := .Values.outboxRelay -}}
http:
  port: 8090
admin:
  port: 9090
database:
  pool_size: {{ $sp.databasePoolSize }}
kafka:
  bootstrap_servers: {{ required "settlementProjection.kafka.bootstrapServers (or outboxRelay.kafka.bootstrapServers) is required (host:port,...)" ($sp.kafka.bootstrapServers | default $relay.kafka.bootstrapServers) | quote }}
  topic: {{ $sp.kafka.topic | default $relay.kafka.topic | quote }}
  group_id: {{ $sp.kafka.groupId | quote }}
  {{- with $sp.kafka.securityProtocol }}
  security_protocol: {{ . | quote }}
  {{- end }}
  {{- with $sp.kafka.saslMechanism }}
  sasl_mechanism: {{ . | quote }}
  {{- end }}
  {{- with $sp.kafka.saslUsername }}
  sasl_username: {{ . | quote }}
  {{- end }}
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
A reconciler CronJob: the sweep and the window report differ only in name, arguments and knobs.
Call with (dict "root" $ "component" "reconciler" "args" (list ...) "cronjob" ... "job" ... "resources" ...).
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
                {{- include "charge-outbox.databaseEnv" $root | nindent 16 }}
                {{- include "charge-outbox.acquirerKeyEnv" $root | nindent 16 }}
                {{- with include "charge-outbox.extraEnv" (list "reconciler" $rec.extraEnv) | trim }}{{ . | nindent 16 }}{{ end }}
              volumeMounts:
                {{- include "charge-outbox.configMount" $root | nindent 16 }}
          volumes:
            {{- include "charge-outbox.configVolume" (list $root "reconciler") | nindent 12 }}
{{- end -}}
