"""Where the test bed finds what the setup scripts installed, and the pinned versions.

``scripts/setup/versions.env`` is the one place versions are written; the setup scripts
source it and this module reads it, so the fixtures start exactly what was installed.
"""

from __future__ import annotations

import os
from functools import cache
from pathlib import Path

from spark_dlq_devtools.cache_keys import (
    JAVA_PROGRAMS,
    argocd_health_key,
    engine_jar_key,
    java_program_key,
    node_images_key,
)

REPO_ROOT = Path(__file__).resolve().parents[2]


def cache_dir() -> Path:
    """The cache folder outside the repository (``SPARK_DLQ_CACHE``, default
    ``~/.cache/spark-dlq``)."""
    return Path(os.environ.get("SPARK_DLQ_CACHE", Path.home() / ".cache" / "spark-dlq"))


@cache
def versions() -> dict[str, str]:
    result: dict[str, str] = {}
    for line in (REPO_ROOT / "scripts" / "setup" / "versions.env").read_text().splitlines():
        line = line.strip()
        if line and not line.startswith("#") and "=" in line:
            key, value = line.split("=", 1)
            result[key.strip()] = value.strip()
    return result


class NotInstalled(RuntimeError):
    """A part of the test bed is missing: the message says which setup script installs it."""


def _need(path: Path, what: str, script: str) -> Path:
    if not path.exists():
        raise NotInstalled(f"{what} not found at {path}; run scripts/setup/{script} (or scripts/setup.sh)")
    return path


def kafka_libs(version: str | None = None) -> Path:
    """An Apache Kafka broker's jars: the test bed's (``KAFKA_VERSION``) or another that
    ``jars.sh`` fetches (``KAFKA_SHARE_GROUP_DLQ_VERSION``)."""
    v = version or versions()["KAFKA_VERSION"]
    return _need(cache_dir() / "kafka" / v / "libs" / ".complete", f"Apache Kafka {v}", "jars.sh").parent


def pulsar_libs() -> Path:
    """A standalone Apache Pulsar broker's jars (``pulsar-broker`` and what it needs)."""
    v = versions()["PULSAR_VERSION"]
    return _need(cache_dir() / "pulsar" / v / "libs" / ".complete", f"Apache Pulsar {v}", "pulsar.sh").parent


def kafka_tools() -> Path:
    """Kafka's command-line tools (``kafka-tools`` and what it needs beside the broker's jars)."""
    v = versions()["KAFKA_VERSION"]
    return _need(cache_dir() / "kafka" / v / "tools" / ".complete", f"Kafka tools {v}", "jars.sh").parent


def spark_kafka_jars() -> list[Path]:
    known = versions()
    v = f"{known['SPARK_VERSION']}-kafka-clients-{known['SPARK_KAFKA_CLIENTS_VERSION']}"
    folder = _need(
        cache_dir() / "spark-jars" / v / ".complete", f"Spark Kafka connector {v}", "jars.sh"
    ).parent
    return sorted(folder.glob("*.jar"))


def spark_delta_jars() -> list[Path]:
    """Delta Lake's Spark connector and storage jars (the dead-letter table's ``delta`` format)."""
    v = versions()["DELTA_VERSION"]
    folder = _need(
        cache_dir() / "spark-jars" / f"delta-{v}" / ".complete", f"Delta Lake {v}", "jars.sh"
    ).parent
    return sorted(folder.glob("*.jar"))


def spark_pulsar_jars() -> list[Path]:
    """Pulsar's Java client (``pulsar-client-original``) and the jars it needs beside Spark's: the
    engine's Pulsar connector runs on them."""
    known = versions()
    v = f"{known['PULSAR_VERSION']}-spark-{known['SPARK_VERSION']}"
    folder = _need(
        cache_dir() / "spark-jars" / f"pulsar-client-{v}" / ".complete",
        f"Pulsar's Java client {v}",
        "jars.sh",
    ).parent
    return sorted(folder.glob("*.jar"))


