"""The Pulsar provisioner alone against a real standalone Pulsar (no Kubernetes): what it
creates, that doing it again changes nothing, how it marks and recognises the topics it created
for a policy (the ``sparkdlq.io/policy-uid`` property, partitioned or not), and how it answers a
broker that is not there."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import TypeVar

import pytest

from dlq_engine.model import parse_policy
from dlq_engine.model.policy import PULSAR_KEEP_SUBSCRIPTION, DeadLetterPolicy
from spark_dlq_devtools.certs import make_ca
from spark_dlq_devtools.oauth2_issuer import OAuth2Issuer
from spark_dlq_devtools.processes import free_port
from spark_dlq_devtools.pulsar import SUPERUSER, PulsarBroker, full_topic
from spark_dlq_operator.naming import Owner
from spark_dlq_operator.topics import BrokerUnavailable, PulsarProvisioner, TopicsReport
from tests.integration.operator.test_pulsar import partitions
from tests.policy_builder import policy_document

T = TypeVar("T")
OWNER = Owner(name="orders-billing", namespace="payments", uid="11111111-2222-3333-4444-555555555555")


def pulsar_policy(pulsar: PulsarBroker, source: str, **overrides: object) -> DeadLetterPolicy:
    broker = {"type": "pulsar", "serviceUrl": pulsar.service_url, "adminUrl": pulsar.admin_url}
    return parse_policy(policy_document({"spec.broker": broker, "spec.source.topic": source, **overrides}))


def with_provisioner(call: Callable[[PulsarProvisioner], Awaitable[T]]) -> T:
    """Run ``call`` on a fresh provisioner, closed afterwards (as the operator's cleanup does)."""

    async def run() -> T:
        provisioner = PulsarProvisioner(timeout=5.0)
        try:
            return await call(provisioner)
        finally:
            await provisioner.close()

    return asyncio.run(run())


def ensure(
    policy: DeadLetterPolicy, owner: Owner = OWNER, credentials: dict[str, str] | None = None
) -> TopicsReport:
    return with_provisioner(lambda p: p.ensure(policy, owner=owner, credentials=credentials))


def delete(policy: DeadLetterPolicy, names: list[str]) -> list[str]:
    return with_provisioner(lambda p: p.delete(policy, names))


def properties(pulsar: PulsarBroker, name: str) -> dict[str, str]:
    return dict(pulsar.admin("GET", f"/admin/v2/{full_topic(name).replace('://', '/')}/properties"))


def test_ensure_creates_once_and_converges(
    pulsar: PulsarBroker, make_pulsar_topic: Callable[..., str]
) -> None:
    source = make_pulsar_topic("orders", partitions=2)
    policy = pulsar_policy(pulsar, source)
    full = f"persistent://public/default/{source}"

    first = ensure(policy)
    second = ensure(policy)

    assert (first.ready, first.reason) == (True, "TopicsReady")
    assert first.created == first.owned == (f"{full}-billing-RETRY", f"{full}-billing-DLQ")
    # Created for the policy, and marked so: found again without a record of it.
    assert properties(pulsar, f"{source}-billing-DLQ") == {"sparkdlq.io/policy-uid": OWNER.uid}
    assert (second.ready, second.created, second.owned, second.message) == (
        True,
        (),
        first.owned,
        first.message,
    )
    assert pulsar.subscriptions(f"{source}-billing-RETRY") == ["billing"]
    assert pulsar.subscriptions(f"{source}-billing-DLQ") == [PULSAR_KEEP_SUBSCRIPTION]


def test_topics_partitions_from_the_policy_win(
    pulsar: PulsarBroker, make_pulsar_topic: Callable[..., str]
) -> None:
    source = make_pulsar_topic("orders")
    report = ensure(pulsar_policy(pulsar, source, **{"spec.topics.partitions": 4}))
    assert report.ready
    assert partitions(pulsar, f"{source}-billing-DLQ") == 4


def test_delete_removes_both_topics_and_then_finds_them_gone(
    pulsar: PulsarBroker, make_pulsar_topic: Callable[..., str]
) -> None:
    source = make_pulsar_topic("orders", partitions=2)
    policy = pulsar_policy(pulsar, source)
    names = list(ensure(policy).owned)
    pulsar.produce(f"{source}-billing-DLQ", [(None, b"x")])

    assert delete(policy, names) == [
        f"persistent://public/default/{source}-billing-RETRY",
        f"persistent://public/default/{source}-billing-DLQ",
    ]
    assert delete(policy, names) == []


def test_an_admin_url_nothing_listens_on_is_broker_unavailable(pulsar: PulsarBroker) -> None:
    closed = f"http://127.0.0.1:{free_port()}"
    policy = pulsar_policy(pulsar, "orders", **{"spec.broker.adminUrl": closed})
    with pytest.raises(BrokerUnavailable) as unavailable:
        ensure(policy)
    assert f"Pulsar's admin API at {closed} (spec.broker.adminUrl) did not answer GET " in str(
        unavailable.value
    )


def test_a_missing_source_is_reported_not_created(pulsar: PulsarBroker) -> None:
    report = ensure(pulsar_policy(pulsar, "never-made-orders"))
    assert (report.ready, report.reason) == (False, "SourceTopicMissing")
    assert "'persistent://public/default/never-made-orders' does not exist" in report.message


def test_a_non_partitioned_source_gives_non_partitioned_topics(
    pulsar: PulsarBroker, make_pulsar_topic: Callable[..., str]
) -> None:
    source = make_pulsar_topic("orders")
    policy = pulsar_policy(pulsar, source)
    report = ensure(policy)
    assert (report.ready, len(report.created)) == (True, 2)
    assert partitions(pulsar, f"{source}-billing-RETRY") == partitions(pulsar, f"{source}-billing-DLQ") == 0
    assert properties(pulsar, f"{source}-billing-RETRY") == {"sparkdlq.io/policy-uid": OWNER.uid}
    # Another policy object of the same name (created again: a new uid) owns none of them.
    again = ensure(policy, Owner(name=OWNER.name, namespace=OWNER.namespace, uid="another-uid"))
    assert (again.ready, again.owned) == (True, ())
    assert "the operator did not create it for this policy" in again.message


def test_the_operators_token_and_ca_are_what_it_calls_https_with(
    pulsar: PulsarBroker, make_pulsar_topic: Callable[..., str], oauth2_issuer: OAuth2Issuer, tmp_path: Path
) -> None:
    """The class's operatorSecretRef on a secured broker: a superuser token and the CA over
    https create the topics; a role without admin rights, by token or client certificate, is
    refused with the broker's answer; a CA that did not sign the broker's certificate never gets
    an answer."""
    source = make_pulsar_topic("orders")
    policy = pulsar_policy(pulsar, source, **{"spec.broker.adminUrl": pulsar.admin_url_tls})
    ca = pulsar.ca.read_text()

    lookup = f"GET {pulsar.admin_url_tls}/admin/v2/persistent/public/default/{source}/partitions: HTTP 401"
    refused = ensure(policy, credentials={"token": pulsar.token("billing-team"), "ca.crt": ca})
    assert (refused.ready, refused.reason) == (False, "CreateFailed")
    assert lookup in refused.message, refused.message
    whose = "refused the operator's credentials for it (its class's spec.brokers[].operatorSecretRef: ca.crt, token)"
    assert whose in refused.message, refused.message
    assert pulsar.token("billing-team") not in refused.message
    # Mutual TLS: the client certificate is the identity (its CN the role).
    cert, key = pulsar.client_cert("billing-team")
    mutual = {"tls.crt": cert.read_text(), "tls.key": key.read_text(), "ca.crt": ca}
    refused = ensure(policy, credentials=mutual)
    assert lookup in refused.message, refused.message
    # OAuth2 client credentials: the issuer's access token, sent as a bearer token.
    oauth2_issuer.register("billing-team", "s3cret", pulsar.token("billing-team"))
    refused = ensure(policy, credentials={**oauth2_issuer.settings("billing-team", "s3cret"), "ca.crt": ca})
    assert lookup in refused.message, refused.message
    refused = ensure(policy, credentials={**oauth2_issuer.settings("billing-team", "n0t-1t"), "ca.crt": ca})
    assert (refused.ready, refused.reason) == (False, "CreateFailed")
    assert f"OAuth2 (oauth2.issuerUrl {oauth2_issuer.url}): POST {oauth2_issuer.url}/token: HTTP 401" in (
        refused.message
    )
    assert "n0t-1t" not in refused.message

    make_ca(tmp_path)  # another CA
    with pytest.raises(BrokerUnavailable, match="CERTIFICATE_VERIFY_FAILED"):
        ensure(
            policy,
            credentials={"token": pulsar.token(SUPERUSER), "ca.crt": (tmp_path / "ca.crt").read_text()},
        )

    created = ensure(policy, credentials={"token": pulsar.token(SUPERUSER), "ca.crt": ca})
    assert (created.ready, len(created.created)) == (True, 2), created.message
    assert pulsar.subscriptions(f"{source}-billing-DLQ") == [PULSAR_KEEP_SUBSCRIPTION]
