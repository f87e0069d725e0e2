{{/*
The Spark component: the service account the SparkApplications' drivers run as, and its Role,
in every namespace where policies run.
*/}}

{{- define "spark-dlq-operator.spark.labels" -}}
{{ include "spark-dlq-operator.labels" . }}
app.kubernetes.io/component: spark
{{- end -}}

{{/* The driver's service account: the operator's --spark-service-account. */}}
{{- define "spark-dlq-operator.spark.serviceAccountName" -}}
{{- required "spark.serviceAccount.name is required: the service account the Spark drivers run as" .Values.spark.serviceAccount.name -}}
{{- end -}}

{{- define "spark-dlq-operator.spark.roleName" -}}
{{- printf "%s-spark-driver" (include "spark-dlq-operator.fullname" .) | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/* spark.namespaces, else the watched namespaces, else the release namespace; as JSON. */}}
{{- define "spark-dlq-operator.spark.namespaces" -}}
{{- $watched := include "spark-dlq-operator.watchedNamespaces" . | fromJsonArray -}}
{{- toJson (.Values.spark.namespaces | default $watched | default (list .Release.Namespace) | uniq) -}}
{{- end -}}
