#!/usr/bin/env bash
# Runs every spark-dlq benchmark and writes docs/benchmarks.md, its plots (docs/benchmarks/)
# and JSON results (bench/results/). Uses the cached environment of scripts/setup.sh.
# Arguments go to `python -m bench.run`, e.g. bench/run.sh --n 20000 --only throughput.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
venv="$(bash scripts/setup.sh)"
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
exec "$venv/bin/python" -m bench.run "$@"
