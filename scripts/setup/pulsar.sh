#!/usr/bin/env bash
# Fetches an Apache Pulsar standalone broker (pulsar-broker with its embedded BookKeeper and
# RocksDB metadata store) from Maven Central into $SPARK_DLQ_CACHE/pulsar/<version>/libs, for the
# test bed's PulsarBroker (devtools/spark_dlq_devtools/pulsar.py). Idempotent: a finished folder
# carries a .complete marker.
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"

dest="$SPARK_DLQ_CACHE/pulsar/$PULSAR_VERSION/libs"
if [[ -f "$dest/.complete" ]]; then log "${dest#"$SPARK_DLQ_CACHE"/}: cached"; exit 0; fi
log "fetching ${dest#"$SPARK_DLQ_CACHE"/} from Maven Central (first run: about 2 minutes)"
rm -rf "$dest"; mkdir -p "$dest"
maven -f "$REPO_ROOT/scripts/setup/maven/pulsar-broker.pom.xml" \
  -s "$REPO_ROOT/scripts/setup/maven/central-only.settings.xml" \
  -Dpulsar.version="$PULSAR_VERSION" -Dmaven.repo.local="$SPARK_DLQ_CACHE/m2" \
  dependency:copy-dependencies -DoutputDirectory="$dest" -DincludeScope=runtime
touch "$dest/.complete"
