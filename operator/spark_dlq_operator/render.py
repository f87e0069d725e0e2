"""Pure builders: a parsed policy in, the Kubernetes manifests the operator writes for it out.

The ConfigMap, the SparkApplication (with its pod templates) and the KafkaTopics are decided
here, with no I/O and no client imported, so every field can be checked by plain unit tests
(tests/unit/test_render.py); ``desired`` renders a policy's objects once per reconcile and the
thin async functions in ``policies.application`` and ``topics`` only send what it returns. The
names, labels and annotations are ``naming``'s; a policy's status is ``policies.status``'s.
"""

from __future__ import annotations

import copy
import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

import yaml

from dlq_engine.model import DeadLetterPolicy, config_hash, to_document
from dlq_engine.model.policy import PodSettings
from dlq_engine.model.policy_spec import broker_spec
from dlq_engine.model.topics import TopicWant, broker_topic_name
from spark_dlq_operator import topic_ownership
from spark_dlq_operator.config import OperatorConfig
from spark_dlq_operator.engine_command import Run, engine_arguments
from spark_dlq_operator.governance import NO_FIT, PodFit
from spark_dlq_operator.naming import (
    CONFIG_HASH_ANNOTATION,
    MANAGED_BY_LABEL,
    POLICY_FILE_KEY,
    POLICY_LABEL,
    POLICY_MOUNT,
    POLICY_NAMESPACE_LABEL,
    PROVISIONER_ANNOTATION,
    SPARK_GROUP,
    SPARK_KIND,
    SPARK_VERSION_API,
    STRIMZI_CLUSTER_LABEL,
    STRIMZI_GROUP,
    STRIMZI_KIND,
    STRIMZI_VERSIONS,
    Owner,
    application_name,
    config_map_name,
    kafka_topic_name,
    label_value,
    labels,
    lease_name,
    service_account_name,
)

Manifest = dict[str, Any]


MAIN_APPLICATION_FILE: Final = "local:///opt/spark-dlq/dlq_engine_main.py"


#: The names Spark gives the driver's and the executors' containers (the pod templates' container
#: is matched by name).
DRIVER_CONTAINER: Final = "spark-kubernetes-driver"


EXECUTOR_CONTAINER: Final = "spark-kubernetes-executor"


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


#: Spark's feature step that makes a NetworkPolicy for each application (Spark 4.2), and the
#: setting that leaves it out (``OperatorConfig.spark_network_policy`` off). No policy and no
#: class can set it (``policy_class.FORBIDDEN_SPARK_CONF``: ``spark.kubernetes.driver.pod.*``).
NETWORK_POLICY_STEP: Final = "org.apache.spark.deploy.k8s.features.NetworkPolicyFeatureStep"
EXCLUDED_DRIVER_STEPS: Final = "spark.kubernetes.driver.pod.excludedFeatureSteps"


#: The driver's and the executors' class paths start with the engine image's list of Spark's
#: jars (a jar naming them in a fixed order): its class-data-sharing archive
#: (``spark_image/Dockerfile``) holds the classes of those jars, and a JVM maps it only when its
#: class path starts as the archive's, jar for jar (else it loads every class itself: seconds of
#: each driver's start and of each executor's registration and first tasks). A platform's own
#: class path (a class's ``spec.sparkConf.fixed``) is kept as it is: that JVM then starts without
#: the archive. An image without the list starts as before (a missing class path entry is skipped).
CLASS_PATHS: Final = ("spark.driver.extraClassPath", "spark.executor.extraClassPath")
CLASS_PATH_JAR: Final = "/opt/spark/spark-dlq-class-path.jar"


def spark_conf(policy: DeadLetterPolicy, config: OperatorConfig) -> dict[str, str]:
    """The SparkApplication's ``sparkConf``: the policy's (its class's fixed keys included), the
    operator's own over it, and the class paths unless the platform set them."""
    conf = {
        **dict.fromkeys(CLASS_PATHS, CLASS_PATH_JAR),
        **policy.spark.spark_conf,
        **operator_spark_conf(config),
    }
    return dict(sorted(conf.items()))


