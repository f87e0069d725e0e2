"""Pure builders: a parsed policy in, Kubernetes manifests and the policy's next status out.

Everything the operator writes to the cluster is decided here, with no I/O and no client
imported, so every field can be checked by plain unit tests (tests/unit/test_render.py) and the
thin async functions in ``reconcile`` and ``topics`` only send what these functions return.
The names, labels and annotations are the contract's (docs/reference.md, section 2); the mapping of a
SparkApplication's state onto the policy's conditions and phase lives here too, as data.
"""

from __future__ import annotations

import copy
import dataclasses
import datetime
import hashlib
import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final, Literal, TypedDict, TypeGuard, get_args

import yaml

from dlq_engine.model import API_VERSION, KIND, DeadLetterPolicy, config_hash, to_document
from dlq_engine.model.breaker import CLOSED, HALF_OPEN, MAX_REASON_CHARS, BreakerReport, is_state
from dlq_engine.model.policy import PodSettings
from dlq_engine.model.topics import TopicWant
from spark_dlq_operator import topic_ownership
from spark_dlq_operator.config import OperatorConfig
from spark_dlq_operator.governance import NO_FIT, PodFit
from spark_dlq_operator.reasons import INVALID, BreakerReason, Reason
from spark_dlq_operator.topic_ownership import OwnedTopic

Manifest = dict[str, Any]
ConditionStatus = Literal["True", "False", "Unknown"]
ConditionType = Literal["Ready", "TopicsReady", "JobRunning", "BreakerClosed"]
#: The conditions in the order ``status.conditions`` lists them.
CONDITION_TYPES: Final[tuple[ConditionType, ...]] = get_args(ConditionType)
Phase = Literal["Pending", "Provisioning", "Running", "Restarting", "Suspended", "Failed", "Invalid"]

# --- names the contract fixes ------------------------------------------------------------------
POLICY_GROUP: Final = "sparkdlq.io"
POLICY_VERSION: Final = "v1alpha1"
POLICY_PLURAL: Final = "deadletterpolicies"

SPARK_GROUP: Final = "sparkoperator.k8s.io"
SPARK_VERSION_API: Final = "v1beta2"
SPARK_PLURAL: Final = "sparkapplications"
SPARK_KIND: Final = "SparkApplication"

STRIMZI_GROUP: Final = "kafka.strimzi.io"
#: The KafkaTopic versions the operator writes, in order of preference: Strimzi 1.0 and later
#: serve only ``v1``, 0.49-0.51 both, older releases only ``v1beta2``. The fields the operator
#: writes and reads (topicName, partitions, replicas, config, status.conditions,
#: status.observedGeneration) are the same in both.
STRIMZI_VERSIONS: Final = ("v1", "v1beta2")
STRIMZI_PLURAL: Final = "kafkatopics"
STRIMZI_KIND: Final = "KafkaTopic"
STRIMZI_CLUSTER_LABEL: Final = "strimzi.io/cluster"

MANAGED_BY_LABEL: Final = "app.kubernetes.io/managed-by"
MANAGED_BY: Final = "spark-dlq-operator"
POLICY_LABEL: Final = "sparkdlq.io/policy"
#: On KafkaTopics only, which may live in another namespace than their policy.
POLICY_NAMESPACE_LABEL: Final = "sparkdlq.io/policy-namespace"
CONFIG_HASH_ANNOTATION: Final = "sparkdlq.io/config-hash"
#: On the ConfigMap: the provisioner ``auto`` resolved to, so a policy keeps it for good (a
#: Strimzi installed later must not take over topics created through the Admin API).
PROVISIONER_ANNOTATION: Final = "sparkdlq.io/topic-provisioner"

POLICY_FILE_KEY: Final = "policy.yaml"
POLICY_MOUNT: Final = "/etc/spark-dlq/policy"
MAIN_APPLICATION_FILE: Final = "local:///opt/spark-dlq/dlq_engine_main.py"

#: The names Spark gives the driver's and the executors' containers (the pod templates' container
#: is matched by name).
DRIVER_CONTAINER: Final = "spark-kubernetes-driver"
EXECUTOR_CONTAINER: Final = "spark-kubernetes-executor"
#: In ``spec.driver.annotations``: bumped by the operator to make the spark-operator resubmit a
#: failed application now (a spec change; see ``resubmit_due``). Not part of the config hash.
RESUBMIT_ANNOTATION: Final = "sparkdlq.io/resubmission"
#: On the policy's Lease: the driver's liveness report (``dlq_engine.job.heartbeat``).
HEARTBEAT_ANNOTATION: Final = "sparkdlq.io/heartbeat"
#: The driver's container port for the engine's Prometheus ``/metrics`` (``dlq-engine run``
#: reads it from ``SPARK_DLQ_METRICS_PORT``), named as the chart's PodMonitor selects it.
ENGINE_METRICS_PORT: Final = 9091
ENGINE_METRICS_PORT_NAME: Final = "metrics"

#: The restricted Pod Security Standard for the driver and executor pods (in their pod
#: templates). The engine image runs as the Spark image's numeric non-root user (uid 185), so
#: ``runAsNonRoot`` can be verified.
POD_SECURITY_CONTEXT: Final[Mapping[str, Any]] = {
    "runAsNonRoot": True,
    "seccompProfile": {"type": "RuntimeDefault"},
}
CONTAINER_SECURITY_CONTEXT: Final[Mapping[str, Any]] = {
    "runAsNonRoot": True,
    "allowPrivilegeEscalation": False,
    "capabilities": {"drop": ["ALL"]},
    "seccompProfile": {"type": "RuntimeDefault"},
}

