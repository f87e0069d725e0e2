"""``dlq-engine run -f policy.yaml`` as a user runs it: a separate process with local Spark."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from dlq_engine.model import config_hash
from dlq_engine.model.documents import load_policy_file
from spark_dlq_devtools.paths import REPO_ROOT, engine_jar, spark_kafka_jars
from spark_dlq_devtools.processes import free_port
from spark_dlq_devtools.spark import submit_env
from tests.helpers import QUICK_LEASE_ENV, engine_policy, produce, read_all

ENGINE = [sys.executable, "-m", "dlq_engine.cli"]


def _env() -> dict[str, str]:
    env = submit_env()
    env["PYTHONPATH"] = os.pathsep.join([str(REPO_ROOT), env.get("PYTHONPATH", "")])
    env.update(QUICK_LEASE_ENV)
    return env


def _write_policy(tmp_path: Path, names: dict[str, str], bootstrap: str, **spec: Any) -> Path:
    path = tmp_path / "policy.yaml"
    path.write_text(yaml.safe_dump(engine_policy(names, bootstrap, **spec), sort_keys=False))
    return path


def test_a_broken_policy_file_gets_one_line_per_problem(tmp_path: Path) -> None:
    path = tmp_path / "policy.yaml"
    path.write_text(
        (REPO_ROOT / "examples" / "orders-billing.yaml")
        .read_text()
        .replace("jitter: 0.1", "jitter: 1.5")
        .replace("maxRedeliverCount: 3", "maxRedeliverCount: -1")
    )
    done = subprocess.run(
        [*ENGINE, "run", "-f", str(path), "--checkpoint", str(tmp_path / "cp")],
        capture_output=True,
        text=True,
        env=_env(),
        timeout=60,
    )
    assert done.returncode == 2
    lines = done.stderr.strip().splitlines()
    assert lines == [
        f"{path}:21: spec.retry.maxRedeliverCount: must be at least 0, got -1",
        f"{path}:27: spec.retry.backoff.jitter: must be between 0 and 1, got 1.5",
    ]
    assert "Traceback" not in done.stderr


EXAMPLE = REPO_ROOT / "examples" / "orders-billing.yaml"


@pytest.mark.parametrize(
    ("old", "new", "expected"),
    [
        pytest.param(
            "subscription: billing\n",
            "subscription: billing: x\n",
            ":11: (yaml): mapping values are not allowed here",
            id="yaml-syntax",
        ),
        pytest.param(
            "maxRedeliverCount: 3",
            "maxRedeliverCount: three",
            ":21: spec.retry.maxRedeliverCount: must be a whole number, got 'three'",
            id="wrong-type",
        ),
        pytest.param(
            "maxRedeliverCount: 3",
            "maxRedeliveryCount: 3",
            ":21: spec.retry.maxRedeliveryCount: unknown field (did you mean 'maxRedeliverCount'?)",
            id="unknown-field",
        ),
        pytest.param(
            "    bootstrapServers: 127.0.0.1:9092\n",
            "",
            ":13: spec.broker.bootstrapServers: is required",
            id="missing-required-field",
        ),
        pytest.param(
            "strategy: topic",
            "strategy: drop",
            ":30: spec.deadLetter.strategy: must be one of topic, ignore, stop, got 'drop'",
            id="enum",
        ),
    ],
)
@pytest.mark.parametrize("command", ["run", "check"])
def test_a_broken_policy_file_is_one_line_naming_field_and_line(
    tmp_path: Path, command: str, old: str, new: str, expected: str
) -> None:
    path = tmp_path / "policy.yaml"
    text = EXAMPLE.read_text()
    assert text.count(old) == 1, old
    path.write_text(text.replace(old, new))
    done = subprocess.run(
        [
            *ENGINE,
            command,
            "-f",
            str(path),
            *(["--checkpoint", str(tmp_path / "cp")] if command == "run" else []),
        ],
        capture_output=True,
        text=True,
        env=_env(),
        timeout=60,
    )
    assert done.returncode == 2
    assert done.stderr.strip().splitlines() == [f"{path}{expected}"]
    assert done.stdout == ""


def test_a_changed_policy_file_or_a_processor_that_cannot_be_imported_stops_before_spark(
    tmp_path: Path,
) -> None:
    """A Spark pod of another policy could have replaced the ConfigMap the file is mounted from:
    the engine checks it against the hash the SparkApplication passes, before anything starts.
    The file as written passes, and its processor, which cannot be imported, stops it next."""
    names = {"source": "s", "retry": "r", "dlq": "d", "output": "o"}
    written = _write_policy(
        tmp_path, names, "127.0.0.1:1", processor={"entrypoint": "no_such_module:process"}
    )
    digest = config_hash(load_policy_file(written))
    tampered = tmp_path / "tampered.yaml"
    tampered.write_text(written.read_text().replace("no_such_module:process", "evil:process"))

    def run(path: Path) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [*ENGINE, "run", "-f", str(path), "--checkpoint", str(tmp_path / "cp"), "--config-hash", digest],
            capture_output=True,
            text=True,
            env=_env(),
            timeout=60,
        )

    refused = run(tampered)
    assert refused.returncode == 2
    found = config_hash(load_policy_file(tampered))
    assert refused.stderr.strip() == (
        f"dlq-engine: {tampered}: the policy's configuration hash is {found}, not {digest} as given "
        "by --config-hash: the file was changed after the operator wrote it (its ConfigMap rewritten "
        "or replaced by someone else); refusing to run it"
    )
    passed = run(written)
    assert passed.returncode == 2
    assert passed.stderr.strip() == (
        "dlq-engine: spec.processor.entrypoint 'no_such_module:process': cannot import module "
        "'no_such_module': ModuleNotFoundError: No module named 'no_such_module'"
    )


def test_a_missing_source_topic_is_named(
    tmp_path: Path, bootstrap_servers: str, make_topic: Callable[..., str]
) -> None:
    names = {
        "source": "no-such-topic",
        "retry": make_topic("r"),
        "dlq": make_topic("d"),
        "output": make_topic("o"),
    }
    path = _write_policy(tmp_path, names, bootstrap_servers)
    done = subprocess.run(
        [*ENGINE, "run", "-f", str(path), "--master", "local[1]", "--checkpoint", str(tmp_path / "cp")],
        capture_output=True,
        text=True,
        env=_env(),
        timeout=180,
    )
    assert done.returncode == 1
    assert f"dlq-engine: missing on {bootstrap_servers}: spec.source.topic 'no-such-topic'" in done.stderr


def test_a_missing_engine_jar_is_named(
    tmp_path: Path, bootstrap_servers: str, make_topic: Callable[..., str]
) -> None:
    names = {k: make_topic(k[0]) for k in ("source", "retry", "dlq", "output")}
    path = _write_policy(tmp_path, names, bootstrap_servers)
    env = _env()
    env["PYSPARK_SUBMIT_ARGS"] = f"--jars {','.join(str(p) for p in spark_kafka_jars())} pyspark-shell"
    done = subprocess.run(
        [*ENGINE, "run", "-f", str(path), "--master", "local[1]", "--checkpoint", str(tmp_path / "cp")],
        capture_output=True,
        text=True,
        env=env,
        timeout=180,
    )
    assert done.returncode == 1
    assert (
        "dlq-engine: io.sparkdlq.engine.DelayStage is not on the Spark class path: add the "
        "engine's jar (spark-dlq-engine.jar" in done.stderr
    )
    assert "Traceback" not in done.stderr
    assert not (tmp_path / "cp").exists()


def test_a_missing_delta_jar_is_named(
    tmp_path: Path, bootstrap_servers: str, make_topic: Callable[..., str]
) -> None:
    names = {k: make_topic(k[0]) for k in ("source", "retry", "dlq", "output")}
    table = tmp_path / "dead-letters"
    path = _write_policy(tmp_path, names, bootstrap_servers, deadLetter={"table": {"path": str(table)}})
    env = _env()
    jars = [*spark_kafka_jars(), engine_jar()]
    env["PYSPARK_SUBMIT_ARGS"] = f"--jars {','.join(str(p) for p in jars)} pyspark-shell"
    done = subprocess.run(
        [*ENGINE, "run", "-f", str(path), "--master", "local[1]", "--checkpoint", str(tmp_path / "cp")],
        capture_output=True,
        text=True,
        env=env,
        timeout=180,
    )
    assert done.returncode == 1
    assert (
        "dlq-engine: spec.deadLetter.table.format is delta, but Delta Lake is not on the Spark class "
        "path: add io.delta:delta-spark_2.13 and io.delta:delta-storage to spark.jars" in done.stderr
    )
    assert "Traceback" not in done.stderr
    assert not (tmp_path / "cp").exists()
    assert not table.exists()


def test_once_drains_and_prints_a_summary(
    tmp_path: Path, bootstrap_servers: str, make_topic: Callable[..., str]
) -> None:
    names = {k: make_topic(k) for k in ("source", "retry", "dlq", "output")}
    produce(
        bootstrap_servers,
        names["source"],
        [(b"1", b"ok:a"), (b"2", b"ack"), (b"3", b"terminate:x"), (b"4", b"ok:b")],
    )
    path = _write_policy(tmp_path, names, bootstrap_servers)
    # The mounted client properties reach every Kafka client of the query; a PLAINTEXT client
    # ignores the JAAS config, whose password must not be printed by Spark or the engine.
    client = tmp_path / "kafka-client"
    client.mkdir()
    (client / "security.protocol").write_text("PLAINTEXT\n")
    secret = "Zebra-Secret-0815"
    (client / "sasl.jaas.config").write_text(
        f'org.apache.kafka.common.security.plain.PlainLoginModule required username="dlq" password="{secret}";'
    )
    done = subprocess.run(
        [
            *ENGINE,
            "run",
            "-f",
            str(path),
            "--master",
            "local[2]",
            "--once",
            "--kafka-client-dir",
            str(client),
            "--checkpoint",
            str(tmp_path / "cp"),
        ],
        capture_output=True,
        text=True,
        env=_env(),
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    summary = [line for line in done.stdout.splitlines() if line.startswith("dlq-engine:")]
    assert summary == ["dlq-engine: processed=4 output=2 acked=1 retried=0 dead=1 ignored=0 redelivered=0"]
    assert len(read_all(bootstrap_servers, names["output"], expect=2, timeout=10)) == 2
    assert secret not in done.stdout + done.stderr


def test_sigterm_stops_cleanly_and_metrics_are_served(
    tmp_path: Path, bootstrap_servers: str, make_topic: Callable[..., str]
) -> None:
    names = {k: make_topic(k) for k in ("source", "retry", "dlq", "output")}
    produce(
        bootstrap_servers,
        names["source"],
        [(str(i).encode(), b"ok:x") for i in range(10)] + [(b"f", b"nonretry:k")],
    )
    path = _write_policy(tmp_path, names, bootstrap_servers, retry={"nonRetryableErrors": ["KeyError"]})
    port = free_port()
    engine = subprocess.Popen(
        [
            *ENGINE,
            "run",
            "-f",
            str(path),
            "--master",
            "local[2]",
            "--metrics-port",
            str(port),
            "--checkpoint",
            str(tmp_path / "cp"),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=_env(),
    )
    try:
        scraped = ""
        deadline = time.monotonic() + 180
        while (
            time.monotonic() < deadline and 'outcome="output",policy="tests/test-policy"} 10.0' not in scraped
        ):
            time.sleep(0.25)
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=2) as response:
                    scraped = response.read().decode()
            except OSError:
                continue
        assert 'spark_dlq_messages_total{outcome="output",policy="tests/test-policy"} 10.0' in scraped
        assert 'spark_dlq_messages_total{outcome="dead_letter",policy="tests/test-policy"} 1.0' in scraped
        assert (
            'spark_dlq_dead_letters_total{policy="tests/test-policy",reason="non-retryable"} 1.0' in scraped
        )
        assert 'spark_dlq_dead_letters_total{policy="tests/test-policy",reason="exhausted"} 0.0' in scraped
        engine.send_signal(signal.SIGTERM)
        stdout, stderr = engine.communicate(timeout=120)
    finally:
        if engine.poll() is None:
            engine.kill()
    assert engine.returncode == 0, stderr[-2000:]
    assert "dlq-engine: processed=11 output=10" in stdout


def test_an_unreachable_broker_is_named(tmp_path: Path) -> None:
    """Named after ``--broker-timeout`` (2 s here, not the default 15 s: the wait is the test's
    cost, the message and the exit status are what it proves)."""
    names = {"source": "s", "retry": "r", "dlq": "d", "output": "o"}
    path = _write_policy(tmp_path, names, f"127.0.0.1:{free_port()}")
    done = subprocess.run(
        [
            *ENGINE,
            "run",
            "-f",
            str(path),
            "--master",
            "local[1]",
            "--broker-timeout",
            "2",
            "--checkpoint",
            str(tmp_path / "cp"),
        ],
        capture_output=True,
        text=True,
        env=_env(),
        timeout=180,
    )
    assert done.returncode == 1
    assert "dlq-engine: cannot reach the broker at 127.0.0.1:" in done.stderr
    assert "(spec.broker.bootstrapServers) within 2s" in done.stderr


def test_kafka_client_secrets_are_never_printed(tmp_path: Path, bootstrap_servers: str) -> None:
    """The mounted broker.secretRef holds a JAAS password; a client that cannot be built from it
    gets one line naming the properties and the cause, and the password appears nowhere."""
    secret = "Zebra-Secret-4711"
    client = tmp_path / "kafka-client"
    client.mkdir()
    (client / "security.protocol").write_text("SASL_PLAINTEXT\n")
    (client / "sasl.mechanism").write_text("PLAIN\n")
    (client / "sasl.jaas.config").write_text(  # no closing semicolon: the Kafka client refuses it
        f'org.apache.kafka.common.security.plain.PlainLoginModule required username="dlq" password="{secret}"\n'
    )
    names = {"source": "s", "retry": "r", "dlq": "d", "output": "o"}
    path = _write_policy(
        tmp_path,
        names,
        bootstrap_servers,
        broker={"bootstrapServers": bootstrap_servers, "secretRef": {"name": "kafka-client"}},
    )
    done = subprocess.run(
        [
            *ENGINE,
            "run",
            "-f",
            str(path),
            "--master",
            "local[1]",
            "--kafka-client-dir",
            str(client),
            "--checkpoint",
            str(tmp_path / "cp"),
        ],
        capture_output=True,
        text=True,
        env=_env(),
        timeout=180,
    )
    assert done.returncode == 1
    assert "Traceback" not in done.stderr
    mine = [line for line in done.stderr.splitlines() if line.startswith("dlq-engine:")]
    assert mine == [
        "dlq-engine: cannot create a Kafka client from the client properties (sasl.jaas.config, "
        "sasl.mechanism, security.protocol): IllegalArgumentException: JAAS config entry not "
        "terminated by semi-colon"
    ]
    assert secret not in done.stdout + done.stderr
    checked = subprocess.run(
        [*ENGINE, "check", "-f", str(path)], capture_output=True, text=True, env=_env(), timeout=60
    )
    assert checked.returncode == 0
    assert "secretRef:\n      name: kafka-client" in checked.stdout
    assert secret not in checked.stdout + checked.stderr
