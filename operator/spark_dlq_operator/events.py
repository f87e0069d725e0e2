"""Kubernetes Events on a policy: what the operator did to it, for ``kubectl describe dlp``.

Every action (an object created, patched or deleted, topics created, a restart, a clean-up
given up) and every change into a problem state (broker unreachable, invalid spec, partition
drift) is posted as an Event on the policy. The operator posts them itself rather than through
kopf, because the periodic resync runs outside kopf's handlers. Posting happens in the
background (a reconcile does not wait for it) and never fails a reconcile: a failed post is
only logged.
"""

from __future__ import annotations

import asyncio
import datetime
import logging
from typing import Any, Final

from dlq_engine.model import API_VERSION
from spark_dlq_operator.kubeapi import EVENTS, KubeApi
from spark_dlq_operator.naming import MANAGED_BY, Owner
from spark_dlq_operator.reasons import EventType

_MESSAGE_MAX: Final = 1024
logger = logging.getLogger(__name__)


class EventRecorder:
    """Posts core/v1 Events about policies."""

    def __init__(self, api: KubeApi, *, instance: str) -> None:
        self._api = api
        self._instance = instance
        self._pending: set[asyncio.Task[None]] = set()

    async def info(self, owner: Owner, reason: str, message: str) -> None:
        await self.post(owner, "Normal", reason, message)

    async def warn(self, owner: Owner, reason: str, message: str) -> None:
        await self.post(owner, "Warning", reason, message)

    async def post(self, owner: Owner, type_: EventType, reason: str, message: str) -> None:
        """Queue the event; it is sent in the background."""
        task = asyncio.create_task(self._send(owner, type_, reason, message))
        self._pending.add(task)
        task.add_done_callback(self._pending.discard)

    async def close(self, timeout: float = 5.0) -> None:
        """Wait (a little) for the events still being sent."""
        if self._pending:
            await asyncio.wait(set(self._pending), timeout=timeout)

    async def _send(self, owner: Owner, type_: EventType, reason: str, message: str) -> None:
        now = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        if len(message) > _MESSAGE_MAX:
            message = message[: _MESSAGE_MAX - 3] + "..."
        event: dict[str, Any] = {
            "apiVersion": "v1",
            "kind": "Event",
            "metadata": {"generateName": f"{owner.name[:200]}.", "namespace": owner.namespace},
            "involvedObject": {
                "apiVersion": API_VERSION,
                "kind": owner.kind,
                "name": owner.name,
                "namespace": owner.namespace,
                "uid": owner.uid,
            },
            "type": type_,
            "reason": reason,
            "message": message,
            "source": {"component": MANAGED_BY},
            "reportingComponent": MANAGED_BY,
            "reportingInstance": self._instance,
            "firstTimestamp": now,
            "lastTimestamp": now,
            "count": 1,
        }
        try:
            await self._api.create(EVENTS, event)
        except Exception as error:  # noqa: BLE001 - an event is never worth failing a reconcile for
            logger.warning("could not post event %s on %s/%s: %s", reason, owner.namespace, owner.name, error)
