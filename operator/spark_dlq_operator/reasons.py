"""Why a policy is where it is: the reasons its conditions give and its phases, as enums.

A reason or a phase is part of the contract (alerts, runbooks, ``kubectl get dlp`` and people
read them), so each is spelled once, here: code builds conditions from these members and
switches on them, tests import them. ``Reason`` holds every reason of a policy's four
conditions (Ready, TopicsReady, JobRunning, BreakerClosed); the frozensets below group them by
what they mean for the policy (Invalid, a Warning event). ``EventReason`` names the events a
condition's change announces under a reason of their own. ``Phase`` is ``status.phase``.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Final, Literal


class Reason(StrEnum):
    """A reason of one of a policy's conditions."""

    # --- Ready -----------------------------------------------------------------------------------
    #: True: the topics are ready and the Spark application is running.
    READY = "Ready"
    #: Unknown: TopicsReady or JobRunning is not known yet.
    PENDING = "Pending"
    #: The policy fails the shared model's validation (a field named in the message).
    INVALID_SPEC = "InvalidSpec"
    #: ``spec.className`` names a DeadLetterPolicyClass that does not exist.
    CLASS_NOT_FOUND = "ClassNotFound"
    #: The policy's class exists but is itself invalid (its problems are in the message).
    CLASS_INVALID = "ClassInvalid"
    #: No ``spec.className``, classes exist, and none is marked default.
    NO_DEFAULT_CLASS = "NoDefaultClass"
    #: No ``spec.className``, and more than one class is marked default.
    DEFAULT_CLASS_AMBIGUOUS = "DefaultClassAmbiguous"
    #: The class's ``namespaceSelector`` does not select the policy's namespace.
    NAMESPACE_NOT_ALLOWED = "NamespaceNotAllowed"
    #: The policy asks for more than its class allows (the field and the rule in the message).
    CLASS_VIOLATION = "ClassViolation"

    # --- TopicsReady -----------------------------------------------------------------------------
    #: True: the retry and dead-letter topics exist.
    TOPICS_READY = "TopicsReady"
    #: True: a Kafka retry or dead-letter topic deletes records sooner than they are needed (each
    #: topic and its retention in the message); a Warning event ``TopicRetentionShort`` goes
    #: with it.
    SHORT_RETENTION = "ShortRetention"
    #: True: ``spec.topics.create`` is false, the operator does not provision the topics.
    NOT_MANAGED = "NotManaged"
    #: The Kafka cluster, or Pulsar's admin API, did not answer.
    BROKER_UNAVAILABLE = "BrokerUnavailable"
    #: The API server refused a KafkaTopic (no such namespace, no RBAC there, ...).
    KAFKA_TOPIC_ERROR = "KafkaTopicError"
    #: The policy's source topic does not exist.
    SOURCE_TOPIC_MISSING = "SourceTopicMissing"
    #: The broker refused to create a topic.
    CREATE_FAILED = "CreateFailed"
    #: ``topics.strimzi.cluster`` names no Kafka cluster Strimzi knows.
    STRIMZI_CLUSTER_MISSING = "StrimziClusterMissing"
    #: The provisioner is strimzi, but the KafkaTopic CRD is not served.
    STRIMZI_NOT_SERVED = "StrimziNotServed"
    #: A KafkaTopic is created and Strimzi has not reported it Ready yet.
    WAITING_FOR_STRIMZI = "WaitingForStrimzi"
    #: Another policy keeps one of the policy's retry and dead-letter topics (``topic_claims``).
    TOPIC_IN_USE = "TopicInUse"
    #: An object of the policy's name belongs to another owner (TopicsReady: a KafkaTopic;
    #: JobRunning: the SparkApplication or one of the Spark pods' identity objects).
    CONFLICT = "Conflict"

    # --- JobRunning ------------------------------------------------------------------------------
    #: True: the Spark application is running.
    RUNNING = "Running"
    #: The SparkApplication is created or submitted, its driver not running yet.
    SUBMITTED = "Submitted"
    #: The configuration changed, or the spark-operator resubmits the application.
    RESTARTING = "Restarting"
    #: ``spec.suspend`` (the policy's or the SparkApplication's own): no job runs.
    SUSPENDED = "Suspended"
    #: The application failed and the spark-operator does not retry it.
    FAILED = "Failed"
    #: The application completed (a streaming job should not stop by itself).
    COMPLETED = "Completed"
    #: Unknown: the driver pod's phase is Unknown (its node may be unreachable).
    DRIVER_UNKNOWN = "DriverUnknown"
    #: Unknown: the application is in a state the operator does not know.
    UNKNOWN = "Unknown"
    #: The spark-operator is declared to watch other namespaces only.
    NAMESPACE_NOT_WATCHED = "NamespaceNotWatched"
    #: The spark-operator has not given the application a state in time.
    NOT_PICKED_UP = "NotPickedUp"
    #: The driver's heartbeat reports no progress for too long: the application is resubmitted.
    ENGINE_STALLED = "EngineStalled"
    #: The application waits for its driver pod too long (the pod's reason in the message).
    DRIVER_PENDING = "DriverPending"
    #: The API server (or the spark-operator's webhook) refused the SparkApplication.
    SPARK_APPLICATION_REFUSED = "SparkApplicationRefused"
    #: The API server refused one of the Spark pods' identity objects (service account, Lease,
    #: Role, RoleBinding: the operator may not bind the drivers' ClusterRole, say). The policy
    #: stays valid and its job waits.
    IDENTITY_REFUSED = "IdentityRefused"

    # --- BreakerClosed (only with ``retry.breaker``; from the driver's heartbeat) ------------------
    #: True: the breaker is closed (its message says why it last opened, if it did).
    BREAKER_CLOSED = "Closed"
    #: False: the engine reads no new source message and holds its retries until it probes.
    BREAKER_OPEN = "BreakerOpen"
    #: False: a few messages probe the processor's downstream.
    BREAKER_HALF_OPEN = "BreakerHalfOpen"


