#!/usr/bin/env bash
# Builds the benchmark's peers (bench/peers/<name>: a Spring Kafka listener, a Kafka Connect
# standalone worker's plugin) into $SPARK_DLQ_CACHE/bench-peers/<name>-<hash>/: lib/ holds the
# dependencies Maven resolves from the peer's pom.xml, peer.jar the compiled sources. The hash
# covers the pom, the sources and the pinned versions, so a change of any builds anew; otherwise
# the cached build is kept. Needs a JDK 17 or newer (javac).
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"

build() {  # build <name> <maven -D properties...>
  local name="$1"; shift
  local src="$REPO_ROOT/bench/peers/$name"
  # Keep in step with bench.peers.build_dir(): sha256 of the "<sha256>  <path>" lines of the
  # pom and the sources, then of the -D properties, one a line.
  local hash
  hash="$( { (cd "$src" && { echo pom.xml; find src -name '*.java'; } | LC_ALL=C sort | xargs sha256sum); printf '%s\n' "$@"; } | sha256sum | cut -c1-12)"
  local dest="$SPARK_DLQ_CACHE/bench-peers/$name-$hash"
  if [[ -f "$dest/.complete" ]]; then log "${dest#"$SPARK_DLQ_CACHE"/}: cached"; return; fi
  command -v javac >/dev/null || { log "javac not found: the benchmark's peers need a JDK 17+"; exit 1; }
  log "building ${dest#"$SPARK_DLQ_CACHE"/} (dependencies from Maven Central)"
  rm -rf "$dest"; mkdir -p "$dest/lib" "$dest/classes"
  maven -f "$src/pom.xml" "$@" -Dmaven.repo.local="$SPARK_DLQ_CACHE/m2" \
    dependency:copy-dependencies -DoutputDirectory="$dest/lib" -DincludeScope=runtime
  (cd "$src" && find src -name '*.java' | LC_ALL=C sort) | sed "s|^|$src/|" > "$dest/sources.txt"
  javac --release 17 -Xlint:all,-path,-processing -Werror -cp "$dest/lib/*" -d "$dest/classes" "@$dest/sources.txt" >&2
  jar cf "$dest/peer.jar" -C "$dest/classes" .
  rm -rf "$dest/classes"
  touch "$dest/.complete"
}

build spring -Dspring.kafka.version="$SPRING_KAFKA_VERSION" -Dkafka.version="$KAFKA_VERSION" \
  -Dslf4j.version="$SLF4J_VERSION"
build connect -Dkafka.version="$KAFKA_VERSION"
