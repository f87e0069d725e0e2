"""What provisioning reports: ``TopicsReport`` (``ready_report`` for topics that exist), the
``BrokerUnavailable`` a reconcile retries with backoff, and a broker's ``Credentials``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from spark_dlq_operator.policies.announcements import DRIFT_MARK
from spark_dlq_operator.reasons import Reason


class BrokerUnavailable(Exception):
    """The Kafka cluster, or Pulsar's admin API, did not answer (or answered that it cannot now)."""


@dataclass(frozen=True, slots=True)
class TopicsReport:
    """What provisioning found. ``ready`` False comes with a reason and a message."""

    ready: bool
    reason: Reason
    message: str
    created: tuple[str, ...] = ()
    #: Human-readable drift findings (an existing topic with fewer partitions than wanted).
    drift: tuple[str, ...] = field(default=())
    #: The topics the operator created for this policy, as far as this provisioning knows: the
    #: ones created now, and those the broker says were created for it (a Pulsar topic's
    #: property, a KafkaTopic's annotation). Named as the policy's broker names them.
    owned: tuple[str, ...] = ()
    #: Topics whose retention deletes records they must keep (``retention_shortfall``).
    short_retention: tuple[str, ...] = ()


def ready_report(
    message: str,
    *,
    created: Sequence[str],
    owned: Sequence[str],
    drift: Sequence[str] = (),
    short_retention: Sequence[str] = (),
) -> TopicsReport:
    """The report of topics that exist: reason ``TopicsReady``, or ``ShortRetention`` (the
    condition stays True: the job runs) with the findings added to the message."""
    if drift:
        message += f"; {DRIFT_MARK} " + "; ".join(drift)
    if short_retention:
        message += "; short retention: " + "; ".join(short_retention)
    return TopicsReport(
        True,
        Reason.SHORT_RETENTION if short_retention else Reason.TOPICS_READY,
        message,
        created=tuple(created),
        drift=tuple(drift),
        owned=tuple(owned),
        short_retention=tuple(short_retention),
    )


#: The operator's identity on one broker: librdkafka settings for its Kafka admin client, the
#: Pulsar client's keys (``dlq_engine.model.pulsar_client``) for Pulsar's admin API; None: no
#: settings of its own beyond the operator-wide ones.
Credentials = Mapping[str, str] | None


def source_missing_report(source: str) -> TopicsReport:
    """The report of a policy whose topics take the source's partitions from a source topic,
    ``source`` as the broker names it, that does not exist."""
    return TopicsReport(
        False,
        Reason.SOURCE_TOPIC_MISSING,
        f"the source topic {source!r} does not exist, and spec.topics.partitions is 0 "
        "(as many partitions as the source)",
    )
