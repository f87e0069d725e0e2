# Shared settings for the setup scripts: where the cache lives and the pinned versions.
# Sourced, never run. Every download and build goes to $SPARK_DLQ_CACHE, outside the
# repository, so a fresh clone on the same machine reuses it.
set -euo pipefail

SPARK_DLQ_CACHE="${SPARK_DLQ_CACHE:-$HOME/.cache/spark-dlq}"
export SPARK_DLQ_CACHE
mkdir -p "$SPARK_DLQ_CACHE"

REPO_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
export REPO_ROOT

# Pinned versions. scripts/setup/versions.env is the single place they are written.
# shellcheck source=versions.env
source "$REPO_ROOT/scripts/setup/versions.env"

log() { printf '[setup] %s\n' "$*" >&2; }

# Maven, quiet and in batch mode, its output on stderr (stdout is the venv path) with no
# terminal colour codes: Maven 3.8's jansi writes resets even with style.color=never.
maven() {
  mvn -q -B -Dstyle.color=never "$@" 2>&1 | sed -u 's/\x1b\[[0-9;]*m//g' >&2
  return "${PIPESTATUS[0]}"
}