#: Spark settings the operator owns, applied over a policy's ``sparkConf``: they keep what the
#: driver does with the Kubernetes API to its executor pods, so its role needs no right on
#: ConfigMaps, Services or PersistentVolumeClaims (docs/security.md ("Least privilege")). With Spark 4.0's
#: defaults the driver would create a ConfigMap for its executors and delete, by label, the
#: ConfigMaps, Services and claims of its application at exit (``deletecollection``, which
#: RBAC cannot limit to one application: a right to delete every ConfigMap of the namespace,
#: the other policies' ``policy.yaml`` included). The executors get Spark's configuration from
#: the driver when they register and run the same image; the driver's Service and ConfigMap
#: belong to its pod and go with it; the engine asks for no claim of its own.
DRIVER_SPARK_CONF: Final[Mapping[str, str]] = {
    "spark.kubernetes.executor.disableConfigMap": "true",
    "spark.kubernetes.driver.service.deleteOnTermination": "false",
    "spark.kubernetes.driver.ownPersistentVolumeClaim": "false",
    "spark.kubernetes.driver.reusePersistentVolumeClaim": "false",
}

_LABEL_VALUE_MAX: Final = 63
#: The CRD's bounds on a condition's reason and message.
_REASON_MAX: Final = 1024
_MESSAGE_MAX: Final = 32768
_DNS_1035_LABEL = re.compile(r"^[a-z]([-a-z0-9]*[a-z0-9])?$")
_DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")


class OwnerReference(TypedDict):
    apiVersion: str
    kind: str
    name: str
    uid: str
    controller: bool
    blockOwnerDeletion: bool


class Condition(TypedDict, total=False):
    type: ConditionType
    status: ConditionStatus
    reason: str
    message: str
    lastTransitionTime: str
    observedGeneration: int


@dataclass(frozen=True, slots=True)
class Owner:
    """The object (a policy, or a redrive) that owns what is rendered for it."""

    name: str
    namespace: str
    uid: str
    kind: str = KIND

    def reference(self) -> OwnerReference:
        return {
            "apiVersion": API_VERSION,
            "kind": self.kind,
            "name": self.name,
            "uid": self.uid,
            "controller": True,
            "blockOwnerDeletion": True,
        }


# --- labels and names --------------------------------------------------------------------------


def label_value(text: str) -> str:
    """``text`` when it is a valid label value, else a shortened form with a hash suffix
    (policy names may be 253 characters long, label values only 63)."""
    if len(text) <= _LABEL_VALUE_MAX:
        return text
    digest = hashlib.sha256(text.encode()).hexdigest()[:8]
    return f"{text[: _LABEL_VALUE_MAX - 9].rstrip('-.')}-{digest}"


def labels(policy_name: str) -> dict[str, str]:
    """The labels on everything the operator creates for a policy."""
    return {MANAGED_BY_LABEL: MANAGED_BY, POLICY_LABEL: label_value(policy_name)}


#: libyaml's safe dumper when PyYAML has it (a third of the pure-Python one's CPU time, the same
#: text for these documents); every reconcile and resync renders the ConfigMap to compare it.
_YAML_DUMPER: Final[type[yaml.SafeDumper]] = getattr(yaml, "CSafeDumper", yaml.SafeDumper)


def application_name(policy_name: str) -> str:
    """The SparkApplication's name: the policy's own name when it is a DNS-1035 label (the
    spark-operator's webhook refuses any other), else a label made from it: dots and other
    characters become ``-``, a leading digit gets a ``p-`` prefix, and a hash of the policy's
    name ends it (63 characters at most). Only names that change get the hash, and every name
    that keeps its own is a DNS-1035 label without one of those changes, so two policies of one
    namespace never share an application."""
    if len(policy_name) <= _LABEL_VALUE_MAX and _DNS_1035_LABEL.match(policy_name):
        return policy_name
    digest = hashlib.sha256(policy_name.encode()).hexdigest()[:8]
    base = re.sub(r"[^a-z0-9-]+", "-", policy_name.lower()).strip("-")
    if not base[:1].isalpha():
        base = f"p-{base}" if base else "p"
    return f"{base[: _LABEL_VALUE_MAX - 9].rstrip('-')}-{digest}"


def config_map_name(policy_name: str) -> str:
    return f"{policy_name}-policy"


def service_account_name(policy_name: str) -> str:
    """The service account the operator makes for a policy's Spark pods."""
    return f"{application_name(policy_name)}-spark"


def shared_service_account(fit: PodFit, config: OperatorConfig) -> str:
    """The one existing service account every governed policy's Spark pods share, empty for one
    per policy (made by the operator). The class's ``pods.serviceAccountName`` wins over the
    operator's ``--spark-service-account``: the platform team owns both, and the class is the
    narrower choice (docs/security.md ("Least privilege"): sharing is the weaker isolation)."""
    return fit.service_account or config.spark_service_account


def spark_service_account(policy_name: str, fit: PodFit, config: OperatorConfig) -> str:
    """The service account a policy's Spark pods run as."""
    return shared_service_account(fit, config) or service_account_name(policy_name)


def lease_name(policy_name: str) -> str:
    """The policy's Lease (``coordination.k8s.io``): its driver's heartbeat."""
    return f"{application_name(policy_name)}-heartbeat"


def checkpoint_location(policy: DeadLetterPolicy, config: OperatorConfig) -> str:
    """``spec.spark.checkpointLocation`` (in a cluster: where the policy's class puts it), else
    ``<checkpoint-base>/<namespace>/<name>``."""
    if policy.spark.checkpoint_location:
        return policy.spark.checkpoint_location
    return f"{config.checkpoint_base.rstrip('/')}/{policy.namespace}/{policy.name}"


