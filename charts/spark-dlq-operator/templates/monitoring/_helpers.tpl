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

{{/* A runbook's absolute URL: the base, then the alert's page. The base is
monitoring.prometheusRule.runbookBaseUrl, else the runbooks of the chart's own version in the
project's repository, which a release stamps into Chart.yaml (annotation
spark-dlq.io/runbooks; docs/release.md); a chart without either fails, naming the value. */}}
{{- define "spark-dlq-operator.monitoring.runbook" -}}
{{- $base := .root.Values.monitoring.prometheusRule.runbookBaseUrl | default (index (.root.Chart.Annotations | default dict) "spark-dlq.io/runbooks") -}}
{{- if not $base -}}
{{- fail "monitoring.prometheusRule.runbookBaseUrl: set the absolute URL of your copy of docs/runbooks (this chart was not packaged by a release, which names the project's own)" -}}
{{- end -}}
{{- printf "%s/%s.md" ($base | trimSuffix "/") .alert -}}
{{- end -}}

{{/* A policy's series with `namespace` taken from its `policy` label (namespace/name), so that
an alert on it routes by namespace; the scrape's own `namespace` (the operator's, for its
series) is replaced. */}}
{{- define "spark-dlq-operator.monitoring.byNamespace" -}}
{{- printf "label_replace(%s, \"namespace\", \"$1\", \"policy\", \"([^/]+)/.+\")" . -}}
{{- end -}}
