#!/usr/bin/env bash
# Builds spark-dlq's container images with podman, on base images made here.
#
# No container registry is reachable where spark-dlq is developed, so the public bases the
# Dockerfiles name by default (python:3.11-slim-bookworm, a Maven image, apache/spark) cannot be
# pulled. This script makes stand-ins for exactly those from Debian's packages (a debootstrap
# rootfs imported into podman, then scripts/images/bases/*.Containerfile) and passes them to the
# Dockerfiles as build arguments; with a registry, the same Dockerfiles build on the public bases.
#
# Images (names written once, here; $SPARK_DLQ_CACHE/images/manifest.json lists them for the
# test bed):
#   localhost/spark-dlq-base/debian:bookworm         the minimal Debian rootfs
#   localhost/spark-dlq-base/python:3.11-bookworm    stands in for python:3.11-slim-bookworm
#   localhost/spark-dlq-base/maven:3-jdk17           stands in for maven:3.9-eclipse-temurin-17
#   localhost/spark-dlq-base/spark:<spark version>   stands in for apache/spark:<v>-...-python3-ubuntu
#   localhost/spark-dlq:<version>                    the engine (spark_image/Dockerfile)
#   localhost/spark-dlq-operator:<version>           the operator (operator/Dockerfile)
#   localhost/spark-dlq-demo:<version>               the engine with examples/processors baked in
#
# Cached: a base is rebuilt only when its inputs change (a label on the image holds their hash);
# the project's images go through podman's layer cache, so a code change rebuilds only the
# layers after the changed files. podman's storage and settings live in $SPARK_DLQ_CACHE/podman.
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"
source "$REPO_ROOT/scripts/images/podman.sh"

start=$SECONDS
version="$(python3 -c 'import sys, tomllib; print(tomllib.load(open(sys.argv[1], "rb"))["project"]["version"])' \
  "$REPO_ROOT/pyproject.toml")"
base="localhost/spark-dlq-base"
debian_image="$base/debian:$DEBIAN_SUITE"
python_image="$base/python:3.11-$DEBIAN_SUITE"
maven_image="$base/maven:3-jdk17"
spark_image="$base/spark:$SPARK_VERSION"
engine_image="localhost/spark-dlq:$version"
operator_image="localhost/spark-dlq-operator:$version"
demo_image="localhost/spark-dlq-demo:$version"

images_dir="$SPARK_DLQ_CACHE/images"
mkdir -p "$images_dir"

# --- podman itself ------------------------------------------------------------------------------
if ! command -v podman >/dev/null || ! command -v debootstrap >/dev/null || [[ ! -x /usr/sbin/runc ]]; then
  log "installing podman, runc and debootstrap from Debian"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq >/dev/null || true
  apt-get install -y -qq --no-install-recommends podman runc debootstrap uidmap >/dev/null
fi

# The project's build steps that download over TLS (pip, Maven) trust what this machine trusts:
# its CA bundles are mounted into their RUN steps (never copied into an image), so a machine
# whose egress goes through a TLS-inspecting proxy, as spark-dlq's own machines do, builds like
# any other. The bases build without them: they download only from Debian's mirror (apt checks
# its signatures), and installing ca-certificates rewrites the very files the mounts cover
# ("mv: cannot move ... ca-certificates.crt: Device or resource busy").
trust=()
for bundle in /etc/ssl/certs/ca-certificates.crt /etc/ssl/certs/java/cacerts; do
  [[ -f "$bundle" ]] && trust+=(--volume "$bundle:$bundle:ro")
done
logs="$images_dir/logs"
mkdir -p "$logs"

# build [--without-trust] NAME podman-build-arguments...: quiet unless it fails, then the end
# of its log.
build() {
  local mounts=("${trust[@]}")
  if [[ "$1" == --without-trust ]]; then mounts=(); shift; fi
  local name="$1" began=$SECONDS; shift
  if ! podman build "${mounts[@]}" "$@" >"$logs/$name.log" 2>&1; then
    tail -40 "$logs/$name.log" >&2
    log "building $name failed; its whole log: $logs/$name.log"
    exit 1
  fi
  log "  $name: $((SECONDS - began))s"
}

# label_of IMAGE: the inputs hash an image was built from ("" when absent).
label_of() {
  podman image inspect --format '{{index .Labels "io.sparkdlq.inputs"}}' "$1" 2>/dev/null || true
}

