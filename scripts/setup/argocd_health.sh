#!/usr/bin/env bash
# Builds devtools/argocd-health, a small program that computes resource health with Argo CD's
# own code (its settings parser and its Lua health environment, from the argo-cd Go module at
# the version devtools/argocd-health/go.mod pins), into
# $SPARK_DLQ_CACHE/tools/argocd-health/<hash of its sources>/. The Argo CD health tests run the
# project's health checks (deploy/argocd) through it. Idempotent.
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"

src="$REPO_ROOT/devtools/argocd-health"
key="$(cat "$src/go.mod" "$src/go.sum" "$src"/*.go | sha256sum | cut -c1-12)"
out="$SPARK_DLQ_CACHE/tools/argocd-health/$key"
if [[ -f "$out/.complete" ]]; then
  log "argocd-health: cached in $out"
  exit 0
fi
argocd="$(awk '$1 == "github.com/argoproj/argo-cd/v3" {print $2; exit}' "$src/go.mod")"
log "building argocd-health on Argo CD $argocd (first run: several minutes)"
mkdir -p "$out"
export GOPATH="$SPARK_DLQ_CACHE/go" GOMODCACHE="$SPARK_DLQ_CACHE/go/pkg/mod"
export GOCACHE="$SPARK_DLQ_CACHE/go/cache" GOFLAGS=-mod=readonly
(cd "$src" && CGO_ENABLED=0 go build -trimpath -ldflags "-s -w" -o "$out/argocd-health" .)
touch "$out/.complete"
log "built into $out"
