#!/usr/bin/env bash
# Fetches the Apache Kafka broker jars (the test bed's, and a newer one for share groups), the
# Spark Kafka connector jars, Delta Lake's jars (the dead-letter table) and Pulsar's Java client
# with what it needs beside Spark's jars (the engine's Pulsar connector, spark_image/jvm) from
# Maven Central into the cache. Idempotent: a finished folder carries a .complete marker.
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"

fetch() {  # fetch OUT POM MAVEN-ARGUMENTS...
  log "fetching ${dest#"$SPARK_DLQ_CACHE"/} from Maven Central (first run: under a minute)"
  maven_fetch "$2" "$1" "${@:3}"
}
jars() {  # jars DEST POM MAVEN-ARGUMENTS...
  dest="$1"
  cached_step "$dest" "${dest#"$SPARK_DLQ_CACHE"/}" fetch "${@:2}"
}

maven="$REPO_ROOT/scripts/setup/maven"
jars "$SPARK_DLQ_CACHE/kafka/$KAFKA_VERSION/libs" "$maven/kafka-broker.pom.xml" \
  -Dkafka.version="$KAFKA_VERSION" -Dscala.binary="$SCALA_BINARY"
# The broker that serves share groups' dead-letter queues (tests/integration/engine/test_interop.py).
jars "$SPARK_DLQ_CACHE/kafka/$KAFKA_SHARE_GROUP_DLQ_VERSION/libs" "$maven/kafka-broker.pom.xml" \
  -Dkafka.version="$KAFKA_SHARE_GROUP_DLQ_VERSION" -Dscala.binary="$SCALA_BINARY"
jars "$SPARK_DLQ_CACHE/kafka/$KAFKA_VERSION/tools" "$maven/kafka-tools.pom.xml" -Dkafka.version="$KAFKA_VERSION"
jars "$SPARK_DLQ_CACHE/spark-jars/$SPARK_VERSION-kafka-clients-$SPARK_KAFKA_CLIENTS_VERSION" \
  "$maven/spark-kafka.pom.xml" \
  -Dspark.version="$SPARK_VERSION" -Dscala.binary="$SCALA_BINARY" \
  -Dkafka.clients.version="$SPARK_KAFKA_CLIENTS_VERSION" \
  -Dcommons.pool2.version="$SPARK_COMMONS_POOL2_VERSION"
jars "$SPARK_DLQ_CACHE/spark-jars/delta-$DELTA_VERSION" "$maven/spark-delta.pom.xml" \
  -Ddelta.version="$DELTA_VERSION" -Dscala.binary="$SCALA_BINARY"
jars "$SPARK_DLQ_CACHE/spark-jars/pulsar-client-$PULSAR_VERSION-spark-$SPARK_VERSION" "$maven/spark-pulsar.pom.xml" \
  -s "$maven/central-only.settings.xml" -Dpulsar.version="$PULSAR_VERSION" \
  -Dnetty.version="$SPARK_NETTY_VERSION"
