"""A team's redrive, through the operator: dead letters pile up, the processor is fixed, a dry
run shows what would move and writes nothing, the redrive sends them back through the
processor and they come out on the output topic. The apiserver, Kafka, Spark, the operator and
the local spark-operator runner are real (tests/e2e/conftest.py)."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from kubernetes import client

from spark_dlq_devtools.local_spark_operator import LocalSparkOperator
from tests.conftest import unique
from tests.e2e.conftest import Policies
from tests.helpers import produce, read_all


def _redrive(name: str, policy: str, **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "sparkdlq.io/v1alpha1",
        "kind": "DeadLetterRedrive",
        "metadata": {"name": name},
        "spec": {"policyRef": {"name": policy}, **spec},
    }


def _wait_redrive(objects: Any, namespace: str, name: str, timeout: float = 300) -> dict[str, Any]:
    deadline = time.monotonic() + timeout
    status: dict[str, Any] = {}
    while time.monotonic() < deadline:
        found = objects.get_namespaced_custom_object(
            "sparkdlq.io", "v1alpha1", namespace, "deadletterredrives", name
        )
        status = dict(found.get("status") or {})
        if status.get("phase") in ("Succeeded", "Failed", "Cancelled"):
            return status
        time.sleep(0.5)
    raise AssertionError(f"redrive {name} did not finish in {timeout:.0f}s; last status {status}")


def test_dead_letters_are_redriven_after_the_fix(
    bootstrap_servers: str,
    make_topic: Callable[..., str],
    policies: Policies,
    kube_api: Any,
    e2e_namespace: str,
    spark_operator: LocalSparkOperator,
    tmp_path: Path,
) -> None:
    source, output = make_topic("orders", partitions=2), make_topic("billed", partitions=2)
    name = unique("billing")
    fixed = tmp_path / "fixed"
    policies.create(
        {
            "apiVersion": "sparkdlq.io/v1alpha1",
            "kind": "DeadLetterPolicy",
            "metadata": {"name": name},
            "spec": {
                "source": {"topic": source, "subscription": "billing", "startingOffsets": "earliest"},
                "broker": {"bootstrapServers": bootstrap_servers},
                "processor": {"entrypoint": "tests.processors.scripted:process"},
                "output": {"topic": output},
                "retry": {"maxRedeliverCount": 1, "backoff": {"type": "fixed", "delay": "200ms"}},
                "spark": {"trigger": "500ms"},
            },
        }
    )
    policies.wait_status(name, lambda s: s.get("phase") == "Running", what="phase Running")
    dlq_topic = f"{source}-billing-DLQ"
    broken = [(f"b{i}".encode(), f"broken-until:{fixed}".encode()) for i in range(20)]
    fine = [(f"f{i}".encode(), b"ok:x") for i in range(10)]
    produce(bootstrap_servers, source, broken + fine)
    assert len(read_all(bootstrap_servers, dlq_topic, expect=20, timeout=180)) == 20
    assert len(read_all(bootstrap_servers, output, expect=10, timeout=60)) == 10

    objects = client.CustomObjectsApi(kube_api)
    fixed.write_text("the processor is fixed\n")

    # A dry run: Succeeded, and nothing is written.
    objects.create_namespaced_custom_object(
        "sparkdlq.io",
        "v1alpha1",
        e2e_namespace,
        "deadletterredrives",
        _redrive("look", name, dryRun=True, selection={"reasons": ["exhausted"]}),
    )
    status = _wait_redrive(objects, e2e_namespace, "look")
    assert status["phase"] == "Succeeded", status  # its driver has exited: it writes nothing later
    assert len(read_all(bootstrap_servers, output, timeout=2)) == 10

    # The redrive: every exhausted dead letter goes back through the (fixed) processor.
    objects.create_namespaced_custom_object(
        "sparkdlq.io",
        "v1alpha1",
        e2e_namespace,
        "deadletterredrives",
        _redrive("fix-1", name, selection={"reasons": ["exhausted"]}, ratePerSecond=50),
    )
    status = _wait_redrive(objects, e2e_namespace, "fix-1")
    assert status["phase"] == "Succeeded", status
    assert status["sparkApplication"] == "fix-1-redrive"
    billed = read_all(bootstrap_servers, output, expect=30, timeout=180)
    assert {r.key for r in billed} == {k for k, _ in broken + fine}
    redriven = [r for r in billed if (r.key or b"").startswith(b"b")]
    assert all(r.value == b"fixed after 0" for r in redriven), [r.value for r in redriven][:3]
    # The dead letters stay where they were: a redrive copies, it never deletes.
    assert len(read_all(bootstrap_servers, dlq_topic, expect=20, timeout=10)) == 20
