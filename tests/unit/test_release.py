"""What a released copy says about itself: ``--version`` on the three commands, one line naming
the extra when it is missing, and the ``*_build_info`` metrics. The wheel itself, installed in a
clean virtualenv, is tests/integration/test_dist.py's."""

from __future__ import annotations

import importlib.metadata
import re
import subprocess
import sys
import tomllib

import pytest
from prometheus_client import REGISTRY, generate_latest

from dlq_engine.job.metrics import EngineMetrics
from dlq_engine.release import EXTRA_MODULES, version
from spark_dlq_devtools.paths import REPO_ROOT
from spark_dlq_operator import metrics as operator_metrics

PROJECT = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text())["project"]
#: Each command as its console script runs it.
COMMANDS = {
    "dlq-engine": "from dlq_engine.cli import main",
    "dlq-operator": "from spark_dlq_operator.cli import main",
    "kubectl dlq": "from spark_dlq_operator.kubectl_dlq.plugin import main",
}


def run(command: str, *args: str, hide: str = "") -> subprocess.CompletedProcess[str]:
    """The command with ``hide`` (a module) made unimportable, as if its extra were missing."""
    code = "import sys\n" + (f"sys.modules[{hide!r}] = None\n" if hide else "")
    code += f"{COMMANDS[command]}\nsys.exit(main(sys.argv[1:]))"
    return subprocess.run(
        [sys.executable, "-c", code, *args], capture_output=True, text=True, timeout=60, check=False
    )


def test_the_version_is_the_projects() -> None:
    assert version() == PROJECT["version"]


#: A module of each command's extra.
EXTRA_MODULE = {"dlq-engine": "pyspark", "dlq-operator": "kopf", "kubectl dlq": "confluent_kafka"}


@pytest.mark.parametrize("command", list(COMMANDS))
def test_every_command_has_version_even_without_its_extra(command: str) -> None:
    done = run(command, "--version", hide=EXTRA_MODULE[command])
    assert (done.returncode, done.stdout) == (0, f"{command} {PROJECT['version']}\n"), done.stderr


@pytest.mark.parametrize(
    ("command", "args", "hide", "extra"),
    [
        pytest.param("dlq-engine", ["run", "-f", "examples/orders-billing.yaml"], "pyspark", "engine", id="engine"),
        pytest.param("dlq-operator", ["run", "--all-namespaces"], "kopf", "operator", id="operator"),
        pytest.param("kubectl dlq", ["stats", "-f", "examples/orders-billing.yaml"], "confluent_kafka", "operator", id="kubectl-dlq"),
    ],
)  # fmt: skip
def test_a_missing_extra_is_one_line_naming_it(command: str, args: list[str], hide: str, extra: str) -> None:
    done = run(command, *args, hide=hide)
    assert done.returncode == 1
    assert done.stderr == (
        f"{command}: needs the {extra} extra ({hide} is not installed): pip install 'spark-dlq[{extra}]'\n"
    )


def test_kubectl_dlq_on_pulsar_without_the_pulsar_extra_is_one_line_naming_it() -> None:
    done = run("kubectl dlq", "stats", "-f", "examples/orders-billing-pulsar.yaml", hide="pulsar")
    assert (done.returncode, done.stdout) == (1, "")
    assert (
        done.stderr
        == "error: needs the pulsar extra (pulsar is not installed): pip install 'spark-dlq[pulsar]'\n"
    )


@pytest.mark.parametrize("extra", list(EXTRA_MODULES))
def test_extra_modules_are_the_extras_distributions(extra: str) -> None:
    """EXTRA_MODULES names the top-level modules of exactly the extra's distributions."""
    by_module = importlib.metadata.packages_distributions()
    wanted = {
        re.split(r"[\s\[<>=!~;]", r, maxsplit=1)[0].lower().replace("_", "-")
        for r in PROJECT["optional-dependencies"][extra]
    }
    found = {
        dist.lower().replace("_", "-")
        for module in EXTRA_MODULES[extra]  # type: ignore[index]
        for dist in by_module.get(module, [])
    }
    assert wanted <= found, f"modules missing for {sorted(wanted - found)}"


def test_engine_build_info() -> None:
    text = generate_latest(EngineMetrics("payments/orders").registry).decode()
    import pyspark

    assert (
        f'spark_dlq_build_info{{policy="payments/orders",python="{sys.version.split()[0]}",'
        f'spark="{pyspark.__version__}",version="{PROJECT["version"]}"}} 1.0'
    ) in text


def test_operator_build_info() -> None:
    assert operator_metrics.BUILD_INFO
    text = generate_latest(REGISTRY).decode()
    assert (
        f'spark_dlq_operator_build_info{{python="{sys.version.split()[0]}",version="{PROJECT["version"]}"}} 1.0'
    ) in text
