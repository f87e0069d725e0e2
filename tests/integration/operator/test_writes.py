"""How often the operator writes a policy back: the apiserver's cost of a policy.

Every write of a DeadLetterPolicy (create, kopf's annotation patch, each status patch) costs the
apiserver the whole schema: validation, defaulting, CEL rules, managed fields. At a thousand
policies those writes are what takes the time (bench/operator_scale.py), so a creation must
cost no more than the two writes it needs: its status, once, and kopf's record of the spec it
handled. The SparkApplication watcher must not write the state the reconcile just wrote.
"""

from __future__ import annotations

from typing import Any

from kubernetes import watch

from tests.integration.operator.conftest import (
    GROUP,
    PLURAL,
    VERSION,
    Cluster,
    RunningOperator,
    after_resync_rounds,
    policy_document,
    wait_for,
)


def _part(body: dict[str, Any], path: str) -> object:
    for key in path.split("."):
        body = body.get(key) or {}
    return body


def test_a_new_policy_is_written_back_twice(
    operator: RunningOperator, cluster: Cluster, namespace: str, bootstrap_servers: str
) -> None:
    start = cluster.objects.list_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL)["metadata"][
        "resourceVersion"
    ]
    cluster.create_policy(
        policy_document(
            namespace, "billing", source="orders", bootstrap=bootstrap_servers, topics={"create": False}
        )
    )
    wait_for(lambda: cluster.status("billing").get("configHash"), what="the status")
    wait_for(
        lambda: (
            "sparkdlq.io/last-handled-configuration"
            in (cluster.policy("billing")["metadata"].get("annotations") or {})
        ),
        what="kopf's annotation",
    )
    wait_for(lambda: cluster.application("billing"), what="the SparkApplication")
    after_resync_rounds()  # the application's watch event and a resync round pass too

    writes: list[str] = []
    previous: dict[str, Any] = {}
    for event in watch.Watch().stream(
        cluster.objects.list_namespaced_custom_object,
        GROUP,
        VERSION,
        namespace,
        PLURAL,
        resource_version=start,
        timeout_seconds=2,
    ):
        body = event["object"]
        if event["type"] == "MODIFIED":
            changed = [
                part
                for part in ("status", "metadata.annotations")
                if _part(body, part) != _part(previous, part)
            ]
            writes.append(f"{body['metadata']['resourceVersion']}: {', '.join(changed) or 'other'}")
        previous = body
    assert sorted(w.split(": ", 1)[1] for w in writes) == ["metadata.annotations", "status"], (
        f"the new policy was written back {len(writes)} times: {writes}"
    )
    status = cluster.status("billing")
    assert (status["phase"], cluster.condition("billing", "JobRunning")["reason"]) == ("Pending", "Submitted")

    # The spark-operator moving the application along is still mapped onto the policy.
    cluster.set_application_state("billing", "RUNNING")
    wait_for(lambda: cluster.status("billing").get("phase") == "Running", what="phase Running")
