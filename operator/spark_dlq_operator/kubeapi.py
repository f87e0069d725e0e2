"""The one place that talks to the Kubernetes API, with idempotent writes.

Reconciling means writing the same objects again and again, after restarts and races, so the
write helpers have the semantics a reconcile needs: creating an object that exists (409) is
success and returns the existing object; deleting one that is gone (404) is success; reading a
missing object gives None. Objects are plain dicts in and out (the manifests ``render`` builds),
addressed by a small ``ResourceType`` descriptor, over ``kubernetes_asyncio``'s HTTP client. Any other
API failure is raised as ``ApiError`` so callers never import the client library.
"""

from __future__ import annotations

import inspect
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final, cast

from kubernetes_asyncio import client as k8s
from kubernetes_asyncio import config as k8s_config
from kubernetes_asyncio.client.exceptions import ApiException

from spark_dlq_operator import metrics, naming
from spark_dlq_operator.policy_class import CLASS_PLURAL

Obj = dict[str, Any]

_RESPONSES: Final = {200: "object", 201: "object", 202: "object"}
_MERGE_PATCH: Final = "application/merge-patch+json"


class ApiError(Exception):
    """A Kubernetes API call failed (other than the 404/409 the helpers absorb)."""

    def __init__(self, status: int, reason: str, message: str) -> None:
        self.status = status
        self.reason = reason
        super().__init__(f"{status} {reason}: {message}")


@dataclass(frozen=True, slots=True)
class ResourceType:
    """A resource type: ``group`` is empty for the core API; a cluster-scoped one (and a
    namespace itself) is addressed with namespace None."""

    group: str
    version: str
    plural: str

    def path(self, namespace: str | None, name: str | None = None, subresource: str | None = None) -> str:
        base = f"/apis/{self.group}/{self.version}" if self.group else f"/api/{self.version}"
        path = f"{base}/namespaces/{namespace}/{self.plural}" if namespace else f"{base}/{self.plural}"
        if name:
            path += f"/{name}"
        if subresource:
            path += f"/{subresource}"
        return path


CONFIG_MAPS: Final = ResourceType("", "v1", "configmaps")
EVENTS: Final = ResourceType("", "v1", "events")
POLICIES: Final = ResourceType(naming.POLICY_GROUP, naming.POLICY_VERSION, naming.POLICY_PLURAL)
SPARK_APPLICATIONS: Final = ResourceType(naming.SPARK_GROUP, naming.SPARK_VERSION_API, naming.SPARK_PLURAL)
REDRIVES: Final = ResourceType(naming.POLICY_GROUP, naming.POLICY_VERSION, naming.REDRIVE_PLURAL)
PODS: Final = ResourceType("", "v1", "pods")
SERVICE_ACCOUNTS: Final = ResourceType("", "v1", "serviceaccounts")
LEASES: Final = ResourceType("coordination.k8s.io", "v1", "leases")
ROLES: Final = ResourceType("rbac.authorization.k8s.io", "v1", "roles")
ROLE_BINDINGS: Final = ResourceType("rbac.authorization.k8s.io", "v1", "rolebindings")
#: Cluster-scoped: addressed with namespace None.
POLICY_CLASSES: Final = ResourceType(naming.POLICY_GROUP, naming.POLICY_VERSION, CLASS_PLURAL)
NAMESPACES: Final = ResourceType("", "v1", "namespaces")
#: Only the Secrets a class names, in the operator's own namespace.
SECRETS: Final = ResourceType("", "v1", "secrets")
KOPF_PEERINGS: Final = ResourceType("kopf.dev", "v1", "kopfpeerings")
CLUSTER_KOPF_PEERINGS: Final = ResourceType("kopf.dev", "v1", "clusterkopfpeerings")


def kafka_topics(version: str) -> ResourceType:
    """Strimzi's KafkaTopics as served in ``version`` (``naming.STRIMZI_VERSIONS``)."""
    return ResourceType(naming.STRIMZI_GROUP, version, naming.STRIMZI_PLURAL)


async def load_configuration(kubeconfig: str | None) -> k8s.Configuration:
    """Credentials for the API: the given kubeconfig, else in-cluster, else the usual files."""
    configuration = k8s.Configuration()
    if kubeconfig:
        await k8s_config.load_kube_config(config_file=kubeconfig, client_configuration=configuration)
        return configuration
    try:
        k8s_config.load_incluster_config(client_configuration=configuration)  # type: ignore[no-untyped-call]
    except k8s_config.ConfigException:
        await k8s_config.load_kube_config(client_configuration=configuration)
    return configuration


async def bearer_token(configuration: k8s.Configuration) -> str | None:
    """The bearer token the configuration authenticates with, if any (kopf logs in with it)."""
    header: object = configuration.get_api_key_with_prefix("BearerToken")
    if inspect.isawaitable(header):
        header = await header
    if not header:
        return None
    return str(header).split(" ", 1)[-1]


