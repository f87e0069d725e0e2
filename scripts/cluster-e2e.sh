#!/usr/bin/env bash
# The whole flow on a real cluster, as a platform team and a user run it: the test bed's node
# (kube-apiserver, controllers, scheduler, kubelet + containerd + runc on this machine), the
# images built here loaded into it, `helm install` of the real Kubeflow spark-operator (its own
# chart, webhook on) and of charts/spark-dlq-operator, `kubectl apply` of the example policy,
# the Spark driver and executor running as pods from the project's image and routing orders,
# `kubectl get dlp`, `kubectl patch` (resubmitted from the checkpoint), five driver-pod kills,
# `kubectl delete` (the dead-letter topic stays). Every step prints what it did and its time.
#
# Set-up is scripts/setup.sh's (cached: a second run only rebuilds images whose inputs changed).
# Extra arguments go to pytest. Everything it starts (broker, apiserver, node, pods) is
# stopped when it ends.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
start=$SECONDS
venv="$(bash scripts/setup.sh)"
echo "[cluster-e2e] set-up ready in $((SECONDS - start))s"
"$venv/bin/python" -m pytest -p no:cacheprovider -s tests/e2e/cluster "$@"
echo "[cluster-e2e] passed in $((SECONDS - start))s"
