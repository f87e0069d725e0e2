"""The engine's image, built by ``scripts/setup/images.sh``, routes messages.

``dlq-engine run --once`` runs in the project's Spark image (its own Spark, the Kafka connector
and the engine's jar baked in) against the test bed's broker, with a policy and a processor
mounted from outside, as the operator's SparkApplication mounts the policy and a team's image
adds its processors. The container runs as the image's numeric non-root user with every
capability dropped and no privilege escalation.
"""

from __future__ import annotations

import subprocess
from collections.abc import Callable
from pathlib import Path

import yaml

from spark_dlq_devtools import containers
from spark_dlq_devtools.paths import REPO_ROOT
from tests.conftest import unique
from tests.helpers import engine_policy, produce, read_all

PROCESSORS = "/opt/spark-dlq/processors"


def test_engine_image_routes_with_a_mounted_policy_and_processor(
    topics: Callable[..., dict[str, str]], bootstrap_servers: str, tmp_path: Path
) -> None:
    names = topics(partitions=2)
    produce(
        bootstrap_servers,
        names["source"],
        [(b"k1", b"ok:first"), (b"k2", b"terminate:bad"), (b"k3", b"nonretry:x"), (b"k4", b"ok:second")],
    )
    policy = engine_policy(names, bootstrap_servers, retry={"nonRetryableErrors": ["LookupError"]})
    policy_file = tmp_path / "policy.yaml"
    policy_file.write_text(yaml.safe_dump(policy))
    name = unique("engine-image")
    argv = containers.run_argv(
        name,
        image_name=containers.image("engine"),
        command=[
            "dlq-engine",
            "run",
            "-f",
            "/etc/spark-dlq/policy/policy.yaml",
            "--once",
            "--master",
            "local[1]",
            "--checkpoint",
            "/tmp/checkpoint",
        ],
        volumes={
            policy_file: "/etc/spark-dlq/policy/policy.yaml",
            # The processor's package, where a team's image copies its processors.
            REPO_ROOT / "tests" / "__init__.py": f"{PROCESSORS}/tests/__init__.py",
            REPO_ROOT / "tests" / "processors": f"{PROCESSORS}/tests/processors",
        },
    )
    try:
        finished = subprocess.run(
            argv, env=containers.podman_env(), capture_output=True, text=True, timeout=420
        )
    finally:
        containers.remove(name)
    assert finished.returncode == 0, finished.stderr[-4000:]
    assert "dlq-engine:" in finished.stdout, finished.stdout[-2000:]

    outputs = read_all(bootstrap_servers, names["output"], expect=2, timeout=30)
    assert sorted(r.value for r in outputs) == [b"FIRST", b"SECOND"]
    dead = read_all(bootstrap_servers, names["dlq"], expect=2, timeout=30)
    assert sorted((r.key, r.header("dlq.reason")) for r in dead) == [
        (b"k2", "terminated"),
        (b"k3", "non-retryable"),
    ]


def test_engine_image_runs_as_its_non_root_user() -> None:
    finished = containers.podman(
        "run", "--rm", "--cap-drop", "ALL", "--security-opt", "no-new-privileges",
        containers.image("engine"), "sh", "-c", "id -u; id -g; python --version; java -version 2>&1 | head -1",
        timeout=120,
    )  # fmt: skip
    uid, gid, python, java = finished.stdout.split("\n")[:4]
    assert (uid, gid) == ("185", "185")
    assert python.startswith("Python 3.11")
    assert "17." in java
