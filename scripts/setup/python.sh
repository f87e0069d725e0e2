#!/usr/bin/env bash
# Creates the Python virtualenv in the cache (keyed by the dependency list in
# pyproject.toml, so a dependency change builds a new one) and installs this checkout into
# it in editable mode (the project, and its test bed devtools/ as a project of its own). Prints nothing on stdout but the venv path.
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"

# What the venv holds: the project's dependencies and those of its engine, operator, pulsar and
# dev extras, with the extras' references to the project itself (spark-dlq[...]) followed.
deps="$(python3 - "$REPO_ROOT/pyproject.toml" <<'PY'
import re, sys, tomllib
data = tomllib.load(open(sys.argv[1], "rb"))
project = data["project"]
extra = project["optional-dependencies"]
reqs = list(project["dependencies"])
todo, seen = ["engine", "operator", "pulsar", "dev"], set()
while todo:
    name = todo.pop(0)
    if name in seen:
        continue
    seen.add(name)
    for r in extra[name]:
        own = re.fullmatch(r"spark-dlq\[([^\]]+)\]", r.strip())
        if own:
            todo += [n.strip() for n in own.group(1).split(",")]
        elif r not in reqs:
            reqs.append(r)
print("\n".join(reqs))
PY
)"
# Keyed by that list and Python's version, so a dependency change builds a new venv.
key="$(printf '%s\n%s\n' "$deps" "$(python3 -c 'import sys; print(sys.version_info[:2])')" | sha256sum | cut -c1-12)"
venv="$SPARK_DLQ_CACHE/venv-$key"
if [[ ! -f "$venv/.complete" ]]; then
  log "creating the Python environment $venv (first run: about 1.5 minutes here)"
  rm -rf "$venv"
  python3 -m venv "$venv"
  "$venv/bin/pip" install -q --upgrade pip setuptools wheel
  # Dependencies only: the project itself is installed editable below, every time.
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
