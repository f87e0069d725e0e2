#!/usr/bin/env bash
# Builds helm $HELM_VERSION from the Go module proxy (`go install helm.sh/helm/v3/cmd/helm@...`)
# into $SPARK_DLQ_CACHE/helm/$HELM_VERSION/bin, for the chart's tests (lint, template). Stamped
# the way helm's own Makefile does: its version, and the Kubernetes version of its client-go as
# the default .Capabilities.KubeVersion. Built with $GO_TOOLCHAIN, which Go fetches from the
# proxy too. Idempotent: a second run only says where it is.
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"

build() {  # build OUT
  local bin="$1"
  log "building helm $HELM_VERSION (first run: a few minutes)"
  go_env "$GO_TOOLCHAIN" -mod=mod
  # The Kubernetes minor helm reports by default follows the client-go it is built with (v0.31.x -> 1.31).
  local helm_mod k8s_minor ldflags pkg
  helm_mod="$(GOTOOLCHAIN=local go mod download -json "helm.sh/helm/v3@$HELM_VERSION" \
    | python3 -c 'import json,sys; print(json.load(sys.stdin)["GoMod"])')"
  k8s_minor="$(awk '$1 == "k8s.io/client-go" {split($2, v, "."); print v[2]; exit}' "$helm_mod")"
  ldflags="-s -w -X helm.sh/helm/v3/internal/version.version=$HELM_VERSION"
  ldflags+=" -X helm.sh/helm/v3/internal/version.gitTreeState=clean"
  for pkg in helm.sh/helm/v3/pkg/chartutil helm.sh/helm/v3/pkg/lint/rules; do
    ldflags+=" -X $pkg.k8sVersionMajor=1 -X $pkg.k8sVersionMinor=$k8s_minor"
  done
  GOBIN="$bin" CGO_ENABLED=0 go install -ldflags "$ldflags" "helm.sh/helm/v3/cmd/helm@$HELM_VERSION"
  "$bin/helm" version --short >&2
}
cached_step "$SPARK_DLQ_CACHE/helm/$HELM_VERSION/bin" "helm $HELM_VERSION" build
