"""The kopf handlers (``handlers.register``) on an in-memory API server and Kafka: what each turns
a reconcile's answer into (kopf's ``PermanentError`` for a refused spec, a ``TemporaryError``
whose delay grows with kopf's retry count for a broker that is down, nothing for a policy that
is fine), what the deletion handler does with a policy it cannot read, and which events free a
policy's topic claims. The handlers are taken from the registry as kopf would call them."""

from __future__ import annotations

import asyncio
import datetime
import logging
from collections.abc import Awaitable, Callable
from typing import Any

import kopf
import pytest
from confluent_kafka import KafkaError, KafkaException

from spark_dlq_operator import naming
from spark_dlq_operator.config import OperatorConfig
from spark_dlq_operator.events import EventRecorder
from spark_dlq_operator.handlers import register
from spark_dlq_operator.policies.services import Services
from spark_dlq_operator.reasons import Phase, Reason
from spark_dlq_operator.topics import AdminProvisioner, StrimziProvisioner
from tests.policy_builder import policy_document
from tests.unit.fake_brokers import FakeKafka
from tests.unit.fake_kube import FakeKube

NAMESPACE = "payments"
POLICIES, EVENTS, APPS = "deadletterpolicies", "events", "sparkapplications"
KAFKA = "kafka.kafka:9092"
DLQ = "orders-billing-DLQ"
CONFIG = OperatorConfig(namespaces=(NAMESPACE,))


class DownKafka(FakeKafka):
    """A Kafka cluster that stops answering when ``down`` is set."""

    down = False

    def _check(self) -> None:
        if self.down:
            raise KafkaException(KafkaError(KafkaError._TRANSPORT))

    def list_topics(self, timeout: float) -> Any:
        self._check()
        return super().list_topics(timeout)

    def delete_topics(self, names: Any, **kwargs: Any) -> Any:
        self._check()
        return super().delete_topics(names, **kwargs)


class Operator:
    """The handlers of one registry, with the services start-up would put in kopf's memo."""

    def __init__(self) -> None:
        self.registry = kopf.OperatorRegistry()
        register(self.registry, CONFIG)
        self.api = FakeKube()
        self.kafka = DownKafka(topics={"orders": 2})
        self.services = Services(
            config=CONFIG,
            api=self.api,
            events=EventRecorder(self.api, instance="test"),
            admin=AdminProvisioner(timeout=1.0, client_factory=self.kafka.client),
            strimzi=StrimziProvisioner(self.api),
        )
        self.memo = kopf.Memo()
        self.memo["services"] = self.services

    def handler(self, handler_id: str) -> Callable[..., Awaitable[Any]]:
        """The function kopf calls for ``handler_id`` (a change handler or an event watcher)."""
        for handlers in (self.registry._changing, self.registry._watching):
            for found in handlers.get_all_handlers():
                if found.id == handler_id:
                    return found.fn  # type: ignore[return-value]
        raise AssertionError(f"no handler {handler_id!r}")

    def call(self, handler_id: str, **kwargs: Any) -> Any:
        async def with_events_flushed() -> Any:
            try:
                return await self.handler(handler_id)(memo=self.memo, **kwargs)
            finally:
                await self.services.events.close()

        return asyncio.run(with_events_flushed())

    def add(self, **overrides: Any) -> dict[str, Any]:
        document = policy_document(
            {
                "metadata.namespace": NAMESPACE,
                "spec.topics.deleteWithPolicy": True,
                **overrides,
            }
        )
        document["metadata"]["creationTimestamp"] = "2026-11-20T00:00:00Z"
        return self.api.put(POLICIES, document)

    def body(self, name: str = "orders-billing") -> dict[str, Any]:
        found = self.api.stored(POLICIES, NAMESPACE, name)
        assert found is not None
        return found

    def changed(self, *, reason: str = "create", retry: int = 0, name: str = "orders-billing") -> Any:
        return self.call("reconcile", body=self.body(name), retry=retry, reason=reason)

    def deleted(self, name: str = "orders-billing", *, ago: float = 0.0) -> Any:
        """The deletion handler, for a policy being deleted since ``ago`` seconds."""
        body = self.body(name)
        since = datetime.datetime.now(datetime.UTC) - datetime.timedelta(seconds=ago)
        body["metadata"]["deletionTimestamp"] = since.strftime("%Y-%m-%dT%H:%M:%SZ")
        return self.call("delete-topics", body=body)

    def events(self, reason: str) -> list[str]:
        return [e["message"] for e in self.api.of(EVENTS) if e["reason"] == reason]

    def condition(self, kind: str, name: str = "orders-billing") -> dict[str, Any]:
        conditions = (self.body(name).get("status") or {}).get("conditions") or []
        return next(c for c in conditions if c["type"] == kind)


@pytest.fixture
def operator() -> Operator:
    return Operator()


def test_a_policy_is_reconciled_and_its_application_created(operator: Operator) -> None:
    operator.add()
    assert operator.changed() is None
    assert operator.body()["status"]["phase"] == Phase.PENDING
    assert operator.condition("JobRunning")["reason"] == Reason.SUBMITTED
    assert operator.api.stored(APPS, NAMESPACE, naming.application_name("orders-billing")) is not None
    assert DLQ in operator.kafka.topics


