{{/*
The spark-operator component: what the Kubeflow spark-operator's controller (installed with its
own chart) needs from this one to submit the policies' SparkApplications.
*/}}

{{- define "spark-dlq-operator.spark-operator.labels" -}}
{{ include "spark-dlq-operator.labels" . }}
app.kubernetes.io/component: spark-operator
{{- end -}}

{{/* The ClusterRole with Spark's NetworkPolicy per application, bound in each Spark namespace. */}}
{{- define "spark-dlq-operator.spark-operator.networkPolicyRoleName" -}}
{{- printf "%s-spark-network-policies" (include "spark-dlq-operator.fullname" .) | trunc 63 | trimSuffix "-" -}}
{{- end -}}
