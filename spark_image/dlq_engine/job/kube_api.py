"""The Kubernetes API as a driver pod reaches it: its service account's token and the cluster's CA.

The engine image has no Kubernetes client, and the engine asks little of the API: the heartbeat
patches its policy's Lease, the checkpoint lease reads the pod of the driver that holds it. Both
go through this: the API server at ``KUBERNETES_SERVICE_HOST``, the pod's service-account token
(re-read for every call: projected tokens rotate) and CA; a local driver (the development
stand-in) is given a folder with ``token``, ``ca.crt`` and ``namespace`` in
``SPARK_DLQ_SERVICEACCOUNT_DIR``. Only the standard library is used.
"""

from __future__ import annotations

import json
import os
import ssl
import urllib.error
import urllib.request
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Final

SERVICE_ACCOUNT_DIR: Final = "/var/run/secrets/kubernetes.io/serviceaccount"


class ApiError(OSError):
    """The API server answered with an HTTP error status."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(f"HTTP {status}: {message}")
        self.status = status


class ServiceAccountApi:
    """Calls to the API server as the pod's service account."""

    def __init__(self) -> None:
        account = Path(os.environ.get("SPARK_DLQ_SERVICEACCOUNT_DIR") or SERVICE_ACCOUNT_DIR)
        host = os.environ.get("KUBERNETES_SERVICE_HOST", "")
        port = os.environ.get("KUBERNETES_SERVICE_PORT", "443")
        token = account / "token"
        #: Why the API cannot be reached from here (not in a pod: a local run), else None.
        self.unavailable: str | None = None
        if not host or not token.is_file():
            self.unavailable = (
                f"KUBERNETES_SERVICE_HOST is {host or 'not set'} and {token} is "
                f"{'there' if token.is_file() else 'missing'}"
            )
        self.server = f"https://{host if ':' not in host else f'[{host}]'}:{port}"
        self._token = token
        ca = account / "ca.crt"
        self._context = ssl.create_default_context(cafile=str(ca) if ca.is_file() else None)

    def url(self, path: str) -> str:
        return f"{self.server}{path}"

    def call(
        self, method: str, path: str, *, body: bytes | None = None, content_type: str = "application/json"
    ) -> Mapping[str, Any]:
        """The decoded answer; ``ApiError`` for an HTTP error, ``OSError`` when unreachable."""
        if self.unavailable is not None:
            raise OSError(f"no Kubernetes API: {self.unavailable}")
        request = urllib.request.Request(
            self.url(path),
            data=body,
            method=method,
            headers={
                "Authorization": f"Bearer {self._token.read_text().strip()}",
                "Content-Type": content_type,
                "Accept": "application/json",
            },
        )
        try:
            with urllib.request.urlopen(request, timeout=10, context=self._context) as response:
                data = response.read()
        except urllib.error.HTTPError as error:
            raise ApiError(error.code, str(error.reason)) from None
        try:
            answer = json.loads(data) if data else {}
        except ValueError:  # not JSON (a proxy's page): nothing to read in it
            answer = {}
        return answer if isinstance(answer, dict) else {}

    def get(self, path: str) -> Mapping[str, Any] | None:
        """The object at ``path``; None when the API server says it does not exist (404)."""
        try:
            return self.call("GET", path)
        except ApiError as error:
            if error.status == 404:
                return None
            raise