# --- the Debian rootfs ------------------------------------------------------------------------------
rootfs_tar="$images_dir/debian-$DEBIAN_SUITE-rootfs.tar"
if [[ ! -f "$rootfs_tar.complete" ]]; then
  log "debootstrap: a minimal Debian $DEBIAN_SUITE rootfs (first run: several minutes)"
  began=$SECONDS
  work="$(mktemp -d "$images_dir/rootfs.XXXXXX")"
  debootstrap --variant=minbase "$DEBIAN_SUITE" "$work/root" "$DEBIAN_MIRROR" >"$work/debootstrap.log" 2>&1 \
    || { tail -20 "$work/debootstrap.log" >&2; exit 1; }
  rm -rf "$work/root/var/cache/apt/archives"/*.deb "$work/root/var/lib/apt/lists"/*
  tar -C "$work/root" --numeric-owner -cf "$rootfs_tar" .
  rm -rf "$work"
  sha256sum "$rootfs_tar" | cut -c1-64 >"$rootfs_tar.complete"
  log "  debootstrap: $((SECONDS - began))s"
fi
# The marker holds the rootfs's hash: a new rootfs is a new Debian image, and so new bases.
debian_label="$(cache_key files --extra "$DEBIAN_SUITE" "$rootfs_tar.complete")"
if [[ "$(label_of "$debian_image")" != "$debian_label" ]]; then
  log "importing $debian_image"
  podman import --quiet --change "LABEL io.sparkdlq.inputs=$debian_label" --change 'CMD ["/bin/bash"]' \
    "$rootfs_tar" "$debian_image" >/dev/null
fi

# build_base IMAGE CONTAINERFILE CONTEXT [BUILD ARGS...]: rebuilt when its inputs change (the
# Debian image, the Containerfile, the build arguments, and the files named in $CONTEXT_INPUTS).
build_base() {
  local image="$1" file="$2" context="$3"; shift 3
  local label inputs
  read -r -a inputs <<<"${CONTEXT_INPUTS:-}"
  label="$(cache_key files --extra "$debian_label $*" "$file" "${inputs[@]}")"
  if [[ "$(label_of "$image")" == "$label" ]]; then
    log "$image: cached"
    return
  fi
  log "building $image"
  build --without-trust "${image##*/}" --label "io.sparkdlq.inputs=$label" --build-arg "DEBIAN_IMAGE=$debian_image" "$@" \
    -f "$file" -t "$image" "$context"
}

bases="$REPO_ROOT/scripts/images/bases"
build_base "$python_image" "$bases/python.Containerfile" "$bases"
build_base "$maven_image" "$bases/maven.Containerfile" "$bases"

# The Spark distribution: the pyspark source distribution carries Spark's bin/, jars/ and
# python/lib/ zips; it is the Spark base's build context with the entry point.
spark_context="$images_dir/spark-context-$SPARK_VERSION"
pyspark_sdist() {  # pyspark_sdist OUT
  log "downloading the pyspark $SPARK_VERSION source distribution (Spark's jars) from PyPI"
  PIP_FIND_LINKS="" python3 -m pip download -q --no-deps --no-binary=:all: "pyspark==$SPARK_VERSION" \
    -d "$1" >&2
}
cached_step "$spark_context" "the pyspark $SPARK_VERSION source distribution" pyspark_sdist
cp "$bases/spark-entrypoint.sh" "$spark_context/spark-entrypoint.sh"
CONTEXT_INPUTS="$bases/spark-entrypoint.sh" \
  build_base "$spark_image" "$bases/spark.Containerfile" "$spark_context" --build-arg "SPARK_VERSION=$SPARK_VERSION"

# --- the project's images --------------------------------------------------------------------------
# build_project NAME IMAGE DOCKERFILE BASE... -- BUILD ARGS...: skipped when the image is labelled
# with the key of what it builds from (cache_key image: the Dockerfile, what it copies, the build
# arguments, the bases' ids); otherwise built through podman's layer cache, so
# a code change rebuilds only the layers after the changed files.
build_project() {
  local name="$1" image="$2" dockerfile="$3"; shift 3
  local ids=()
  while [[ "$1" != -- ]]; do ids+=("$(podman image inspect --format '{{.Id}}' "$1")"); shift; done
  shift
  local label
  label="$(cache_key image "$REPO_ROOT" "$dockerfile" "$@" "${ids[@]}")"
  if [[ "$(label_of "$image")" == "$label" ]]; then
    log "$image: cached"
    return
  fi
  log "building $image ($dockerfile)"
  build "$name" --label "io.sparkdlq.inputs=$label" "$@" -f "$dockerfile" -t "$image" "$REPO_ROOT"
}

cd "$REPO_ROOT"
build_project engine "$engine_image" spark_image/Dockerfile "$python_image" "$maven_image" "$spark_image" -- \
  --build-arg "PYTHON_IMAGE=$python_image" --build-arg "MAVEN_IMAGE=$maven_image" \
  --build-arg "SPARK_IMAGE=$spark_image" \
  --build-arg "SPARK_VERSION=$SPARK_VERSION" --build-arg "SCALA_BINARY=$SCALA_BINARY" \
  --build-arg "SPARK_KAFKA_CLIENTS_VERSION=$SPARK_KAFKA_CLIENTS_VERSION" \
  --build-arg "SPARK_COMMONS_POOL2_VERSION=$SPARK_COMMONS_POOL2_VERSION" \
  --build-arg "DELTA_VERSION=$DELTA_VERSION" \
  --build-arg "PULSAR_VERSION=$PULSAR_VERSION" --build-arg "SPARK_NETTY_VERSION=$SPARK_NETTY_VERSION"
build_project operator "$operator_image" operator/Dockerfile "$python_image" -- \
  --build-arg "PYTHON_IMAGE=$python_image"
# The engine with the example processors (examples/Containerfile), for the demo on a cluster.
build_project demo "$demo_image" examples/Containerfile "$engine_image" -- \
  --build-arg "ENGINE_IMAGE=$engine_image"

# The manifest keeps the names other set-up scripts added (scripts/setup/spark_operator.sh).
python3 - "$images_dir/manifest.json" <<PY
import json, os, sys
path = sys.argv[1]
images = json.load(open(path)) if os.path.exists(path) else {}
images |= {
    "debian": "$debian_image", "python": "$python_image", "maven": "$maven_image",
    "spark": "$spark_image", "engine": "$engine_image", "operator": "$operator_image",
    "demo": "$demo_image",
}
json.dump(images, open(path, "w"), indent=1)
PY
log "images ready in $((SECONDS - start))s: $engine_image, $operator_image, $demo_image"
