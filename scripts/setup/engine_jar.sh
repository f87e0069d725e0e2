#!/usr/bin/env bash
# Compiles the engine's JVM part (spark_image/jvm: the delay stage's StatefulProcessor, the Pulsar
# connector) against the venv's PySpark jars and Pulsar's Java client (fetched by jars.sh, which
# runs first) into $SPARK_DLQ_CACHE/engine-jar/<spark>-<sources key>/. A change of the Java
# sources or of the Spark version builds a new jar; otherwise the cached one is kept.
# Needs a JDK 17 or newer (javac); the image builds the same sources (spark_image/Dockerfile).
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"

src="$REPO_ROOT/spark_image/jvm"
dest="$SPARK_DLQ_CACHE/engine-jar/$SPARK_VERSION-$(cache_key engine-jar "$src")"

compile() {  # compile OUT
  need_javac "the engine's jar"
  local venv="$SPARK_DLQ_CACHE/venv" spark_jars
  spark_jars="$("$venv/bin/python" -c 'import os, pyspark; print(os.path.join(os.path.dirname(pyspark.__file__), "jars"))')"
  local pulsar_jars="$SPARK_DLQ_CACHE/spark-jars/pulsar-client-$PULSAR_VERSION-spark-$SPARK_VERSION"
  [[ -f "$pulsar_jars/.complete" ]] || { log "${pulsar_jars#"$SPARK_DLQ_CACHE"/} not found: run scripts/setup/jars.sh first"; exit 1; }
  log "compiling ${dest#"$SPARK_DLQ_CACHE"/}"
  jar_build "$src" "$spark_jars/*:$pulsar_jars/*" -path "$1/spark-dlq-engine.jar"
}
cached_step "$dest" "the engine's jar" compile
