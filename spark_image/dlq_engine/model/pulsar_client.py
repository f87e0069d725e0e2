"""The Pulsar client's security settings: which keys a Pulsar ``broker.secretRef`` Secret holds.

On Kafka the Secret's keys are client properties passed through; on Pulsar they are a fixed
set, each a file once the Secret is mounted (the engine's Java client reads the files there, the
operator the same keys of its own Secret), so a Secret can only say what this list lets it say:
the certificates to trust, a client certificate, and one way to authenticate. A key outside the
list is refused with the list, never ignored (a typo would otherwise run unauthenticated).

The names follow Kubernetes' own Secret types where there is one: ``ca.crt``, ``tls.crt`` and
``tls.key`` are those of a ``kubernetes.io/tls`` Secret (what cert-manager writes), ``token``
that of a service-account token. The values are never logged, written to a status or passed as
a Spark option: the engine passes the folder, the operator keeps them in memory.
"""

from __future__ import annotations

from collections.abc import Collection
from typing import Final, Literal

#: A JSON Web Token (Pulsar's ``AuthenticationToken``), the whole file.
TOKEN: Final = "token"
#: PEM certificates to trust for ``pulsar+ssl://`` and ``https://`` (host names are verified).
CA: Final = "ca.crt"
#: A PEM client certificate and its PKCS#8 key (mutual TLS); the authentication when neither a
#: token nor OAuth2 is given (Pulsar's ``AuthenticationTls``: the role is the certificate's CN).
CERT: Final = "tls.crt"
KEY: Final = "tls.key"
#: OAuth2 client credentials (Pulsar's ``AuthenticationOAuth2``): the issuer, the audience, an
#: optional scope and Pulsar's key file (``{"type": "client_credentials", "client_id": ...,
#: "client_secret": ...}``).
OAUTH2_ISSUER: Final = "oauth2.issuerUrl"
OAUTH2_AUDIENCE: Final = "oauth2.audience"
OAUTH2_SCOPE: Final = "oauth2.scope"
OAUTH2_CREDENTIALS: Final = "oauth2.credentials.json"

KEYS: Final = (TOKEN, CA, CERT, KEY, OAUTH2_ISSUER, OAUTH2_AUDIENCE, OAUTH2_SCOPE, OAUTH2_CREDENTIALS)
_OAUTH2_REQUIRED: Final = (OAUTH2_ISSUER, OAUTH2_AUDIENCE, OAUTH2_CREDENTIALS)

Authentication = Literal["token", "oauth2", "tls", "none"]


def authentication(keys: Collection[str]) -> Authentication:
    """How a client with these settings authenticates (the engine's Java client decides alike:
    ``io.sparkdlq.engine.pulsar.ClientSettings``)."""
    if TOKEN in keys:
        return "token"
    if OAUTH2_ISSUER in keys:
        return "oauth2"
    if CERT in keys and KEY in keys:
        return "tls"
    return "none"


def problems(keys: Collection[str]) -> list[str]:
    """What is wrong with a Secret holding these keys (empty when nothing is)."""
    found: list[str] = []
    unknown = sorted(set(keys) - set(KEYS))
    if unknown:
        found.append(f"unknown key(s) {', '.join(unknown)} (a Pulsar client takes {', '.join(KEYS)})")
    if (CERT in keys) != (KEY in keys):
        found.append(f"{CERT} and {KEY} go together (a client certificate and its key)")
    oauth2 = [key for key in keys if key.startswith("oauth2.")]
    if oauth2 and TOKEN in keys:
        found.append(f"{TOKEN} and oauth2.* are two ways to authenticate: give one")
    if oauth2:
        missing = [key for key in _OAUTH2_REQUIRED if key not in keys]
        if missing:
            found.append(f"OAuth2 needs {', '.join(missing)} too")
    return found