def engine_jar() -> Path:
    """The engine's JVM part (``spark_image/jvm``), compiled by ``engine_jar.sh`` into a folder
    named by the Spark version and a hash of the Java sources."""
    digest = engine_jar_key(REPO_ROOT / "spark_image" / "jvm")
    folder = cache_dir() / "engine-jar" / f"{versions()['SPARK_VERSION']}-{digest}"
    return _need(folder / ".complete", "the engine's jar", "engine_jar.sh").parent / "spark-dlq-engine.jar"


def java_program(name: str) -> Path:
    """A Java program built by ``java_programs.sh``: its folder, with ``<name>.jar`` and
    ``lib/``, named by a hash of its pom, its sources and its Maven properties."""
    if name not in JAVA_PROGRAMS:
        raise ValueError(f"unknown Java program {name!r}; known: {', '.join(JAVA_PROGRAMS)}")
    folder, properties = JAVA_PROGRAMS[name]
    pinned = versions()
    digest = java_program_key(REPO_ROOT / folder, [f"-D{prop}={pinned[key]}" for prop, key in properties])
    built = cache_dir() / "java" / f"{name}-{digest}"
    return _need(built / ".complete", f"the Java program {name}", "java_programs.sh").parent


def java_classpath(name: str) -> str:
    """The class path of ``java_program(name)``: its jar and its dependencies."""
    folder = java_program(name)
    return os.pathsep.join([str(folder / f"{name}.jar"), str(folder / "lib" / "*")])


def spark_operator() -> Path:
    """The Kubeflow spark-operator built from its Go module by ``spark_operator.sh``: its
    ``bin/spark-operator``, ``chart/`` and ``crds/``."""
    v = versions()["SPARK_OPERATOR_VERSION"]
    folder = cache_dir() / "spark-operator" / v
    return _need(folder / ".complete", f"the spark-operator {v}", "spark_operator.sh").parent


def kubernetes_bin(name: str) -> Path:
    v = versions()["KUBERNETES_VERSION"]
    return _need(cache_dir() / "kubernetes" / f"v{v}" / "bin" / name, f"{name} {v}", "kubernetes.sh")


def node_images_digest() -> str:
    """A hash of the node images' sources (``devtools/node-images`` and the archive writer):
    ``node.sh`` builds into ``node/images-<digest>`` and tags the images with it."""
    return node_images_key(REPO_ROOT / "devtools")


def node_images() -> Path:
    """The node's own image archives (``pause.tar``, ``probe.tar``), built by ``node.sh``."""
    folder = cache_dir() / "node" / f"images-{node_images_digest()}"
    return _need(folder / ".complete", "the node's images", "node.sh").parent


def coredns_bin() -> Path:
    v = versions()["COREDNS_VERSION"]
    return _need(cache_dir() / "node" / f"coredns-{v}" / "coredns", f"CoreDNS {v}", "node.sh")


def crictl_bin() -> Path:
    v = versions()["CRI_TOOLS_VERSION"]
    return _need(cache_dir() / "node" / f"crictl-{v}" / "crictl", f"crictl {v}", "node.sh")


def helm_bin() -> Path:
    v = versions()["HELM_VERSION"]
    return _need(cache_dir() / "helm" / v / "bin" / "helm", f"helm {v}", "helm.sh")


def argocd_health_bin() -> Path:
    """``devtools/argocd-health`` (Argo CD's own health code), built by ``argocd_health.sh`` into a
    folder named by a hash of its Go sources."""
    digest = argocd_health_key(REPO_ROOT / "devtools" / "argocd-health")
    folder = cache_dir() / "tools" / "argocd-health" / digest
    return _need(folder / ".complete", "argocd-health", "argocd_health.sh").parent / "argocd-health"


def etcd_bin() -> Path:
    for folder in ("/usr/bin", "/usr/local/bin"):
        candidate = Path(folder) / "etcd"
        if candidate.exists():
            return candidate
    raise NotInstalled("etcd not found; run scripts/setup/kubernetes.sh (installs Debian's etcd-server)")


def work_dir(name: str) -> Path:
    """A scratch folder for running services (logs, data), under the cache's ``run/``."""
    path = cache_dir() / "run" / name
    path.mkdir(parents=True, exist_ok=True)
    return path


