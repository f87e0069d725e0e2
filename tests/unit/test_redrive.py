"""DeadLetterRedrive: the model, the CRD in step with it, what the operator renders and how it
moves a redrive along (on the in-memory API server of ``fake_kube``)."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from dlq_engine.model import PolicyError, parse_policy
from dlq_engine.model.policy import PULSAR_CLIENT_DIR
from dlq_engine.model.redrive import (
    DEFAULT_MAX_REDRIVES,
    DESTINATION_TYPES,
    EXPIRED_REASON,
    REASONS,
    Gap,
    describe_gaps,
    gaps,
    parse_redrive,
    redrive_to_document,
)
from spark_dlq_operator import naming, render
from spark_dlq_operator import redrive_render as rr
from spark_dlq_operator.config import OperatorConfig
from spark_dlq_operator.events import EventRecorder
from spark_dlq_operator.policies.services import Services
from spark_dlq_operator.redrives import reconcile_redrive
from spark_dlq_operator.topics import AdminProvisioner, StrimziProvisioner
from tests.policy_builder import policy_document
from tests.unit.fake_kube import FakeKube

CRD = Path(__file__).resolve().parents[2] / "crds" / "sparkdlq.io_deadletterredrives.yaml"
NAMESPACE = "payments"


def document(**spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "sparkdlq.io/v1alpha1",
        "kind": "DeadLetterRedrive",
        "metadata": {"name": "fix-1", "namespace": NAMESPACE},
        "spec": {"policyRef": {"name": "orders-billing"}, **spec},
    }


def issues(doc: dict[str, Any]) -> list[str]:
    with pytest.raises(PolicyError) as raised:
        parse_redrive(doc)
    return [str(i) for i in raised.value.issues]


def test_the_defaults() -> None:
    redrive = parse_redrive(document())
    assert (redrive.destination.type, redrive.rate_per_second, redrive.dry_run) == ("source", 0.0, False)
    assert redrive.max_redrives == DEFAULT_MAX_REDRIVES
    assert redrive.qualified_name == "payments/fix-1"


def test_a_normalised_document_parses_to_the_same_redrive() -> None:
    redrive = parse_redrive(
        document(
            selection={
                "failedAfter": "2026-11-25T10:00:00Z",
                "failedBefore": "2026-11-25T11:00:00.5+01:00",
                "reasons": ["exhausted"],
                "errorClasses": ["ValueError"],
                "keys": ["k1"],
                "headers": {"team": "billing"},
                "filter": "attempts > 1",
            },
            destination={"type": "topic", "topic": "parking"},
            ratePerSecond=50,
            dryRun=True,
            maxRedrives=2,
            failOnGaps=True,
        )
    )
    assert redrive.fail_on_gaps
    assert parse_redrive(redrive_to_document(redrive)) == redrive


@pytest.mark.parametrize(
    ("spec", "expected"),
    [
        pytest.param({"policyRef": {}}, "spec.policyRef.name: is required", id="no-policy"),
        pytest.param(
            {"selection": {"failedAfter": "yesterday"}},
            "spec.selection.failedAfter: must be an RFC 3339 time such as 2026-11-25T10:00:00Z, got 'yesterday'",
            id="bad-time",
        ),
        pytest.param(
            {"selection": {"failedAfter": "2026-11-25T10:00:00"}},
            "spec.selection.failedAfter: must name its time zone (e.g. a trailing Z for UTC), got '2026-11-25T10:00:00'",
            id="no-zone",
        ),
        pytest.param(
            {"selection": {"failedAfter": "2026-11-25T11:00:00Z", "failedBefore": "2026-11-25T10:00:00Z"}},
            "spec.selection.failedBefore: must be later than selection.failedAfter",
            id="empty-range",
        ),
        pytest.param(
            {"destination": {"type": "topic"}},
            "spec.destination.topic: is required when destination.type is topic",
            id="no-topic",
        ),
        pytest.param(
            {"destination": {"type": "retry", "topic": "x"}},
            "spec.destination.topic: is only for destination.type topic, not retry",
            id="topic-for-retry",
        ),
        pytest.param({"maxRedrives": 0}, "spec.maxRedrives: must be at least 1, got 0", id="max-redrives"),
        pytest.param(
            {"ratePerSecond": -5}, "spec.ratePerSecond: must be 0 (no limit) or more, got -5.0", id="rate"
        ),
        pytest.param({"retries": 3}, "spec.retries: unknown field", id="typo"),
    ],
)
def test_bad_redrives_name_the_field(spec: dict[str, Any], expected: str) -> None:
    doc = document()
    doc["spec"].update(spec)
    found = issues(doc)
    assert any(line.startswith(expected) for line in found), found


def test_the_crd_has_the_model_s_defaults_and_enums() -> None:
    crd = yaml.safe_load(CRD.read_text())
    [version] = crd["spec"]["versions"]
    spec = version["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"]
    model = parse_redrive(document())
    assert spec["ratePerSecond"]["default"] == model.rate_per_second
    assert spec["dryRun"]["default"] is model.dry_run
    assert spec["maxRedrives"]["default"] == model.max_redrives
    assert spec["suspend"]["default"] is model.suspend
    assert spec["failOnGaps"]["default"] is model.fail_on_gaps
    assert spec["destination"]["properties"]["type"]["default"] == model.destination.type
    assert tuple(spec["destination"]["properties"]["type"]["enum"]) == DESTINATION_TYPES
    assert tuple(spec["selection"]["properties"]["reasons"]["items"]["enum"]) == REASONS
    assert spec["selection"]["properties"]["reasons"]["maxItems"] == len(REASONS)
    assert crd["spec"]["names"]["shortNames"] == ["dlr"]
    fields = {
        "policyRef",
        "selection",
        "destination",
        "ratePerSecond",
        "dryRun",
        "maxRedrives",
        "suspend",
        "failOnGaps",
    }
    assert set(spec) == fields


# --- rendering ---------------------------------------------------------------------------------

CONFIG = OperatorConfig(namespaces=(NAMESPACE,), checkpoint_claim="checkpoints")


def test_the_spark_application_runs_the_redrive_beside_the_policy() -> None:
    policy = parse_policy(policy_document())
    redrive = parse_redrive(document(dryRun=True))
    owner = naming.Owner(name="fix-1", namespace=NAMESPACE, uid="u-1", kind="DeadLetterRedrive")
    app = rr.spark_application(redrive, policy, config=CONFIG, owner=owner)

    assert app["metadata"]["name"] == "fix-1-redrive"
    assert app["metadata"]["ownerReferences"][0]["kind"] == "DeadLetterRedrive"
    assert app["metadata"]["labels"][rr.REDRIVE_LABEL] == "fix-1"
    assert app["spec"]["arguments"] == [
        "redrive",
        "-f",
        "/etc/spark-dlq/redrive/redrive.yaml",
        "--policy",
        "/etc/spark-dlq/policy/policy.yaml",
        "--checkpoint",
        "/var/lib/spark-dlq/checkpoints/payments/orders-billing-redrives/fix-1",
        "--status-file",
        "/dev/termination-log",
    ]
    assert app["spec"]["restartPolicy"]["type"] == "OnFailure"
    template = app["spec"]["driver"]["template"]["spec"]
    assert {v["name"] for v in template["volumes"]} == {"policy", "checkpoints", "redrive"}
    mounts = {m["name"]: m["mountPath"] for m in template["containers"][0]["volumeMounts"]}
    assert mounts["redrive"] == "/etc/spark-dlq/redrive"
    assert mounts["checkpoints"] == "/var/lib/spark-dlq/checkpoints"
    config_map = rr.config_map(redrive, owner=owner)
    assert parse_redrive(yaml.safe_load(config_map["data"]["redrive.yaml"])) == redrive


def test_the_driver_s_termination_message_is_read() -> None:
    message = json.dumps({"state": "Succeeded", "matched": 5, "redriven": 5})
    pod = {
        "status": {
            "containerStatuses": [
                {"name": "other", "state": {"terminated": {"message": "{}"}}},
                {
                    "name": render.DRIVER_CONTAINER,
                    "state": {"terminated": {"exitCode": 0, "message": message}},
                },
            ]
        }
    }
    assert rr.termination_status(pod) == {"state": "Succeeded", "matched": 5, "redriven": 5}
    assert rr.termination_status({"status": {}}) is None
    assert rr.termination_status(None) is None


# --- the operator, on a fake API server ---------------------------------------------------------


class Bed:
    def __init__(self) -> None:
        self.api = FakeKube()
        self.services = Services(
            config=CONFIG,
            api=self.api,
            events=EventRecorder(self.api, instance="test"),
            admin=AdminProvisioner(timeout=1.0),
            strimzi=StrimziProvisioner(self.api),
        )

    def add_redrive(self, name: str = "fix-1", **spec: Any) -> dict[str, Any]:
        doc = document(**spec)
        doc["metadata"]["name"] = name
        return self.api.put("deadletterredrives", doc)

    def reconcile(self, name: str = "fix-1") -> float | None:
        body = self.api.stored("deadletterredrives", NAMESPACE, name)
        assert body is not None

        async def run() -> float | None:
            again = await reconcile_redrive(self.services, body)
            await self.services.events.close()
            return again

        return asyncio.run(run())

    def status(self, name: str = "fix-1") -> dict[str, Any]:
        body = self.api.stored("deadletterredrives", NAMESPACE, name)
        assert body is not None
        return dict(body.get("status") or {})


def condition(status: dict[str, Any], kind: str) -> dict[str, Any] | None:
    return next((c for c in status.get("conditions") or [] if c["type"] == kind), None)


def job_conditions(status: dict[str, Any]) -> dict[str, str]:
    """type -> status of the redrive's conditions."""
    return {c["type"]: c["status"] for c in status.get("conditions") or []}


