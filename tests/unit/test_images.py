"""What the real builds and runs of the images cannot show, checked by reading.

``scripts/setup/images.sh`` builds both Dockerfiles with podman on bases made here from Debian's
packages, and the integration tests run the images (``tests/integration/engine``,
``tests/integration/operator``, ``tests/integration/images``). What no build here can prove is
read here: the Dockerfiles' defaults name the public bases and the pinned versions (the set-up
passes its own bases and versions as build arguments), the requirements lists follow
pyproject.toml, the Makefile builds with docker or podman, and the kind script parses.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
import yaml

from spark_dlq_devtools.paths import REPO_ROOT, versions
from spark_dlq_operator import config as operator_config

SPARK_DOCKERFILE = REPO_ROOT / "spark_image" / "Dockerfile"
OPERATOR_DOCKERFILE = REPO_ROOT / "operator" / "Dockerfile"
REQUIREMENTS = REPO_ROOT / "scripts" / "images" / "requirements.py"
MAKEFILE = REPO_ROOT / "Makefile"
CHART = REPO_ROOT / "charts" / "spark-dlq-operator"


def project() -> dict[str, object]:
    data: dict[str, object] = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text())["project"]
    return data


def instructions(dockerfile: Path) -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) with continuation lines joined and comments dropped."""
    text = re.sub(r"\\\n", " ", dockerfile.read_text())
    result = []
    for line in text.splitlines():
        line = line.strip()
        if line and not line.startswith("#"):
            word, _, rest = line.partition(" ")
            result.append((word.upper(), rest.strip()))
    return result


def arg_defaults(dockerfile: Path) -> dict[str, str]:
    defaults = {}
    for word, rest in instructions(dockerfile):
        if word == "ARG" and "=" in rest:
            key, value = rest.split("=", 1)
            defaults.setdefault(key, value)
    return defaults


def stages(dockerfile: Path) -> list[list[tuple[str, str]]]:
    result: list[list[tuple[str, str]]] = []
    for word, rest in instructions(dockerfile):
        if word == "FROM":
            result.append([])
        if result:
            result[-1].append((word, rest))
    return result


def expand(text: str, defaults: dict[str, str]) -> str:
    """``${NAME}`` replaced by the ARG defaults, which may name other ARGs."""
    while "${" in text:
        text = re.sub(r"\$\{(\w+)\}", lambda m: defaults[m.group(1)], text)
    return text


# --- the Dockerfiles' defaults: the public bases and the pinned versions ---------------------------


def test_spark_image_versions_follow_versions_env_and_pyproject() -> None:
    pinned = versions()
    defaults = arg_defaults(SPARK_DOCKERFILE)
    for key in (
        "SPARK_VERSION",
        "SCALA_BINARY",
        "SPARK_KAFKA_CLIENTS_VERSION",
        "SPARK_COMMONS_POOL2_VERSION",
        "DELTA_VERSION",
        "PULSAR_VERSION",
        "SPARK_NETTY_VERSION",
    ):
        assert defaults[key] == pinned[key], key
    engine = project()["optional-dependencies"]["engine"]  # type: ignore[index]
    assert f"pyspark=={pinned['SPARK_VERSION']}" in engine
    assert pinned["SPARK_VERSION"] == operator_config.SPARK_VERSION
    assert yaml.safe_load((CHART / "values.yaml").read_text())["spark"]["version"] == pinned["SPARK_VERSION"]


@pytest.mark.parametrize(
    ("dockerfile", "runtime_base"),
    [
        pytest.param(
            SPARK_DOCKERFILE,
            f"apache/spark:{versions()['SPARK_VERSION']}-scala{versions()['SCALA_BINARY']}-java17-python3-ubuntu",
            id="spark",
        ),
        pytest.param(OPERATOR_DOCKERFILE, "python:3.11-slim-bookworm", id="operator"),
    ],
)
def test_dockerfiles_build_on_the_public_bases_by_default(dockerfile: Path, runtime_base: str) -> None:
    """Where a registry is reachable, the public bases; images.sh passes the bases it makes
    here (``SPARK_IMAGE``, ``PYTHON_IMAGE``, ``MAVEN_IMAGE``) instead."""
    defaults = arg_defaults(dockerfile)
    assert expand(stages(dockerfile)[-1][0][1], defaults) == runtime_base
    bases = {expand(stage[0][1], defaults).split(" AS ")[0] for stage in stages(dockerfile)}
    assert bases <= {
        "python:3.11-slim-bookworm",
        "maven:3.9-eclipse-temurin-17",
        runtime_base,
    }


def test_operator_image_exposes_the_charts_ports() -> None:
    exposed = next(rest for word, rest in stages(OPERATOR_DOCKERFILE)[-1] if word == "EXPOSE").split()
    chart = yaml.safe_load((CHART / "values.yaml").read_text())["operator"]
    assert exposed == [str(chart["liveness"]["port"]), str(chart["metrics"]["port"])]


# --- the requirements the images install ---------------------------------------------------------


@pytest.mark.parametrize(
    ("extra", "exclude", "present", "absent"),
    [
        pytest.param(
            "engine", ["pyspark"], ["PyYAML", "pyarrow", "pandas"], ["pyspark", "spark-dlq"], id="engine"
        ),
        pytest.param(
            "operator", [], ["PyYAML", "kopf", "confluent-kafka"], ["pyspark", "spark-dlq"], id="operator"
        ),
    ],
)
def test_requirements_come_from_pyproject(
    extra: str, exclude: list[str], present: list[str], absent: list[str]
) -> None:
    args = [sys.executable, str(REQUIREMENTS), str(REPO_ROOT / "pyproject.toml"), extra]
    for name in exclude:
        args += ["--exclude", name]
    lines = subprocess.run(args, check=True, capture_output=True, text=True).stdout.split()
    names = {re.split(r"[<>=!~\[;]", line)[0].lower() for line in lines}
    assert {p.lower() for p in present} <= names
    assert not {a.lower() for a in absent} & names
    opt = project()["optional-dependencies"]
    assert all(line in [*project()["dependencies"], *opt[extra]] for line in lines)  # type: ignore[index,misc]


# --- the Makefile --------------------------------------------------------------------------------------


@pytest.mark.parametrize("tool", ["docker", "podman"])
def test_makefile_builds_both_images(tool: str) -> None:
    make = shutil.which("make")
    assert make, "make is needed to check the Makefile"
    out = subprocess.run(
        [make, "-n", "-C", str(REPO_ROOT), "images", f"CONTAINER_TOOL={tool}"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    version, pinned = project()["version"], versions()
    assert f"{tool} build -f operator/Dockerfile -t spark-dlq-operator:{version} ." in out
    assert (
        f"{tool} build -f spark_image/Dockerfile --build-arg SPARK_VERSION={pinned['SPARK_VERSION']}" in out
    )
    for key in (
        "SCALA_BINARY",
        "SPARK_KAFKA_CLIENTS_VERSION",
        "SPARK_COMMONS_POOL2_VERSION",
        "DELTA_VERSION",
        "PULSAR_VERSION",
        "SPARK_NETTY_VERSION",
    ):
        assert f"--build-arg {key}={pinned[key]}" in out
    # The chart's default images are the ones the Makefile builds.
    values = yaml.safe_load((CHART / "values.yaml").read_text())
    assert values["image"]["repository"] == "spark-dlq-operator"
    assert values["spark"]["image"]["repository"] == "spark-dlq"
    assert f"spark-dlq:{version}" == operator_config.DEFAULT_SPARK_IMAGE