def checkpoint_volume(
    policy: DeadLetterPolicy, fit: PodFit, config: OperatorConfig
) -> tuple[str, str] | None:
    """``(claim, mount path)`` of the shared volume the policy's checkpoint is on, None when it is
    on an object store: the class's claim at its base, else the operator's claim when the class
    keeps the operator's base."""
    base = (fit.checkpoint_base or config.checkpoint_base).rstrip("/")
    claim = fit.checkpoint_claim or ("" if fit.checkpoint_base else config.checkpoint_claim or "")
    if not claim or not checkpoint_location(policy, config).startswith(f"{base}/"):
        return None
    return claim, base


# --- ConfigMap and SparkApplication ------------------------------------------------------------


def policy_document(policy: DeadLetterPolicy, config: OperatorConfig) -> dict[str, Any]:
    """The document the engine reads: the normalised policy with its checkpoint filled in."""
    document = to_document(policy)
    document["spec"]["spark"]["checkpointLocation"] = checkpoint_location(policy, config)
    return document


def policy_file_hash(policy: DeadLetterPolicy, config: OperatorConfig) -> str:
    """The configuration hash of ``policy.yaml`` as the operator writes it (its checkpoint filled
    in), which the engine checks the mounted file against (``--config-hash``). It is the policy's
    own ``config_hash`` when the policy names its checkpoint."""
    spark = dataclasses.replace(policy.spark, checkpoint_location=checkpoint_location(policy, config))
    return config_hash(dataclasses.replace(policy, spark=spark))


def config_map(
    policy: DeadLetterPolicy, *, config: OperatorConfig, owner: Owner, provisioner: str | None = None
) -> Manifest:
    """ConfigMap ``P-policy`` with ``policy.yaml``, mounted into the Spark pods."""
    text = yaml.dump(policy_document(policy, config), Dumper=_YAML_DUMPER, sort_keys=False)
    metadata: dict[str, Any] = {
        "name": config_map_name(policy.name),
        "namespace": policy.namespace,
        "labels": labels(policy.name),
        "ownerReferences": [owner.reference()],
    }
    if provisioner is not None:
        metadata["annotations"] = {PROVISIONER_ANNOTATION: provisioner}
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": metadata, "data": {POLICY_FILE_KEY: text}}


def spark_application(
    policy: DeadLetterPolicy, *, config: OperatorConfig, owner: Owner, fit: PodFit = NO_FIT
) -> Manifest:
    """SparkApplication ``application_name(P)`` running ``dlq-engine run -f`` on the mounted policy.

    The driver and executors run as ``service_account``, by default the operator's shared one
    (``--spark-service-account``), else the policy's own (``service_account_name``); the executors get no service-account token unless
    ``executor_token`` (they never call the Kubernetes API, and run the processor's code on
    untrusted payloads). The driver reports its heartbeat on the policy's Lease and refuses a
    ``policy.yaml`` whose hash is not the one the operator wrote (``--config-hash``).

    The configuration hash is in the metadata (for people and selectors) and inside the spec
    (``spec.driver.annotations``): the spark-operator resubmits a running application only
    when its spec changes. The volumes and security contexts are in the driver's and the
    executors' pod templates (``spec.driver.template``, ``spec.executor.template``), which
    spark-submit itself applies: the spark-operator's mutating webhook, which is the only way
    its ``volumes``/``securityContext`` fields reach the pods, need not run for the engine to
    find its policy and to pass restricted Pod Security. ``policy`` is the policy as its class
    lets it run (``governance.Governed.policy``): its ``spark.pod`` goes into both templates;
    ``fit`` is what else the class gives the pods (service account, pull secrets, checkpoint
    volume).
    """
    digest = config_hash(policy)
    own_labels = labels(policy.name)
    volumes: list[dict[str, Any]] = [
        {"name": "policy", "configMap": {"name": config_map_name(policy.name)}},
    ]
    mounts: list[dict[str, Any]] = [
        {"name": "policy", "mountPath": POLICY_MOUNT, "readOnly": True},
    ]
    shared = checkpoint_volume(policy, fit, config)
    if shared is not None:
        # The driver writes offsets and commits, the executors the retry stage's state: every
        # Spark pod mounts the shared volume the checkpoints live on.
        claim, base = shared
        volumes.append({"name": "checkpoints", "persistentVolumeClaim": {"claimName": claim}})
        mounts.append({"name": "checkpoints", "mountPath": base})
    if policy.broker.secret_ref is not None:
        # Only the secret's name: the operator never reads or copies a secret.
        volume = f"{policy.broker.type}-client"
        volumes.append({"name": volume, "secret": {"secretName": policy.broker.secret_ref.name}})
        mounts.append({"name": volume, "mountPath": policy.broker.client_dir, "readOnly": True})
    driver, executor = policy.spark.driver, policy.spark.executor
    pod = policy.spark.pod
    application: Manifest = {
        "apiVersion": f"{SPARK_GROUP}/{SPARK_VERSION_API}",
        "kind": SPARK_KIND,
        "metadata": {
            "name": application_name(policy.name),
            "namespace": policy.namespace,
            "labels": own_labels,
            "annotations": {CONFIG_HASH_ANNOTATION: digest},
            "ownerReferences": [owner.reference()],
        },
        "spec": {
            "type": "Python",
            "pythonVersion": "3",
            "mode": "cluster",
            "sparkVersion": config.spark_version,
            "image": policy.spark.image or config.spark_image,
            "mainApplicationFile": MAIN_APPLICATION_FILE,
            "arguments": [
                "run",
                "-f",
                f"{POLICY_MOUNT}/{POLICY_FILE_KEY}",
                "--checkpoint",
                checkpoint_location(policy, config),
                "--heartbeat-lease",
                f"{policy.namespace}/{lease_name(policy.name)}",
                "--config-hash",
                policy_file_hash(policy, config),
            ],
            "sparkConf": dict(sorted({**policy.spark.spark_conf, **DRIVER_SPARK_CONF}.items())),
            "restartPolicy": restart_policy(config),
            "driver": {
                "cores": driver.cores,
                "memory": driver.memory,
                "serviceAccount": spark_service_account(policy.name, fit, config),
                "labels": dict(own_labels),
                "annotations": {CONFIG_HASH_ANNOTATION: digest},
                "template": pod_template(
                    DRIVER_CONTAINER,
                    volumes=volumes,
                    mounts=mounts,
                    ports=[{"name": ENGINE_METRICS_PORT_NAME, "containerPort": ENGINE_METRICS_PORT}],
                    env=[{"name": "SPARK_DLQ_METRICS_PORT", "value": str(ENGINE_METRICS_PORT)}],
                    pod=pod,
                ),
            },
            "executor": {
                "instances": executor.instances,
                "cores": executor.cores,
                "memory": executor.memory,
                "labels": dict(own_labels),
                "template": pod_template(
                    EXECUTOR_CONTAINER,
                    volumes=volumes,
                    mounts=mounts,
                    pod=pod,
                    service_account_token=fit.executor_service_account_token,
                ),
            },
        },
    }
    if fit.image_pull_secrets:
        application["spec"]["imagePullSecrets"] = list(fit.image_pull_secrets)
    return application


