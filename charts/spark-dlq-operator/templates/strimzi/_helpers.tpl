{{/*
The strimzi component: the operator's rights on KafkaTopics, only in the Kafka clusters'
namespaces and only when the strimzi provisioner is enabled.
*/}}

{{- define "spark-dlq-operator.strimzi.roleName" -}}
{{- printf "%s-kafkatopics" (include "spark-dlq-operator.fullname" .) | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "spark-dlq-operator.strimzi.labels" -}}
{{ include "spark-dlq-operator.labels" . }}
app.kubernetes.io/component: strimzi
{{- end -}}
