"""The engine's check before a run on a secured Pulsar (the session's broker: token and TLS
authentication, authorization, TLS listeners): a wrong token, a missing produce permission and
an untrusted certificate each stop it before anything is read, with a line naming the problem
and no secret in it; a client certificate (mutual TLS) and OAuth2 client credentials (a
stand-in issuer whose access tokens the broker signed) are identities like a token. The routing
run of a limited role over TLS is test_pulsar_engine.py's."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from dlq_engine.job.pulsar_topics import PulsarAccessError, Refusal, check_topics
from dlq_engine.model import parse_policy
from dlq_engine.model.policy import DeadLetterPolicy
from spark_dlq_devtools.certs import make_ca
from spark_dlq_devtools.oauth2_issuer import OAuth2Issuer
from spark_dlq_devtools.pulsar import PulsarBroker, full_topic
from tests.helpers import pulsar_engine_policy
from tests.integration.engine.test_pulsar_engine import limited_client


def refusal(spark: Any, policy: DeadLetterPolicy, client_dir: Path) -> PulsarAccessError:
    with pytest.raises(PulsarAccessError) as refused:
        check_topics(spark, policy, str(client_dir))
    return refused.value


def test_a_wrong_token_a_missing_permission_and_an_untrusted_certificate_stop_the_engine_first(
    spark: Any,
    pulsar: PulsarBroker,
    pulsar_topics: Callable[..., dict[str, str]],
    oauth2_issuer: OAuth2Issuer,
    tmp_path: Path,
) -> None:
    names = pulsar_topics()
    plain = parse_policy(pulsar_engine_policy(names, pulsar))
    tls = parse_policy(pulsar_engine_policy(names, pulsar, tls=True))
    secret_field = "spec.broker.secretRef (mounted at {})"

    forged = pulsar.token("engine-forged", key=b"not the broker's signing key, 32+")
    wrong = pulsar.client_dir("forged", {"token": forged})
    refused = refusal(spark, plain, wrong)
    assert refused.kind is Refusal.CREDENTIALS
    assert str(refused).startswith(
        f"the Pulsar broker at {pulsar.service_url} refused the client's credentials "
        f"({secret_field.format(wrong)}): "
    ), refused
    assert forged not in str(refused)

    no_dlq = limited_client(pulsar, names, "engine-no-dlq", dlq=False)
    refused = refusal(spark, tls, no_dlq)
    assert refused.kind is Refusal.PERMISSION
    assert str(refused).startswith(
        f"the Pulsar client ({secret_field.format(no_dlq)}) may not produce to "
        f"{full_topic(names['dlq'])} (spec.deadLetter.topic): "
    ), refused
    assert "AuthorizationException" in str(refused)
    assert full_topic(names["retry"]) not in str(refused), "the retry topic is writable"

    make_ca(tmp_path / "other-ca")
    untrusting = limited_client(pulsar, names, "engine-other-ca")
    (untrusting / "ca.crt").write_bytes((tmp_path / "other-ca" / "ca.crt").read_bytes())
    refused = refusal(spark, tls, untrusting)
    assert refused.kind is Refusal.CERTIFICATE
    assert str(refused).startswith(
        f"the Pulsar broker's certificate at 127.0.0.1:{pulsar.tls_port} (spec.broker.serviceUrl) is "
        f"not trusted by the certificates of ca.crt in {secret_field.format(untrusting)}: "
    ), refused

    # Mutual TLS: the certificate's CN is the role; granted what the engine needs, it may run.
    cert, key = pulsar.client_cert("engine-mtls")
    limited_client(pulsar, names, "engine-mtls")
    mutual = pulsar.client_dir("mtls", {"tls.crt": cert, "tls.key": key, "ca.crt": pulsar.ca})
    check_topics(spark, tls, str(mutual))

    # OAuth2 client credentials: the issuer's access token is the identity.
    oauth2_issuer.register("engine-oauth2", "s3cret", pulsar.token("engine-oauth2"))
    limited_client(pulsar, names, "engine-oauth2", dlq=False)
    oauth2 = pulsar.client_dir("oauth2", oauth2_issuer.settings("engine-oauth2", "s3cret"))
    refused = refusal(spark, plain, oauth2)
    assert refused.kind is Refusal.PERMISSION
    assert f"may not produce to {full_topic(names['dlq'])} (spec.deadLetter.topic)" in str(refused)
    assert "s3cret" not in str(refused)
    pulsar.grant(names["dlq"], "engine-oauth2", ["produce"])
    check_topics(spark, plain, str(oauth2))
    assert oauth2_issuer.requests >= 1

    assert pulsar.subscriptions(names["source"]) == [], "a check read the source"
    assert pulsar.subscriptions(names["retry"]) == []
