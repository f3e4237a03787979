{{/* The release's full name, at most 63 characters. */}}
{{- define "custom-scheduler.fullname" -}}
{{- if contains .Chart.Name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name .Chart.Name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{/* The component label: scheduler or extender (anything else fails the render). */}}
{{- define "custom-scheduler.component" -}}
{{- if not (has .Values.mode (list "scheduler" "extender")) -}}
{{- fail (printf "mode must be scheduler or extender, not %q" .Values.mode) -}}
{{- end -}}
{{- .Values.mode -}}
{{- end -}}

{{- define "custom-scheduler.selectorLabels" -}}
app.kubernetes.io/name: {{ .Chart.Name }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/component: {{ include "custom-scheduler.component" . }}
{{- end -}}

{{- define "custom-scheduler.labels" -}}
{{ include "custom-scheduler.selectorLabels" . }}
app.kubernetes.io/part-of: custom-scheduler
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
{{- end -}}

{{- define "custom-scheduler.serviceAccountName" -}}
{{- default (include "custom-scheduler.fullname" .) .Values.serviceAccount.name -}}
{{- end -}}

{{/* The HTTP port: /metrics, /healthz, /readyz (and the extender's verbs). */}}
{{- define "custom-scheduler.port" -}}
{{- if eq .Values.mode "extender" -}}{{ .Values.extender.port }}{{- else -}}{{ .Values.metricsPort }}{{- end -}}
{{- end -}}

{{/* The Service: the release's name, with `-extender` in extender mode, so that a release
named custom-scheduler serves the address deploy/extender's kube-scheduler examples call. */}}
{{- define "custom-scheduler.serviceName" -}}
{{- if eq .Values.mode "extender" -}}
{{- printf "%s-extender" (include "custom-scheduler.fullname" .) | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- include "custom-scheduler.fullname" . -}}
{{- end -}}
{{- end -}}

{{/* The scheme of the HTTP port: the scheduler serves HTTPS (its secure port), the
extender plain HTTP unless it is given a certificate. */}}
{{- define "custom-scheduler.scheme" -}}
{{- if eq .Values.mode "scheduler" -}}HTTPS{{- else -}}HTTP{{- end -}}
{{- end -}}