def operator_spark_conf(config: OperatorConfig) -> Mapping[str, str]:
    """The Spark settings the operator owns: ``DRIVER_SPARK_CONF``, and Spark's NetworkPolicy
    step excluded when the platform turned the policies off."""
    if config.spark_network_policy:
        return DRIVER_SPARK_CONF
    return {**DRIVER_SPARK_CONF, EXCLUDED_DRIVER_STEPS: NETWORK_POLICY_STEP}


#: libyaml's safe dumper when PyYAML has it (a third of the pure-Python one's CPU time, the same
#: text for these documents); every reconcile and resync renders the ConfigMap to compare it.
_YAML_DUMPER: Final[type[yaml.SafeDumper]] = getattr(yaml, "CSafeDumper", yaml.SafeDumper)


def shared_service_account(fit: PodFit, config: OperatorConfig) -> str:
    """The one existing service account every governed policy's Spark pods share, empty for one
    per policy (made by the operator). The class's ``pods.serviceAccountName`` wins over the
    operator's ``--spark-service-account``: the platform team owns both, and the class is the
    narrower choice (docs/security.md ("Least privilege"): sharing is the weaker isolation)."""
    return fit.service_account or config.spark_service_account


def spark_service_account(policy_name: str, fit: PodFit, config: OperatorConfig) -> str:
    """The service account a policy's Spark pods run as."""
    return shared_service_account(fit, config) or service_account_name(policy_name)


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
    manifest = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": metadata,
        "data": {POLICY_FILE_KEY: text},
    }
    return pin_provisioner(manifest, provisioner)


def spark_application(
    policy: DeadLetterPolicy,
    *,
    config: OperatorConfig,
    owner: Owner,
    fit: PodFit = NO_FIT,
    digest: str | None = None,
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
    volume). ``digest`` is the policy's ``config_hash`` when the caller has it already.
    """
    digest = digest if digest is not None else config_hash(policy)
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
            "arguments": engine_arguments(
                Run(
                    file=f"{POLICY_MOUNT}/{POLICY_FILE_KEY}",
                    checkpoint=checkpoint_location(policy, config),
                    heartbeat_lease=f"{policy.namespace}/{lease_name(policy.name)}",
                    config_hash=policy_file_hash(policy, config),
                )
            ),
            "sparkConf": spark_conf(policy, config),
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


@dataclass(frozen=True, slots=True)
class Desired:
    """What one reconcile wants for a policy, rendered once: its configuration hash, its
    ConfigMap (without the pinned provisioner: ``pin_provisioner``), its SparkApplication (None
    while the policy is suspended), and the names its status reports."""

    config_hash: str
    config_map: Manifest
    application: Manifest | None
    application_name: str
    service_account: str
    retry_topic: str
    dead_letter_topic: str
    #: ``status.broker``: the broker the job uses, as ``spec.broker`` is written.
    broker: Manifest


def desired(policy: DeadLetterPolicy, *, config: OperatorConfig, owner: Owner, fit: PodFit) -> Desired:
    """The objects and names of ``policy`` as its class lets it run (``fit``)."""
    digest = config_hash(policy)
    return Desired(
        config_hash=digest,
        config_map=config_map(policy, config=config, owner=owner),
        application=(
            None
            if policy.suspend
            else spark_application(policy, config=config, owner=owner, fit=fit, digest=digest)
        ),
        application_name=application_name(policy.name),
        service_account=spark_service_account(policy.name, fit, config),
        retry_topic=broker_topic_name(policy, policy.retry_topic),
        dead_letter_topic=broker_topic_name(policy, policy.dead_letter_topic),
        broker=broker_spec(policy.broker),
    )


def pin_provisioner(config_map: Manifest, provisioner: str | None) -> Manifest:
    """``config_map`` annotated with the provisioner the policy's topics resolved to (a copy;
    itself when there is none)."""
    if provisioner is None:
        return config_map
    metadata = {**config_map["metadata"], "annotations": {PROVISIONER_ANNOTATION: provisioner}}
    return {**config_map, "metadata": metadata}


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
