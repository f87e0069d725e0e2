"""scripts/setup.sh's profiles: the test suite's set-up runs every step, the demo's only those the
demo runs (and Pulsar or Prometheus when its options need them). Run against stand-in steps that
record their names, so the selection is checked without building anything."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from spark_dlq_devtools.paths import REPO_ROOT

SETUP = REPO_ROOT / "scripts" / "setup.sh"
STEPS = sorted(
    p.name
    for p in (REPO_ROOT / "scripts" / "setup").glob("*.sh")
    if p.name not in {"common.sh", "k8s_build.sh", "lib.sh"}
)
DEMO = [
    "python.sh",
    "jars.sh",
    "engine_jar.sh",
    "kubernetes.sh kube-apiserver kubectl",
    "spark_operator.sh --crds",
]


def steps_run(tmp_path: Path, *args: str) -> list[str]:
    scripts = tmp_path / "scripts"
    (scripts / "setup").mkdir(parents=True)
    shutil.copy(SETUP, scripts / "setup.sh")
    record = tmp_path / "steps"
    for name in STEPS:
        stand_in = f'echo "{name}${{1:+ $*}}" >> "{record}"\n'
        if name == "python.sh":
            stand_in += "echo /venv\n"
        (scripts / "setup" / name).write_text(stand_in)
    done = subprocess.run(
        ["bash", str(scripts / "setup.sh"), *args], capture_output=True, text=True, timeout=60, check=True
    )
    assert done.stdout == "/venv\n", "stdout is the venv's path only"
    return record.read_text().splitlines()


def test_the_test_suite_sets_up_every_step(tmp_path: Path) -> None:
    ran = steps_run(tmp_path)
    assert sorted(step.split()[0] for step in ran) == STEPS
    assert "spark_operator.sh --image" in ran
    assert "release_tools.sh" in ran, "the tests check what make dist makes"


@pytest.mark.parametrize(
    ("args", "extra"),
    [
        pytest.param([], [], id="kafka"),
        pytest.param(["--orders", "1000", "--broker", "kafka"], [], id="kafka-explicit"),
        pytest.param(["--broker", "pulsar"], ["pulsar.sh"], id="pulsar"),
        pytest.param(["--broker=pulsar", "--orders", "200"], ["pulsar.sh"], id="pulsar-equals"),
        pytest.param(["--monitor"], ["prometheus.sh"], id="monitor"),
        pytest.param(["--dashboard", "out.png", "--rate", "8"], ["prometheus.sh"], id="dashboard"),
    ],
)
def test_the_demo_sets_up_only_what_it_runs(tmp_path: Path, args: list[str], extra: list[str]) -> None:
    ran = steps_run(tmp_path, "--demo", *args)
    assert sorted(ran) == sorted(DEMO + extra)
    assert ran[0] == "python.sh", "the venv first: the engine's jar compiles against its pyspark"


def test_demo_sh_sets_up_with_the_demo_profile_and_its_arguments() -> None:
    text = (REPO_ROOT / "scripts" / "demo.sh").read_text()
    assert 'scripts/setup.sh --demo "$@"' in text
    assert "scripts/setup.sh --demo" not in (REPO_ROOT / "scripts" / "test.sh").read_text()
