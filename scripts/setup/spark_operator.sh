#!/usr/bin/env bash
# The real Kubeflow spark-operator, from its Go module (github.com/kubeflow/spark-operator/v2 at
# $SPARK_OPERATOR_VERSION, served by the Go module proxy), into
# $SPARK_DLQ_CACHE/spark-operator/$SPARK_OPERATOR_VERSION/:
#   bin/spark-operator   built as its Makefile's build-operator target builds it (inside a
#                        writable copy of the module, so its go.mod's replace block applies)
#   chart/               its Helm chart (charts/spark-operator-chart, CRDs in chart/crds/)
#   crds/                its CustomResourceDefinitions (config/crd/bases)
#   entrypoint.sh        the entry point its own Dockerfile puts in its image
# and its image, localhost/spark-operator:$SPARK_OPERATOR_VERSION: our Spark base image (the
# spark-submit it runs) with the binary, tini and its entry point, as its Dockerfile does it.
# Nothing of the module is copied into this repository. Idempotent.
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"

out="$SPARK_DLQ_CACHE/spark-operator/$SPARK_OPERATOR_VERSION"
if [[ -f "$out/.complete" ]]; then
  log "spark-operator $SPARK_OPERATOR_VERSION: cached in $out"
else
  log "building the spark-operator $SPARK_OPERATOR_VERSION from its Go module (first run: several minutes)"
  export GOPATH="$SPARK_DLQ_CACHE/go" GOMODCACHE="$SPARK_DLQ_CACHE/go/pkg/mod"
  export GOCACHE="$SPARK_DLQ_CACHE/go/cache" GOFLAGS=-mod=mod
  module="github.com/kubeflow/spark-operator/v2@$SPARK_OPERATOR_VERSION"
  dir="$(GOTOOLCHAIN=local go mod download -json "$module" | python3 -c 'import json,sys; print(json.load(sys.stdin)["Dir"])')"
  rm -rf "$out"; mkdir -p "$out/bin"
  work="$(mktemp -d "$SPARK_DLQ_CACHE/spark-operator/build.XXXXXX")"
  cp -r "$dir/." "$work/"; chmod -R u+w "$work"
  pkg=k8s.io/component-base/version
  ldflags="-s -w -X $pkg.gitVersion=$SPARK_OPERATOR_VERSION -X $pkg.gitTreeState=clean"
  (cd "$work" && CGO_ENABLED=0 go build -trimpath -ldflags "$ldflags" -o "$out/bin/spark-operator" ./cmd/operator)
  cp -r "$dir/charts/spark-operator-chart" "$out/chart"
  cp -r "$dir/config/crd/bases" "$out/crds"
  cp "$dir/entrypoint.sh" "$out/entrypoint.sh"
  chmod -R u+w "$out"
  rm -rf "$work"
  touch "$out/.complete"
  log "built into $out"
fi

# --- its image: FROM our Spark base (scripts/setup/images.sh makes it) -------------------------------
source "$REPO_ROOT/scripts/images/podman.sh"
image="localhost/spark-operator:$SPARK_OPERATOR_VERSION"
manifest="$SPARK_DLQ_CACHE/images/manifest.json"
[[ -f "$manifest" ]] || { log "no $manifest: run scripts/setup/images.sh first (it makes the Spark base)"; exit 1; }
spark_base="$(python3 -c 'import json, sys; print(json.load(open(sys.argv[1]))["spark"])' "$manifest")"
label="$(cat "$out/bin/spark-operator" "$out/entrypoint.sh" "$REPO_ROOT/scripts/images/spark-operator.Containerfile" \
  | sha256sum | cut -c1-12)-$(podman image inspect --format '{{.Id}}' "$spark_base" | cut -c1-12)"
if [[ "$(podman image inspect --format '{{index .Labels "io.sparkdlq.inputs"}}' "$image" 2>/dev/null || true)" == "$label" ]]; then
  log "$image: cached"
else
  log "building $image"
  context="$out/image-context"
  rm -rf "$context"; mkdir -p "$context"
  cp "$out/bin/spark-operator" "$out/entrypoint.sh" "$context/"
  trust=()
  for bundle in /etc/ssl/certs/ca-certificates.crt /etc/ssl/certs/java/cacerts; do
    [[ -f "$bundle" ]] && trust+=(--volume "$bundle:$bundle:ro")
  done
  podman build "${trust[@]}" --label "io.sparkdlq.inputs=$label" --build-arg "SPARK_IMAGE=$spark_base" \
    -f "$REPO_ROOT/scripts/images/spark-operator.Containerfile" -t "$image" "$context" \
    >"$SPARK_DLQ_CACHE/images/logs/spark-operator.log" 2>&1 \
    || { tail -30 "$SPARK_DLQ_CACHE/images/logs/spark-operator.log" >&2; exit 1; }
fi
python3 - "$SPARK_DLQ_CACHE/images/manifest.json" "$image" <<'PY'
import json, sys
path, image = sys.argv[1], sys.argv[2]
names = json.load(open(path))
names["spark-operator"] = image
json.dump(names, open(path, "w"), indent=1)
PY
