"""The set-up's cache keys (spark_dlq_devtools.cache_keys) are byte for byte what the set-up
scripts computed in bash before they asked Python: every machine's warm cache is named by them,
so a key that drifts rebuilds that part everywhere. Each test runs the old shell computation
(sha256sum, cat) on the same files as the oracle."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from spark_dlq_devtools import cache_keys
from spark_dlq_devtools.paths import REPO_ROOT


def shell(script: str, *args: str | Path, cwd: Path | None = None) -> str:
    done = subprocess.run(
        ["bash", "-c", f"set -euo pipefail; {script}", "bash", *map(str, args)],
        capture_output=True,
        text=True,
        check=True,
        cwd=cwd,
        env={"PATH": "/usr/bin:/bin", "LC_ALL": "C"},
    )
    return done.stdout.strip()


def java_tree(root: Path) -> Path:
    for name, text in {
        "pom.xml": "<project/>",
        "src/main/java/io/Zeta.java": "class Zeta {}",
        "src/main/java/io/alpha/A_b.java": "class A_b {}",
        "src/main/java/io/alpha/a.java": "class a {}",
        "src/main/resources/notes.txt": "not a source",
    }.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)
    return root


def test_engine_jar_key_is_the_sha256sum_manifest_of_the_java_sources(tmp_path: Path) -> None:
    src = java_tree(tmp_path)
    old = shell(
        'cd "$1" && find src -name "*.java" | LC_ALL=C sort | xargs sha256sum | sha256sum | cut -c1-12', src
    )
    assert cache_keys.engine_jar_key(src) == old


def test_java_program_key_covers_the_pom_the_sources_and_the_properties_in_order(tmp_path: Path) -> None:
    src = java_tree(tmp_path)
    properties = ["-Dkafka.version=4.1.1", "-Dslf4j.version=2.0.17"]
    old = shell(
        'src="$1"; shift; { (cd "$src" && { echo pom.xml; find src -name "*.java"; } | LC_ALL=C sort'
        ' | xargs sha256sum); printf "%s\\n" "$@"; } | sha256sum | cut -c1-12',
        src,
        *properties,
    )
    assert cache_keys.java_program_key(src, properties) == old
    assert cache_keys.java_program_key(src, properties[::-1]) != old, "the order is part of the key"


def test_argocd_health_key_is_the_hash_of_its_files_in_turn(tmp_path: Path) -> None:
    for name in ("go.mod", "go.sum", "main.go", "A_util.go", "a.go"):
        (tmp_path / name).write_text(f"// {name}\n")
    old = shell('cd "$1" && cat go.mod go.sum *.go | sha256sum | cut -c1-12', tmp_path)
    assert cache_keys.argocd_health_key(tmp_path) == old


@pytest.mark.parametrize("extra", ["", "bookworm", "013055c2a5a4 --build-arg SPARK_VERSION=4.2.0"])
def test_files_key_is_the_hash_of_the_contents_then_the_extra_words(tmp_path: Path, extra: str) -> None:
    files = [tmp_path / "Containerfile", tmp_path / "entrypoint.sh"]
    for path in files:
        path.write_text(f"{path.name}\n")
    old = shell(
        'extra="$1"; shift; { cat "$@"; printf "%s" "$extra"; } | sha256sum | cut -c1-12', extra, *files
    )
    assert cache_keys.files_key(files, extra) == old


def test_venv_key_is_the_requirements_then_the_python_version(tmp_path: Path) -> None:
    pyproject = tmp_path / "pyproject.toml"
    pyproject.write_text(
        '[project]\nname = "spark-dlq"\ndependencies = ["PyYAML>=6.0"]\n'
        "[project.optional-dependencies]\n"
        'engine = ["pyspark==4.2.0", "PyYAML>=6.0"]\noperator = ["kopf>=1.37"]\n'
        'pulsar = ["pulsar-client>=3.5"]\ndev = ["spark-dlq[engine,operator]", "pytest>=8"]\n'
    )
    requirements = cache_keys.venv_requirements(pyproject)
    assert requirements == ["PyYAML>=6.0", "pyspark==4.2.0", "kopf>=1.37", "pulsar-client>=3.5", "pytest>=8"]
    version = str(sys.version_info[:2])
    old = shell('printf "%s\\n%s\\n" "$1" "$2" | sha256sum | cut -c1-12', "\n".join(requirements), version)
    assert cache_keys.venv_key(pyproject) == old


def test_image_key_follows_what_the_dockerfile_copies(tmp_path: Path) -> None:
    (tmp_path / "app" / "__pycache__").mkdir(parents=True)
    (tmp_path / "app" / "main.py").write_text("print(1)\n")
    (tmp_path / "Dockerfile").write_text("FROM base\nCOPY app/ /app/\nCOPY --from=build /x /x\n")
    key = cache_keys.image_key(tmp_path, tmp_path / "Dockerfile", ["--build-arg", "A=1"])
    (tmp_path / "app" / "__pycache__" / "main.pyc").write_bytes(b"\0")
    assert cache_keys.image_key(tmp_path, tmp_path / "Dockerfile", ["--build-arg", "A=1"]) == key
    assert cache_keys.image_key(tmp_path, tmp_path / "Dockerfile", ["--build-arg", "A=2"]) != key
    (tmp_path / "app" / "main.py").write_text("print(2)\n")
    assert cache_keys.image_key(tmp_path, tmp_path / "Dockerfile", ["--build-arg", "A=1"]) != key


def test_the_scripts_and_the_test_bed_ask_the_same_functions() -> None:
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "spark_dlq_devtools.cache_keys",
            "engine-jar",
            str(REPO_ROOT / "spark_image" / "jvm"),
        ],
        capture_output=True,
        text=True,
        check=True,
        env={"PYTHONPATH": str(REPO_ROOT / "devtools")},
    )
    assert done.stdout.strip() == cache_keys.engine_jar_key(REPO_ROOT / "spark_image" / "jvm")


def test_an_unknown_kind_is_refused_with_the_usage() -> None:
    assert cache_keys.main(["engine-jar"]) == 2
    assert cache_keys.main(["no-such-kind", "x"]) == 2
