{{/*
The monitoring component: how Prometheus finds the operator's and the Spark drivers' metrics
(a Service and ServiceMonitor for the operator, a PodMonitor for the drivers), the alert rules
and the Grafana dashboard. docs/monitoring.md lists the metrics; docs/runbooks/ has a page per
alert.
*/}}

{{- define "spark-dlq-operator.monitoring.labels" -}}
{{ include "spark-dlq-operator.labels" . }}
app.kubernetes.io/component: monitoring
{{- end -}}

{{- define "spark-dlq-operator.monitoring.serviceName" -}}
{{- printf "%s-metrics" (include "spark-dlq-operator.fullname" .) | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/* A runbook's URL: the base, then the alert's page. */}}
{{- define "spark-dlq-operator.monitoring.runbook" -}}
{{- printf "%s/%s.md" (.root.Values.monitoring.prometheusRule.runbookBaseUrl | trimSuffix "/") .alert -}}
{{- end -}}
