"""Whether the driver that holds a checkpoint still runs, as the Kubernetes API says of its pod.

A driver killed with its pod leaves its checkpoint lease behind (``checkpoint_lock``), and its
successor, a new pod, would wait the whole lease for it. On Kubernetes a driver knows its own
pod (Spark gives it ``spark.kubernetes.driver.pod.name`` and ``spark.kubernetes.namespace``)
and reads it once for its uid, which its lease records; a successor reads the holder's pod by
name with the one right every Spark driver has already (``get`` on the pods of its namespace:
Spark's driver reads its own pod to own its executors), and compares uids, since the
spark-operator gives every resubmitted driver pod the same name:

- ``GONE``: no pod by that name, or another one (the successor itself, often). The API server
  removes a pod once its kubelet confirmed its containers stopped, or when someone
  force-deletes it (then the kubelet kills them within seconds);
- ``ENDED``: the pod is there and its containers all terminated (phase Succeeded or Failed);
- ``RUNNING``: it is there and not ended: running, terminating, pending, or on a node that no
  longer reports (a partitioned holder may be writing);
- ``UNKNOWN``: the API did not tell (refused, unreachable, not on Kubernetes).

Only ``GONE`` and ``ENDED`` let a successor take the lease before it runs out.
"""

from __future__ import annotations

import enum
import logging
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Protocol
from urllib.parse import quote

log = logging.getLogger("dlq_engine.driver_pod")


class PodState(enum.Enum):
    """What the API says of a lease holder's pod (see the module's docstring)."""

    RUNNING = "running"
    GONE = "gone"
    ENDED = "ended"
    UNKNOWN = "unknown"


#: The states in which the holder's driver runs no more: its lease may be taken at once.
HOLDER_STOPPED = frozenset({PodState.GONE, PodState.ENDED})


@dataclass(frozen=True, slots=True)
class PodRef:
    """One pod, by namespace, name and uid (a pod of the same name made later has another uid)."""

    namespace: str
    name: str
    uid: str

    def __str__(self) -> str:
        return f"{self.namespace}/{self.name} (uid {self.uid})"

    def path(self) -> str:
        return f"/api/v1/namespaces/{quote(self.namespace, safe='')}/pods/{quote(self.name, safe='')}"

    def document(self) -> dict[str, str]:
        return {"namespace": self.namespace, "name": self.name, "uid": self.uid}

    @staticmethod
    def parse(raw: object) -> PodRef | None:
        """None for no pod (a driver outside Kubernetes) or anything that is not one."""
        if not isinstance(raw, Mapping):
            return None
        fields = [raw.get(key) for key in ("namespace", "name", "uid")]
        if not all(isinstance(value, str) and value for value in fields):
            return None
        return PodRef(*(str(value) for value in fields))


def pod_state(pod: Mapping[str, Any] | None, uid: str) -> PodState:
    """The state of the pod whose uid is ``uid``, from what the API answered for its name."""
    if pod is None or (pod.get("metadata") or {}).get("uid") != uid:
        return PodState.GONE
    status = pod.get("status") or {}
    if status.get("phase") in ("Succeeded", "Failed"):
        return PodState.ENDED
    containers = status.get("containerStatuses") or []
    if containers and all("terminated" in (c.get("state") or {}) for c in containers):
        return PodState.ENDED
    return PodState.RUNNING


class PodReader(Protocol):
    """What is read of the API: the object at a path, None when there is none (404); raises
    ``OSError`` when the API does not answer it (``kube_api.ServiceAccountApi``)."""

    def get(self, path: str) -> Mapping[str, Any] | None: ...


class DriverPods:
    """Reads drivers' pods through the API."""

    def __init__(self, api: PodReader) -> None:
        self._api = api

    def state(self, pod: PodRef) -> PodState:
        try:
            return pod_state(self._api.get(pod.path()), pod.uid)
        except OSError as error:
            log.warning("cannot tell whether pod %s runs: %s", pod, error)
            return PodState.UNKNOWN

    def find(self, namespace: str, name: str) -> PodRef | None:
        """The pod of that name as it is now (this driver's own), None when it cannot be read."""
        try:
            pod = self._api.get(PodRef(namespace, name, "").path())
        except OSError as error:
            log.warning("cannot read this driver's pod %s/%s: %s", namespace, name, error)
            return None
        uid = ((pod or {}).get("metadata") or {}).get("uid")
        return PodRef(namespace, name, str(uid)) if uid else None


def own_pod_name(conf: Mapping[str, str]) -> tuple[str, str] | None:
    """This driver's pod (namespace, name) from its Spark configuration; None when the driver
    does not run on Kubernetes (a local run, the development stand-in)."""
    if not conf.get("spark.master", "").startswith("k8s://"):
        return None
    name = conf.get("spark.kubernetes.driver.pod.name", "")
    namespace = conf.get("spark.kubernetes.namespace", "") or "default"
    return (namespace, name) if name else None


def this_driver(conf: Mapping[str, str]) -> tuple[DriverPods | None, PodRef | None]:
    """How this driver reads pods (None outside Kubernetes), and its own pod (None when it
    cannot be read: its lease then says nothing of a pod, and a successor waits it out)."""
    from dlq_engine.job.kube_api import ServiceAccountApi

    own = own_pod_name(conf)
    if own is None:
        return None, None
    api = ServiceAccountApi()
    if api.unavailable is not None:
        log.warning("no Kubernetes API to read pods: %s", api.unavailable)
        return None, None
    pods = DriverPods(api)
    return pods, pods.find(*own)