_NO_POD: Final = PodSettings()


def pod_template(
    container: str,
    *,
    volumes: Sequence[Mapping[str, Any]],
    mounts: Sequence[Mapping[str, Any]],
    ports: Sequence[Mapping[str, Any]] = (),
    env: Sequence[Mapping[str, Any]] = (),
    pod: PodSettings = _NO_POD,
    service_account_token: bool | None = None,
) -> Manifest:
    """A Spark pod template: the volumes, their mounts in the Spark container (named as Spark
    names it), its extra ports and environment (Spark adds its own to them), the restricted Pod
    Security contexts, the pods' fit (node selector, tolerations, affinity, priority class,
    labels and annotations; the operator's own labels are Spark's to set and win), and
    ``automountServiceAccountToken`` when ``service_account_token`` is given (None: the service
    account's own setting)."""
    spark_container: dict[str, Any] = {
        "name": container,
        "securityContext": copy.deepcopy(dict(CONTAINER_SECURITY_CONTEXT)),
        "volumeMounts": copy.deepcopy(list(mounts)),
    }
    if ports:
        spark_container["ports"] = copy.deepcopy(list(ports))
    if env:
        spark_container["env"] = copy.deepcopy(list(env))
    spec: dict[str, Any] = {
        "securityContext": copy.deepcopy(dict(POD_SECURITY_CONTEXT)),
        "volumes": copy.deepcopy(list(volumes)),
        "containers": [spark_container],
    }
    if service_account_token is not None:
        spec["automountServiceAccountToken"] = service_account_token
    if pod.node_selector:
        spec["nodeSelector"] = dict(pod.node_selector)
    if pod.tolerations:
        spec["tolerations"] = [dict(t) for t in pod.tolerations]
    if pod.affinity:
        spec["affinity"] = copy.deepcopy(dict(pod.affinity))
    if pod.priority_class_name:
        spec["priorityClassName"] = pod.priority_class_name
    template: Manifest = {"spec": spec}
    labels_ = {k: v for k, v in pod.labels.items() if k not in (MANAGED_BY_LABEL, POLICY_LABEL)}
    metadata = {
        key: dict(value) for key, value in (("labels", labels_), ("annotations", pod.annotations)) if value
    }
    if metadata:
        template["metadata"] = metadata
    return template


def restart_policy(config: OperatorConfig) -> dict[str, Any]:
    """``Always``: the spark-operator resubmits after every failure, for good (its ``OnFailure``
    budget counts failures over the application's whole life: its counters are reset only when
    the spec changes, so the n-th crash ever would leave the policy failed). It waits the
    interval times the submissions so far, over the application's life, after the last one;
    the operator caps that wait (``config.restart_backoff_cap``, ``resubmit_due``)."""
    return {
        "type": "Always",
        "onFailureRetryInterval": config.restart_interval,
        "onSubmissionFailureRetryInterval": config.submission_retry_interval,
    }


# --- topics ------------------------------------------------------------------------------------


def kafka_topic_name(topic: str) -> str:
    """A Kubernetes name for a Kafka topic: the topic itself when it is a valid DNS subdomain,
    else Strimzi's own convention, ``<lower-cased, sanitised>---<sha1 of the topic>``."""
    if len(topic) <= 253 and _DNS_SUBDOMAIN.match(topic):
        return topic
    digest = hashlib.sha1(topic.encode(), usedforsecurity=False).hexdigest()
    base = re.sub(r"[^a-z0-9.-]", "-", topic.lower()).strip("-.")[:200].rstrip("-.")
    return f"{base}---{digest}" if base else digest


def strimzi_namespace(policy: DeadLetterPolicy) -> str:
    return policy.topics.strimzi.namespace or policy.namespace


