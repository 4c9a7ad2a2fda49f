{{/* Name of the chart, or nameOverride. */}}
{{- define "kshard.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/* Full name of the release's resources. */}}
{{- define "kshard.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- $name := default .Chart.Name .Values.nameOverride -}}
{{- if contains $name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{/* Labels every resource carries. */}}
{{- define "kshard.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
app.kubernetes.io/name: {{ include "kshard.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: kshard
{{- end -}}

{{/* Selector labels of the operator pods. */}}
{{- define "kshard.selectorLabels" -}}
app.kubernetes.io/name: {{ include "kshard.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/component: operator
{{- end -}}

{{/* The operator's ServiceAccount. */}}
{{- define "kshard.serviceAccountName" -}}
{{- if .Values.serviceAccount.create -}}
{{- default (include "kshard.fullname" .) .Values.serviceAccount.name -}}
{{- else -}}
{{- default "default" .Values.serviceAccount.name -}}
{{- end -}}
{{- end -}}

{{/* Service the API server calls for the webhook. */}}
{{- define "kshard.webhookService" -}}
{{- printf "%s-webhook" (include "kshard.fullname" .) -}}
{{- end -}}

{{/* Secret with the webhook's serving certificate (and its CA). */}}
{{- define "kshard.webhookSecret" -}}
{{- printf "%s-webhook-tls" (include "kshard.fullname" .) -}}
{{- end -}}

{{/* ClusterRole granted to sidecars (read and watch ShardMaps). */}}
{{- define "kshard.sidecarClusterRole" -}}
kshard-sidecar
{{- end -}}
