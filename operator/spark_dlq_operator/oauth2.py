"""OAuth2 client credentials for the operator's Pulsar admin calls.

A class's Pulsar broker may give the operator OAuth2 client credentials instead of a token
(``dlq_engine.model.pulsar_client``: ``oauth2.issuerUrl``, ``oauth2.audience``, optional
``oauth2.scope``, and Pulsar's key file ``oauth2.credentials.json``). Pulsar's own clients do what
this module does: find the issuer's token endpoint (``<issuer>/.well-known/openid-configuration``),
ask it for an access token with the ``client_credentials`` grant, and send that token as a bearer
token; it is kept until shortly before it expires. Nothing of the credentials or the token is
logged or put in a message.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Mapping
from typing import Any, Final

import aiohttp

from dlq_engine.model import pulsar_client

#: A token is asked for again this long before it expires.
EXPIRY_MARGIN_S: Final = 30.0
#: An answer without ``expires_in`` is kept this long.
DEFAULT_LIFETIME_S: Final = 300.0


class OAuth2Refused(Exception):
    """The issuer refused the credentials (a 4xx), or they are not Pulsar's key file."""


class OAuth2Unavailable(Exception):
    """The issuer did not answer, or answered that it cannot now (a 5xx)."""


class ClientCredentials:
    """Access tokens by credentials, kept until ``EXPIRY_MARGIN_S`` before they expire."""

    def __init__(self, *, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._tokens: dict[tuple[str, ...], tuple[str, float]] = {}

    async def token(self, session: aiohttp.ClientSession, settings: Mapping[str, str]) -> str:
        """An access token for ``settings`` (the Pulsar client's keys)."""
        issuer = settings[pulsar_client.OAUTH2_ISSUER].strip().rstrip("/")
        audience = settings.get(pulsar_client.OAUTH2_AUDIENCE, "").strip()
        scope = settings.get(pulsar_client.OAUTH2_SCOPE, "").strip()
        key = (issuer, audience, scope, settings.get(pulsar_client.OAUTH2_CREDENTIALS, ""))
        cached = self._tokens.get(key)
        if cached is not None and self._clock() < cached[1]:
            return cached[0]
        try:
            found = json.loads(settings.get(pulsar_client.OAUTH2_CREDENTIALS, ""))
            client_id, client_secret = str(found["client_id"]), str(found["client_secret"])
        except (ValueError, KeyError, TypeError):
            raise OAuth2Refused(
                f"{pulsar_client.OAUTH2_CREDENTIALS} is not Pulsar's key file "
                '({"type": "client_credentials", "client_id": ..., "client_secret": ...})'
            ) from None
        metadata = await _json(session, "GET", f"{issuer}/.well-known/openid-configuration")
        endpoint = metadata.get("token_endpoint")
        if not isinstance(endpoint, str) or not endpoint:
            raise OAuth2Refused(f"the OAuth2 issuer {issuer} names no token_endpoint")
        form = {
            "grant_type": "client_credentials",
            "client_id": client_id,
            "client_secret": client_secret,
            **({"audience": audience} if audience else {}),
            **({"scope": scope} if scope else {}),
        }
        answer = await _json(session, "POST", endpoint, form=form)
        token = answer.get("access_token")
        if not isinstance(token, str) or not token:
            raise OAuth2Refused(f"the OAuth2 token endpoint {endpoint} gave no access_token")
        lifetime = float(answer.get("expires_in") or DEFAULT_LIFETIME_S)
        self._tokens[key] = (token, self._clock() + max(0.0, lifetime - EXPIRY_MARGIN_S))
        return token


async def _json(
    session: aiohttp.ClientSession, method: str, url: str, *, form: Mapping[str, str] | None = None
) -> Mapping[str, Any]:
    try:
        async with session.request(method, url, data=dict(form) if form is not None else None) as answer:
            status, text = answer.status, await answer.text()
    except (aiohttp.ClientError, TimeoutError, OSError) as error:
        raise OAuth2Unavailable(
            f"the OAuth2 issuer did not answer {method} {url}: {type(error).__name__}"
        ) from None
    if status >= 500:
        raise OAuth2Unavailable(f"{method} {url}: HTTP {status} from the OAuth2 issuer")
    if status >= 400:
        # The body may say why (invalid_client); it never holds the secret sent.
        raise OAuth2Refused(f"{method} {url}: HTTP {status} from the OAuth2 issuer: {text.strip()[:200]}")
    try:
        found = json.loads(text)
    except ValueError:
        raise OAuth2Refused(f"{method} {url}: the OAuth2 issuer's answer is not JSON") from None
    if not isinstance(found, dict):
        raise OAuth2Refused(f"{method} {url}: the OAuth2 issuer's answer is not a JSON object")
    return found
