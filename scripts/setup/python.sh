#!/usr/bin/env bash
# Creates the Python virtualenv in the cache (keyed by the dependency list in
# pyproject.toml, so a dependency change builds a new one) and installs this checkout into
# it in editable mode (the project, and its test bed devtools/ as a project of its own). Prints nothing on stdout but the venv path.
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"

key="$(python3 - "$REPO_ROOT/pyproject.toml" <<'PY'
import hashlib, sys, tomllib
data = tomllib.load(open(sys.argv[1], "rb"))
project = data["project"]
blob = repr((project.get("dependencies"), project.get("optional-dependencies"), sys.version_info[:2]))
print(hashlib.sha256(blob.encode()).hexdigest()[:12])
PY
)"
venv="$SPARK_DLQ_CACHE/venv-$key"
if [[ ! -f "$venv/.complete" ]]; then
  log "creating the Python environment $venv (first run: about 1.5 minutes here)"
  rm -rf "$venv"
  python3 -m venv "$venv"
  "$venv/bin/pip" install -q --upgrade pip setuptools wheel
  # Dependencies only: the project itself is installed editable below, every time.
  deps="$(python3 - "$REPO_ROOT/pyproject.toml" <<'PY'
import sys, tomllib
data = tomllib.load(open(sys.argv[1], "rb"))
project = data["project"]
extra = project["optional-dependencies"]
reqs = list(project["dependencies"])
for name in ("engine", "operator", "dev"):
    reqs += [r for r in extra[name] if not r.startswith("spark-dlq")]
print("\n".join(reqs))
PY
)"
  printf '%s\n' "$deps" > "$venv/requirements.txt"
  "$venv/bin/pip" install -q -r "$venv/requirements.txt"
  touch "$venv/.complete"
fi
# Quietly: setuptools warns about editable installs at length. The test bed (devtools/) is a
# project of its own, so that the release wheel never carries it.
"$venv/bin/pip" install -q --no-deps --no-build-isolation -e "$REPO_ROOT" -e "$REPO_ROOT/devtools" \
  >"$venv/editable-install.log" 2>&1 || { cat "$venv/editable-install.log" >&2; exit 1; }
ln -sfn "$venv" "$SPARK_DLQ_CACHE/venv"
echo "$venv"
