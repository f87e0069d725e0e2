#!/usr/bin/env bash
# `make dist`: the release artefacts, built and checked, into dist/ (spark_dlq_devtools.dist says
# what each is and how it is checked; docs/release.md how to publish them). Sets up what that
# needs and is missing: the Python environment, helm, podman with the images' bases
# (scripts/setup/images.sh, where no registry is reachable), and the release tools (build,
# pip-tools, cyclonedx-py, syft). Extra arguments go to `spark-dlq-dev dist`.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
venv="$(bash scripts/setup/python.sh)"
bash scripts/setup/helm.sh
bash scripts/setup/images.sh
bash scripts/setup/release_tools.sh >/dev/null
exec "$venv/bin/spark-dlq-dev" dist "$@"
