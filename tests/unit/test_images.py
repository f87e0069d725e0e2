"""The images, the Makefile and the kind script, checked statically (no Docker daemon here).

The Dockerfiles are read as text: their versions follow scripts/setup/versions.env and
pyproject.toml, they copy what the operator's SparkApplication expects to where it expects it,
and they run as non-root users. What can run without Docker does: the requirements lists they
install, and a wheel built from exactly the files each Dockerfile copies.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
import tomllib
import zipfile
from pathlib import Path

import pytest
import yaml

from spark_dlq_devtools.paths import REPO_ROOT, versions
from spark_dlq_operator import config as operator_config
from spark_dlq_operator import render

SPARK_DOCKERFILE = REPO_ROOT / "spark_image" / "Dockerfile"
OPERATOR_DOCKERFILE = REPO_ROOT / "operator" / "Dockerfile"
REQUIREMENTS = REPO_ROOT / "scripts" / "images" / "requirements.py"
MAKEFILE = REPO_ROOT / "Makefile"
KIND_E2E = REPO_ROOT / "scripts" / "kind-e2e.sh"
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


# --- the Spark image -------------------------------------------------------------------------------


def test_spark_image_versions_follow_versions_env_and_pyproject() -> None:
    pinned = versions()
    defaults = arg_defaults(SPARK_DOCKERFILE)
    for key in (
        "SPARK_VERSION",
        "SCALA_BINARY",
        "SPARK_KAFKA_CLIENTS_VERSION",
        "SPARK_COMMONS_POOL2_VERSION",
    ):
        assert defaults[key] == pinned[key], key
    engine = project()["optional-dependencies"]["engine"]  # type: ignore[index]
    assert f"pyspark=={pinned['SPARK_VERSION']}" in engine
    assert pinned["SPARK_VERSION"] == operator_config.SPARK_VERSION
    assert yaml.safe_load((CHART / "values.yaml").read_text())["spark"]["version"] == pinned["SPARK_VERSION"]


def test_spark_image_is_the_official_apache_spark_python_image_by_default() -> None:
    """Where a registry is reachable, the public base; scripts/setup/images.sh passes the base
    it makes here as SPARK_IMAGE instead."""
    defaults = arg_defaults(SPARK_DOCKERFILE)
    runtime = stages(SPARK_DOCKERFILE)[-1]
    base = expand(runtime[0][1], defaults)
    assert (
        base
        == f"apache/spark:{versions()['SPARK_VERSION']}-scala{versions()['SCALA_BINARY']}-java17-python3-ubuntu"
    )


def test_spark_image_bakes_the_kafka_connector_with_the_test_beds_pom() -> None:
    jars = stages(SPARK_DOCKERFILE)[0]
    assert jars[0][1].endswith(" AS jars")
    copied = [rest for word, rest in jars if word == "COPY"]
    assert copied == ["scripts/setup/maven/spark-kafka.pom.xml /build/pom.xml"]
    run = " ".join(rest for word, rest in jars if word == "RUN")
    for prop, arg in (
        ("spark.version", "SPARK_VERSION"),
        ("scala.binary", "SCALA_BINARY"),
        ("kafka.clients.version", "SPARK_KAFKA_CLIENTS_VERSION"),
        ("commons.pool2.version", "SPARK_COMMONS_POOL2_VERSION"),
    ):
        assert f'-D{prop}="${{{arg}}}"' in run
    # The same -D properties as scripts/setup/jars.sh passes to the same pom.
    jars_sh = (REPO_ROOT / "scripts" / "setup" / "jars.sh").read_text()
    for prop in ("spark.version", "scala.binary", "kafka.clients.version", "commons.pool2.version"):
        assert f"-D{prop}=" in jars_sh
    pom = (REPO_ROOT / "scripts" / "setup" / "maven" / "spark-kafka.pom.xml").read_text()
    assert pom.count("<dependency>") == 4
    assert 'test "$(ls /jars/*.jar | wc -l)" -eq 4' in run
    runtime = stages(SPARK_DOCKERFILE)[-1]
    assert ("COPY", "--from=jars --chmod=0644 /jars/ /opt/spark/jars/") in runtime


def test_spark_image_compiles_the_engines_jar_as_the_setup_script_does() -> None:
    by_name = {stage[0][1].rsplit(" AS ", 1)[-1]: stage for stage in stages(SPARK_DOCKERFILE)}
    defaults = arg_defaults(SPARK_DOCKERFILE)
    runtime = stages(SPARK_DOCKERFILE)[-1]
    # Compiled against the runtime's own Spark jars, with the flags engine_jar.sh uses.
    assert expand(by_name["spark"][0][1], defaults) == f"{expand(runtime[0][1], defaults)} AS spark"
    build = by_name["engine-jar"]
    assert ("COPY", "--from=spark /opt/spark/jars /spark-jars") in build
    assert ("COPY", "spark_image/jvm/src /build/src") in build
    run = " ".join(rest for word, rest in build if word == "RUN")
    flags = "javac --release 17 -Xlint:all,-path -Werror"
    assert flags in run
    assert flags in (REPO_ROOT / "scripts" / "setup" / "engine_jar.sh").read_text()
    assert ("COPY", "--from=engine-jar --chmod=0644 /build/spark-dlq-engine.jar /opt/spark/jars/") in runtime


def test_spark_image_installs_the_engine_without_pyspark() -> None:
    wheel = stages(SPARK_DOCKERFILE)[1]
    run = " ".join(rest for word, rest in wheel if word == "RUN")
    assert "requirements.py pyproject.toml engine --exclude pyspark" in run
    runtime = " ".join(rest for word, rest in stages(SPARK_DOCKERFILE)[-1] if word == "RUN")
    assert "python3.11 -m venv /opt/spark-dlq/venv" in runtime
    assert "pip install --no-cache-dir --no-deps /tmp/dist/*.whl" in runtime
    assert "pyspark.zip" in runtime
    assert "py4j-*-src.zip" in runtime


def test_spark_image_has_the_entry_file_the_operator_names() -> None:
    main_file = render.MAIN_APPLICATION_FILE.removeprefix("local://")
    runtime = stages(SPARK_DOCKERFILE)[-1]
    assert ("COPY", f"spark_image/dlq_engine_main.py {main_file}") in runtime
    env = " ".join(rest for word, rest in runtime if word == "ENV")
    assert "PYSPARK_PYTHON=/opt/spark-dlq/venv/bin/python" in env
    assert "PYSPARK_DRIVER_PYTHON=/opt/spark-dlq/venv/bin/python" in env


def test_spark_image_python_meets_the_projects_requires_python() -> None:
    requires = str(project()["requires-python"])
    assert requires == ">=3.11"
    runtime = " ".join(rest for word, rest in stages(SPARK_DOCKERFILE)[-1] if word == "RUN")
    assert "python3.11" in runtime


def last_user(dockerfile: Path) -> str:
    users = [rest for word, rest in stages(dockerfile)[-1] if word == "USER"]
    assert users, f"{dockerfile}: no USER in the final stage"
    return users[-1]


@pytest.mark.parametrize("dockerfile", [SPARK_DOCKERFILE, OPERATOR_DOCKERFILE], ids=["spark", "operator"])
def test_images_run_as_a_numeric_non_root_user(dockerfile: Path) -> None:
    uid = last_user(dockerfile).split(":")[0]
    assert uid.isdigit(), "a numeric uid lets runAsNonRoot verify it"
    assert int(uid) != 0


# --- the operator image ------------------------------------------------------------------------------


def test_operator_image_is_slim_python_running_dlq_operator() -> None:
    defaults = arg_defaults(OPERATOR_DOCKERFILE)
    assert defaults["PYTHON_IMAGE"].startswith("python:3.11-slim")
    runtime = stages(OPERATOR_DOCKERFILE)[-1]
    assert expand(runtime[0][1], defaults) == defaults["PYTHON_IMAGE"]
    assert ("ENTRYPOINT", '["dlq-operator"]') in runtime
    cmd = next(rest for word, rest in runtime if word == "CMD")
    assert cmd.startswith('["run"')
    wheel = " ".join(rest for word, rest in stages(OPERATOR_DOCKERFILE)[0] if word == "RUN")
    assert "requirements.py pyproject.toml operator" in wheel


def test_operator_image_user_matches_the_charts_security_context() -> None:
    uid, gid = last_user(OPERATOR_DOCKERFILE).split(":")
    values = yaml.safe_load((CHART / "values.yaml").read_text())["operator"]["podSecurityContext"]
    assert (values["runAsUser"], values["runAsGroup"]) == (int(uid), int(gid))
    exposed = next(rest for word, rest in stages(OPERATOR_DOCKERFILE)[-1] if word == "EXPOSE").split()
    chart = yaml.safe_load((CHART / "values.yaml").read_text())["operator"]
    assert exposed == [str(chart["liveness"]["port"]), str(chart["metrics"]["port"])]


@pytest.mark.parametrize("dockerfile", [SPARK_DOCKERFILE, OPERATOR_DOCKERFILE], ids=["spark", "operator"])
def test_every_copied_source_exists_and_is_not_docker_ignored(dockerfile: Path) -> None:
    ignored = {
        line.strip()
        for line in (REPO_ROOT / ".dockerignore").read_text().splitlines()
        if line.strip() and not line.startswith("#")
    }
    for stage in stages(dockerfile):
        for word, rest in stage:
            if word != "COPY" or rest.startswith("--from"):
                continue
            *sources, _ = rest.split()
            for source in sources:
                assert (REPO_ROOT / source).exists(), source
                assert source.split("/")[0] not in ignored, f"{source} is in .dockerignore"


@pytest.mark.parametrize(
    ("dockerfile", "packages"),
    [
        pytest.param(SPARK_DOCKERFILE, {"dlq_engine"}, id="spark"),
        pytest.param(OPERATOR_DOCKERFILE, {"dlq_engine", "spark_dlq_operator"}, id="operator"),
    ],
)
def test_wheel_builds_from_exactly_what_the_dockerfile_copies(
    dockerfile: Path, packages: set[str], tmp_path: Path
) -> None:
    wheel_stage = next(s for s in stages(dockerfile) if s[0][1].endswith(" AS wheel"))
    src = tmp_path / "src"
    src.mkdir()
    for word, rest in wheel_stage:
        if word == "COPY":
            *sources, target = rest.split()
            if target.startswith("/"):
                continue  # outside the build folder (the requirements script)
            for item in sources:
                path = REPO_ROOT / item
                destination = src / (path.name if target == "./" else target)
                if path.is_dir():
                    shutil.copytree(path, destination, ignore=shutil.ignore_patterns("__pycache__"))
                else:
                    destination.parent.mkdir(parents=True, exist_ok=True)
                    shutil.copy(path, destination)
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "-q",
            "--no-deps",
            "--no-build-isolation",
            "-w",
            str(tmp_path / "dist"),
            str(src),
        ],
        check=True,
        capture_output=True,
        timeout=120,
    )
    [wheel] = (tmp_path / "dist").glob("*.whl")
    with zipfile.ZipFile(wheel) as archive:
        top = {name.split("/")[0] for name in archive.namelist() if not name.startswith("spark_dlq-")}
    assert top == packages


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


# --- Makefile and the kind script --------------------------------------------------------------------


def test_makefile_builds_and_loads_both_images() -> None:
    make = shutil.which("make")
    assert make, "make is needed to check the Makefile"
    out = subprocess.run(
        [make, "-n", "-C", str(REPO_ROOT), "kind-load", "KIND_CLUSTER=test", "DOCKER=docker"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    version, pinned = project()["version"], versions()
    assert f"docker build -f operator/Dockerfile -t spark-dlq-operator:{version} ." in out
    assert (
        f"docker build -f spark_image/Dockerfile --build-arg SPARK_VERSION={pinned['SPARK_VERSION']}" in out
    )
    for key in ("SCALA_BINARY", "SPARK_KAFKA_CLIENTS_VERSION", "SPARK_COMMONS_POOL2_VERSION"):
        assert f"--build-arg {key}={pinned[key]}" in out
    assert f"kind load docker-image --name test spark-dlq-operator:{version} spark-dlq:{version}" in out
    # The chart's default images are the ones the Makefile builds.
    values = yaml.safe_load((CHART / "values.yaml").read_text())
    assert values["image"]["repository"] == "spark-dlq-operator"
    assert values["spark"]["image"]["repository"] == "spark-dlq"
    assert f"spark-dlq:{version}" == operator_config.DEFAULT_SPARK_IMAGE


def test_kind_script_parses_and_says_it_cannot_run_here() -> None:
    subprocess.run(["bash", "-n", str(KIND_E2E)], check=True)
    header = KIND_E2E.read_text().split("set -euo pipefail")[0]
    assert "CANNOT RUN ON THE MACHINE" in header
    assert "checked by reading" in header
    text = KIND_E2E.read_text()
    for needed in (
        "kind create cluster",
        "make images",
        "make kind-load",
        "charts/spark-dlq-operator",
        "spark-operator/spark-operator",
        "strimzi-kafka-operator",
        "kind: DeadLetterPolicy",
        "orders-billing-DLQ",
        "dlq.reason:terminated",
    ):
        assert needed in text, needed
    for key in ("SPARK_OPERATOR_VERSION", "STRIMZI_VERSION", "STRIMZI_KAFKA_VERSION"):
        assert f"${key}" in text or f'"${key}"' in text
        assert key in versions()


def test_kind_script_policy_is_valid() -> None:
    from dlq_engine.model import parse_policy

    text = KIND_E2E.read_text()
    block = re.search(r"k apply -f - <<'EOF'\n(.*?)\nEOF", text, re.S)
    assert block is not None
    policy = parse_policy(yaml.safe_load(block.group(1)))
    assert policy.topics.provisioner == "strimzi"
    assert policy.dead_letter_topic == "orders-billing-DLQ"
