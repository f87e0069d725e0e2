#!/usr/bin/env bash
# The crash soak (bench/soak.py): 20 SIGKILLs of the engine while messages flow, then an audit.
# Writes bench/results/soak.json. Uses the cached environment of scripts/setup.sh.
# Arguments go to `python -m bench.soak`, e.g. bench/soak.sh --kills 5 --n 50000.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
venv="$(bash scripts/setup.sh)"
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
exec "$venv/bin/python" -m bench.soak "$@"
