#!/usr/bin/env bash
# spark-dlq end to end on a kind cluster, the way a platform team installs it:
#   1. a kind cluster
#   2. the spark-operator (Helm chart, watching the namespace "payments")
#   3. Strimzi and a one-node Kafka cluster "my-cluster" in the namespace "kafka"
#   4. both images built (make images), a demo engine image with examples/processors baked in,
#      all loaded into kind
#   5. our chart (charts/spark-dlq-operator) with the strimzi provisioner
#   6. a DeadLetterPolicy for the topic "orders", then good, flaky, poison, fraud and non-JSON
#      orders; it checks the good and flaky ones reach "orders-billed" and the poison, fraud and
#      non-JSON ones reach the dead-letter topic with their dlq.reason headers.
#
# IT CANNOT RUN ON THE MACHINE spark-dlq IS DEVELOPED ON: that machine has no Docker daemon (and
# kind, the spark-operator chart and Strimzi come from their own download sites). It was
# checked by reading, and tests/unit/test_images.py checks what can be checked statically
# (bash -n, the versions, the chart and Makefile targets it uses).
#
# Needs: docker, kind, kubectl, helm 3, make, python3. Versions: scripts/setup/versions.env.
# Usage: scripts/kind-e2e.sh [--keep]     (--keep leaves the cluster up afterwards)
#        KIND_CLUSTER=name KIND_NODE_IMAGE=kindest/node:v1.30.x scripts/kind-e2e.sh
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
# shellcheck source=setup/versions.env
source scripts/setup/versions.env

KIND_CLUSTER="${KIND_CLUSTER:-spark-dlq-e2e}"
KIND_NODE_IMAGE="${KIND_NODE_IMAGE:-}"
KEEP=false
[[ "${1:-}" == "--keep" ]] && KEEP=true
VERSION="$(python3 -c 'import tomllib; print(tomllib.load(open("pyproject.toml", "rb"))["project"]["version"])')"
DEMO_IMAGE="spark-dlq-demo:$VERSION"
KAFKA_POD=my-cluster-dual-role-0
CONTEXT="kind-$KIND_CLUSTER"

log() { printf '\n[kind-e2e] %s\n' "$*" >&2; }
k() { kubectl --context "$CONTEXT" "$@"; }
h() { helm --kube-context "$CONTEXT" "$@"; }

for tool in docker kind kubectl helm make python3; do
  command -v "$tool" >/dev/null || { echo "kind-e2e: $tool is needed" >&2; exit 2; }
done
docker info >/dev/null 2>&1 || { echo "kind-e2e: no Docker daemon" >&2; exit 2; }

cleanup() {
  local status=$?
  if [[ $status -ne 0 ]]; then
    log "FAILED; what the cluster says:"
    k -n payments get dlp,sparkapplications,pods -o wide || true
    k -n payments describe dlp orders-billing || true
    k -n spark-dlq logs deployment/spark-dlq-spark-dlq-operator --tail=100 || true
  fi
  if $KEEP; then
    log "cluster kept: kubectl --context $CONTEXT ..."
  else
    kind delete cluster --name "$KIND_CLUSTER" >/dev/null 2>&1 || true
  fi
  exit $status
}
trap cleanup EXIT

# --- 1. the cluster --------------------------------------------------------------------------------
log "creating kind cluster $KIND_CLUSTER"
kind create cluster --name "$KIND_CLUSTER" ${KIND_NODE_IMAGE:+--image "$KIND_NODE_IMAGE"} --wait 120s
k create namespace payments
k create namespace kafka

# --- 2. the spark-operator ---------------------------------------------------------------------------
log "installing the spark-operator chart of $SPARK_OPERATOR_VERSION (watching payments)"
helm repo add spark-operator https://kubeflow.github.io/spark-operator --force-update >/dev/null
# Our chart creates the drivers' service account and Role; the spark-operator's would be unused.
h upgrade --install spark-operator spark-operator/spark-operator \
  --version "${SPARK_OPERATOR_VERSION#v}" --namespace spark-operator --create-namespace \
  --set 'spark.jobNamespaces={payments}' \
  --set spark.serviceAccount.create=false --set spark.rbac.create=false \
  --wait --timeout 5m

# --- 3. Strimzi and Kafka ------------------------------------------------------------------------
log "installing Strimzi $STRIMZI_VERSION and a one-node Kafka $STRIMZI_KAFKA_VERSION"
h upgrade --install strimzi oci://quay.io/strimzi-helm/strimzi-kafka-operator \
  --version "$STRIMZI_VERSION" --namespace kafka --wait --timeout 5m
k apply -n kafka -f - <<EOF
apiVersion: kafka.strimzi.io/v1beta2
kind: KafkaNodePool
metadata:
  name: dual-role
  labels:
    strimzi.io/cluster: my-cluster
spec:
  replicas: 1
  roles: [controller, broker]
  storage:
    type: ephemeral
---
apiVersion: kafka.strimzi.io/v1beta2
kind: Kafka
metadata:
  name: my-cluster
  annotations:
    strimzi.io/node-pools: enabled
    strimzi.io/kraft: enabled
spec:
  kafka:
    version: $STRIMZI_KAFKA_VERSION
    listeners:
      - {name: plain, port: 9092, type: internal, tls: false}
    config:
      offsets.topic.replication.factor: 1
      transaction.state.log.replication.factor: 1
      transaction.state.log.min.isr: 1
      default.replication.factor: 1
      min.insync.replicas: 1
  entityOperator:
    topicOperator: {}
