"""OAuth2 client credentials for the operator's Pulsar admin calls (``spark_dlq_operator.oauth2``),
against the stand-in issuer on the loopback interface: a token is asked for once and kept until
shortly before it expires; a refused secret and a key file that is not Pulsar's are named, the
secret never."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator, Mapping

import aiohttp
import pytest

from spark_dlq_devtools.oauth2_issuer import OAuth2Issuer
from spark_dlq_operator.oauth2 import EXPIRY_MARGIN_S, ClientCredentials, OAuth2Refused


@pytest.fixture
def issuer() -> Iterator[OAuth2Issuer]:
    found = OAuth2Issuer()
    found.register("operator", "s3cret", "access-token-1")
    found.start()
    try:
        yield found
    finally:
        found.stop()


def token(credentials: ClientCredentials, settings: Mapping[str, str]) -> str:
    async def ask() -> str:
        async with aiohttp.ClientSession() as session:
            return await credentials.token(session, settings)

    return asyncio.run(ask())


def test_a_token_is_asked_for_once_and_again_when_it_nears_its_expiry(issuer: OAuth2Issuer) -> None:
    now = [0.0]
    credentials = ClientCredentials(clock=lambda: now[0])
    settings = issuer.settings("operator", "s3cret")
    assert token(credentials, settings) == "access-token-1"
    now[0] = 3600 - EXPIRY_MARGIN_S - 1
    assert token(credentials, settings) == "access-token-1"
    assert issuer.requests == 1
    now[0] = 3600 - EXPIRY_MARGIN_S
    token(credentials, settings)
    assert issuer.requests == 2


def test_a_refused_secret_is_named_without_the_secret(issuer: OAuth2Issuer) -> None:
    with pytest.raises(OAuth2Refused) as refused:
        token(ClientCredentials(), issuer.settings("operator", "n0t-1t"))
    assert str(refused.value) == (
        f'POST {issuer.url}/token: HTTP 401 from the OAuth2 issuer: {{"error": "invalid_client"}}'
    )


def test_a_key_file_that_is_not_pulsars_is_named(issuer: OAuth2Issuer) -> None:
    settings = {**issuer.settings("operator", "s3cret"), "oauth2.credentials.json": "client_id=operator"}
    with pytest.raises(OAuth2Refused, match=r"oauth2.credentials.json is not Pulsar's key file"):
        token(ClientCredentials(), settings)
    assert issuer.requests == 0
