#!/usr/bin/env bash
# Builds kube-apiserver, kube-controller-manager (for its garbage collector and namespace
# controller) and kubectl of $KUBERNETES_VERSION from the Go module proxy and
# installs etcd from Debian (k8s_build.sh says how a Kubernetes command is built).
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"
source "$(dirname "${BASH_SOURCE[0]}")/k8s_build.sh"

bin="$SPARK_DLQ_CACHE/kubernetes/v$KUBERNETES_VERSION/bin"
if [[ -f "$bin/.complete-v2" ]]; then
  log "kube-apiserver, kube-controller-manager and kubectl $KUBERNETES_VERSION: cached in $bin"
else
  log "building kube-apiserver, kube-controller-manager and kubectl $KUBERNETES_VERSION (first run: several minutes)"
  k8s_build "$SPARK_DLQ_CACHE/kubernetes/v$KUBERNETES_VERSION/wrapper" "$bin" \
    kube-apiserver kube-controller-manager kubectl
  touch "$bin/.complete-v2"
  log "built into $bin"
fi

if ! command -v etcd >/dev/null 2>&1; then
  log "installing etcd-server $ETCD_DEBIAN_VERSION from Debian"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq >/dev/null || true
  apt-get install -y -qq --no-install-recommends "etcd-server=$ETCD_DEBIAN_VERSION" >/dev/null
  # The Debian package starts a system etcd on 2379; the test bed runs its own.
  (systemctl stop etcd 2>/dev/null || service etcd stop 2>/dev/null || pkill -x etcd) >/dev/null 2>&1 || true
fi
log "etcd: $(etcd --version 2>/dev/null | head -1)"
