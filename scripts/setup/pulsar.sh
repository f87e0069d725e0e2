#!/usr/bin/env bash
# Fetches an Apache Pulsar standalone broker (pulsar-broker with its embedded BookKeeper and
# RocksDB metadata store) from Maven Central into $SPARK_DLQ_CACHE/pulsar/<version>/libs, for the
# test bed's PulsarBroker (devtools/spark_dlq_devtools/pulsar.py). Idempotent: a finished folder
# carries a .complete marker.
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"

fetch() {  # fetch OUT
  log "fetching Apache Pulsar $PULSAR_VERSION from Maven Central (first run: about 2 minutes)"
  maven_fetch "$REPO_ROOT/scripts/setup/maven/pulsar-broker.pom.xml" "$1" \
    -s "$REPO_ROOT/scripts/setup/maven/central-only.settings.xml" -Dpulsar.version="$PULSAR_VERSION"
}
cached_step "$SPARK_DLQ_CACHE/pulsar/$PULSAR_VERSION/libs" "Apache Pulsar $PULSAR_VERSION" fetch
