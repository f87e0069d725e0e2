# Container images of spark-dlq, for a cluster (the Helm chart in charts/spark-dlq-operator),
# built on the public bases (python:3.11-slim-bookworm, a Maven image, apache/spark) with docker,
# or with podman where there is no docker (CONTAINER_TOOL=podman to choose it):
#
#   make images                   # build both images, then push them where your cluster pulls
#
# Where no registry is reachable (spark-dlq's own machines), scripts/setup/images.sh builds the
# same Dockerfiles with podman on bases it makes from Debian's packages, passed as build
# arguments (PYTHON_IMAGE, MAVEN_IMAGE, SPARK_IMAGE); the test suite and scripts/cluster-e2e.sh
# run those images.
# Versions come from scripts/setup/versions.env and pyproject.toml, never written here.

include scripts/setup/versions.env

VERSION := $(shell python3 -c 'import tomllib; print(tomllib.load(open("pyproject.toml", "rb"))["project"]["version"])')
CONTAINER_TOOL ?= $(shell command -v docker >/dev/null 2>&1 && echo docker || echo podman)
OPERATOR_IMAGE ?= spark-dlq-operator:$(VERSION)
SPARK_IMAGE ?= spark-dlq:$(VERSION)

SPARK_BUILD_ARGS := \
	--build-arg SPARK_VERSION=$(SPARK_VERSION) \
	--build-arg SCALA_BINARY=$(SCALA_BINARY) \
	--build-arg SPARK_KAFKA_CLIENTS_VERSION=$(SPARK_KAFKA_CLIENTS_VERSION) \
	--build-arg SPARK_COMMONS_POOL2_VERSION=$(SPARK_COMMONS_POOL2_VERSION) \
	--build-arg DELTA_VERSION=$(DELTA_VERSION) \
	--build-arg PULSAR_VERSION=$(PULSAR_VERSION) \
	--build-arg SPARK_NETTY_VERSION=$(SPARK_NETTY_VERSION)

.PHONY: images operator-image spark-image

images: operator-image spark-image

operator-image:
	$(CONTAINER_TOOL) build -f operator/Dockerfile -t $(OPERATOR_IMAGE) .

spark-image:
	$(CONTAINER_TOOL) build -f spark_image/Dockerfile $(SPARK_BUILD_ARGS) -t $(SPARK_IMAGE) .
