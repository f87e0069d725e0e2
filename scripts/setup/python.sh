#!/usr/bin/env bash
# Creates the Python virtualenv in the cache (keyed by the dependency list in
# pyproject.toml, so a dependency change builds a new one) and installs this checkout into
# it in editable mode (the project, and its test bed devtools/ as a project of its own). Prints nothing on stdout but the venv path.
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"

# What the venv holds: the project's dependencies and those of its engine, operator, pulsar and
# dev extras; keyed by that list and Python's version, so a dependency change builds a new venv
# (spark_dlq_devtools.cache_keys).
pyproject="$REPO_ROOT/pyproject.toml"
venv="$SPARK_DLQ_CACHE/venv-$(cache_key venv "$pyproject")"
create() {  # create OUT (in place: a virtualenv's scripts name its path)
  log "creating the Python environment $1 (first run: about 1.5 minutes here)"
  rm -rf "$1"
  python3 -m venv "$1"
  "$1/bin/pip" install -q --upgrade pip setuptools wheel
  # Dependencies only: the project itself is installed editable below, every time.
  cache_key venv-requirements "$pyproject" > "$1/requirements.txt"
  "$1/bin/pip" install -q -r "$1/requirements.txt"
}
cached_step --in-place "$venv" "the Python environment" create
# Quietly: setuptools warns about editable installs at length. The test bed (devtools/) is a
# project of its own, so that the release wheel never carries it.
"$venv/bin/pip" install -q --no-deps --no-build-isolation -e "$REPO_ROOT" -e "$REPO_ROOT/devtools" \
  >"$venv/editable-install.log" 2>&1 || { cat "$venv/editable-install.log" >&2; exit 1; }
ln -sfn "$venv" "$SPARK_DLQ_CACHE/venv"
echo "$venv"
