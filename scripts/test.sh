#!/usr/bin/env bash
# The whole test suite: set-up (cached), static checks, then every tier of tests (unit,
# integration, e2e) against real services that the fixtures start. Extra arguments go to
# pytest, e.g. scripts/test.sh -m unit, or scripts/test.sh tests/unit/test_policy.py.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
venv="$(bash scripts/setup.sh)"
bin="$venv/bin"
if [[ $# -eq 0 ]]; then
  echo "== static checks: ruff check, ruff format --check, mypy --strict, import-linter"
  "$bin/ruff" check .
  "$bin/ruff" format --check .
  # mypy keeps its cache in the project's cache (common.sh names it), not in the clone: a fresh
  # clone with the cache kept re-checks only what changed (mypy compares a file's hash when its
  # mtime or path differs).
  cache="$(source scripts/setup/common.sh && echo "$SPARK_DLQ_CACHE")"
  "$bin/mypy" --cache-dir "$cache/mypy"
  "$bin/lint-imports" --no-cache
  # The whole suite must stay under 40 minutes: its slowest tests are listed at the end.
  set -- --durations=30
fi
echo "== pytest"
exec "$bin/python" -m pytest -p no:cacheprovider "$@"
