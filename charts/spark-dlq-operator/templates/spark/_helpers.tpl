{{/*
The Spark component: the ClusterRole a policy's Spark driver is bound to (the operator binds it
to each policy's service account, in the policy's namespace), and the shared service account
when the platform names one.
*/}}

{{- define "spark-dlq-operator.spark.labels" -}}
{{ include "spark-dlq-operator.labels" . }}
app.kubernetes.io/component: spark
{{- end -}}

{{/* A shared service account for every policy's Spark pods (the operator's
--spark-service-account), or "" for one per policy, made by the operator. */}}
{{- define "spark-dlq-operator.spark.serviceAccountName" -}}
{{- if and .Values.spark.serviceAccount.annotations (not .Values.spark.serviceAccount.name) -}}
{{- fail "spark.serviceAccount.annotations are put on a shared service account: set spark.serviceAccount.name (and create) to keep one, or leave them out (each policy's own service account gets none)" -}}
{{- end -}}
{{- if and .Values.spark.serviceAccount.create (not .Values.spark.serviceAccount.name) -}}
{{- fail "spark.serviceAccount.create makes a shared service account: set spark.serviceAccount.name, or leave create false (each policy gets its own, made by the operator)" -}}
{{- end -}}
{{- .Values.spark.serviceAccount.name -}}
{{- end -}}

{{/* The ClusterRole with what a Spark driver needs for its executors (the operator's
--spark-driver-cluster-role, which it may bind and nothing else). */}}
{{- define "spark-dlq-operator.spark.clusterRoleName" -}}
{{- if .Values.spark.rbac.create -}}
{{- .Values.spark.rbac.clusterRoleName | default (printf "%s-spark-driver" (include "spark-dlq-operator.fullname" .) | trunc 63 | trimSuffix "-") -}}
{{- else -}}
{{- required "spark.rbac.clusterRoleName is required when spark.rbac.create is false: an existing ClusterRole with what a Spark driver needs (operator/README.md)" .Values.spark.rbac.clusterRoleName -}}
{{- end -}}
{{- end -}}

{{/* spark.namespaces, else the watched namespaces, else the release namespace; as JSON. */}}
{{- define "spark-dlq-operator.spark.namespaces" -}}
{{- $watched := include "spark-dlq-operator.watchedNamespaces" . | fromJsonArray -}}
{{- toJson (.Values.spark.namespaces | default $watched | default (list .Release.Namespace) | uniq) -}}
{{- end -}}