def test_a_redrive_waits_for_its_policy_then_runs_and_succeeds_with_the_driver_s_counts() -> None:
    bed = Bed()
    bed.add_redrive()
    assert bed.reconcile() is not None
    assert (bed.status()["phase"], bed.status()["conditions"][0]["reason"]) == ("Pending", "PolicyNotFound")
    assert job_conditions(bed.status()) == {"Running": "False"}

    bed.api.put("deadletterpolicies", policy_document())
    assert bed.reconcile() is None
    assert bed.status()["phase"] == "Running"
    assert job_conditions(bed.status()) == {"Running": "True"}
    app = bed.api.stored("sparkapplications", NAMESPACE, "fix-1-redrive")
    assert app is not None
    assert bed.api.stored("configmaps", NAMESPACE, "fix-1-redrive") is not None

    message = {
        "state": "Succeeded",
        "matched": 7,
        "redriven": 7,
        "skipped": {"maxRedrives": 1},
        "possibleDuplicates": 0,
    }
    bed.api.edit(
        "sparkapplications",
        NAMESPACE,
        "fix-1-redrive",
        lambda o: o.update(
            status={"applicationState": {"state": "COMPLETED"}, "driverInfo": {"podName": "fix-1-driver"}}
        ),
    )
    bed.api.put(
        "pods",
        {
            "metadata": {"name": "fix-1-driver", "namespace": NAMESPACE},
            "status": {
                "containerStatuses": [
                    {
                        "name": render.DRIVER_CONTAINER,
                        "state": {"terminated": {"message": json.dumps(message)}},
                    }
                ]
            },
        },
    )
    bed.reconcile()
    status = bed.status()
    assert (status["phase"], status["matched"], status["redriven"], status["skipped"]) == (
        "Succeeded",
        7,
        7,
        {"maxRedrives": 1},
    )
    # As a batch/v1 Job's: Complete only on success, with the generation it describes.
    assert job_conditions(status) == {"Running": "False", "Complete": "True"}
    complete = condition(status, "Complete")
    assert complete is not None
    assert complete["observedGeneration"] == 1
    assert complete["reason"] == "Completed"
    assert "completionTime" in status
    assert "RedriveSucceeded" in [e["reason"] for e in bed.api.of("events")]

    writes = len([c for c in bed.api.calls if c[0] != "GET"])
    bed.reconcile()  # a final phase is final
    assert len([c for c in bed.api.calls if c[0] != "GET"]) == writes


