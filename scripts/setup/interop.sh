#!/usr/bin/env bash
# The interop program (tests/interop/java): the real Spring for Apache Kafka, Kafka Connect
# runtime and Pulsar client classes, resolved from Maven Central by tests/interop/java/pom.xml,
# and the program compiled against them, into
# $SPARK_DLQ_CACHE/interop/<hash of pom, sources and versions>/ (libs/*.jar, interop.jar). The
# interop tests (tests/integration/engine/test_interop.py) run it to check the header profiles
# (deadLetter.headerProfiles) against those libraries. A change of the pom, the sources or the
# versions builds a new folder; otherwise the cached one is kept. Needs a JDK 17+ and Maven.
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"

src="$REPO_ROOT/tests/interop/java"
# Keep in step with spark_dlq_devtools.paths.interop(): sha256 of "<sha256>  <path>" lines of
# the pom and the sources, then of the three versions.
hash="$( (cd "$src" && { echo pom.xml; find src -name '*.java'; } | LC_ALL=C sort | xargs sha256sum
          echo "$KAFKA_VERSION $SPRING_KAFKA_VERSION $PULSAR_CLIENT_VERSION") | sha256sum | cut -c1-12)"
dest="$SPARK_DLQ_CACHE/interop/$hash"
if [[ -f "$dest/.complete" ]]; then log "${dest#"$SPARK_DLQ_CACHE"/}: cached"; exit 0; fi

command -v javac >/dev/null || { log "javac not found: the interop program needs a JDK 17+"; exit 1; }
log "building ${dest#"$SPARK_DLQ_CACHE"/} (Spring Kafka $SPRING_KAFKA_VERSION, Kafka Connect $KAFKA_VERSION, Pulsar client $PULSAR_CLIENT_VERSION)"
rm -rf "$dest"; mkdir -p "$dest/classes"
maven -f "$src/pom.xml" -Dkafka.version="$KAFKA_VERSION" -Dspring.kafka.version="$SPRING_KAFKA_VERSION" \
  -Dpulsar.version="$PULSAR_CLIENT_VERSION" -Dmaven.repo.local="$SPARK_DLQ_CACHE/m2" \
  dependency:copy-dependencies -DoutputDirectory="$dest/libs" -DincludeScope=runtime
(cd "$src" && find src -name '*.java' | LC_ALL=C sort) | sed "s|^|$src/|" > "$dest/sources.txt"
javac --release 17 -Xlint:all,-path,-processing,-classfile -Werror -cp "$dest/libs/*" -d "$dest/classes" "@$dest/sources.txt" >&2
jar cf "$dest/interop.jar" -C "$dest/classes" .
rm -rf "$dest/classes"
touch "$dest/.complete"