def kafka_topic(
    policy: DeadLetterPolicy,
    want: TopicWant,
    *,
    owner: Owner | None,
    uid: str,
    version: str = STRIMZI_VERSIONS[0],
) -> Manifest:
    """A Strimzi KafkaTopic for ``want`` (``kafka.strimzi.io/<version>``), in the Kafka cluster's
    namespace, annotated with the uid of the policy it is created for (``uid``).

    ``owner`` is given only when the KafkaTopic is in the policy's namespace, the topics go
    with the policy (``deleteWithPolicy``) and the operator created the topic for it: a
    garbage-collected KafkaTopic deletes its topic.
    """
    spec: dict[str, Any] = {"topicName": want.name}
    if want.partitions:
        spec["partitions"] = want.partitions
    if want.replication_factor > 0:
        spec["replicas"] = want.replication_factor
    spec["config"] = dict(want.config)
    metadata: dict[str, Any] = {
        "name": kafka_topic_name(want.name),
        "namespace": strimzi_namespace(policy),
        "labels": {
            STRIMZI_CLUSTER_LABEL: policy.topics.strimzi.cluster,
            **labels(policy.name),
            POLICY_NAMESPACE_LABEL: label_value(policy.namespace),
        },
        "annotations": {topic_ownership.POLICY_UID_KEY: uid},
    }
    if owner is not None:
        metadata["ownerReferences"] = [owner.reference()]
    return {
        "apiVersion": f"{STRIMZI_GROUP}/{version}",
        "kind": STRIMZI_KIND,
        "metadata": metadata,
        "spec": spec,
    }


def strimzi_ready(kafka_topic_object: Mapping[str, Any]) -> tuple[bool, str]:
    """Whether Strimzi reports the KafkaTopic Ready for its current generation, and why not."""
    status = kafka_topic_object.get("status") or {}
    generation = (kafka_topic_object.get("metadata") or {}).get("generation")
    observed = status.get("observedGeneration")
    for condition in status.get("conditions") or []:
        if condition.get("type") != "Ready":
            continue
        if condition.get("status") == "True":
            if observed is not None and generation is not None and observed < generation:
                return False, "Strimzi has not yet reconciled the latest change"
            return True, ""
        detail = condition.get("message") or condition.get("reason") or "not ready"
        return False, str(detail)
    return False, "Strimzi has not reported on it yet"


# --- status ------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ConditionState:
    status: ConditionStatus
    reason: str
    message: str


#: The spark-operator v2's application states (``ApplicationState*`` in its api/v1beta2; ""
#: is its NEW). Under the Always restart policy a failing driver or a failed submission is
#: resubmitted, so FAILING and SUBMISSION_FAILED are on the way back, not the end; FAILED is
#: the end (reached only under another restart policy, e.g. a SparkApplication edited by hand).
#: UNKNOWN is the driver pod's phase Unknown (its node lost): the job may still run.
_SUBMITTED = frozenset({"", "SUBMITTED"})
_RESTARTING = frozenset(
    {"PENDING_RERUN", "INVALIDATING", "SUCCEEDING", "FAILING", "SUBMISSION_FAILED", "SUSPENDING", "RESUMING"}
)
_FAILED = frozenset({"FAILED"})


def application_state(app: Mapping[str, Any]) -> tuple[str, str, str]:
    """``(state, submissionID, errorMessage)`` of a SparkApplication: what changes when the
    spark-operator moves it along (a resubmission changes the submission id)."""
    status = app.get("status") or {}
    state = status.get("applicationState") or {}
    return (
        str(state.get("state") or ""),
        str(status.get("submissionID") or ""),
        str(state.get("errorMessage") or ""),
    )


def job_condition(app: Mapping[str, Any]) -> ConditionState:
    """JobRunning from the spark-operator's ``status.applicationState``."""
    state, _, error = application_state(app)
    if state == "RUNNING":
        return ConditionState("True", "Running", "the Spark application is running")
    if state in _SUBMITTED:
        return ConditionState(
            "False", "Submitted", f"the Spark application is submitted (state {state or 'none yet'})"
        )
    if state in _RESTARTING:
        return ConditionState(
            "False",
            "Restarting",
            f"the Spark application is restarting (state {state})" + (f": {error}" if error else ""),
        )
    if state == "SUSPENDED":
        return ConditionState(
            "False", "Suspended", "the SparkApplication is suspended (its spec.suspend, not the policy's)"
        )
    if state in _FAILED:
        return ConditionState(
            "False",
            "Failed",
            f"the Spark application failed (state {state})" + (f": {error}" if error else ""),
        )
    if state == "COMPLETED":
        return ConditionState(
            "False", "Completed", "the Spark application completed; a streaming job should not stop by itself"
        )
    if state == "UNKNOWN":
        return ConditionState(
            "Unknown", "DriverUnknown", "the driver pod's state is unknown (its node may be unreachable)"
        )
    return ConditionState("Unknown", "Unknown", f"the Spark application is in state {state}")


def unwatched(namespace: str, watched: Sequence[str]) -> ConditionState | None:
    """JobRunning when the spark-operator is declared to watch other namespaces only."""
    if not watched or namespace in watched or "" in watched:
        return None
    return ConditionState(
        "False",
        "NamespaceNotWatched",
        f"the spark-operator watches {', '.join(sorted(watched))}, not {namespace}: no job starts "
        f"here until {namespace} is one of its job namespaces (its chart's spark.jobNamespaces)",
    )


def unnoticed(app: Mapping[str, Any], *, now: datetime.datetime, timeout: float) -> ConditionState | None:
    """JobRunning for a SparkApplication the spark-operator has not picked up ``timeout``
    seconds after it was created (no state at all), else None."""
    state, _, _ = application_state(app)
    created = time_of((app.get("metadata") or {}).get("creationTimestamp"))
    if state or created is None or (now - created).total_seconds() < timeout:
        return None
    metadata = app.get("metadata") or {}
    return ConditionState(
        "False",
        "NotPickedUp",
        f"SparkApplication {metadata.get('name')} has no state {timeout:.0f}s after it was created: "
        f"the spark-operator may not watch namespace {metadata.get('namespace')} (its chart's "
        "spark.jobNamespaces), or may not be running",
    )