#: The reasons that make a policy's phase ``Invalid``: nothing is created for it, and a job of an
#: earlier valid generation keeps running as it was.
INVALID: Final = frozenset(
    {
        Reason.INVALID_SPEC,
        Reason.CLASS_NOT_FOUND,
        Reason.CLASS_INVALID,
        Reason.NO_DEFAULT_CLASS,
        Reason.DEFAULT_CLASS_AMBIGUOUS,
        Reason.NAMESPACE_NOT_ALLOWED,
        Reason.CLASS_VIOLATION,
    }
)

#: The reasons worth a Warning event (of the same reason) when a condition turns False with them.
WARNING: Final = frozenset(
    {
        *INVALID,
        Reason.BROKER_UNAVAILABLE,
        Reason.SOURCE_TOPIC_MISSING,
        Reason.CREATE_FAILED,
        Reason.STRIMZI_CLUSTER_MISSING,
        Reason.STRIMZI_NOT_SERVED,
        Reason.KAFKA_TOPIC_ERROR,
        Reason.TOPIC_IN_USE,
        Reason.CONFLICT,
        Reason.FAILED,
        Reason.SPARK_APPLICATION_REFUSED,
        Reason.NAMESPACE_NOT_WATCHED,
        Reason.NOT_PICKED_UP,
        Reason.ENGINE_STALLED,
        Reason.DRIVER_PENDING,
        Reason.IDENTITY_REFUSED,
    }
)

#: JobRunning reasons a reconcile replaces with the application's own state when it finds the
#: application unchanged (they say nothing of the application as it now is).
STALE_JOB: Final = frozenset(
    {
        Reason.SUSPENDED,
        Reason.CONFLICT,
        Reason.SPARK_APPLICATION_REFUSED,
        Reason.SUBMITTED,
        Reason.NAMESPACE_NOT_WATCHED,
    }
)

#: JobRunning reasons the supervisor's and the watcher's findings must not overwrite: the policy
#: (suspended) or the operator (a conflict, a refusal) decided them.
DECIDED_JOB: Final = frozenset({Reason.SUSPENDED, Reason.CONFLICT, Reason.SPARK_APPLICATION_REFUSED})


