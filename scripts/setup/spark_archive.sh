#!/usr/bin/env bash
# A class-data-sharing archive of the local Spark driver's classes, made by a short training run
# (spark_dlq_devtools.jvm_archive), into $SPARK_DLQ_CACHE/spark-cds/<key>.jsa: every local Spark
# driver (tests, dlq-engine run, the stand-in spark-operator) then starts without loading them.
# Keyed by the Java runtime and Spark's jars; the cached archive is kept otherwise.
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"

venv="$SPARK_DLQ_CACHE/venv"
start=$SECONDS
path="$(PYTHONPATH="$REPO_ROOT/devtools:$REPO_ROOT/spark_image${PYTHONPATH:+:$PYTHONPATH}" \
  "$venv/bin/python" -m spark_dlq_devtools.jvm_archive)"
log "Spark class-data-sharing archive: ${path#"$SPARK_DLQ_CACHE"/} ($((SECONDS - start))s)"
