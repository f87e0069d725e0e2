"""Pure builders for a ``DeadLetterRedrive``: its ConfigMap, its SparkApplication (a batch job
running ``dlq-engine redrive``), and its status from what the SparkApplication and its driver
report. No I/O, like ``render``."""

from __future__ import annotations

import copy
import json
from collections.abc import Mapping
from enum import StrEnum
from typing import Any, Final

import yaml

from dlq_engine.model.policy import DeadLetterPolicy
from dlq_engine.model.redrive import REDRIVE_KIND, DeadLetterRedrive, redrive_to_document
from spark_dlq_operator import naming, render
from spark_dlq_operator.config import OperatorConfig
from spark_dlq_operator.engine_command import Redrive, engine_arguments
from spark_dlq_operator.governance import NO_FIT, PodFit
from spark_dlq_operator.policies.application_state import AppState, application_state
from spark_dlq_operator.reasons import FINAL_REDRIVE_PHASES, RedrivePhase, RedriveReason

REDRIVE_LABEL: Final = "sparkdlq.io/redrive"
REDRIVE_FILE_KEY: Final = "redrive.yaml"
REDRIVE_MOUNT: Final = "/etc/spark-dlq/redrive"
#: Where the driver writes its final status (the container's default terminationMessagePath);
#: the kubelet puts it in the pod's status, where the operator reads it.
TERMINATION_LOG: Final = "/dev/termination-log"
#: A redrive's driver is resubmitted after a failure this many times; each attempt resumes from
#: the progress on the checkpoint volume.
REDRIVE_RETRIES: Final = 3

#: The phases of a redrive; the last three are final.
PHASES: Final = tuple(RedrivePhase)
FINAL_PHASES: Final = FINAL_REDRIVE_PHASES


#: Its conditions, as a batch/v1 Job's: ``Complete`` True only when it succeeded, ``Failed``
#: True when it failed or was cancelled (``kubectl wait --for=condition=Complete`` never takes a
#: failed redrive for a finished one), and ``Running``, True while its job runs (its reason says
#: why a Pending redrive waits).
class RedriveCondition(StrEnum):
    """The type of one of a redrive's conditions."""

    RUNNING = "Running"
    COMPLETE = "Complete"
    FAILED = "Failed"


def owner(body: Mapping[str, Any]) -> naming.Owner:
    metadata = body["metadata"]
    return naming.Owner(
        name=metadata["name"], namespace=metadata["namespace"], uid=metadata["uid"], kind=REDRIVE_KIND
    )


def application_name(redrive_name: str) -> str:
    return naming.application_name(f"{redrive_name}-redrive")


def config_map_name(redrive_name: str) -> str:
    return f"{redrive_name}-redrive"


def labels(redrive: DeadLetterRedrive) -> dict[str, str]:
    return {
        **naming.labels(redrive.policy),
        REDRIVE_LABEL: naming.label_value(redrive.name),
    }


def checkpoint(redrive: DeadLetterRedrive, policy: DeadLetterPolicy, config: OperatorConfig) -> str:
    """Where the redrive keeps its progress: beside the policy's checkpoint, on the same volume."""
    return f"{render.checkpoint_location(policy, config).rstrip('/')}-redrives/{redrive.name}"


def config_map(redrive: DeadLetterRedrive, *, owner: naming.Owner) -> render.Manifest:
    text = yaml.safe_dump(redrive_to_document(redrive), sort_keys=False)
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {
            "name": config_map_name(redrive.name),
            "namespace": redrive.namespace,
            "labels": labels(redrive),
            "ownerReferences": [owner.reference()],
        },
        "data": {REDRIVE_FILE_KEY: text},
    }


def spark_application(
    redrive: DeadLetterRedrive,
    policy: DeadLetterPolicy,
    *,
    config: OperatorConfig,
    owner: naming.Owner,
    fit: PodFit = NO_FIT,
) -> render.Manifest:
    """The policy's own SparkApplication made into a batch job: the same image, Spark settings,
    pods' fit (``policy`` and ``fit`` as its class governs it), volumes (the policy's ConfigMap,
    the checkpoint volume, the Kafka client secret) plus the redrive's ConfigMap, running
    ``dlq-engine redrive`` and resubmitted a few times on failure."""
    app = render.spark_application(policy, config=config, owner=owner, fit=fit)
    own_labels = labels(redrive)
    app["metadata"] = {
        "name": application_name(redrive.name),
        "namespace": redrive.namespace,
        "labels": own_labels,
        "ownerReferences": [owner.reference()],
    }
    spec = app["spec"]
    spec["arguments"] = engine_arguments(
        Redrive(
            file=f"{REDRIVE_MOUNT}/{REDRIVE_FILE_KEY}",
            policy=f"{naming.POLICY_MOUNT}/{naming.POLICY_FILE_KEY}",
            checkpoint=checkpoint(redrive, policy, config),
            status_file=TERMINATION_LOG,
        )
    )
    spec["restartPolicy"] = {
        "type": "OnFailure",
        "onFailureRetries": REDRIVE_RETRIES,
        "onFailureRetryInterval": 10,
        "onSubmissionFailureRetries": REDRIVE_RETRIES,
        "onSubmissionFailureRetryInterval": 10,
    }
    driver = spec["driver"]
    driver["labels"] = dict(own_labels)
    driver.pop("annotations", None)
    template = driver["template"]["spec"]
    template["volumes"].append({"name": "redrive", "configMap": {"name": config_map_name(redrive.name)}})
    container = template["containers"][0]
    container["volumeMounts"].append({"name": "redrive", "mountPath": REDRIVE_MOUNT, "readOnly": True})
    container.pop("ports", None)
    container.pop("env", None)
    spec["executor"]["labels"] = dict(own_labels)
    return app


