#!/usr/bin/env bash
# Compiles the engine's JVM part (spark_image/jvm: the delay stage's StatefulProcessor, the Pulsar
# connector) against the venv's PySpark jars and Pulsar's Java client (fetched by jars.sh, which
# runs first) into $SPARK_DLQ_CACHE/engine-jar/<spark>-<sources hash>/. A change of the Java
# sources or of the Spark version builds a new jar; otherwise the cached one is kept.
# Needs a JDK 17 or newer (javac); the image builds the same sources (spark_image/Dockerfile).
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"

src="$REPO_ROOT/spark_image/jvm"
# Keep in step with spark_dlq_devtools.paths.engine_jar(): sha256 of "<sha256>  <path>" lines.
hash="$(cd "$src" && find src -name '*.java' | LC_ALL=C sort | xargs sha256sum | sha256sum | cut -c1-12)"
dest="$SPARK_DLQ_CACHE/engine-jar/$SPARK_VERSION-$hash"
if [[ -f "$dest/.complete" ]]; then log "${dest#"$SPARK_DLQ_CACHE"/}: cached"; exit 0; fi

command -v javac >/dev/null || { log "javac not found: the engine's jar needs a JDK 17+ (Debian: openjdk-17-jdk-headless)"; exit 1; }
venv="$SPARK_DLQ_CACHE/venv"
spark_jars="$("$venv/bin/python" -c 'import os, pyspark; print(os.path.join(os.path.dirname(pyspark.__file__), "jars"))')"
pulsar_jars="$SPARK_DLQ_CACHE/spark-jars/pulsar-client-$PULSAR_VERSION-spark-$SPARK_VERSION"
[[ -f "$pulsar_jars/.complete" ]] || { log "${pulsar_jars#"$SPARK_DLQ_CACHE"/} not found: run scripts/setup/jars.sh first"; exit 1; }
log "compiling ${dest#"$SPARK_DLQ_CACHE"/}"
rm -rf "$dest"; mkdir -p "$dest/classes"
(cd "$src" && find src -name '*.java' | LC_ALL=C sort) | sed "s|^|$src/|" > "$dest/sources.txt"
javac --release 17 -Xlint:all,-path -Werror -cp "$spark_jars/*:$pulsar_jars/*" -d "$dest/classes" "@$dest/sources.txt" >&2
jar cf "$dest/spark-dlq-engine.jar" -C "$dest/classes" .
rm -rf "$dest/classes"
touch "$dest/.complete"
