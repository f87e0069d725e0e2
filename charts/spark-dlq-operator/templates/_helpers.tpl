{{/*
Helpers shared by every component. Component helpers live next to their templates
(templates/<component>/_helpers.tpl) and are named spark-dlq-operator.<component>.<thing>.
*/}}

{{/* The chart name, or nameOverride. */}}
{{- define "spark-dlq-operator.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/* The release's full name: fullnameOverride, or <release>-<name> unless the release name
already contains the name. Truncated to 63 characters (a DNS label). */}}
{{- define "spark-dlq-operator.fullname" -}}
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

{{/* chart-version, for the helm.sh/chart label. */}}
{{- define "spark-dlq-operator.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/* The labels every object carries. */}}
{{- define "spark-dlq-operator.labels" -}}
helm.sh/chart: {{ include "spark-dlq-operator.chart" . }}
{{ include "spark-dlq-operator.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: spark-dlq
{{- with .Values.commonLabels }}
{{ toYaml . }}
{{- end }}
{{- end -}}

{{/* The labels that select the release's objects. */}}
{{- define "spark-dlq-operator.selectorLabels" -}}
app.kubernetes.io/name: {{ include "spark-dlq-operator.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{/* A list of namespaces as JSON (fromJsonArray turns it back): the watched namespaces, the
release namespace when none is given. Empty ([]) when the operator watches all namespaces. */}}
{{- define "spark-dlq-operator.watchedNamespaces" -}}
{{- if .Values.operator.watch.allNamespaces -}}
[]
{{- else -}}
{{- toJson (.Values.operator.watch.namespaces | default (list .Release.Namespace) | uniq) -}}
{{- end -}}
{{- end -}}

{{/* Whether kopf peering is on: more than one operator replica. "true" or "". */}}
{{- define "spark-dlq-operator.peering" -}}
{{- if gt (int .Values.operator.replicas) 1 -}}true{{- end -}}
{{- end -}}

{{/* The provisioner given to the operator: topics.provisioner, else strimzi when the strimzi
RBAC is enabled, else admin. Fails when strimzi is asked for without its RBAC. */}}
{{- define "spark-dlq-operator.provisioner" -}}
{{- $choice := .Values.topics.provisioner | default (ternary "strimzi" "admin" .Values.topics.strimzi.enabled) -}}
{{- if and (eq $choice "strimzi") (not .Values.topics.strimzi.enabled) -}}
{{- fail "topics.provisioner is strimzi: set topics.strimzi.enabled=true (and topics.strimzi.namespaces) so the operator may write KafkaTopics" -}}
{{- end -}}
{{- $choice -}}
{{- end -}}

{{/* An image reference, [registry/]repository:tag[@digest], from an image value (registry,
repository, tag, digest): the registry defaults to global.imageRegistry, the tag to the chart's
appVersion. Call with (dict "image" .Values.image "root" .). */}}
{{- define "spark-dlq-operator.image" -}}
{{- $registry := .image.registry | default (.root.Values.global).imageRegistry | default "" | trimSuffix "/" -}}
{{- $ref := .image.repository -}}
{{- if $registry -}}
{{- $ref = printf "%s/%s" $registry $ref -}}
{{- end -}}
{{- $ref = printf "%s:%s" $ref (.image.tag | default .root.Chart.AppVersion) -}}
{{- if .image.digest -}}
{{- $ref = printf "%s@%s" $ref .image.digest -}}
{{- end -}}
{{- $ref -}}
{{- end -}}
