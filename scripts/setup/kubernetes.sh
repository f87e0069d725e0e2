#!/usr/bin/env bash
# Builds kube-apiserver, kube-controller-manager (for its garbage collector and namespace
# controller) and kubectl of $KUBERNETES_VERSION from the Go module proxy and
# installs etcd from Debian. k8s.io/kubernetes cannot be `go install`ed directly: its go.mod
# replaces the staging modules (k8s.io/api, ...) with local paths. A wrapper module requires
# k8s.io/kubernetes and replaces every staging module with its published v0.X.Y instead.
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"

bin="$SPARK_DLQ_CACHE/kubernetes/v$KUBERNETES_VERSION/bin"
if [[ -f "$bin/.complete-v2" ]]; then
  log "kube-apiserver, kube-controller-manager and kubectl $KUBERNETES_VERSION: cached in $bin"
else
  log "building kube-apiserver, kube-controller-manager and kubectl $KUBERNETES_VERSION (first run: several minutes)"
  work="$SPARK_DLQ_CACHE/kubernetes/v$KUBERNETES_VERSION/wrapper"
  mkdir -p "$work" "$bin"
  export GOPATH="$SPARK_DLQ_CACHE/go" GOMODCACHE="$SPARK_DLQ_CACHE/go/pkg/mod"
  export GOCACHE="$SPARK_DLQ_CACHE/go/cache" GOTOOLCHAIN="$GO_TOOLCHAIN" GOFLAGS=-mod=mod
  staging_minor="v0.${KUBERNETES_VERSION#1.}"
  cd "$work"
  # The upstream go.mod names every staging module in its replace block.
  upstream_mod="$(GOTOOLCHAIN=local go mod download -json "k8s.io/kubernetes@v$KUBERNETES_VERSION" \
    | python3 -c 'import json,sys; print(json.load(sys.stdin)["GoMod"])')"
  {
    echo "module sparkdlq.local/kubebuild"
    echo
    echo "go 1.22.0"
    echo
    echo "require k8s.io/kubernetes v$KUBERNETES_VERSION"
    echo
    grep -oE '^\s*k8s\.io/[a-z0-9-]+ => \./staging/src/k8s\.io/[a-z0-9-]+' "$upstream_mod" \
      | awk -v v="$staging_minor" '{print "replace " $1 " => " $1 " " v}'
  } > go.mod
  cat > tools.go <<'GO'
//go:build tools

package kubebuild

import (
	_ "k8s.io/kubernetes/cmd/kube-apiserver"
	_ "k8s.io/kubernetes/cmd/kube-controller-manager"
	_ "k8s.io/kubernetes/cmd/kubectl"
)
GO
  go mod tidy -e >/dev/null 2>&1 || true
  # Stamp the version the way Kubernetes' own build does, so clients see v1.30.x, not v0.0.0.
  pkg=k8s.io/component-base/version
  ldflags="-s -w -X $pkg.gitVersion=v$KUBERNETES_VERSION -X $pkg.gitMajor=1"
  ldflags+=" -X $pkg.gitMinor=$(cut -d. -f2 <<<"$KUBERNETES_VERSION") -X $pkg.gitTreeState=clean"
  ldflags+=" -X k8s.io/client-go/pkg/version.gitVersion=v$KUBERNETES_VERSION"
  go build -ldflags "$ldflags" -o "$bin/kube-apiserver" k8s.io/kubernetes/cmd/kube-apiserver
  go build -ldflags "$ldflags" -o "$bin/kube-controller-manager" k8s.io/kubernetes/cmd/kube-controller-manager
  go build -ldflags "$ldflags" -o "$bin/kubectl" k8s.io/kubernetes/cmd/kubectl
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
