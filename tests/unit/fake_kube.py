"""An in-memory Kubernetes API under the operator's own ``KubeApi``, for fast tests of its I/O
logic (in the spirit of kopf's own tests, which fake the HTTP API rather than the client).

Only the HTTP call (``KubeApi._call``) is replaced, so ``get``'s 404, ``create``'s 409 and the
``resourceVersion`` preconditions run as they do against a real API server. What the fake keeps
of the API server's behaviour: names unique per kind and namespace, ``generateName``, a uid and a
``resourceVersion`` per write, 409 Conflict on a stale ``resourceVersion`` (PUT, or a merge patch
that names one), 404 Not Found, ``generation`` bumped when ``spec`` changes, the ``status``
subresource written only through ``/status``, label selectors of ``k=v`` pairs, discovery of
the group versions a test declares ``served``. Tests add failures (``fail``) and concurrent
writers (``before``), and read every call made (``calls``).
"""

from __future__ import annotations

import copy
import itertools
import re
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from spark_dlq_operator.kubeapi import ApiError, KubeApi, Obj

_DISCOVERY = re.compile(r"^/apis/(?P<group>[^/]+)/(?P<version>[^/]+)$")
_PATH = re.compile(
    r"^/(?:api/(?P<core>v1)|apis/(?P<group>[^/]+)/(?P<version>[^/]+))"
    r"(?:/namespaces/(?P<namespace>[^/]+))?/(?P<plural>[^/]+)(?:/(?P<name>[^/]+))?(?:/(?P<sub>status))?$"
)


@dataclass
class _Failure:
    method: str
    plural: str
    status: int
    times: int


def merge_patch(target: Any, patch: Any) -> Any:
    """RFC 7386 JSON merge patch."""
    if not isinstance(patch, Mapping):
        return copy.deepcopy(patch)
    result = dict(target) if isinstance(target, Mapping) else {}
    for key, value in patch.items():
        if value is None:
            result.pop(key, None)
        else:
            result[key] = merge_patch(result.get(key), value)
    return result


