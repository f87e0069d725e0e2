#!/usr/bin/env bash
# Builds kube-apiserver, kube-controller-manager (for its garbage collector and namespace
# controller) and kubectl of $KUBERNETES_VERSION from the Go module proxy (or only the commands
# given as arguments) and installs etcd from Debian (k8s_build.sh says how a Kubernetes command is
# built).
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"
source "$(dirname "${BASH_SOURCE[0]}")/k8s_build.sh"

bin="$SPARK_DLQ_CACHE/kubernetes/v$KUBERNETES_VERSION/bin"
# Arguments name the commands to build (scripts/setup.sh --demo: kube-apiserver kubectl); none, all three.
all=(kube-apiserver kube-controller-manager kubectl)
if (($#)); then wanted=("$@"); else wanted=("${all[@]}"); fi
missing=()
for cmd in "${wanted[@]}"; do
  [[ -f "$bin/.complete-v2" || -f "$bin/.built-$cmd" ]] || missing+=("$cmd")
done
if ((${#missing[@]} == 0)); then
  log "${wanted[*]} $KUBERNETES_VERSION: cached in $bin"
else
  # Cold on this project's 2 busy cores (2026-11-26): kube-apiserver 8.5 minutes, the Go toolchain
  # and the modules' download included, then kube-controller-manager 4 and kubectl 1.5.
  log "building ${missing[*]} $KUBERNETES_VERSION from the Go module proxy" \
    "(first run: about 10 minutes for kube-apiserver and kubectl, 4 more for kube-controller-manager)"
  k8s_build "$SPARK_DLQ_CACHE/kubernetes/v$KUBERNETES_VERSION/wrapper" "$bin" "${missing[@]}"
  for cmd in "${missing[@]}"; do touch "$bin/.built-$cmd"; done
  if [[ -f "$bin/.built-kube-apiserver" && -f "$bin/.built-kube-controller-manager" && -f "$bin/.built-kubectl" ]]; then
    touch "$bin/.complete-v2"
  fi
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
