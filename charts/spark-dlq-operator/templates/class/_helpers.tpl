{{/*
The DeadLetterPolicyClass the chart creates (defaultClass): its labels, and the spec from the
values, empty values left out so that the class reads like the operator's built-in one.
*/}}

{{- define "spark-dlq-operator.class.labels" -}}
{{ include "spark-dlq-operator.labels" . }}
app.kubernetes.io/component: class
{{- end -}}

{{/* The class's spec as YAML: each field only when set (sparkConf.allowed always: an empty list
allows no key). */}}
{{- define "spark-dlq-operator.class.spec" -}}
{{- $class := .Values.defaultClass -}}
{{- $spec := dict "sparkConf" (dict "allowed" $class.sparkConf.allowed) -}}
{{- range $key := list "namespaceSelector" "defaults" "brokers" "limits" -}}
{{- with index $class $key }}{{ $_ := set $spec $key . }}{{ end -}}
{{- end -}}
{{- with $class.sparkConf.fixed }}{{ $_ := set $spec.sparkConf "fixed" . }}{{ end -}}
{{- $images := dict -}}
{{- range $key, $value := $class.images }}{{ if $value }}{{ $_ := set $images $key $value }}{{ end }}{{ end -}}
{{- with $images }}{{ $_ := set $spec "images" . }}{{ end -}}
{{- $storage := dict -}}
{{- range $key, $value := $class.storage }}{{ if $value }}{{ $_ := set $storage $key $value }}{{ end }}{{ end -}}
{{- with $storage }}{{ $_ := set $spec "storage" . }}{{ end -}}
{{- $pods := dict -}}
{{- range $key, $value := $class.pods }}{{ if $value }}{{ $_ := set $pods $key $value }}{{ end }}{{ end -}}
{{- with $pods }}{{ $_ := set $spec "pods" . }}{{ end -}}
{{- toYaml $spec -}}
{{- end -}}