def test_one_redrive_at_a_time_per_policy() -> None:
    bed = Bed()
    bed.api.put("deadletterpolicies", policy_document())
    bed.add_redrive("first")
    bed.reconcile("first")
    bed.add_redrive("second")
    assert bed.reconcile("second") is not None
    status = bed.status("second")
    assert (status["phase"], status["conditions"][0]["reason"]) == ("Pending", "AnotherRedriveRunning")
    assert bed.api.stored("sparkapplications", NAMESPACE, "second-redrive") is None


def test_suspend_cancels_and_deletes_the_application() -> None:
    bed = Bed()
    bed.api.put("deadletterpolicies", policy_document())
    bed.add_redrive()
    bed.reconcile()
    bed.api.edit("deadletterredrives", NAMESPACE, "fix-1", lambda o: o["spec"].update(suspend=True))
    bed.reconcile()
    assert bed.status()["phase"] == "Cancelled"
    # Never Complete: it did not finish; Failed, so that a wait on either ends.
    assert job_conditions(bed.status()) == {"Running": "False", "Failed": "True"}
    failed = condition(bed.status(), "Failed")
    assert failed is not None
    assert failed["reason"] == "Suspended"
    assert bed.api.stored("sparkapplications", NAMESPACE, "fix-1-redrive") is None