def prometheus_operator_crds() -> list[Path]:
    """The Prometheus Operator's ServiceMonitor, PodMonitor and PrometheusRule CRDs, from its Go
    module (``prometheus.sh``): what the chart's monitoring objects are validated against."""
    v = versions()["PROMETHEUS_OPERATOR_VERSION"]
    folder = _need(
        cache_dir() / "prometheus-operator" / v / "crds" / ".complete",
        f"Prometheus Operator {v}'s CRDs",
        "prometheus.sh",
    ).parent
    return sorted(folder.glob("*.yaml"))


def prometheus_bin(name: str) -> Path:
    """``prometheus`` or ``promtool``, built from the Go module proxy by ``prometheus.sh``."""
    v = versions()["PROMETHEUS_MODULE_VERSION"]
    folder = _need(
        cache_dir() / "prometheus" / v / "bin" / ".complete", f"Prometheus {v}", "prometheus.sh"
    ).parent
    return folder / name


def spark_operator_dir() -> Path:
    """The Kubeflow spark-operator of ``SPARK_OPERATOR_VERSION``, built from its Go module by
    ``spark_operator.sh``: ``bin/spark-operator``, ``crds/`` (its CRDs), ``chart/`` (its chart)."""
    v = versions()["SPARK_OPERATOR_VERSION"]
    return _need(
        cache_dir() / "spark-operator" / v / ".complete-v2", f"spark-operator {v}", "spark_operator.sh"
    ).parent


def spark_operator_bin() -> Path:
    return spark_operator_dir() / "bin" / "spark-operator"


def spark_operator_chart() -> Path:
    return spark_operator_dir() / "chart"


def spark_operator_crds_dir() -> Path:
    """The spark-operator's CRDs alone, from its Go module (``spark_operator.sh --crds``, which
    the demo's set-up runs: no binary needed)."""
    v = versions()["SPARK_OPERATOR_VERSION"]
    return _need(
        cache_dir() / "spark-operator" / f"{v}-crds" / ".complete",
        f"the spark-operator {v}'s CRDs",
        "spark_operator.sh --crds",
    ).parent


def spark_operator_crds() -> list[Path]:
    """Every CRD of the spark-operator (SparkApplication, ScheduledSparkApplication, SparkConnect):
    its controller and webhook need all of them served."""
    return sorted(spark_operator_crds_dir().glob("*.yaml"))


def spark_application_crd() -> Path:
    """The real SparkApplication CRD (``sparkoperator.k8s.io_sparkapplications.yaml``) of the
    spark-operator the test bed runs."""
    return spark_operator_crds_dir() / "sparkoperator.k8s.io_sparkapplications.yaml"


def kafka_topic_crd(*, v1beta2: bool = False) -> Path:
    """The real KafkaTopic CRD, made by Strimzi's own generator (``strimzi.sh``): of a current
    Strimzi (served as ``v1`` only), or with ``v1beta2`` of an older one that serves no ``v1``."""
    v = versions()["STRIMZI_V1BETA2_API_VERSION" if v1beta2 else "STRIMZI_API_VERSION"]
    folder = _need(
        cache_dir() / "strimzi" / v / ".complete", f"Strimzi {v}'s KafkaTopic CRD", "strimzi.sh"
    ).parent
    return folder / "043-Crd-kafkatopic.yaml"


def release_tools() -> Path:
    """The release tools' virtualenv (``release_tools.sh``): ``bin/python -m build``,
    ``bin/pip-compile``, ``bin/cyclonedx-py`` and ``bin/syft``."""
    known = versions()
    name = (
        f"venv-build-{known['PYTHON_BUILD_VERSION']}-pip-tools-{known['PIP_TOOLS_VERSION']}"
        f"-cyclonedx-{known['CYCLONEDX_BOM_VERSION']}"
    )
    folder = _need(
        cache_dir() / "release-tools" / name / ".complete", "the release tools", "release_tools.sh"
    ).parent
    if not (folder / "bin" / "syft").exists():
        raise NotInstalled(f"syft not found in {folder / 'bin'}; run scripts/setup/release_tools.sh")
    return folder