def test_a_handler_called_before_start_up_asks_kopf_to_retry_in_a_second(operator: Operator) -> None:
    operator.add()
    operator.memo = kopf.Memo()
    with pytest.raises(kopf.TemporaryError) as retried:
        operator.changed()
    assert retried.value.delay == 1
    assert "status" not in operator.body()


def test_a_refused_spec_is_reported_in_the_status_and_never_retried(operator: Operator) -> None:
    operator.add(**{"spec.retry.maxRedeliverCount": -1})
    with pytest.raises(kopf.PermanentError, match=r"^invalid policy: .*spec\.retry\.maxRedeliverCount"):
        operator.changed()
    ready = operator.condition("Ready")
    assert (ready["status"], ready["reason"]) == ("False", Reason.INVALID_SPEC)
    assert "spec.retry.maxRedeliverCount" in ready["message"]
    assert operator.api.of(APPS) == []


@pytest.mark.parametrize(
    ("retry", "delay"),
    [
        pytest.param(0, CONFIG.broker_retry_delay, id="first"),
        pytest.param(2, 4 * CONFIG.broker_retry_delay, id="doubling"),
        pytest.param(7, 8 * CONFIG.broker_retry_delay, id="at-most-eight-times"),
    ],
)
def test_a_broker_that_is_down_is_retried_with_a_growing_delay(
    operator: Operator, retry: int, delay: float
) -> None:
    operator.add()
    operator.kafka.down = True
    with pytest.raises(kopf.TemporaryError) as retried:
        operator.changed(retry=retry)
    assert retried.value.delay == delay
    topics = operator.condition("TopicsReady")
    assert (topics["status"], topics["reason"]) == ("False", Reason.BROKER_UNAVAILABLE)
    assert operator.api.of(APPS) == []


def test_deleting_a_policy_deletes_the_topics_it_created_and_frees_them(operator: Operator) -> None:
    operator.add()
    operator.changed()
    assert operator.deleted() is None
    assert sorted(operator.kafka.deleted) == ["orders-billing-DLQ", "orders-billing-RETRY"]
    assert operator.services.claims.user_of((KAFKA, DLQ), besides="") is None


def test_deleting_while_the_broker_is_down_is_retried(operator: Operator) -> None:
    operator.add()
    operator.changed()
    operator.kafka.down = True
    with pytest.raises(kopf.TemporaryError) as retried:
        operator.deleted()
    assert 1 <= retried.value.delay <= CONFIG.broker_retry_delay
    assert operator.kafka.deleted == []
    # Still claimed: another policy cannot take the topics while they may yet be deleted.
    assert operator.services.claims.user_of((KAFKA, DLQ), besides="") == f"{NAMESPACE}/orders-billing"


def test_a_deletion_past_the_finalizer_timeout_gives_up_and_keeps_the_topics(operator: Operator) -> None:
    operator.add()
    operator.changed()
    operator.kafka.down = True
    assert operator.deleted(ago=CONFIG.finalizer_timeout + 1) is None
    assert sorted(operator.kafka.topics) == ["orders", "orders-billing-DLQ", "orders-billing-RETRY"]
    [abandoned] = operator.events("CleanupAbandoned")
    assert "must be deleted by hand" in abandoned


def test_an_invalid_policy_s_topics_are_kept_with_a_warning(operator: Operator) -> None:
    operator.add()
    operator.changed()
    operator.api.edit(
        POLICIES, NAMESPACE, "orders-billing", lambda o: o["spec"].update(retry={"maxRedeliverCount": -1})
    )
    assert operator.deleted() is None
    assert operator.kafka.deleted == []
    [skipped] = operator.events("CleanupSkipped")
    assert "its topics are unknown and kept" in skipped
    assert "spec.retry.maxRedeliverCount" in skipped


def test_only_a_deleted_event_frees_a_policy_s_topics(operator: Operator) -> None:
    body = operator.add()
    operator.changed()
    key = f"{NAMESPACE}/orders-billing"
    for kind in ("ADDED", "MODIFIED"):
        operator.call("topic-claims", event={"type": kind, "object": body})
        assert operator.services.claims.user_of((KAFKA, DLQ), besides="") == key
    # Of another object under the policy's name (an older one): kept.
    stale = {**body, "metadata": {**body["metadata"], "uid": "an-older-policy"}}
    operator.call("topic-claims", event={"type": "DELETED", "object": stale})
    assert operator.services.claims.user_of((KAFKA, DLQ), besides="") == key
    operator.call("topic-claims", event={"type": "DELETED", "object": body})
    assert operator.services.claims.user_of((KAFKA, DLQ), besides="") is None


def test_an_application_event_the_api_cannot_serve_is_logged_not_raised(
    operator: Operator, caplog: pytest.LogCaptureFixture
) -> None:
    operator.add()
    operator.changed()
    app = operator.api.stored(APPS, NAMESPACE, naming.application_name("orders-billing"))
    assert app is not None
    operator.api.fail("GET", POLICIES, 500, times=5)
    operator.api.fail("PATCH", POLICIES, 500, times=5)
    app["status"] = {"applicationState": {"state": "RUNNING"}}
    logger = logging.getLogger("test-handlers")
    with caplog.at_level(logging.WARNING, logger="test-handlers"):
        operator.call("spark-application", event={"type": "MODIFIED", "object": app}, logger=logger)
    assert "could not map SparkApplication orders-billing onto its policy" in caplog.text
