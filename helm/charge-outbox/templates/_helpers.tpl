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

{{/* DATABASE_URL, from the Secret only. */}}
{{- define "charge-outbox.databaseEnv" -}}
- name: DATABASE_URL
  valueFrom:
    secretKeyRef:
      name: {{ .Values.global.databaseSecret.name }}
      key: {{ .Values.global.databaseSecret.key }}
{{- end -}}

{{/* The acquirer charge-api and the reconciler call: its URL, and its API key from the Secret only. */}}
{{- define "charge-outbox.acquirerEnv" -}}
- name: ACQUIRER_URL
  value: {{ required "global.acquirer.url is required (the card acquirer's base URL)" .Values.global.acquirer.url | quote }}
- name: ACQUIRER_API_KEY
  valueFrom:
    secretKeyRef:
      name: {{ .Values.global.acquirer.apiKeySecret.name }}
      key: {{ .Values.global.acquirer.apiKeySecret.key }}
{{- end -}}