---
apiVersion: kafka.strimzi.io/v1beta2
kind: KafkaTopic
metadata:
  name: orders
  labels: {strimzi.io/cluster: my-cluster}
spec: {partitions: 2, replicas: 1}
---
apiVersion: kafka.strimzi.io/v1beta2
kind: KafkaTopic
metadata:
  name: orders-billed
  labels: {strimzi.io/cluster: my-cluster}
spec: {partitions: 2, replicas: 1}
EOF
k -n kafka wait kafka/my-cluster --for=condition=Ready --timeout=10m
k -n kafka wait kafkatopic/orders kafkatopic/orders-billed --for=condition=Ready --timeout=5m

# --- 4. the images -------------------------------------------------------------------------------
log "building and loading the images"
make images
# The engine image with the example processor: how a team ships its processors.
docker build -t "$DEMO_IMAGE" -f - . <<EOF
FROM spark-dlq:$VERSION
COPY examples/processors/ /opt/spark-dlq/processors/
EOF
make kind-load KIND_CLUSTER="$KIND_CLUSTER"
kind load docker-image --name "$KIND_CLUSTER" "$DEMO_IMAGE"

# --- 5. our chart --------------------------------------------------------------------------------
log "installing charts/spark-dlq-operator"
h upgrade --install spark-dlq charts/spark-dlq-operator --namespace spark-dlq --create-namespace \
  --set topics.strimzi.enabled=true --set 'topics.strimzi.namespaces={kafka}' \
  --set 'spark.namespaces={payments}' \
  --set spark.image.repository=spark-dlq-demo \
  --wait --timeout 5m
k -n spark-dlq rollout status deployment/spark-dlq-spark-dlq-operator --timeout=3m

# --- 6. a policy, and messages through it -------------------------------------------------------------
log "applying the policy payments/orders-billing"
k apply -f - <<'EOF'
apiVersion: sparkdlq.io/v1alpha1
kind: DeadLetterPolicy
metadata:
  name: orders-billing
  namespace: payments
spec:
  source: {topic: orders, subscription: billing, startingOffsets: earliest}
  broker: {bootstrapServers: my-cluster-kafka-bootstrap.kafka:9092}
  processor: {entrypoint: "shop_orders:process", mode: message}
  output: {topic: orders-billed}
  retry:
    maxRedeliverCount: 3
    backoff: {type: fixed, delay: 1s}
    nonRetryableErrors: [json.decoder.JSONDecodeError]
  deadLetter: {strategy: topic}
  topics:
    provisioner: strimzi
    strimzi: {namespace: kafka, cluster: my-cluster}
  spark:
    # A kind cluster has no shared storage: the checkpoint lives in the driver pod, which is
    # enough for one run (real installs set spark.checkpointBase to s3a://, hdfs://, ...).
    checkpointLocation: /tmp/spark-dlq/payments/orders-billing
    driver: {cores: 1, memory: 1g}
    executor: {instances: 1, cores: 1, memory: 1g}
EOF
k -n payments wait dlp/orders-billing --for=jsonpath='{.status.phase}'=Running --timeout=15m
k -n kafka get kafkatopics -l sparkdlq.io/policy=orders-billing

log "producing orders"
k -n kafka exec -i "$KAFKA_POD" -- /opt/kafka/bin/kafka-console-producer.sh \
  --bootstrap-server localhost:9092 --topic orders <<'EOF'
{"id": 1, "amount": 10}
{"id": 2, "amount": 20}
{"id": 3, "amount": 30, "kind": "flaky"}
{"id": 4, "kind": "poison"}
{"id": 5, "kind": "fraud"}
{"id": 6, "kind": "ignore"}
this is not json
EOF

count() {  # count <topic>: records in the topic right now
  k -n kafka exec "$KAFKA_POD" -- /opt/kafka/bin/kafka-console-consumer.sh \
    --bootstrap-server localhost:9092 --topic "$1" --from-beginning --timeout-ms 10000 \
    --property print.headers=true 2>/dev/null | grep -c . || true
}
wait_for_count() {  # wait_for_count <topic> <n>
  local deadline=$((SECONDS + 600)) n
  while :; do
    n="$(count "$1")"
    [[ "$n" -ge "$2" ]] && { log "$1: $n records"; return 0; }
    [[ $SECONDS -ge $deadline ]] && { echo "kind-e2e: $1 has $n records, expected $2" >&2; return 1; }
    sleep 10
  done
}

log "waiting for the routing: 3 billed (1, 2, flaky 3), 3 dead letters (poison, fraud, not JSON)"
wait_for_count orders-billed 3
wait_for_count orders-billing-DLQ 3
dead_letters="$(k -n kafka exec "$KAFKA_POD" -- /opt/kafka/bin/kafka-console-consumer.sh \
  --bootstrap-server localhost:9092 --topic orders-billing-DLQ --from-beginning --timeout-ms 10000 \
  --property print.headers=true 2>/dev/null)"
for reason in dlq.reason:exhausted dlq.reason:terminated dlq.reason:non-retryable; do
  grep -q "$reason" <<<"$dead_letters" || { echo "kind-e2e: no dead letter with $reason" >&2; exit 1; }
done
[[ "$(count orders-billed)" -eq 3 ]] || { echo "kind-e2e: more than 3 billed orders" >&2; exit 1; }
k -n payments get dlp orders-billing
log "PASSED: messages are routed on kind"
