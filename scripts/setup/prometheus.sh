#!/usr/bin/env bash
# Builds Prometheus and promtool $PROMETHEUS_MODULE_VERSION from the Go module proxy
# (`go install github.com/prometheus/prometheus/cmd/{prometheus,promtool}@...`) into
# $SPARK_DLQ_CACHE/prometheus/$PROMETHEUS_MODULE_VERSION/bin, for the monitoring tests: promtool
# checks and unit-tests the chart's alert rules, the server scrapes a running engine and operator.
# Built with the `remove_all_sd` tag (only static, file and HTTP discovery: the tests configure
# their targets statically) and without the web UI's assets, which need an npm build of their
# own: the server and its HTTP API work, its UI pages answer 404. Built with the Go the module
# asks for (its go.mod's toolchain, fetched from the proxy when the local Go is older).
# Also the Prometheus Operator's CRDs for the chart's ServiceMonitor, PodMonitor and
# PrometheusRule, as its Go module $PROMETHEUS_OPERATOR_VERSION ships them, into
# $SPARK_DLQ_CACHE/prometheus-operator/$PROMETHEUS_OPERATOR_VERSION/crds.
# Idempotent: a second run only says where it is.
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"

go_env "" -mod=mod

crds() {  # crds OUT
  log "downloading the Prometheus Operator $PROMETHEUS_OPERATOR_VERSION module for its CRDs"
  local module kind
  module="$(go mod download -json "github.com/prometheus-operator/prometheus-operator@$PROMETHEUS_OPERATOR_VERSION" \
    | python3 -c 'import json, sys; print(json.load(sys.stdin)["Dir"])')"
  for kind in servicemonitors podmonitors prometheusrules; do
    cp "$module/example/prometheus-operator-crd/monitoring.coreos.com_$kind.yaml" "$1/"
  done
}
cached_step "$SPARK_DLQ_CACHE/prometheus-operator/$PROMETHEUS_OPERATOR_VERSION/crds" \
  "Prometheus Operator $PROMETHEUS_OPERATOR_VERSION CRDs" crds

version="$PROMETHEUS_MODULE_VERSION"
build() {  # build OUT
  local bin="$1"
  log "building prometheus and promtool $version (first run: about ten minutes)"
  # The module names the Go it needs (`go 1.26.x`); `auto` fetches that toolchain if ours is older.
  export GOTOOLCHAIN=auto
  local common=github.com/prometheus/common/version ldflags cmd
  ldflags="-s -w -X $common.Version=$version -X $common.Branch=module -X $common.Revision=$version"
  ldflags+=" -X $common.BuildUser=spark-dlq-setup"
  for cmd in prometheus promtool; do
    GOBIN="$bin" CGO_ENABLED=0 nice -n 10 go install -tags remove_all_sd -ldflags "$ldflags" \
      "github.com/prometheus/prometheus/cmd/$cmd@$version"
  done
  "$bin/prometheus" --version 2>&1 | head -1 >&2
  "$bin/promtool" --version 2>&1 | head -1 >&2
}
cached_step "$SPARK_DLQ_CACHE/prometheus/$version/bin" "prometheus $version" build
