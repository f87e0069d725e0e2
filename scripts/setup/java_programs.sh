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

compile() {  # compile OUT NAME SOURCES MAVEN-PROPERTIES...
  local out="$1" name="$2" src="$3"
  shift 3
  need_javac "the Java program $name"
  log "building the Java program $name (dependencies from Maven Central)"
  maven_fetch "$src/pom.xml" "$out/lib" "$@"
  jar_build "$src" "$out/lib/*" -path,-processing,-classfile "$out/$name.jar"
}

# Each program (spark_dlq_devtools.cache_keys.JAVA_PROGRAMS: NAME SOURCES PROPERTY=VERSIONS-KEY...)
# into java/NAME-<key of its pom, its sources and its properties>/, where the tests find it.
programs="$(cache_key java-programs)"
while read -r name src pinned <&3; do
  properties=()
  for property in $pinned; do
    version_key="${property#*=}"
    properties+=("-D${property%%=*}=${!version_key}")
  done
  key="$(cache_key java-program "$REPO_ROOT/$src" "${properties[@]}")"
  cached_step "$SPARK_DLQ_CACHE/java/$name-$key" "the Java program $name" compile "$name" "$REPO_ROOT/$src" "${properties[@]}"
done 3<<<"$programs"