def resubmit_due(app: Mapping[str, Any], *, cap: float, now: datetime.datetime) -> float | None:
    """Seconds until the operator should resubmit a failed application itself, or None when the
    spark-operator resubmits it within ``cap`` seconds of its last submission (or it is not
    failing). The spark-operator waits its retry interval times the submissions so far, over the
    application's life (``TimeUntilNextRetryDue``), so the wait has no bound of its own.

    FAILED is final for the spark-operator (a restart policy other than the operator's ``Always``,
    or a spark-operator that gave up): the operator resubmits it after its retry interval
    doubled for each of the operator's own resubmissions so far (``RESUBMIT_ANNOTATION``), at
    most ``cap`` seconds, from when it ended."""
    status = app.get("status") or {}
    state, _, _ = application_state(app)
    policy = (app.get("spec") or {}).get("restartPolicy") or {}
    if state == "FAILED":
        driver = (app.get("spec") or {}).get("driver") or {}
        resubmitted = int((driver.get("annotations") or {}).get(RESUBMIT_ANNOTATION) or 0)
        base = float(policy.get("onFailureRetryInterval") or 10)
        wait = min(cap, base * 2.0 ** min(resubmitted, 30))
        ended = time_of(status.get("terminationTime")) or time_of(status.get("lastSubmissionAttemptTime"))
        if ended is None:
            return 0.0
        return max(0.0, wait - (now - ended).total_seconds())
    if state == "FAILING":
        interval = policy.get("onFailureRetryInterval")
    elif state == "SUBMISSION_FAILED":
        interval = policy.get("onSubmissionFailureRetryInterval")
    else:
        return None
    attempts = int(status.get("submissionAttempts") or 0)
    last = time_of(status.get("lastSubmissionAttemptTime"))
    if interval is None or last is None or attempts <= 0 or float(interval) * attempts <= cap:
        return None
    return max(0.0, cap - (now - last).total_seconds())


def resubmission(app: Mapping[str, Any]) -> dict[str, Any]:
    """The merge patch that makes the spark-operator resubmit ``app`` now: a new value of
    ``RESUBMIT_ANNOTATION`` in its driver's annotations, a spec change, so it invalidates the
    run, resets its counters and submits again."""
    driver = (app.get("spec") or {}).get("driver") or {}
    count = int((driver.get("annotations") or {}).get(RESUBMIT_ANNOTATION) or 0)
    return {"spec": {"driver": {"annotations": {RESUBMIT_ANNOTATION: str(count + 1)}}}}


def time_of(value: object) -> datetime.datetime | None:
    """An RFC 3339 time as Kubernetes writes it, or None."""
    if not value:
        return None
    try:
        parsed = datetime.datetime.fromisoformat(str(value).replace("Z", "+00:00"))
    except ValueError:
        return None
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=datetime.UTC)


# --- the supervisor: what the spark-operator does not catch -------------------------------------


class OrderingStatus(TypedDict):
    """``status.ordering``: what the ordering stage of ``source.ordering: key`` holds."""

    heldMessages: int
    blockedKeys: int
    blockedKeySample: list[str]


#: The most blocked keys ``status.ordering`` names, and the longest name it keeps (the CRD
#: allows as many; the engine sends no more).
ORDERING_SAMPLE: Final = 10
ORDERING_KEY_CHARS: Final = 100


@dataclass(frozen=True, slots=True)
class Heartbeat:
    """The driver's last liveness report (times as the driver's clock has them)."""

    time: datetime.datetime
    query_active: bool
    last_progress: datetime.datetime
    #: ``source.ordering: key``: the ordering stage's report; None without one (or unreadable).
    ordering: OrderingStatus | None = None
    #: ``retry.breaker``: the breaker's report; None without one (or unreadable).
    breaker: BreakerReport | None = None


def _ordering_of(raw: object) -> OrderingStatus | None:
    """The heartbeat's ``ordering``, None when absent or not as the engine writes it."""
    if not isinstance(raw, Mapping):
        return None
    held, blocked, sample = raw.get("heldMessages"), raw.get("blockedKeys"), raw.get("blockedKeySample")
    if not (_count(held) and _count(blocked)) or not isinstance(sample, list):
        return None
    if not all(isinstance(k, str) for k in sample):
        return None
    return {
        "heldMessages": int(held),
        "blockedKeys": int(blocked),
        "blockedKeySample": [str(k)[:ORDERING_KEY_CHARS] for k in sample[:ORDERING_SAMPLE]],
    }


def _count(value: object) -> TypeGuard[int]:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def heartbeat_of(lease: Mapping[str, Any] | None) -> Heartbeat | None:
    """The heartbeat on a policy's Lease, None when there is none or it is unreadable."""
    annotations = ((lease or {}).get("metadata") or {}).get("annotations") or {}
    text = annotations.get(HEARTBEAT_ANNOTATION)
    if not text:
        return None
    try:
        raw = json.loads(text)
        at, progress = time_of(raw["time"]), time_of(raw["lastProgressTime"])
        active = raw["queryActive"]
    except (ValueError, KeyError, TypeError):
        return None
    if at is None or progress is None or not isinstance(active, bool):
        return None
    return Heartbeat(at, active, progress, _ordering_of(raw.get("ordering")), _breaker_of(raw.get("breaker")))


def _breaker_of(raw: object) -> BreakerReport | None:
    """The heartbeat's ``breaker``, None when absent or not as the engine writes it."""
    if not isinstance(raw, Mapping):
        return None
    state, since, reason, opens, probe_at = (
        raw.get(key) for key in ("state", "since", "reason", "opens", "probeAt")
    )
    if not is_state(state) or time_of(since) is None or not _count(opens):
        return None
    if not isinstance(reason, str) or not isinstance(probe_at, str):
        return None
    return {
        "state": state,
        "since": str(since),
        "reason": reason[:MAX_REASON_CHARS],
        "opens": int(opens),
        "probeAt": probe_at if time_of(probe_at) is not None else "",
    }


