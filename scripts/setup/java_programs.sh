#!/usr/bin/env bash
# The small Java programs the tests and the benchmark run on real libraries from Maven Central,
# each built from its pom.xml and sources into $SPARK_DLQ_CACHE/java/<name>-<hash>/: lib/ holds
# the dependencies Maven resolves, <name>.jar the compiled sources. The hash covers the pom, the
# sources and the Maven properties (the pinned versions), so a change of any builds anew;
# otherwise the cached build is kept. Needs a JDK 17 or newer (javac).
# - interop (tests/interop/java): Spring for Apache Kafka, Kafka Connect's runtime and the Pulsar
#   client, run by tests/integration/engine/test_interop.py to check deadLetter.headerProfiles;
# - kafka-interop (tests/interop/kafka): Kafka Streams (its dead-letter queue, KIP-1034) and a share
#   consumer that rejects records (a share group's dead-letter queue, KIP-1191), on their own
#   kafka-clients, run by tests/integration/engine/test_interop.py;
# - pulsar-interop (tests/interop/pulsar): Pulsar's Java client at the broker's version, its
#   enableRetry/reconsumeLater/DeadLetterPolicy run against the engine's topics by
#   tests/integration/engine/test_pulsar_interop.py;
# - spring, connect (bench/peers/<name>): the benchmark's peers, a Spring Kafka @RetryableTopic
#   listener and a Kafka Connect standalone worker's plugin.
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"

build() {  # build <name> <sources> <maven -D properties...>
  local name="$1" src="$2"; shift 2
  # Keep in step with spark_dlq_devtools.paths.java_program(): sha256 of the "<sha256>  <path>"
  # lines of the pom and the sources, then of the -D properties, one a line.
  local hash
  hash="$( { (cd "$src" && { echo pom.xml; find src -name '*.java'; } | LC_ALL=C sort | xargs sha256sum); printf '%s\n' "$@"; } | sha256sum | cut -c1-12)"
  local dest="$SPARK_DLQ_CACHE/java/$name-$hash"
  if [[ -f "$dest/.complete" ]]; then log "${dest#"$SPARK_DLQ_CACHE"/}: cached"; return; fi
  command -v javac >/dev/null || { log "javac not found: the Java program $name needs a JDK 17+"; exit 1; }
  log "building ${dest#"$SPARK_DLQ_CACHE"/} (dependencies from Maven Central)"
  rm -rf "$dest"; mkdir -p "$dest/lib" "$dest/classes"
  maven -f "$src/pom.xml" "$@" -Dmaven.repo.local="$SPARK_DLQ_CACHE/m2" \
    dependency:copy-dependencies -DoutputDirectory="$dest/lib" -DincludeScope=runtime
  (cd "$src" && find src -name '*.java' | LC_ALL=C sort) | sed "s|^|$src/|" > "$dest/sources.txt"
  javac --release 17 -Xlint:all,-path,-processing,-classfile -Werror -cp "$dest/lib/*" -d "$dest/classes" "@$dest/sources.txt" >&2
  jar cf "$dest/$name.jar" -C "$dest/classes" .
  rm -rf "$dest/classes"
  touch "$dest/.complete"
}

build interop "$REPO_ROOT/tests/interop/java" -Dkafka.version="$KAFKA_VERSION" \
  -Dspring.kafka.version="$SPRING_KAFKA_VERSION" -Dpulsar.version="$PULSAR_CLIENT_VERSION"
build kafka-interop "$REPO_ROOT/tests/interop/kafka" -Dkafka.version="$KAFKA_STREAMS_VERSION"
build pulsar-interop "$REPO_ROOT/tests/interop/pulsar" -Dpulsar.version="$PULSAR_VERSION" \
  -Dslf4j.version="$SLF4J_VERSION"
build spring "$REPO_ROOT/bench/peers/spring" -Dspring.kafka.version="$SPRING_KAFKA_VERSION" \
  -Dkafka.version="$KAFKA_VERSION" -Dslf4j.version="$SLF4J_VERSION"
build connect "$REPO_ROOT/bench/peers/connect" -Dkafka.version="$KAFKA_VERSION"
