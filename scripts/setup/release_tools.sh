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
create() {  # create OUT (in place: a virtualenv's scripts name its path)
  log "creating the release tools' environment: build, pip-tools, cyclonedx-bom (seconds)"
  rm -rf "$1"
  python3 -m venv "$1"
  "$1/bin/pip" install -q --upgrade pip
  "$1/bin/pip" install -q "build==$PYTHON_BUILD_VERSION" "pip-tools==$PIP_TOOLS_VERSION" \
    "cyclonedx-bom==$CYCLONEDX_BOM_VERSION"
}
cached_step --in-place "$venv" "the release tools' environment" create
if [[ "${1:-}" == --python ]]; then echo "$venv"; exit 0; fi

syft="$root/syft-$SYFT_VERSION"
build_syft() {  # build_syft OUT
  log "building syft $SYFT_VERSION from the Go module proxy (first run: about 16 minutes here, on 2 busy cores)"
  go_env "" -mod=mod
  mkdir -p "$1/bin"
  GOBIN="$1/bin" CGO_ENABLED=0 go install "github.com/anchore/syft/cmd/syft@$SYFT_VERSION"
}
cached_step "$syft" "syft $SYFT_VERSION" build_syft
# One folder with the three commands.
ln -sfn "$syft/bin/syft" "$venv/bin/syft"
echo "$venv"