def ordering_status(app: Mapping[str, Any] | None, lease: Mapping[str, Any] | None) -> OrderingStatus | None:
    """``status.ordering`` from the heartbeat of the application's current submission (one sent
    after it was submitted), None when there is none or it carries no ordering report."""
    beat = current_beat(app, lease)
    return beat.ordering if beat is not None else None


def current_beat(app: Mapping[str, Any] | None, lease: Mapping[str, Any] | None) -> Heartbeat | None:
    """The heartbeat of the application's current submission (one sent after it was
    submitted), None when there is none."""
    beat = heartbeat_of(lease)
    if app is None or beat is None:
        return None
    submitted = time_of((app.get("status") or {}).get("lastSubmissionAttemptTime"))
    if submitted is not None and beat.time < submitted:
        return None
    return beat


def breaker_condition(
    app: Mapping[str, Any] | None, lease: Mapping[str, Any] | None
) -> ConditionState | None:
    """``BreakerClosed`` from the breaker's report in the current submission's heartbeat (None
    when there is none): True while closed; False while open, saying since when, why and when it
    probes, and while half-open."""
    beat = current_beat(app, lease)
    report = beat.breaker if beat is not None else None
    if report is None:
        return None
    opened = f"opened {report['opens']} time{'s' if report['opens'] != 1 else ''} in this run"
    if report["state"] == CLOSED:
        last = f"; it last opened because {report['reason']} ({opened})" if report["opens"] else ""
        return ConditionState("True", BreakerReason.CLOSED, "the breaker is closed" + last)
    if report["state"] == HALF_OPEN:
        return ConditionState(
            "False",
            BreakerReason.HALF_OPEN,
            f"the breaker is half-open since {report['since']}: a few messages probe the processor's "
            f"downstream; it opened because {report['reason']} ({opened})",
        )
    return ConditionState(
        "False",
        BreakerReason.OPEN,
        f"the breaker opened at {report['since']} because {report['reason']}: the engine reads no new "
        f"source message and holds its retries until it probes at {report['probeAt']} ({opened})",
    )


def engine_stalled(
    app: Mapping[str, Any], lease: Mapping[str, Any] | None, *, bound: float
) -> ConditionState | None:
    """JobRunning for a RUNNING application whose driver reports that its query made no progress
    for longer than ``bound`` seconds (dead, or stuck in a micro-batch), else None. Only a
    heartbeat of the current submission counts (one sent after it was submitted): a driver
    that never reported is not judged."""
    state, _, _ = application_state(app)
    beat = heartbeat_of(lease)
    submitted = time_of((app.get("status") or {}).get("lastSubmissionAttemptTime"))
    if state != "RUNNING" or beat is None or (submitted is not None and beat.time < submitted):
        return None
    idle = (beat.time - beat.last_progress).total_seconds()
    if idle <= bound:
        return None
    query = "active" if beat.query_active else "not active"
    return ConditionState(
        "False",
        "EngineStalled",
        f"the driver reports no progress of its query ({query}) since "
        f"{beat.last_progress.strftime('%Y-%m-%dT%H:%M:%SZ')}, {idle:.0f}s before its heartbeat at "
        f"{beat.time.strftime('%Y-%m-%dT%H:%M:%SZ')} (bound {bound:.0f}s): the Spark application is "
        "resubmitted and resumes from its checkpoint",
    )


#: Application states in which a driver is on its way but not running yet. No state at all is
#: the spark-operator's silence, which ``unnoticed`` reports (NotPickedUp).
_WAITING: Final = frozenset({"SUBMITTED", "PENDING_RERUN"})


def driver_pending(
    app: Mapping[str, Any], pod: Mapping[str, Any] | None, *, now: datetime.datetime, bound: float
) -> ConditionState | None:
    """JobRunning for an application stuck in submission (SUBMITTED, PENDING_RERUN) longer than
    ``bound`` seconds since its last submission (else its creation), naming why its driver pod
    waits (ImagePullBackOff, Unschedulable, ...); else None."""
    state, _, _ = application_state(app)
    if state not in _WAITING:
        return None
    status, metadata = app.get("status") or {}, app.get("metadata") or {}
    since = time_of(status.get("lastSubmissionAttemptTime")) or time_of(metadata.get("creationTimestamp"))
    if since is None or (now - since).total_seconds() <= bound:
        return None
    pod_name = (status.get("driverInfo") or {}).get("podName")
    if pod is None:
        why = f"driver pod {pod_name} does not exist" if pod_name else "no driver pod yet"
    else:
        why = f"driver pod {pod_name}: {pod_waiting_reason(pod)}"
    return ConditionState(
        "False",
        "DriverPending",
        f"the Spark application is in state {state} since "
        f"{since.strftime('%Y-%m-%dT%H:%M:%SZ')}, more than {bound:.0f}s: {why}",
    )


def pod_waiting_reason(pod: Mapping[str, Any]) -> str:
    """Why a pod is not running: a container's waiting reason and message, else an unmet pod
    condition (Unschedulable), else its phase."""
    status = pod.get("status") or {}
    for container in [*(status.get("initContainerStatuses") or []), *(status.get("containerStatuses") or [])]:
        waiting = (container.get("state") or {}).get("waiting") or {}
        if waiting.get("reason") and waiting["reason"] not in ("ContainerCreating", "PodInitializing"):
            message = waiting.get("message")
            return f"container {container.get('name')} is waiting: {waiting['reason']}" + (
                f": {message}" if message else ""
            )
    for condition in status.get("conditions") or []:
        if condition.get("status") == "False" and condition.get("reason"):
            message = condition.get("message")
            return f"{condition.get('type')} is False: {condition['reason']}" + (
                f": {message}" if message else ""
            )
    return f"phase {status.get('phase') or 'unknown'}"