def termination_status(pod: Mapping[str, Any] | None) -> dict[str, Any] | None:
    """The status the redrive's driver wrote to its termination message, if it did."""
    for status in ((pod or {}).get("status") or {}).get("containerStatuses") or []:
        if status.get("name") != render.DRIVER_CONTAINER:
            continue
        for state in (status.get("state") or {}, status.get("lastState") or {}):
            message = (state.get("terminated") or {}).get("message")
            if message:
                try:
                    found = json.loads(message)
                except ValueError:
                    return None
                return found if isinstance(found, dict) else None
    return None


def next_status(
    old: Mapping[str, Any],
    *,
    generation: int,
    phase: str,
    reason: str,
    message: str,
    driver: Mapping[str, Any] | None = None,
    now: str,
) -> dict[str, Any]:
    """The redrive's status: phase, counts (from the driver's final status), its conditions
    (``conditions``), and the time it started and finished."""
    status = copy.deepcopy(dict(old))
    status["observedGeneration"] = generation
    status["phase"] = phase
    status["sparkApplication"] = status.get("sparkApplication") or ""
    if phase == RedrivePhase.RUNNING and not status.get("startTime"):
        status["startTime"] = now
    if phase in FINAL_PHASES and not status.get("completionTime"):
        status["completionTime"] = now
    if driver:
        for key in (
            "matched",
            "redriven",
            "possibleDuplicates",
            "expired",
            "considered",
            "toConsider",
            "dryRun",
        ):
            if key in driver:
                status[key] = driver[key]
        if isinstance(driver.get("skipped"), dict):
            status["skipped"] = driver["skipped"]
        elif "skippedMaxRedrives" in driver:
            status["skipped"] = {"maxRedrives": driver["skippedMaxRedrives"]}
        if isinstance(driver.get("partitions"), dict):
            status["partitions"] = driver["partitions"]
        for key in ("byReason", "byErrorClass", "samples"):
            if key in driver:
                status[key] = driver[key]
    status["conditions"] = conditions(
        status.get("conditions") or [],
        phase=phase,
        reason=reason,
        message=message,
        generation=generation,
        now=now,
    )
    return status


def conditions(
    old: list[Mapping[str, Any]], *, phase: str, reason: str, message: str, generation: int, now: str
) -> list[dict[str, Any]]:
    """``Running`` (True while the job runs), then ``Complete`` or ``Failed`` once the redrive
    ended, as a batch/v1 Job's. A condition keeps its lastTransitionTime while its status stays."""
    wanted = [(RedriveCondition.RUNNING, "True" if phase == RedrivePhase.RUNNING else "False")]
    if phase == "Succeeded":
        wanted.append((RedriveCondition.COMPLETE, "True"))
    elif phase in FINAL_PHASES:
        wanted.append((RedriveCondition.FAILED, "True"))
    previous = {c.get("type"): c for c in old}
    result = []
    for kind, state in wanted:
        before = previous.get(kind) or {}
        result.append(
            {
                "type": kind.value,
                "status": state,
                "reason": reason,
                "message": message,
                "lastTransitionTime": before.get("lastTransitionTime", now)
                if before.get("status") == state
                else now,
                "observedGeneration": generation,
            }
        )
    return result


def phase_of(app: Mapping[str, Any] | None) -> tuple[RedrivePhase, str, str]:
    """``(phase, reason, message)`` of a redrive from its SparkApplication's state."""
    if app is None:
        return (
            RedrivePhase.PENDING,
            RedriveReason.SUBMITTING,
            "the redrive's SparkApplication is being created",
        )
    state, _, error = application_state(app)
    if state == AppState.COMPLETED:
        return RedrivePhase.SUCCEEDED, RedriveReason.COMPLETED, "the redrive finished"
    if state in (AppState.FAILED, AppState.SUBMISSION_FAILED):
        return (
            RedrivePhase.FAILED,
            RedriveReason.SPARK_APPLICATION_FAILED,
            f"the redrive's Spark application failed (state {state})" + (f": {error}" if error else ""),
        )
    if state == AppState.RUNNING:
        return RedrivePhase.RUNNING, RedriveReason.RUNNING, "the redrive is running"
    return (
        RedrivePhase.RUNNING,
        RedriveReason.SUBMITTED,
        f"the redrive's Spark application is submitted (state {state or 'none yet'})",
    )