class FakeKube(KubeApi):
    def __init__(self) -> None:  # no client: nothing leaves the process
        self.objects: dict[tuple[str, str, str], Obj] = {}
        self.calls: list[tuple[str, str]] = []
        self._failures: list[_Failure] = []
        self._before: list[tuple[str, str, Callable[[], None]]] = []
        self._versions = itertools.count(1)
        #: Discovery: the resources each ``group/version`` serves.
        self.served: dict[str, list[str]] = {}

    async def close(self) -> None:
        return None

    # --- what tests use ----------------------------------------------------------------------

    def fail(self, method: str, plural: str, status: int, *, times: int = 1) -> None:
        """The next ``times`` calls of ``method`` on ``plural`` fail with ``status``."""
        self._failures.append(_Failure(method, plural, status, times))

    def before(self, method: str, plural: str, action: Callable[[], None]) -> None:
        """Run ``action`` just before the next ``method`` call on ``plural`` is served: another
        writer getting there first."""
        self._before.append((method, plural, action))

    def put(self, plural: str, body: Mapping[str, Any]) -> Obj:
        """Store an object as if someone else created it."""
        obj = copy.deepcopy(dict(body))
        metadata = obj.setdefault("metadata", {})
        metadata.setdefault("uid", str(uuid.uuid4()))
        metadata.setdefault("generation", 1)
        metadata["resourceVersion"] = str(next(self._versions))
        self.objects[(plural, metadata.get("namespace", ""), metadata["name"])] = obj
        return copy.deepcopy(obj)

    def edit(self, plural: str, namespace: str, name: str, change: Callable[[Obj], None]) -> None:
        """Change a stored object as another client would (a new ``resourceVersion``)."""
        obj = self.objects[(plural, namespace, name)]
        change(obj)
        obj["metadata"]["resourceVersion"] = str(next(self._versions))

    def stored(self, plural: str, namespace: str, name: str) -> Obj | None:
        found = self.objects.get((plural, namespace, name))
        return copy.deepcopy(found) if found is not None else None

    def of(self, plural: str) -> list[Obj]:
        return [copy.deepcopy(o) for (p, _, _), o in sorted(self.objects.items()) if p == plural]

    def count(self, method: str, plural: str) -> int:
        return sum(1 for m, path in self.calls if m == method and f"/{plural}" in path)

    # --- the API server ----------------------------------------------------------------------

    async def _call(
        self,
        method: str,
        path: str,
        *,
        body: object = None,
        query: Sequence[tuple[str, str]] = (),
        content_type: str = "application/json",
    ) -> Obj:
        self.calls.append((method, path))
        discovery = _DISCOVERY.match(path)
        if method == "GET" and discovery is not None:
            served = self.served.get(f"{discovery['group']}/{discovery['version']}")
            if served is None:
                raise ApiError(404, "NotFound", f"no such group version {path}")
            return {"resources": [{"name": name} for name in served]}
        match = _PATH.match(path)
        if match is None:
            raise ApiError(404, "NotFound", f"no such path {path}")
        plural, namespace, name, sub = (
            match["plural"],
            match["namespace"] or "",
            match["name"],
            match["sub"],
        )
        for i, (m, p, action) in enumerate(self._before):
            if m == method and p == plural:
                del self._before[i]
                action()
                break
        for failure in self._failures:
            if failure.method == method and failure.plural == plural and failure.times > 0:
                failure.times -= 1
                raise ApiError(failure.status, "Injected", f"{method} {path}")
        key = (plural, namespace, name or "")
        if method == "GET":
            if name is None:
                return {
                    "items": self._list(plural, namespace, dict(query).get("labelSelector")),
                    "metadata": {},
                }
            return copy.deepcopy(self._existing(key))
        if method == "POST":
            return self._create(plural, namespace, body)
        if method == "DELETE":
            self._existing(key)
            del self.objects[key]
            return {}
        current = self._existing(key)
        assert isinstance(body, Mapping)
        wanted = (body.get("metadata") or {}).get("resourceVersion")
        if wanted is not None and wanted != current["metadata"]["resourceVersion"]:
            raise ApiError(409, "Conflict", f"the object {name} has been modified")
        if method == "PUT":
            new = copy.deepcopy(dict(body))
            new["status"] = current.get("status")
            if new.get("status") is None:
                new.pop("status")
        elif sub == "status":
            new = copy.deepcopy(current)
            new["status"] = merge_patch(current.get("status"), body.get("status"))
        else:
            patch = {k: v for k, v in body.items() if k != "status"}
            new = merge_patch(current, patch)
        if method == "PUT" or sub == "status":
            new["metadata"] = {**current["metadata"], **new["metadata"]}
        for fixed in ("uid", "creationTimestamp", "generation"):
            if fixed in current["metadata"]:
                new["metadata"][fixed] = current["metadata"][fixed]
        if new.get("spec") != current.get("spec"):
            new["metadata"]["generation"] = current["metadata"].get("generation", 1) + 1
        new["metadata"]["resourceVersion"] = str(next(self._versions))
        self.objects[key] = new
        return copy.deepcopy(new)

    def _existing(self, key: tuple[str, str, str]) -> Obj:
        found = self.objects.get(key)
        if found is None:
            raise ApiError(404, "NotFound", f"{key[0]} {key[2]!r} not found")
        return found

    def _create(self, plural: str, namespace: str, body: object) -> Obj:
        assert isinstance(body, Mapping)
        obj = copy.deepcopy(dict(body))
        metadata = obj.setdefault("metadata", {})
        if not metadata.get("name"):
            metadata["name"] = metadata.get("generateName", "") + uuid.uuid4().hex[:5]
        key = (plural, namespace, metadata["name"])
        if key in self.objects:
            raise ApiError(409, "AlreadyExists", f"{plural} {metadata['name']!r} already exists")
        metadata.update(
            uid=str(uuid.uuid4()),
            generation=1,
            resourceVersion=str(next(self._versions)),
            creationTimestamp="2026-11-25T00:00:00Z",
        )
        obj.pop("status", None)
        self.objects[key] = obj
        return copy.deepcopy(obj)

    def _list(self, plural: str, namespace: str, selector: str | None) -> list[Obj]:
        wanted = dict(pair.split("=", 1) for pair in selector.split(",")) if selector else {}
        found = []
        for (p, ns, _), obj in sorted(self.objects.items()):
            labels = obj["metadata"].get("labels") or {}
            if (
                p == plural
                and (not namespace or ns == namespace)
                and all(labels.get(k) == v for k, v in wanted.items())
            ):
                found.append(copy.deepcopy(obj))
        return found
