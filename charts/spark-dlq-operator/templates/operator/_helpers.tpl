{{/*
The operator component: its names, labels, image, and the RBAC rules it needs. The rules are
operator/README.md's RBAC block, split by where they apply; tests/unit/test_chart_rbac.py
checks that the rendered chart grants exactly them.
*/}}

{{- define "spark-dlq-operator.operator.name" -}}
{{- include "spark-dlq-operator.fullname" . -}}
{{- end -}}

{{- define "spark-dlq-operator.operator.labels" -}}
{{ include "spark-dlq-operator.labels" . }}
app.kubernetes.io/component: operator
{{- end -}}

{{- define "spark-dlq-operator.operator.selectorLabels" -}}
{{ include "spark-dlq-operator.selectorLabels" . }}
app.kubernetes.io/component: operator
{{- end -}}

{{- define "spark-dlq-operator.operator.serviceAccountName" -}}
{{- if .Values.operator.serviceAccount.create -}}
{{- .Values.operator.serviceAccount.name | default (include "spark-dlq-operator.operator.name" .) -}}
{{- else -}}
{{- required "operator.serviceAccount.name is required when operator.serviceAccount.create is false" .Values.operator.serviceAccount.name -}}
{{- end -}}
{{- end -}}

{{- define "spark-dlq-operator.operator.image" -}}
{{- printf "%s:%s" .Values.image.repository (.Values.image.tag | default .Chart.AppVersion) -}}
{{- end -}}

{{- define "spark-dlq-operator.operator.peeringName" -}}
{{- .Values.operator.peering.name | default (include "spark-dlq-operator.operator.name" .) -}}
{{- end -}}

{{/* Cluster-wide: one ClusterRole. Namespaced: a Role per watched namespace, and a small
ClusterRole for what kopf reads cluster-wide. */}}
{{- define "spark-dlq-operator.operator.clusterRoleName" -}}
{{- if .Values.operator.watch.allNamespaces -}}
{{- include "spark-dlq-operator.operator.name" . -}}
{{- else -}}
{{- printf "%s-scanning" (include "spark-dlq-operator.operator.name" .) | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{- define "spark-dlq-operator.operator.roleName" -}}
{{- include "spark-dlq-operator.operator.name" . -}}
{{- end -}}

{{/* Rules on the policies and what the operator creates for them: a ClusterRole's rules when
cluster-wide, each watched namespace's Role otherwise. */}}
{{- define "spark-dlq-operator.operator.policyRules" -}}
# The policies: kopf watches them, keeps its state in their annotations, adds or removes its
# finalizer; the operator writes their status.
- apiGroups: [sparkdlq.io]
  resources: [deadletterpolicies]
  verbs: [get, list, watch, patch]
- apiGroups: [sparkdlq.io]
  resources: [deadletterpolicies/status]
  verbs: [get, patch]
# Owner references with blockOwnerDeletion (OwnerReferencesPermissionEnforcement).
- apiGroups: [sparkdlq.io]
  resources: [deadletterpolicies/finalizers]
  verbs: [update]
# The redrives: the operator watches them, writes their status, and reads their drivers'
# pods for the final counts (the termination message).
- apiGroups: [sparkdlq.io]
  resources: [deadletterredrives]
  verbs: [get, list, watch, patch]
- apiGroups: [sparkdlq.io]
  resources: [deadletterredrives/status]
  verbs: [get, patch]
- apiGroups: [sparkdlq.io]
  resources: [deadletterredrives/finalizers]
  verbs: [update]
- apiGroups: [""]
  resources: [pods]
  verbs: [get]
# What the operator creates for a policy: the ConfigMap P-policy (the resync lists them by
# label) and the SparkApplication P (patched to resubmit it); for a redrive R, R-redrive of each.
- apiGroups: [""]
  resources: [configmaps]
  verbs: [get, list, create, patch]
- apiGroups: [sparkoperator.k8s.io]
  resources: [sparkapplications]
  verbs: [get, list, watch, create, update, patch, delete]
# Events on the policies (the operator's and kopf's).
- apiGroups: [""]
  resources: [events]
  verbs: [create]
# The Spark pods' identity, per policy: their service account, the Lease the driver writes its
# heartbeat on (the resync lists them), a Role on that Lease alone (the operator holds every
# right it grants: get, update, patch) and the bindings of the account to it and to the
# drivers' ClusterRole, which the operator may bind and nothing more.
- apiGroups: [""]
  resources: [serviceaccounts]
  verbs: [get, create, patch]
- apiGroups: [coordination.k8s.io]
  resources: [leases]
  verbs: [get, list, create, update, patch]
- apiGroups: [rbac.authorization.k8s.io]
  resources: [roles, rolebindings]
  verbs: [get, create, patch]
- apiGroups: [rbac.authorization.k8s.io]
  resources: [clusterroles]
  resourceNames: [{{ include "spark-dlq-operator.spark.clusterRoleName" . }}]
  verbs: [bind]
{{- end -}}

{{/* The DeadLetterPolicyClasses (cluster-scoped): listed and watched, never written; and the
labels of a policy's namespace, for a class's namespaceSelector. Whatever the operator watches. */}}
{{- define "spark-dlq-operator.operator.classRules" -}}
- apiGroups: [sparkdlq.io]
  resources: [deadletterpolicyclasses]
  verbs: [list, watch]
- apiGroups: [""]
  resources: [namespaces]
  verbs: [get]
{{- end -}}

{{/* The Secrets in the release namespace that classes name as the operator's credentials for a
broker (operatorSecretRef): the chart's class's, and operator.rbac.classSecretNames. JSON. */}}
{{- define "spark-dlq-operator.operator.classSecrets" -}}
{{- $names := list -}}
{{- if .Values.defaultClass.create -}}
{{- range .Values.defaultClass.brokers -}}
{{- with .operatorSecretRef }}{{ $names = append $names .name }}{{ end -}}
{{- end -}}
{{- end -}}
{{- toJson (concat $names .Values.operator.rbac.classSecretNames | uniq) -}}
{{- end -}}

{{/* What kopf reads cluster-wide: CRDs coming and going (always), and namespaces coming and
going (only when it watches a list of namespaces: cluster-wide it does not look at them). */}}
{{- define "spark-dlq-operator.operator.scanningRules" -}}
- apiGroups: [apiextensions.k8s.io]
  resources: [customresourcedefinitions]
  verbs: [list, watch]
{{- if not .Values.operator.watch.allNamespaces }}
- apiGroups: [""]
  resources: [namespaces]
  verbs: [list, watch]
{{- end }}
{{- end -}}

{{/* kopf peering (replicas > 1): the ClusterKopfPeering cluster-wide, KopfPeerings otherwise. */}}
{{- define "spark-dlq-operator.operator.peeringRules" -}}
{{- if include "spark-dlq-operator.peering" . -}}
# kopf peering: the replicas find each other in the peering object and patch it.
- apiGroups: [kopf.dev]
  resources: [{{ ternary "clusterkopfpeerings" "kopfpeerings" .Values.operator.watch.allNamespaces }}]
  verbs: [get, list, watch, patch]
{{- end -}}
{{- end -}}