def test_a_failed_application_fails_the_redrive_with_the_driver_s_reason() -> None:
    bed = Bed()
    bed.api.put("deadletterpolicies", policy_document())
    bed.add_redrive()
    bed.reconcile()
    bed.api.edit(
        "sparkapplications",
        NAMESPACE,
        "fix-1-redrive",
        lambda o: o.update(
            status={"applicationState": {"state": "FAILED", "errorMessage": "driver exited 1"}}
        ),
    )
    bed.reconcile()
    status = bed.status()
    assert status["phase"] == "Failed"
    assert job_conditions(status) == {"Running": "False", "Failed": "True"}, (
        "a failed redrive is not Complete"
    )
    failed = condition(status, "Failed")
    assert failed is not None
    assert "driver exited 1" in failed["message"]


def test_dead_letters_that_expired_fail_the_redrive_with_their_own_reason() -> None:
    """``failOnGaps``: the driver's final status names the gap; the redrive's condition says why
    (DeadLettersExpired), the counts of what it did before are kept, and a Warning event says it."""
    bed = Bed()
    bed.api.put("deadletterpolicies", policy_document())
    bed.add_redrive(failOnGaps=True)
    bed.reconcile()
    gap = (
        "spec.failOnGaps: dead letters expired before the redrive read them: topic 'orders-billing-DLQ' "
        "partition 0 offsets 0-3 (4 dead letters); the broker deleted them (the topic's retention, or a "
        "deleteRecords)"
    )
    message = {
        "state": "Failed",
        "reason": EXPIRED_REASON,
        "message": gap,
        "matched": 0,
        "redriven": 0,
        "expired": 0,
        "partitions": {"0": {"next": 0, "end": 12}},
    }
    bed.api.edit(
        "sparkapplications",
        NAMESPACE,
        "fix-1-redrive",
        lambda o: o.update(
            status={"applicationState": {"state": "FAILED"}, "driverInfo": {"podName": "fix-1-driver"}}
        ),
    )
    bed.api.put(
        "pods",
        {
            "metadata": {"name": "fix-1-driver", "namespace": NAMESPACE},
            "status": {
                "containerStatuses": [
                    {
                        "name": render.DRIVER_CONTAINER,
                        "state": {"terminated": {"message": json.dumps(message)}},
                    }
                ]
            },
        },
    )
    bed.reconcile()
    status = bed.status()
    failed = condition(status, "Failed")
    assert failed is not None
    assert failed["status"] == "True"
    assert (status["phase"], failed["reason"], failed["message"]) == ("Failed", EXPIRED_REASON, gap)
    assert (status["redriven"], status["expired"], status["partitions"]) == (
        0,
        0,
        {"0": {"next": 0, "end": 12}},
    )
    [event] = [e for e in bed.api.of("events") if e["reason"] == "RedriveFailed"]
    assert event["type"] == "Warning"
    assert "partition 0 offsets 0-3" in event["message"]