JOB_SUSPENDED: Final = ConditionState("False", "Suspended", "spec.suspend is true: the job is stopped")
#: JobRunning right after the operator creates the SparkApplication: what the application's own
#: first event (no state yet) maps to, so that event finds nothing to write.
JOB_SUBMITTED: Final = job_condition({})
JOB_RESTARTING: Final = ConditionState(
    "False", "Restarting", "the configuration changed: the Spark application is resubmitted"
)


@dataclass(frozen=True, slots=True)
class Observation:
    """What one reconcile (or one SparkApplication event) learnt; None leaves a field as is."""

    generation: int | None = None
    #: Set when the spec failed the model's validation, or its class refused it: the problems,
    #: one per line, and the reason.
    invalid: Sequence[str] | None = None
    invalid_reason: Reason = Reason.INVALID_SPEC
    topics: ConditionState | None = None
    job: ConditionState | None = None
    retry_topic: str | None = None
    dead_letter_topic: str | None = None
    spark_application: str | None = None
    config_hash: str | None = None
    restarted: bool = False
    #: Why the job was restarted: ``ConfigChanged`` (the default) or ``EngineStalled``.
    restart_reason: str = "ConfigChanged"
    #: ``status.ordering`` as the driver's heartbeat reports it; ``ordering_off``: the policy
    #: does not order by key (any ``status.ordering`` goes).
    ordering: OrderingStatus | None = None
    ordering_off: bool = False
    #: ``BreakerClosed`` as the driver's heartbeat reports it; ``breaker_off``: the policy has no
    #: breaker (the condition goes).
    breaker: ConditionState | None = None
    breaker_off: bool = False
    #: Topics the operator created for the policy: added to ``status.ownedTopics``.
    owned_topics: Sequence[OwnedTopic] = ()


def next_status(old: Mapping[str, Any], observation: Observation, *, now: str) -> dict[str, Any]:
    """The policy's status after ``observation``. A condition keeps its lastTransitionTime while
    its status does not change. ``now`` is an RFC 3339 time."""
    status = copy.deepcopy(dict(old))
    generation = (
        observation.generation if observation.generation is not None else status.get("observedGeneration")
    )
    conditions: dict[str, Condition] = {}
    for item in status.get("conditions") or []:
        if isinstance(item, Mapping) and item.get("type"):
            conditions[str(item["type"])] = Condition(**item)  # type: ignore[typeddict-item]

    def put(kind: ConditionType, state: ConditionState) -> None:
        previous = conditions.get(kind)
        since = (
            previous.get("lastTransitionTime", now)
            if previous is not None and previous.get("status") == state.status
            else now
        )
        condition: Condition = {
            "type": kind,
            "status": state.status,
            "reason": state.reason[:_REASON_MAX],
            "message": state.message[:_MESSAGE_MAX],
            "lastTransitionTime": since,
        }
        if generation is not None:
            condition["observedGeneration"] = int(generation)
        conditions[kind] = condition

    if observation.topics is not None:
        put("TopicsReady", observation.topics)
    if observation.job is not None:
        put("JobRunning", observation.job)
    if observation.breaker is not None:
        put("BreakerClosed", observation.breaker)
    elif observation.breaker_off:
        conditions.pop("BreakerClosed", None)
    still_invalid = observation.generation is None and conditions.get("Ready", {}).get("reason") in INVALID
    if observation.invalid is not None:
        put("Ready", ConditionState("False", observation.invalid_reason, "\n".join(observation.invalid)))
    elif not still_invalid:
        put("Ready", _ready(conditions))

    status["conditions"] = [conditions[kind] for kind in CONDITION_TYPES if kind in conditions]
    status["phase"] = phase(conditions)
    if generation is not None:
        status["observedGeneration"] = int(generation)
    for key, value in (
        ("retryTopic", observation.retry_topic),
        ("deadLetterTopic", observation.dead_letter_topic),
        ("sparkApplication", observation.spark_application),
        ("configHash", observation.config_hash),
    ):
        if value is not None:
            status[key] = value
    if observation.owned_topics:
        status["ownedTopics"] = topic_ownership.merged(status.get("ownedTopics"), observation.owned_topics)
    if observation.ordering is not None:
        status["ordering"] = dict(observation.ordering)
    elif observation.ordering_off:
        status.pop("ordering", None)
    status.setdefault("restartCount", 0)
    if observation.restarted:
        status["restartCount"] = int(status["restartCount"]) + 1
        status["lastRestartTime"] = now
        status["lastRestartReason"] = observation.restart_reason
    return status


def _ready(conditions: Mapping[str, Condition]) -> ConditionState:
    """Ready = TopicsReady and JobRunning; otherwise the first one that is not, with its reason."""
    for kind in ("TopicsReady", "JobRunning"):
        condition = conditions.get(kind)
        if condition is None:
            return ConditionState("Unknown", "Pending", f"{kind} is not known yet")
        if condition.get("status") != "True":
            return ConditionState("False", condition.get("reason", kind), condition.get("message", ""))
    return ConditionState("True", "Ready", "the topics are ready and the Spark application is running")


def phase(conditions: Mapping[str, Condition]) -> Phase:
    """The one-word summary of the conditions shown by ``kubectl get dlp``."""
    ready = conditions.get("Ready", {})
    topics = conditions.get("TopicsReady", {})
    job = conditions.get("JobRunning", {})
    if ready.get("reason") in INVALID:
        return "Invalid"
    if job.get("reason") == "Suspended":
        return "Suspended"
    if topics.get("status") != "True":
        return "Provisioning"
    if job.get("status") == "True":
        return "Running"
    if job.get("reason") == "Restarting":
        return "Restarting"
    if job.get("reason") in ("Failed", "Completed"):
        return "Failed"
    return "Pending"
