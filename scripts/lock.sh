#!/usr/bin/env bash
# Writes the images' lock files, requirements/<image>-image.txt: every Python distribution the
# image installs, pinned, with the hashes of every file PyPI serves for it (pip-compile
# --generate-hashes), resolved from the image's extra in pyproject.toml (scripts/images/requirements.py):
#   engine-image.txt    the engine extra without pyspark (spark_image/Dockerfile: the base has Spark)
#   operator-image.txt  the operator extra (operator/Dockerfile)
# The Dockerfiles install from them with --require-hashes. Run it after changing an extra;
# tests/unit/test_lock_files.py fails while a lock no longer satisfies its extra.
#   scripts/lock.sh            re-resolve (newest versions the extras allow)
#   scripts/lock.sh --keep     keep the pins that still satisfy the extras (pip-compile's default)
# pip-compile runs from the release tools' environment (scripts/setup/release_tools.sh), on the
# Python the images run (3.11).
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/setup/common.sh"
tools="$(bash "$REPO_ROOT/scripts/setup/release_tools.sh" --python)"
# PyPI only: no local wheel folder of this machine may end up in a lock.
export PIP_FIND_LINKS=""
upgrade=(--upgrade)
[[ "${1:-}" == --keep ]] && upgrade=()
cd "$REPO_ROOT"
lock() {  # lock IMAGE EXTRA [--exclude NAME...]
  local image="$1" extra="$2"; shift 2
  local input
  input="$(mktemp -d)/$image-image.in"
  python3 scripts/images/requirements.py pyproject.toml "$extra" "$@" > "$input"
  CUSTOM_COMPILE_COMMAND="scripts/lock.sh" "$tools/bin/pip-compile" --quiet "${upgrade[@]}" \
    --generate-hashes --allow-unsafe --strip-extras --no-emit-index-url --no-emit-find-links --resolver=backtracking \
    --output-file "requirements/$image-image.txt" "$input"
  # The input's temporary path is no fact worth keeping: name what it was made from instead.
  sed -i "s|$input|pyproject.toml's $extra extra|" "requirements/$image-image.txt"
  log "requirements/$image-image.txt: $(grep -c '^[a-z0-9]' "requirements/$image-image.txt") distributions"
}
lock engine engine --exclude pyspark
lock operator operator
