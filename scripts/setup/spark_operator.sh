#!/usr/bin/env bash
# The real Kubeflow spark-operator, from its Go module (github.com/kubeflow/spark-operator/v2 at
# $SPARK_OPERATOR_VERSION, served by the Go module proxy), into
# $SPARK_DLQ_CACHE/spark-operator/$SPARK_OPERATOR_VERSION/:
#   bin/spark-operator   built as its Makefile's build-operator target builds it (CGO off, inside a
#                        writable copy of the module, so its go.mod's replace block applies), with
#                        the Go release its go.mod names (GOTOOLCHAIN; Go fetches it from the proxy)
#   chart/               its Helm chart (charts/spark-operator-chart, CRDs in chart/crds/)
#   crds/                its CustomResourceDefinitions (config/crd/bases)
#   entrypoint.sh        the entry point its own Dockerfile puts in its image
# and, on their own, its CRDs into $SPARK_DLQ_CACHE/spark-operator/$SPARK_OPERATOR_VERSION-crds/
# (the module's download only, seconds): every test and the demo install them, and --crds stops
# there (scripts/setup.sh --demo: the demo needs the SparkApplication CRD, not the binary).
# The test bed runs the binary as host processes (spark_dlq_devtools.spark_operator). With
# --image it also builds its image,
# localhost/spark-operator:$SPARK_OPERATOR_VERSION: our Spark base image (the spark-submit it
# runs) with the binary, tini and its entry point, as its Dockerfile does it (needs the base
# that scripts/setup/images.sh makes). Nothing of the module is copied into this repository.
# Idempotent; progress on stderr.
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"

module="github.com/kubeflow/spark-operator/v2@$SPARK_OPERATOR_VERSION"
go_env
module_dir() { GOTOOLCHAIN=local go mod download -json "$module" | python3 -c 'import json,sys; print(json.load(sys.stdin)["Dir"])'; }

# --- its CRDs (config/crd/bases of the module) ------------------------------------------------------
crds() {  # crds OUT
  log "fetching the spark-operator $SPARK_OPERATOR_VERSION's CRDs from its Go module (seconds)"
  local dir
  dir="$(module_dir)"
  cp "$dir"/config/crd/bases/*.yaml "$1/"
  chmod -R u+w "$1"
}
cached_step "$SPARK_DLQ_CACHE/spark-operator/$SPARK_OPERATOR_VERSION-crds" \
  "spark-operator $SPARK_OPERATOR_VERSION CRDs" crds
[[ "${1:-}" == --crds ]] && exit 0

# --- its binary, chart and entry point -------------------------------------------------------------
out="$SPARK_DLQ_CACHE/spark-operator/$SPARK_OPERATOR_VERSION"
build() {  # build OUT
  local stage="$1"
  log "building the spark-operator $SPARK_OPERATOR_VERSION from its Go module (first run: about 3 minutes)"
  go_env "" -mod=mod
  local dir go_release
  dir="$(module_dir)"
  # The Go release the module asks for: its toolchain line, else its go line (go 1.24.10).
  go_release="$(awk '$1 == "toolchain" {print $2; exit}' "$dir/go.mod")"
  [[ -n "$go_release" ]] || go_release="go$(awk '$1 == "go" {print $2; exit}' "$dir/go.mod")"
  log "  with $go_release (GOTOOLCHAIN; the Go module proxy serves it)"
  local work="$stage/src" pkg=k8s.io/component-base/version commit ldflags
  mkdir -p "$stage/bin"
  cp -r "$dir/." "$work/"; chmod -R u+w "$work"
  commit="$(GOTOOLCHAIN=local go mod download -json "$module" \
    | python3 -c 'import json,sys; print((json.load(sys.stdin).get("Origin") or {}).get("Hash", ""))')"
  ldflags="-s -w -X $pkg.gitVersion=$SPARK_OPERATOR_VERSION -X $pkg.gitCommit=$commit -X $pkg.gitTreeState=clean"
  (cd "$work" && GOTOOLCHAIN="$go_release" CGO_ENABLED=0 go build -trimpath -ldflags "$ldflags" \
    -o "$stage/bin/spark-operator" ./cmd/operator)
  cp -r "$dir/charts/spark-operator-chart" "$stage/chart"
  cp -r "$dir/config/crd/bases" "$stage/crds"
  cp "$dir/entrypoint.sh" "$stage/entrypoint.sh"
  chmod -R u+w "$stage"
  rm -rf "$work"
  "$stage/bin/spark-operator" version >&2
  # .complete as well: what the test bed's paths.spark_operator() looks for.
  touch "$stage/.complete"
}
cached_step --marker .complete-v2 "$out" "spark-operator $SPARK_OPERATOR_VERSION" build
[[ "${1:-}" == --image ]] || exit 0

# --- its image: FROM our Spark base (scripts/setup/images.sh makes it) -------------------------------
source "$REPO_ROOT/scripts/images/podman.sh"
image="localhost/spark-operator:$SPARK_OPERATOR_VERSION"
manifest="$SPARK_DLQ_CACHE/images/manifest.json"
[[ -f "$manifest" ]] || { log "no $manifest: run scripts/setup/images.sh first (it makes the Spark base)"; exit 1; }
spark_base="$(python3 -c 'import json, sys; print(json.load(open(sys.argv[1]))["spark"])' "$manifest")"
inputs="$(cache_key files "$out/bin/spark-operator" "$out/entrypoint.sh" "$REPO_ROOT/scripts/images/spark-operator.Containerfile")"
base_id="$(podman image inspect --format '{{.Id}}' "$spark_base")"
label="$inputs-${base_id:0:12}"
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
