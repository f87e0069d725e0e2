# Container images of spark-dlq, for a cluster (the Helm chart in charts/spark-dlq-operator).
#
#   make images                   # docker build both images
#   make kind-load KIND_CLUSTER=x # ... and load them into a kind cluster
#
# NOT RUN on the machine this project is developed on (it has no Docker daemon): the targets are
# checked by reading and by tests/unit/test_images.py; scripts/kind-e2e.sh uses them.
# Versions come from scripts/setup/versions.env and pyproject.toml, never written here.

include scripts/setup/versions.env

VERSION := $(shell python3 -c 'import tomllib; print(tomllib.load(open("pyproject.toml", "rb"))["project"]["version"])')
DOCKER ?= docker
KIND ?= kind
KIND_CLUSTER ?= spark-dlq
OPERATOR_IMAGE ?= spark-dlq-operator:$(VERSION)
SPARK_IMAGE ?= spark-dlq:$(VERSION)

SPARK_BUILD_ARGS := \
	--build-arg SPARK_VERSION=$(SPARK_VERSION) \
	--build-arg SCALA_BINARY=$(SCALA_BINARY) \
	--build-arg SPARK_KAFKA_CLIENTS_VERSION=$(SPARK_KAFKA_CLIENTS_VERSION) \
	--build-arg SPARK_COMMONS_POOL2_VERSION=$(SPARK_COMMONS_POOL2_VERSION)

.PHONY: images operator-image spark-image kind-load

images: operator-image spark-image

operator-image:
	$(DOCKER) build -f operator/Dockerfile -t $(OPERATOR_IMAGE) .

spark-image:
	$(DOCKER) build -f spark_image/Dockerfile $(SPARK_BUILD_ARGS) -t $(SPARK_IMAGE) .

kind-load: images
	$(KIND) load docker-image --name $(KIND_CLUSTER) $(OPERATOR_IMAGE) $(SPARK_IMAGE)
