#!/usr/bin/env bash
# Sets up what spark-dlq's tests or its demo need, into $SPARK_DLQ_CACHE (default
# ~/.cache/spark-dlq). Prints the virtualenv's path on stdout.
#
#   scripts/setup.sh                     everything the test suite needs (scripts/test.sh)
#   scripts/setup.sh --demo [DEMO ARGS]  only what `spark-dlq-dev demo DEMO ARGS` runs
#                                        (scripts/demo.sh): the Python environment, Kafka's and
#                                        Spark's jars, the engine's jar, kube-apiserver,
#                                        kubectl and etcd, the SparkApplication CRD; with
#                                        --broker pulsar a Pulsar
#                                        broker; with --monitor or --dashboard Prometheus
#
# Everything: the Python environment, the Kafka broker and Spark connector jars from Maven
# Central, a standalone Apache Pulsar broker from Maven Central, the engine's jar (javac), the
# Java interop programs and benchmark peers, kube-apiserver, kubectl and helm built from the Go
# module proxy, etcd from Debian, devtools/argocd-health (Argo CD's own health code, from its Go
# module), Strimzi's KafkaTopic CRDs (its own generator, from Maven Central), the test bed's
# Kubernetes node (kubelet, kube-proxy, kube-scheduler, CoreDNS, crictl from the Go module proxy;
# containerd, runc, the CNI plugins from Debian; its images made here), Prometheus and promtool
# (from the Go module proxy), the project's container images (podman, on bases made from
# Debian's packages), the Kubeflow spark-operator (its Go module: binary, chart, CRDs, and its
# image on our Spark base), and the release's tools (build, pip-tools, cyclonedx-py, syft).
# Idempotent: a second run only re-installs this checkout into the cached environment. Every
# step that takes longer than a few seconds says what it builds and about how long the first
# time, and when it is done how long it took.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
start=$SECONDS

log() { printf '[setup] %s\n' "$*" >&2; }

# step SCRIPT ARGS...: one set-up step, and its time when it was not a cached one.
step() {
  local began=$SECONDS took
  bash "$here/setup/$1" "${@:2}"
  took=$((SECONDS - began))
  if ((took >= 10)); then log "  ${1%.sh} took $((took / 60))m$((took % 60))s"; fi
}

profile=all pulsar=false prometheus=false
if [[ "${1:-}" == --demo ]]; then
  profile=demo
  shift
  # The demo's own options that need more than its Kafka story (spark_dlq_devtools.cli).
  while (($#)); do
    case "$1" in
      --broker=pulsar) pulsar=true ;;
      --broker) [[ "${2:-}" == pulsar ]] && pulsar=true ;;
      --monitor | --dashboard | --dashboard=*) prometheus=true ;;
    esac
    shift
  done
elif (($#)); then
  log "usage: scripts/setup.sh [--demo [DEMO ARGS]]"
  exit 2
fi

if [[ "$profile" == demo ]]; then
  # Cold on this project's 2 busy cores: about 1.5 + 1 + 10.5 minutes for the three long steps
  # (the venv, the jars, kube-apiserver and kubectl; README, "Two commands"); Pulsar adds about 2,
  # Prometheus about 16.
  log "the demo's set-up: the Python environment, Kafka's and Spark's jars, the engine's jar," \
    "kube-apiserver and kubectl$($pulsar && echo ', Pulsar')$($prometheus && echo ', Prometheus')" \
    "(first run: about 14 minutes; then seconds)"
  began=$SECONDS
  venv="$(bash "$here/setup/python.sh")"
  took=$((SECONDS - began))
  if ((took >= 10)); then log "  python took $((took / 60))m$((took % 60))s"; fi
  step jars.sh
  if $pulsar; then step pulsar.sh; fi
  step engine_jar.sh
  step kubernetes.sh kube-apiserver kubectl
  step spark_operator.sh --crds
  if $prometheus; then step prometheus.sh; fi
else
  began=$SECONDS
  venv="$(bash "$here/setup/python.sh")"
  took=$((SECONDS - began))
  if ((took >= 10)); then log "  python took $((took / 60))m$((took % 60))s"; fi
  step jars.sh
  step pulsar.sh
  step engine_jar.sh
  step spark_archive.sh
  step java_programs.sh
  step kubernetes.sh
  step helm.sh
  step argocd_health.sh
  step strimzi.sh
  step node.sh
  step prometheus.sh
  step images.sh
  step spark_operator.sh --image
  # The release's tools: the tests check the artefacts `make dist` makes (tests/integration/test_dist.py).
  began=$SECONDS
  bash "$here/setup/release_tools.sh" >/dev/null
  took=$((SECONDS - began))
  if ((took >= 10)); then log "  release_tools took $((took / 60))m$((took % 60))s"; fi
fi
log "ready in $((SECONDS - start))s (venv $venv)"
echo "$venv"
