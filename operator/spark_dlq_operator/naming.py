"""The names the contract fixes: API groups, versions, plurals and kinds, the labels and
annotations the operator writes, and the names it gives a policy's objects.

The I/O modules (``kubeapi``, ``handlers``, ``runner``) address resources by these, and the
pure builders (``render``, ``identity``, ``redrive_render``) name what they build by them, so
neither side imports the other for an identity. Everything here is docs/reference.md, section 2;
nothing does I/O.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from typing import Final, TypedDict

from dlq_engine.model import API_VERSION, KIND, heartbeat

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
#: The DeadLetterRedrive's plural (same group and version as the policy's).
REDRIVE_PLURAL: Final = "deadletterredrives"
#: In ``spec.driver.annotations``: bumped by the operator to make the spark-operator resubmit a
#: failed application now (a spec change; see
#: ``policies.application_state.resubmit_due``). Not part of the config hash.
RESUBMIT_ANNOTATION: Final = "sparkdlq.io/resubmission"
#: On the policy's Lease: the driver's liveness report (``dlq_engine.model.heartbeat``).
HEARTBEAT_ANNOTATION: Final = heartbeat.ANNOTATION

_LABEL_VALUE_MAX: Final = 63
_DNS_1035_LABEL = re.compile(r"^[a-z]([-a-z0-9]*[a-z0-9])?$")
_DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")


class OwnerReference(TypedDict):
    apiVersion: str
    kind: str
    name: str
    uid: str
    controller: bool
    blockOwnerDeletion: bool


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


def lease_name(policy_name: str) -> str:
    """The policy's Lease (``coordination.k8s.io``): its driver's heartbeat."""
    return f"{application_name(policy_name)}-heartbeat"


def kafka_topic_name(topic: str) -> str:
    """A Kubernetes name for a Kafka topic: the topic itself when it is a valid DNS subdomain,
    else Strimzi's own convention, ``<lower-cased, sanitised>---<sha1 of the topic>``."""
    if len(topic) <= 253 and _DNS_SUBDOMAIN.match(topic):
        return topic
    digest = hashlib.sha1(topic.encode(), usedforsecurity=False).hexdigest()
    base = re.sub(r"[^a-z0-9.-]", "-", topic.lower()).strip("-.")[:200].rstrip("-.")
    return f"{base}---{digest}" if base else digest
