#!/usr/bin/env bash
# Sets up everything spark-dlq's demo and tests need, into $SPARK_DLQ_CACHE (default
# ~/.cache/spark-dlq): the Python environment, the Kafka broker and Spark connector jars from
# Maven Central, a standalone Apache Pulsar broker from Maven Central, the engine's jar (javac), kube-apiserver, kubectl and helm built from the Go
# module proxy, etcd from Debian, devtools/argocd-health (Argo CD's own health code, from its Go
# module), Strimzi's KafkaTopic CRDs (its own generator, from Maven Central), the test bed's Kubernetes node (kubelet, kube-proxy, kube-scheduler, CoreDNS,
# crictl from the Go module proxy; containerd, runc, the CNI plugins from Debian; its images
# made here), Prometheus and promtool (from the Go module proxy), the project's container
# images (podman, on bases made from Debian's packages), and the Kubeflow spark-operator (its Go
# module: binary, chart, CRDs, and its image on our Spark base).
# Idempotent: a second run only re-installs this checkout into the cached environment.
# Prints the virtualenv's path on stdout.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
start=$SECONDS
venv="$(bash "$here/setup/python.sh")"
bash "$here/setup/jars.sh"
bash "$here/setup/pulsar.sh"
bash "$here/setup/engine_jar.sh"
bash "$here/setup/spark_archive.sh"
bash "$here/setup/java_programs.sh"
bash "$here/setup/kubernetes.sh"
bash "$here/setup/helm.sh"
bash "$here/setup/argocd_health.sh"
bash "$here/setup/strimzi.sh"
bash "$here/setup/node.sh"
bash "$here/setup/prometheus.sh"
bash "$here/setup/images.sh"
bash "$here/setup/spark_operator.sh" --image
printf '[setup] ready in %ss (venv %s)\n' "$((SECONDS - start))" "$venv" >&2
echo "$venv"