class KubeApi:
    """Idempotent reads and writes of namespaced objects as dicts."""

    def __init__(self, configuration: k8s.Configuration) -> None:
        self.configuration = configuration
        self._client = k8s.ApiClient(configuration)

    async def close(self) -> None:
        await self._client.close()

    async def _call(
        self,
        method: str,
        path: str,
        *,
        body: object = None,
        query: Sequence[tuple[str, str]] = (),
        content_type: str = "application/json",
    ) -> Obj:
        try:
            result = await self._client.call_api(
                path,
                method,
                query_params=list(query),
                body=body,
                header_params={"Accept": "application/json", "Content-Type": content_type},
                response_types_map=_RESPONSES,
                auth_settings=["BearerToken"],
                _return_http_data_only=True,
                _preload_content=True,
            )
        except ApiException as error:
            metrics.api_error(method, _resource(path), int(error.status or 0))
            raise _api_error(error) from None
        except OSError:
            metrics.api_error(method, _resource(path), 0)
            raise
        return cast(Obj, result) if isinstance(result, dict) else {}

    async def get(self, kind: ResourceType, namespace: str | None, name: str) -> Obj | None:
        """The object, or None when it does not exist."""
        try:
            return await self._call("GET", kind.path(namespace, name))
        except ApiError as error:
            if error.status == 404:
                return None
            raise

    async def list(
        self, kind: ResourceType, namespace: str | None, *, label_selector: str | None = None
    ) -> list[Obj]:
        """Every object of ``kind`` in ``namespace`` (all namespaces when None)."""
        items: list[Obj] = []
        token: str | None = None
        while True:
            query = [("limit", "500")]
            if label_selector:
                query.append(("labelSelector", label_selector))
            if token:
                query.append(("continue", token))
            page = await self._call("GET", kind.path(namespace), query=query)
            items.extend(page.get("items") or [])
            token = (page.get("metadata") or {}).get("continue")
            if not token:
                return items

    async def create(self, kind: ResourceType, body: Mapping[str, Any]) -> tuple[Obj, bool]:
        """Create ``body``; ``(object, True)``, or ``(existing object, False)`` when it exists."""
        metadata = body["metadata"]
        try:
            return await self._call("POST", kind.path(metadata.get("namespace")), body=body), True
        except ApiError as error:
            if error.status != 409 or not metadata.get("name"):
                raise
        existing = await self.get(kind, metadata.get("namespace"), metadata["name"])
        if existing is None:  # deleted in between: one more try
            return await self._call("POST", kind.path(metadata.get("namespace")), body=body), True
        return existing, False

    async def patch(
        self,
        kind: ResourceType,
        namespace: str,
        name: str,
        patch: Mapping[str, Any],
        *,
        subresource: str | None = None,
    ) -> Obj:
        """A JSON merge patch. Put ``metadata.resourceVersion`` in it to fail with 409 when the
        object changed since it was read."""
        return await self._call(
            "PATCH", kind.path(namespace, name, subresource), body=patch, content_type=_MERGE_PATCH
        )

    async def replace(self, kind: ResourceType, body: Mapping[str, Any]) -> Obj:
        """PUT the whole object (its ``metadata.resourceVersion`` guards against lost updates)."""
        metadata = body["metadata"]
        return await self._call("PUT", kind.path(metadata.get("namespace"), metadata["name"]), body=body)

    async def delete(self, kind: ResourceType, namespace: str, name: str) -> bool:
        """Delete; True when it was there, False when it was already gone."""
        try:
            await self._call(
                "DELETE",
                kind.path(namespace, name),
                body={"kind": "DeleteOptions", "apiVersion": "v1", "propagationPolicy": "Background"},
            )
        except ApiError as error:
            if error.status == 404:
                return False
            raise
        return True

    async def served_resources(self, group: str, version: str) -> set[str]:
        """The resource names an API group version serves (discovery); empty when absent."""
        try:
            document = await self._call("GET", f"/apis/{group}/{version}")
        except ApiError as error:
            if error.status in (404, 503):
                return set()
            raise
        return {str(r.get("name")) for r in document.get("resources") or []}


def _resource(path: str) -> str:
    """The resource (plural) a request path names: ``/api/v1/namespaces/n/configmaps/x``
    -> ``configmaps``; discovery paths -> ``discovery``."""
    parts = path.strip("/").split("/")
    parts = parts[2:] if parts[0] == "api" else parts[3:]
    if parts[:1] == ["namespaces"] and len(parts) >= 3:
        parts = parts[2:]
    return parts[0] if parts else "discovery"


def _api_error(error: ApiException) -> ApiError:
    status = int(error.status or 0)
    message = str(error.reason or "")
    raw: object = error.body
    body = raw.decode(errors="replace") if isinstance(raw, bytes) else raw
    if isinstance(body, str) and body:
        try:
            message = str(json.loads(body).get("message") or message)
        except (ValueError, AttributeError):
            message = body[:500]
    return ApiError(status, str(error.reason or ""), message)
