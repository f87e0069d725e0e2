"""Provisioning the retry and dead-letter topics: through the Kafka Admin API, Strimzi, or
Pulsar's admin REST API.

One provisioner per mode of docs/reference.md section 2, never two for one topic. ``admin``
creates missing topics with the Kafka Admin API (confluent-kafka, whose blocking calls run in a
thread) and never changes an existing one: fewer partitions than wanted is reported as drift,
not fixed. ``strimzi`` writes one ``KafkaTopic`` per topic in the Kafka cluster's namespace and
waits for Strimzi's topic operator to report it Ready. ``pulsar`` (a policy with broker type
pulsar) creates the topics through Pulsar's admin REST API, partitioned like the source, and
the durable subscriptions that keep what they hold from Pulsar's retention. All report a
``TopicsReport`` that the reconcile turns into the ``TopicsReady`` condition; an unreachable
broker is an exception, ``BrokerUnavailable``, so the reconcile can retry with backoff.

Topics are owned, not borrowed (``topic_ownership``): each report names the topics the
operator created for the policy (``owned``), and only those get what only an owner may do:
Pulsar's subscriptions, a KafkaTopic's spec and owner reference, deletion. A topic that exists
is used as it is. A KafkaTopic takes over a topic of its name that the cluster already has
(Strimzi's topic operator adopts it, puts the KafkaTopic's config on it and deletes it with
the KafkaTopic), so the ``strimzi`` provisioner creates one only for a topic that no other
KafkaTopic names and the cluster does not have (asked through the Admin API).

Retention is checked, never changed: a Kafka retry or dead-letter topic that deletes records
sooner than they are needed (``retention_shortfall``: the configs a topic was created with, the
retention the broker describes for one that existed, a KafkaTopic's ``spec.config``) leaves
TopicsReady True with reason ``ShortRetention`` naming it.
"""

from spark_dlq_operator.topics.kafka_admin import AdminProvisioner
from spark_dlq_operator.topics.pulsar import PulsarProvisioner, tls_context
from spark_dlq_operator.topics.report import BrokerUnavailable, Credentials, TopicsReport, ready_report
from spark_dlq_operator.topics.strimzi import StrimziNotServed, StrimziProvisioner

__all__ = [
    "AdminProvisioner",
    "BrokerUnavailable",
    "Credentials",
    "PulsarProvisioner",
    "StrimziNotServed",
    "StrimziProvisioner",
    "TopicsReport",
    "ready_report",
    "tls_context",
]
