# Shared settings for the setup scripts: where the cache lives and the pinned versions, and the
# steps' plumbing (lib.sh). Sourced, never run. Every download and build goes to
# $SPARK_DLQ_CACHE, outside the repository, so a fresh clone on the same machine reuses it.
set -euo pipefail

SPARK_DLQ_CACHE="${SPARK_DLQ_CACHE:-$HOME/.cache/spark-dlq}"
export SPARK_DLQ_CACHE
mkdir -p "$SPARK_DLQ_CACHE"

REPO_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
export REPO_ROOT

# Pinned versions. scripts/setup/versions.env is the single place they are written.
# shellcheck source=versions.env
source "$REPO_ROOT/scripts/setup/versions.env"

# shellcheck source=lib.sh
source "$REPO_ROOT/scripts/setup/lib.sh"
