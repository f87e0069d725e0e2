"""The keys a Pulsar ``broker.secretRef`` Secret may hold (``dlq_engine.model.pulsar_client``):
what is refused, how a client authenticates, and the engine's Java client reading the same names."""

from __future__ import annotations

import re

import pytest

from dlq_engine.model import pulsar_client
from spark_dlq_devtools.paths import REPO_ROOT

CLIENT_SETTINGS = REPO_ROOT / "spark_image/jvm/src/main/java/io/sparkdlq/engine/pulsar/ClientSettings.java"


@pytest.mark.parametrize(
    ("keys", "expected"),
    [
        pytest.param(["token", "ca.crt"], [], id="token-over-tls"),
        pytest.param(["tls.crt", "tls.key", "ca.crt"], [], id="mutual-tls"),
        pytest.param(
            ["oauth2.issuerUrl", "oauth2.audience", "oauth2.credentials.json", "oauth2.scope"],
            [],
            id="oauth2",
        ),
        pytest.param(
            ["tokne"],
            [
                "unknown key(s) tokne (a Pulsar client takes token, ca.crt, tls.crt, tls.key, "
                "oauth2.issuerUrl, oauth2.audience, oauth2.scope, oauth2.credentials.json)"
            ],
            id="typo",
        ),
        pytest.param(
            ["tls.crt"], ["tls.crt and tls.key go together (a client certificate and its key)"], id="half"
        ),
        pytest.param(
            ["token", "oauth2.issuerUrl"],
            [
                "token and oauth2.* are two ways to authenticate: give one",
                "OAuth2 needs oauth2.audience, oauth2.credentials.json too",
            ],
            id="two-ways",
        ),
    ],
)
def test_problems_name_each_key(keys: list[str], expected: list[str]) -> None:
    assert pulsar_client.problems(keys) == expected


@pytest.mark.parametrize(
    ("keys", "expected"),
    [
        pytest.param(["token", "tls.crt", "tls.key"], "token", id="token-wins"),
        pytest.param(["oauth2.issuerUrl", "tls.crt", "tls.key"], "oauth2", id="oauth2"),
        pytest.param(["tls.crt", "tls.key", "ca.crt"], "tls", id="certificate"),
        pytest.param(["ca.crt"], "none", id="trust-only"),
    ],
)
def test_authentication_is_the_first_way_given(keys: list[str], expected: str) -> None:
    assert pulsar_client.authentication(keys) == expected


def test_the_java_client_reads_the_same_file_names() -> None:
    declared = re.findall(r'static final String \w+ = "([^"]+)";', CLIENT_SETTINGS.read_text())
    assert declared == list(pulsar_client.KEYS)