@pytest.mark.parametrize(
    ("start", "end", "earliest", "read_below", "found"),
    [
        pytest.param({0: 0, 1: 5}, {0: 10, 1: 9}, {0: 0, 1: 5}, None, [], id="nothing-gone"),
        pytest.param({0: 0}, {0: 10}, {0: 4}, None, [Gap(0, 0, 3, 4)], id="the-start-gone"),
        pytest.param({0: 2}, {0: 10}, {0: 30}, None, [Gap(0, 2, 9, 8)], id="the-whole-range-gone"),
        pytest.param({0: 0}, {0: 10}, {0: 6}, {0: 4}, [Gap(0, 0, 5, 2)], id="read-before-the-rest-went"),
        pytest.param({0: 0}, {0: 10}, {0: 6}, {0: 6}, [], id="all-read-before-deleted"),
        pytest.param({0: 0, 1: 3}, {0: 5, 1: 8}, {1: 4}, None, [Gap(1, 3, 3, 1)], id="one-partition"),
    ],
)
def test_gaps_are_the_expected_offsets_below_the_earliest(
    start: dict[int, int],
    end: dict[int, int],
    earliest: dict[int, int],
    read_below: dict[int, int] | None,
    found: list[Gap],
) -> None:
    assert gaps(start, end, earliest, read_below) == found


def test_a_gap_is_named_by_topic_partition_and_offsets() -> None:
    assert describe_gaps("dlq", [Gap(0, 0, 3, 4), Gap(2, 7, 7, 1)]) == (
        "topic 'dlq' partition 0 offsets 0-3 (4 dead letters), partition 2 offset 7 (1 dead letter)"
    )
    many = [Gap(p, 0, 1, 2) for p in range(12)]
    assert describe_gaps("dlq", many).endswith(
        "partition 9 offsets 0-1 (2 dead letters), and 2 more gaps (4 dead letters)"
    )


def test_an_invalid_redrive_fails_naming_the_field() -> None:
    bed = Bed()
    bed.add_redrive(maxRedrives=0)
    bed.reconcile()
    status = bed.status()
    assert status["phase"] == "Failed"
    assert "spec.maxRedrives: must be at least 1, got 0" in status["conditions"][0]["message"]


PULSAR_BROKER = {
    "type": "pulsar",
    "serviceUrl": "pulsar+ssl://p:6651",
    "adminUrl": "https://p:8443",
    "secretRef": {"name": "pulsar-client"},
}


def test_a_redrive_of_a_pulsar_policy_runs_with_the_policy_s_pulsar_client() -> None:
    bed = Bed()
    bed.add_redrive()
    bed.api.put("deadletterpolicies", policy_document({"spec.broker": PULSAR_BROKER}))

    assert bed.reconcile() is None

    assert bed.status()["phase"] == "Running"
    app = bed.api.stored("sparkapplications", NAMESPACE, "fix-1-redrive")
    assert app is not None
    template = app["spec"]["driver"]["template"]["spec"]
    [volume] = [v for v in template["volumes"] if v.get("secret", {}).get("secretName") == "pulsar-client"]
    mounts = {m["name"]: m["mountPath"] for m in template["containers"][0]["volumeMounts"]}
    assert mounts[volume["name"]] == PULSAR_CLIENT_DIR  # where dlq-engine redrive reads it by default


