#!/usr/bin/env bash
# The local demo: sets up what the demo runs and is missing (scripts/setup.sh --demo: not the
# test suite's node, images, helm, spark-operator binary; cached afterwards), then runs the whole spark-dlq
# loop on this machine (etcd + kube-apiserver, Kafka, the operator, a local stand-in for the
# spark-operator, a PySpark job) and prints what happened. Extra arguments go to the demo,
# e.g. scripts/demo.sh --orders 1000, or scripts/demo.sh --broker pulsar (the same story on a
# standalone Pulsar with examples/orders-billing-pulsar.yaml).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
venv="$(bash scripts/setup.sh --demo "$@")"
exec "$venv/bin/spark-dlq-dev" demo "$@"