#: A Kubernetes Event's type.
EventType = Literal["Normal", "Warning"]


class EventReason(StrEnum):
    """The reason of an event a condition's change announces, where it is not the condition's
    own reason (``policies.announcements``)."""

    #: Normal: Ready turned True.
    READY = "Ready"
    #: Normal: the breaker closed again.
    BREAKER_CLOSED = "BreakerClosed"
    #: Warning: an existing retry or dead-letter topic has fewer partitions than wanted.
    TOPIC_PARTITIONS_DRIFT = "TopicPartitionsDrift"
    #: Warning: a topic deletes records sooner than they are needed (TopicsReady ShortRetention).
    TOPIC_RETENTION_SHORT = "TopicRetentionShort"


def reason_of(text: object, default: Reason) -> Reason:
    """``text`` (a reason as a status holds it) as a Reason; ``default`` when it is none."""
    try:
        return Reason(str(text))
    except ValueError:
        return default


class Phase(StrEnum):
    """``status.phase``: the one-word summary of a policy's conditions (``kubectl get dlp``)."""

    PENDING = "Pending"
    PROVISIONING = "Provisioning"
    RUNNING = "Running"
    RESTARTING = "Restarting"
    SUSPENDED = "Suspended"
    FAILED = "Failed"
    INVALID = "Invalid"


#: The phase a policy whose topics are ready and whose job does not run is in, by JobRunning's
#: reason (any other: Pending).
JOB_PHASE: Final = {
    Reason.RESTARTING: Phase.RESTARTING,
    Reason.FAILED: Phase.FAILED,
    Reason.COMPLETED: Phase.FAILED,
}


class RestartReason(StrEnum):
    """``status.lastRestartReason``: why the operator last restarted the policy's job."""

    CONFIG_CHANGED = "ConfigChanged"
    ENGINE_STALLED = "EngineStalled"


class RedrivePhase(StrEnum):
    """A DeadLetterRedrive's ``status.phase``; the last three are final."""

    PENDING = "Pending"
    RUNNING = "Running"
    SUCCEEDED = "Succeeded"
    FAILED = "Failed"
    CANCELLED = "Cancelled"


#: The phases after which a redrive does nothing more.
FINAL_REDRIVE_PHASES: Final = frozenset({RedrivePhase.SUCCEEDED, RedrivePhase.FAILED, RedrivePhase.CANCELLED})


class RedriveReason(StrEnum):
    """A reason of a DeadLetterRedrive's conditions (the driver's own ``ExpiredRecords``, from
    ``dlq_engine.model.redrive``, besides)."""

    #: Pending: its SparkApplication is being created.
    SUBMITTING = "Submitting"
    #: Pending: its DeadLetterPolicy does not exist.
    POLICY_NOT_FOUND = "PolicyNotFound"
    #: Pending: its DeadLetterPolicy is invalid or refused by its class.
    POLICY_INVALID = "PolicyInvalid"
    #: Pending: another redrive of the same policy runs (one at a time per policy).
    ANOTHER_REDRIVE_RUNNING = "AnotherRedriveRunning"
    #: Running: the SparkApplication is submitted, its driver not running yet.
    SUBMITTED = "Submitted"
    #: Running: the redrive's driver runs.
    RUNNING = "Running"
    #: Succeeded: the redrive finished.
    COMPLETED = "Completed"
    #: Failed: the redrive's Spark application failed.
    SPARK_APPLICATION_FAILED = "SparkApplicationFailed"
    #: Failed: the API server refused its SparkApplication.
    SPARK_APPLICATION_REFUSED = "SparkApplicationRefused"
    #: Failed: the spec fails the model's validation.
    INVALID_SPEC = "InvalidSpec"
    #: Failed: its spec asks what its policy's broker cannot do (``spec.failOnGaps`` on Pulsar).
    BROKER_NOT_SUPPORTED = "BrokerNotSupported"
    #: Cancelled: ``spec.suspend`` is true.
    SUSPENDED = "Suspended"
    #: Cancelled: its driver was stopped.
    STOPPED = "Stopped"
