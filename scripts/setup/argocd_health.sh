#!/usr/bin/env bash
# Builds devtools/argocd-health, a small program that computes resource health with Argo CD's
# own code (its settings parser and its Lua health environment, from the argo-cd Go module at
# the version devtools/argocd-health/go.mod pins), into
# $SPARK_DLQ_CACHE/tools/argocd-health/<key of its sources>/. The Argo CD health tests run the
# project's health checks (deploy/argocd) through it. Idempotent.
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"

src="$REPO_ROOT/devtools/argocd-health"
build() {  # build OUT
  local argocd
  argocd="$(awk '$1 == "github.com/argoproj/argo-cd/v3" {print $2; exit}' "$src/go.mod")"
  log "building argocd-health on Argo CD $argocd (first run: several minutes)"
  go_env "" -mod=readonly
  (cd "$src" && CGO_ENABLED=0 go build -trimpath -ldflags "-s -w" -o "$1/argocd-health" .)
}
out="$SPARK_DLQ_CACHE/tools/argocd-health/$(cache_key argocd-health "$src")"
cached_step "$out" argocd-health build
