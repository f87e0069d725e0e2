#!/usr/bin/env bash
# The tools `make dist` and scripts/lock.sh use, into $SPARK_DLQ_CACHE/release-tools/ (not part of
# scripts/setup.sh: neither the demo nor the tests need them):
#   venv-<versions>/   build (python -m build: the wheel and the sdist), pip-tools (pip-compile: the
#                      images' lock files) and cyclonedx-bom (cyclonedx-py: the wheel's SBOM), from
#                      PyPI, in a virtualenv of their own
#   syft-<version>/    syft (the images' SBOMs, from their OCI archives), built from the Go module
#                      proxy (first run: about 16 minutes on 2 busy cores)
# Prints the folder whose bin/ has all three (with --python: only the virtualenv, no syft).
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"

root="$SPARK_DLQ_CACHE/release-tools"
# Keep in step with spark_dlq_devtools.paths.release_tools().
venv="$root/venv-build-$PYTHON_BUILD_VERSION-pip-tools-$PIP_TOOLS_VERSION-cyclonedx-$CYCLONEDX_BOM_VERSION"
if [[ ! -f "$venv/.complete" ]]; then
  log "creating the release tools' environment: build, pip-tools, cyclonedx-bom (seconds)"
  rm -rf "$venv"
  python3 -m venv "$venv"
  "$venv/bin/pip" install -q --upgrade pip
  "$venv/bin/pip" install -q "build==$PYTHON_BUILD_VERSION" "pip-tools==$PIP_TOOLS_VERSION" \
    "cyclonedx-bom==$CYCLONEDX_BOM_VERSION"
  touch "$venv/.complete"
fi
if [[ "${1:-}" == --python ]]; then echo "$venv"; exit 0; fi

syft="$root/syft-$SYFT_VERSION"
if [[ ! -f "$syft/.complete" ]]; then
  log "building syft $SYFT_VERSION from the Go module proxy (first run: about 16 minutes here, on 2 busy cores)"
  began=$SECONDS
  export GOPATH="$SPARK_DLQ_CACHE/go" GOMODCACHE="$SPARK_DLQ_CACHE/go/pkg/mod"
  export GOCACHE="$SPARK_DLQ_CACHE/go/cache" GOFLAGS=-mod=mod
  mkdir -p "$syft/bin"
  GOBIN="$syft/bin" CGO_ENABLED=0 go install "github.com/anchore/syft/cmd/syft@$SYFT_VERSION"
  touch "$syft/.complete"
  log "  syft: $((SECONDS - began))s"
fi
# One folder with the three commands.
ln -sfn "$syft/bin/syft" "$venv/bin/syft"
echo "$venv"
