#!/usr/bin/env bash
# Fetches the Apache Kafka broker jars (the test bed's, and a newer one for share groups), the
# Spark Kafka connector jars, Delta Lake's jars (the dead-letter table) and Pulsar's Java client
# with what it needs beside Spark's jars (the engine's Pulsar connector, spark_image/jvm) from
# Maven Central into the cache. Idempotent: a finished folder carries a .complete marker.
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"

fetch() {  # fetch <pom> <dest> <maven arguments...>
  local pom="$1" dest="$2"; shift 2
  if [[ -f "$dest/.complete" ]]; then log "${dest#"$SPARK_DLQ_CACHE"/}: cached"; return; fi
  log "fetching ${dest#"$SPARK_DLQ_CACHE"/} from Maven Central (first run: under a minute)"
  rm -rf "$dest"; mkdir -p "$dest"
  maven -f "$pom" "$@" -Dmaven.repo.local="$SPARK_DLQ_CACHE/m2" \
    dependency:copy-dependencies -DoutputDirectory="$dest" -DincludeScope=runtime
  touch "$dest/.complete"
}

fetch "$REPO_ROOT/scripts/setup/maven/kafka-broker.pom.xml" \
  "$SPARK_DLQ_CACHE/kafka/$KAFKA_VERSION/libs" \
  -Dkafka.version="$KAFKA_VERSION" -Dscala.binary="$SCALA_BINARY"
# The broker that serves share groups' dead-letter queues (tests/integration/engine/test_interop.py).
fetch "$REPO_ROOT/scripts/setup/maven/kafka-broker.pom.xml" \
  "$SPARK_DLQ_CACHE/kafka/$KAFKA_SHARE_GROUP_DLQ_VERSION/libs" \
  -Dkafka.version="$KAFKA_SHARE_GROUP_DLQ_VERSION" -Dscala.binary="$SCALA_BINARY"
fetch "$REPO_ROOT/scripts/setup/maven/kafka-tools.pom.xml" \
  "$SPARK_DLQ_CACHE/kafka/$KAFKA_VERSION/tools" -Dkafka.version="$KAFKA_VERSION"
fetch "$REPO_ROOT/scripts/setup/maven/spark-kafka.pom.xml" \
  "$SPARK_DLQ_CACHE/spark-jars/$SPARK_VERSION-kafka-clients-$SPARK_KAFKA_CLIENTS_VERSION" \
  -Dspark.version="$SPARK_VERSION" -Dscala.binary="$SCALA_BINARY" \
  -Dkafka.clients.version="$SPARK_KAFKA_CLIENTS_VERSION" \
  -Dcommons.pool2.version="$SPARK_COMMONS_POOL2_VERSION"
fetch "$REPO_ROOT/scripts/setup/maven/spark-delta.pom.xml" \
  "$SPARK_DLQ_CACHE/spark-jars/delta-$DELTA_VERSION" \
  -Ddelta.version="$DELTA_VERSION" -Dscala.binary="$SCALA_BINARY"
fetch "$REPO_ROOT/scripts/setup/maven/spark-pulsar.pom.xml" \
  "$SPARK_DLQ_CACHE/spark-jars/pulsar-client-$PULSAR_VERSION-spark-$SPARK_VERSION" \
  -s "$REPO_ROOT/scripts/setup/maven/central-only.settings.xml" -Dpulsar.version="$PULSAR_VERSION" \
  -Dnetty.version="$SPARK_NETTY_VERSION"