def test_fail_on_gaps_on_pulsar_fails_naming_the_field_and_the_rule_and_starts_nothing() -> None:
    bed = Bed()
    bed.add_redrive(failOnGaps=True)
    bed.api.put("deadletterpolicies", policy_document({"spec.broker": PULSAR_BROKER}))

    assert bed.reconcile() is None

    condition = bed.status()["conditions"][0]
    assert (bed.status()["phase"], condition["reason"]) == ("Failed", "BrokerNotSupported")
    assert (
        "spec.failOnGaps: must be false for a policy on Pulsar (spec.broker.type pulsar)"
        in condition["message"]
    )
    assert bed.api.stored("sparkapplications", NAMESPACE, "fix-1-redrive") is None


def test_a_redrive_whose_filter_calls_java_fails_at_once_and_creates_nothing() -> None:
    bed = Bed()
    bed.api.put("deadletterpolicies", policy_document())
    bed.add_redrive(selection={"filter": "java_method('java.lang.System', 'getenv', 'HOME') IS NOT NULL"})

    assert bed.reconcile() is None

    status = bed.status()
    assert (status["phase"], status["conditions"][0]["reason"]) == ("Failed", "InvalidSpec")
    assert status["conditions"][0]["message"].startswith(
        "spec.selection.filter: function java_method is not allowed"
    )
    assert bed.api.of("sparkapplications") == []
    assert bed.api.of("configmaps") == []


def test_a_running_redrive_whose_filter_the_model_now_refuses_is_stopped() -> None:
    """A redrive started by an operator that passed its filter through (before the filter
    language), seen by one that refuses it: its SparkApplication is deleted."""
    bed = Bed()
    bed.api.put("deadletterpolicies", policy_document())
    bed.add_redrive(selection={"filter": "attempts > 1"})
    bed.reconcile()
    assert bed.api.stored("sparkapplications", NAMESPACE, "fix-1-redrive") is not None
    bed.api.edit(
        "deadletterredrives",
        NAMESPACE,
        "fix-1",
        lambda o: o["spec"]["selection"].update(filter="java_method('java.lang.System', 'exit', 0) = 1"),
    )

    bed.reconcile()

    assert bed.status()["phase"] == "Failed"
    assert bed.api.stored("sparkapplications", NAMESPACE, "fix-1-redrive") is None


def test_a_redrive_runs_as_its_policy_s_class_says() -> None:
    """The class's image, pods' fit and checkpoint storage, as the policy's own job."""
    bed = Bed()
    bed.api.put(
        "deadletterpolicyclasses",
        {
            "metadata": {"name": "standard", "annotations": {"sparkdlq.io/is-default-class": "true"}},
            "spec": {
                "images": {"default": "registry/team-spark-dlq:2"},
                "storage": {"checkpointBase": "/cp", "checkpointClaim": "class-claim"},
                "pods": {"nodeSelector": {"pool": "spark"}, "imagePullSecrets": [{"name": "registry"}]},
            },
        },
    )
    bed.api.put("deadletterpolicies", policy_document())
    bed.add_redrive()
    assert bed.reconcile() is None
    app = bed.api.stored("sparkapplications", NAMESPACE, "fix-1-redrive")
    assert app is not None
    spec = app["spec"]
    assert (spec["image"], spec["imagePullSecrets"]) == ("registry/team-spark-dlq:2", ["registry"])
    assert spec["arguments"][spec["arguments"].index("--checkpoint") + 1].startswith(f"/cp/{NAMESPACE}/")
    driver = spec["driver"]["template"]["spec"]
    assert driver["nodeSelector"] == {"pool": "spark"}
    assert {"name": "checkpoints", "persistentVolumeClaim": {"claimName": "class-claim"}} in driver["volumes"]
