{{- define "corral.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "corral.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" -}}
{{- else if contains (include "corral.name" .) .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name (include "corral.name" .) | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{- define "corral.selectorLabels" -}}
app.kubernetes.io/name: {{ include "corral.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{- define "corral.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
{{ include "corral.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end -}}

{{/* The variables the chart sets itself; env may not set them too. */}}
{{- define "corral.reservedEnv" -}}
CORRAL_ADDR CORRAL_DATA_DIR CORRAL_TENANTS_FILE CORRAL_UPSTREAMS_FILE CORRAL_SHUTDOWN_TIMEOUT CORRAL_REDIS_URL CORRAL_REDIS_CLUSTER CORRAL_UPSTREAM_API_KEY CORRAL_ADMIN_TOKEN CORRAL_CONSOLE_SECURE_COOKIE
{{- end -}}

{{/* The pods' ServiceAccount: the chart's own when it makes one (named, or
the full name), else the one named ("" = the namespace's default). */}}
{{- define "corral.serviceAccountName" -}}
{{- if .Values.serviceAccount.create -}}
{{- default (include "corral.fullname" .) .Values.serviceAccount.name -}}
{{- else -}}
{{- .Values.serviceAccount.name -}}
{{- end -}}
{{- end -}}
