"""A stand-in OAuth2 issuer on 127.0.0.1, for the tests of OAuth2 client credentials on Pulsar.

It serves what Pulsar's clients ask an issuer for: its metadata
(``/.well-known/openid-configuration``, naming the token endpoint) and the ``client_credentials``
grant at ``/token``. A client whose id and secret it knows gets the access token registered for
it: in the tests a Pulsar token the secured broker signs (``PulsarBroker.token``), which the
broker's token authentication takes as it takes any JWT; anyone else gets 401
``invalid_client``. ``requests`` counts the grants given.
"""

from __future__ import annotations

import json
import threading
import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


class OAuth2Issuer:
    def __init__(self) -> None:
        self.clients: dict[str, tuple[str, str]] = {}
        self.requests = 0
        issuer = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, format: str, *args: Any) -> None:
                pass

            def _answer(self, status: int, body: dict[str, Any]) -> None:
                data = json.dumps(body).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_GET(self) -> None:
                if self.path == "/.well-known/openid-configuration":
                    self._answer(200, {"issuer": issuer.url, "token_endpoint": f"{issuer.url}/token"})
                else:
                    self._answer(404, {"error": "not_found"})

            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                form = dict(urllib.parse.parse_qsl(self.rfile.read(length).decode()))
                known = issuer.clients.get(form.get("client_id", ""))
                if self.path != "/token" or form.get("grant_type") != "client_credentials":
                    self._answer(400, {"error": "unsupported_grant_type"})
                elif known is None or known[0] != form.get("client_secret"):
                    self._answer(401, {"error": "invalid_client"})
                else:
                    issuer.requests += 1
                    self._answer(200, {"access_token": known[1], "token_type": "Bearer", "expires_in": 3600})

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    def register(self, client_id: str, client_secret: str, access_token: str) -> None:
        self.clients[client_id] = (client_secret, access_token)

    def key_file(self, client_id: str, client_secret: str) -> str:
        """Pulsar's key file (``oauth2.credentials.json``) for a client."""
        return json.dumps(
            {
                "type": "client_credentials",
                "client_id": client_id,
                "client_secret": client_secret,
                "issuer_url": self.url,
            }
        )

    def settings(self, client_id: str, client_secret: str) -> dict[str, str]:
        """The Pulsar client's OAuth2 keys (``dlq_engine.model.pulsar_client``)."""
        return {
            "oauth2.issuerUrl": self.url,
            "oauth2.audience": "urn:spark-dlq:test",
            "oauth2.credentials.json": self.key_file(client_id, client_secret),
        }

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()
